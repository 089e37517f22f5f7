package quic

import "github.com/quiver-quic/quiver/quic/wire"

// Hooks is how a test or a conformance probe reaches the engine: a few
// named points on the connection's path, nothing else. Production code
// leaves Config.Probe nil; the engine then runs every point's nil check
// and nothing more. Embed NoHooks to implement only the points needed.
// Methods run on the connection's goroutine and must not block; one Hooks
// value may serve many connections at once (a server's), so methods that
// keep state lock it.
//
// *Probe implements Hooks with one field per behaviour.
type Hooks interface {
	// Policy returns the misbehaviour switches of a connection. The
	// engine reads it once, when the connection starts.
	Policy() Policy
	// EditTransportParameters may edit the transport parameters before
	// they are encoded. A non-nil result is sent verbatim instead of p
	// (duplicates and unknown IDs included).
	EditTransportParameters(p *wire.TransportParameters) (raw []wire.TransportParameter)
	// HandshakeData sees the CRYPTO bytes TLS writes at each level
	// (SpaceInitial, SpaceHandshake, SpaceApplication) and returns what
	// to send instead; clientHello marks a client's first Initial data,
	// the ClientHello as crypto/tls wrote it. data is the hook's own
	// copy. TLS still hashes what it wrote.
	HandshakeData(space int, data []byte, clientHello bool) []byte
	// SkipNextPacketNumber, when it returns true, makes the engine skip
	// one packet number in space before the next packet.
	SkipNextPacketNumber(space int) bool
	// PacketSealing sees every packet before protection. It may change
	// the plaintext payload in place (same length) to alter what is
	// sealed; the engine's record of what the packet carried is not
	// updated.
	PacketSealing(PacketInfo)
	// DatagramOut is called only while Policy().InterceptDatagrams is
	// set. It sees every sealed datagram and the ECN codepoint the
	// engine chose before it is written and returns the datagrams to
	// write instead, with the codepoint to mark them with: nil drops
	// it, two copies duplicate it, a changed copy corrupts it.
	DatagramOut(b []byte, ecn uint8) (out [][]byte, ecnOut uint8)
	// DatagramIn sees every received datagram before processing; true
	// drops it.
	DatagramIn(b []byte) (drop bool)
	// PacketReceived sees every packet after decryption.
	PacketReceived(PacketInfo)
}

// Policy holds a connection's misbehaviour switches: each breaks or
// bends a rule on purpose, for the conformance suite's own tests and for
// probes of a peer's checks. The zero Policy is a well-behaved endpoint.
type Policy struct {
	// NoAcks switches off automatic acknowledgments.
	NoAcks bool
	// AnyVersionTickets makes a client offer a session ticket (and
	// 0-RTT) whatever the QUIC version of the connection that issued it,
	// which RFC 9369 §5 forbids.
	AnyVersionTickets bool
	// NoRetransmit switches off retransmission of lost frames.
	NoRetransmit bool
	// NoFlowControlCredit stops MAX_DATA, MAX_STREAM_DATA and
	// MAX_STREAMS: the peer only ever has the initial credit.
	NoFlowControlCredit bool
	// NoKeyUpdateAck withholds acknowledgments of 1-RTT packets received
	// after the peer started a key update.
	NoKeyUpdateAck bool
	// OpenWithOldKeys makes the engine open a 1-RTT packet that the keys
	// RFC 9001 §6.5 selects cannot open with the previous read keys
	// instead, while it still holds them, and process it.
	OpenWithOldKeys bool
	// KeyUpdateInterval, when non-zero, replaces the number of packets
	// the engine seals with one set of 1-RTT keys before it updates them
	// on its own.
	KeyUpdateInterval uint64
	// KeyUpdateWithoutAck lets the engine start a key update without an
	// acknowledgment of a packet of the current phase, which RFC 9001
	// §6.1 forbids.
	KeyUpdateWithoutAck bool
	// KeepInitialKeys stops a server from discarding its Initial keys
	// when it first processes a Handshake packet, which RFC 9001 §4.9.1
	// requires.
	KeepInitialKeys bool
	// EarlyHandshakeDone makes a server queue HANDSHAKE_DONE as soon as
	// it has 1-RTT write keys, before the client's Finished, which RFC
	// 9000 §19.20 forbids.
	EarlyHandshakeDone bool
	// Keep0RTTKeys makes a server keep its 0-RTT keys for the life of the
	// connection instead of dropping them with the first 1-RTT packet.
	Keep0RTTKeys bool
	// EarlyFrames are sent verbatim, ahead of everything else, in the
	// connection's first application-space packet (a client's first
	// 0-RTT packet when it offers early data), and again after a Retry.
	EarlyFrames []wire.Frame
	// ResetReplyAtOnce sends the RESET_STREAM that answers STOP_SENDING
	// at once, in a packet of its own if need be, instead of with the
	// next acknowledgment (both allowed: RFC 9000 §3.5 sets no
	// deadline). Probes that script datagrams want it.
	ResetReplyAtOnce bool
	// InterceptDatagrams passes every datagram through DatagramOut; the
	// connection then writes them one at a time (no GSO).
	InterceptDatagrams bool
}

// NoHooks implements every Hooks point as a no-op: embed it in a type
// that implements only some.
type NoHooks struct{}

var (
	_ Hooks = NoHooks{}
	_ Hooks = (*Probe)(nil)
)

// Policy returns the zero Policy.
func (NoHooks) Policy() Policy { return Policy{} }

// EditTransportParameters leaves p as it is.
func (NoHooks) EditTransportParameters(*wire.TransportParameters) []wire.TransportParameter {
	return nil
}

// HandshakeData returns data unchanged.
func (NoHooks) HandshakeData(_ int, data []byte, _ bool) []byte { return data }

// SkipNextPacketNumber skips none.
func (NoHooks) SkipNextPacketNumber(int) bool { return false }

// PacketSealing does nothing.
func (NoHooks) PacketSealing(PacketInfo) {}

// DatagramOut writes b as it is.
func (NoHooks) DatagramOut(b []byte, ecn uint8) ([][]byte, uint8) { return [][]byte{b}, ecn }

// DatagramIn drops nothing.
func (NoHooks) DatagramIn([]byte) bool { return false }

// PacketReceived does nothing.
func (NoHooks) PacketReceived(PacketInfo) {}

// connHooks returns the hooks a connection uses: nil for none, including
// a nil *Probe stored in the interface.
func connHooks(h Hooks) Hooks {
	if p, ok := h.(*Probe); ok && p == nil {
		return nil
	}
	return h
}
