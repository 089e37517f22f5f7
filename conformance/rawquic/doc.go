// Package rawquic is the conformance suite's scripted raw QUIC client, the
// endpoint that sends anything byte for byte: Client (client.go) completes a
// real handshake when asked yet lets a scenario choose every header field
// and put any frame in any packet type; client_fetch.go sends requests and
// reassembles answers (hq-interop and HTTP/3), client_paths.go opens more
// sockets and answers PATH_CHALLENGE on each. Its leaf pieces are here too:
// the sets of packet numbers it acknowledges (PNSet), the reassembly of the
// server's streams with a bounded memory and a digest of what went past
// (Stream, Digest), the flow-control credit it grants as it reads (Credit),
// its UDP sockets with each datagram's ECN codepoint, kernel time and IPv6
// flow label (Path, In), and the TLS ClientHello and ServerHello it parses
// and rewrites (ClientHello, ServerHello).
//
// The client knows neither the recorder nor a scenario: it reaches them only
// through its Host (host.go), which records every datagram and packet,
// reports tester failures and facts, and gives the probe timeout. Package
// conformance hosts it with a scenario's T and the recorder's trace of the
// connection (conformance/rawclient_host.go).
package rawquic
