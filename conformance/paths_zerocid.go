package conformance

// A server that chose a zero-length connection ID identifies the
// connection by address alone (RFC 9000 §5.2: "If the Destination
// Connection ID is zero length and the addressing information in the
// packet matches the addressing information the endpoint uses to identify
// a connection with a zero-length connection ID, QUIC processes the packet
// as part of that connection"). A client does not migrate towards it
// (§9.5: "An endpoint SHOULD NOT initiate migration with a peer that has
// requested a zero-length connection ID"), and a changed address is
// expected to break the connection (§5.1: "multiplexing connections on the
// same local IP address and port while using zero-length connection IDs
// will cause failures in the presence of peer connection migration, NAT
// rebinding, and client port reuse"). The scenarios that move the tester
// to a new address or port end unsupported against such a server.

// zeroCIDServerSentence is the reason they give.
const zeroCIDServerSentence = "The server chose a zero-length connection ID, so it tells connections apart by address alone (RFC 9000 §5.2): the tester does not move to another address or port, since \"An endpoint SHOULD NOT initiate migration with a peer that has requested a zero-length connection ID\" (§9.5) and a new address is expected to lose the connection (§5.1)."

// needServerCID ends the scenario unsupported when the server of rc
// chose a zero-length connection ID.
func (t *T) needServerCID(rc *rawClient) {
	if rc.ServerSCID != nil && len(rc.ServerSCID) == 0 {
		t.Fact("path.server-cid-length", 0)
		t.Unsupported(zeroCIDServerSentence)
	}
}
