package quic

import (
	"context"
	"crypto/tls"
	"errors"
	"time"

	"github.com/quiver-quic/quiver/quic/wire"
)

// Probe holds test hooks for conformance scenarios, one field per
// behaviour; it implements Hooks. Production code never sets it. Hooks
// run on the connection's goroutine and must not block. The switches are
// read once, when a connection starts.
type Probe struct {
	// OnPacketReceived observes every packet after decryption.
	OnPacketReceived func(PacketInfo)
	// OnPacketSent observes every packet before protection. It may also
	// change the plaintext payload in place (same length) to alter what is
	// sealed; the engine's record of what the packet carried is not
	// updated.
	OnPacketSent func(PacketInfo)
	// OnSendDatagram sees every sealed datagram before it is written and
	// returns the datagrams to write instead: nil drops it, two copies
	// duplicate it, a changed copy corrupts it. To delay one, return nil
	// and write a copy later with Conn.SendRawDatagram. GSO is off while
	// this hook is set.
	OnSendDatagram func(b []byte) [][]byte
	// DropIncoming, when it returns true, drops a received datagram
	// before processing.
	DropIncoming func(b []byte) bool
	// NoAcks switches off automatic acknowledgments.
	NoAcks bool
	// AnyVersionTickets makes a client offer a session ticket (and 0-RTT)
	// whatever the QUIC version of the connection that issued it, which
	// RFC 9369 §5 forbids: a conformance probe of the server's check.
	AnyVersionTickets bool
	// NoRetransmit switches off retransmission of lost frames.
	NoRetransmit bool
	// RawTransportParameters, when non-nil, is sent verbatim instead of
	// the engine's transport parameters (duplicates and unknown IDs
	// included).
	RawTransportParameters []wire.TransportParameter
	// TransportParameters may edit the typed parameters before they are
	// encoded.
	TransportParameters func(*wire.TransportParameters)
	// NoFlowControlCredit stops MAX_DATA, MAX_STREAM_DATA and MAX_STREAMS:
	// the peer only ever has the initial credit.
	NoFlowControlCredit bool
	// RewriteClientHello replaces the client's first Initial CRYPTO data
	// (the ClientHello as crypto/tls wrote it) before it is sent. TLS
	// still hashes the original, so the handshake fails unless the peer
	// rejects it first — which is what such probes look for.
	RewriteClientHello func(hello []byte) []byte
	// OnHandshakeFlight sees the CRYPTO bytes TLS writes at each level
	// (SpaceInitial, SpaceHandshake, SpaceApplication) and returns what to
	// send instead; nil sends nothing (e.g. holding back the Finished; TLS
	// does not know and the handshake stalls). Split and reorder flights
	// at datagram level with OnSendDatagram.
	OnHandshakeFlight func(space int, crypto []byte) []byte
	// NoKeyUpdateAck withholds acknowledgments of 1-RTT packets received
	// after the peer started a key update.
	NoKeyUpdateAck bool
	// OpenWithOldKeys makes the engine open a 1-RTT packet that the keys
	// RFC 9001 §6.5 selects cannot open with the previous read keys
	// instead, while it still holds them, and process it: the old-key
	// packet after newer keys that §6.4 makes a KEY_UPDATE_ERROR. A
	// misbehaving server for conformance tests.
	OpenWithOldKeys bool
	// KeyUpdateInterval, when non-zero, replaces the number of packets
	// the engine seals with one set of 1-RTT keys before it updates them
	// on its own (a server that updates often, for key-update tests).
	KeyUpdateInterval uint64
	// KeyUpdateWithoutAck lets the engine start a key update without an
	// acknowledgment of a packet of the current phase, which RFC 9001
	// §6.1 forbids: a misbehaving server for conformance tests.
	KeyUpdateWithoutAck bool
	// KeepInitialKeys stops a server from discarding its Initial keys
	// when it first processes a Handshake packet, which RFC 9001 §4.9.1
	// requires: a misbehaving server for conformance tests.
	KeepInitialKeys bool
	// SkipPacketNumber, when it returns true, makes the engine skip one
	// packet number in that space before the next packet.
	SkipPacketNumber func(space int) bool
	// ECN, when set, chooses the ECN codepoint of every datagram sent (0
	// Not-ECT, 1 ECT(1), 2 ECT(0), 3 CE), bypassing ECN validation. GSO
	// is off while this hook is set.
	ECN func() uint8
	// EarlyHandshakeDone makes a server queue HANDSHAKE_DONE as soon as
	// it has 1-RTT write keys, before the client's Finished: it breaks
	// RFC 9000 §19.20 ("Servers MUST NOT send a HANDSHAKE_DONE frame
	// before completing the handshake") on purpose, for the conformance
	// suite's own tests.
	EarlyHandshakeDone bool
	// Keep0RTTKeys makes a server keep its 0-RTT keys for the life of the
	// connection instead of dropping them with the first 1-RTT packet:
	// it ignores RFC 9001 §4.9.3's recommended 3 × PTO on purpose, for the
	// conformance suite's own tests.
	Keep0RTTKeys bool
	// EarlyFrames are sent verbatim, ahead of everything else, in the
	// connection's first application-space packet: a client that offers
	// early data sends them in its first 0-RTT packet, whatever the
	// scheduling of the goroutine that dialed, and again in a 0-RTT
	// packet after a Retry (which discards every 0-RTT packet before it).
	EarlyFrames []wire.Frame
}

// Policy returns the switches of p (Hooks).
func (p *Probe) Policy() Policy {
	return Policy{
		NoAcks: p.NoAcks, AnyVersionTickets: p.AnyVersionTickets, NoRetransmit: p.NoRetransmit,
		NoFlowControlCredit: p.NoFlowControlCredit, NoKeyUpdateAck: p.NoKeyUpdateAck, OpenWithOldKeys: p.OpenWithOldKeys,
		KeyUpdateInterval: p.KeyUpdateInterval, KeyUpdateWithoutAck: p.KeyUpdateWithoutAck, KeepInitialKeys: p.KeepInitialKeys,
		EarlyHandshakeDone: p.EarlyHandshakeDone, Keep0RTTKeys: p.Keep0RTTKeys, EarlyFrames: p.EarlyFrames,
		// The conformance tester and the misbehaving peers of its tests
		// script datagrams: replies to STOP_SENDING stay where they were.
		ResetReplyAtOnce:   true,
		InterceptDatagrams: p.OnSendDatagram != nil || p.ECN != nil,
	}
}

// EditTransportParameters runs TransportParameters and returns
// RawTransportParameters (Hooks).
func (p *Probe) EditTransportParameters(tp *wire.TransportParameters) []wire.TransportParameter {
	if p.RawTransportParameters != nil {
		return p.RawTransportParameters
	}
	if p.TransportParameters != nil {
		p.TransportParameters(tp)
	}
	return nil
}

// HandshakeData runs RewriteClientHello on a client's first Initial data,
// then OnHandshakeFlight (Hooks).
func (p *Probe) HandshakeData(space int, data []byte, clientHello bool) []byte {
	if clientHello && p.RewriteClientHello != nil {
		data = p.RewriteClientHello(data)
	}
	if p.OnHandshakeFlight != nil {
		data = p.OnHandshakeFlight(space, data)
	}
	return data
}

// SkipNextPacketNumber runs SkipPacketNumber (Hooks).
func (p *Probe) SkipNextPacketNumber(space int) bool {
	return p.SkipPacketNumber != nil && p.SkipPacketNumber(space)
}

// PacketSealing runs OnPacketSent (Hooks).
func (p *Probe) PacketSealing(pi PacketInfo) {
	if p.OnPacketSent != nil {
		p.OnPacketSent(pi)
	}
}

// DatagramOut runs ECN and OnSendDatagram (Hooks).
func (p *Probe) DatagramOut(b []byte, ecn uint8) ([][]byte, uint8) {
	if p.ECN != nil {
		ecn = p.ECN() & 3
	}
	if p.OnSendDatagram != nil {
		return p.OnSendDatagram(b), ecn
	}
	return [][]byte{b}, ecn
}

// DatagramIn runs DropIncoming (Hooks).
func (p *Probe) DatagramIn(b []byte) bool {
	return p.DropIncoming != nil && p.DropIncoming(b)
}

// PacketReceived runs OnPacketReceived (Hooks).
func (p *Probe) PacketReceived(pi PacketInfo) {
	if p.OnPacketReceived != nil {
		p.OnPacketReceived(pi)
	}
}

// PacketInfo describes a packet seen by a probe hook. Payload is the
// plaintext frames; it is valid only during the call.
type PacketInfo struct {
	Space        int // 0 Initial, 1 Handshake, 2 Application
	Type         wire.PacketType
	PacketNumber uint64
	DCID, SCID   []byte
	Size         int
	DatagramSize int
	// ECN is the ECN codepoint of the received datagram's IP header (0
	// until the engine reads it from the socket; see the TODO in the
	// package notes).
	ECN uint8
	// KeyPhase is the Key Phase bit of a 1-RTT packet (RFC 9001 §6): of a
	// received one after header protection is removed, of a sent one as
	// the engine set it (packets from the probe's own builders aside).
	KeyPhase bool
	// FirstByte is a received packet's first byte after header
	// protection is removed: packet number length, spin bit, reserved
	// bits (0 for sent packets).
	FirstByte byte
	Payload   []byte
}

// Packet number spaces for InjectFrames.
const (
	SpaceInitial     = 0
	SpaceHandshake   = 1
	SpaceApplication = 2
)

// probeRuntime is the loop-owned state of probe actions.
type probeRuntime struct {
	inject [numSpaces][]wire.Frame
	// injected0RTT are the injected frames sent in 0-RTT packets: a
	// Retry means the server processed none of them (RFC 9000 §17.2.5),
	// so handleRetry queues them again.
	injected0RTT []wire.Frame
}

// openWithOldKeys opens a 1-RTT packet with the previous read keys (see
// Probe.OpenWithOldKeys).
func (c *Conn) openWithOldKeys(header, ciphertext []byte, pn uint64) ([]byte, error) {
	prev := c.appKeys.PreviousRead()
	if prev == nil {
		return nil, errors.New("no previous read keys")
	}
	return prev.Open(nil, header, ciphertext, pn)
}

// InjectFrames queues frames to be sent verbatim in the next packet of
// space (SpaceInitial, SpaceHandshake or SpaceApplication), ahead of
// everything else. Use wire.RawFrame for arbitrary bytes.
func (c *Conn) InjectFrames(space int, frames ...wire.Frame) {
	c.post(func(now time.Time) {
		c.probeRT.inject[space] = append(c.probeRT.inject[space], frames...)
	})
}

// ForceKeyUpdate starts a key update now (RFC 9001 §6), without the
// checks a well-behaved endpoint makes (handshake confirmed, previous
// update acknowledged).
func (c *Conn) ForceKeyUpdate() error {
	var err error
	if !c.run(context.Background(), func(now time.Time) {
		if err = c.appKeys.Update(); err == nil {
			c.qlogKeyUpdated(now, tls.QUICEncryptionLevelApplication, true, "local_update")
		}
	}) {
		return c.Err()
	}
	return err
}

// IssueConnectionID sends a NEW_CONNECTION_ID frame with a fresh
// connection ID of ours and the chosen sequence number and Retire Prior
// To, whatever the rules say; the endpoint routes the new ID to c. The
// engine counts the ID as issued: its own NEW_CONNECTION_ID frames go on
// above seq, and the peer may retire it.
func (c *Conn) IssueConnectionID(seq, retirePriorTo uint64) ([]byte, error) {
	cid := newCID(max(c.ep.cidLen, 1))
	if !c.run(contextBackground, func(now time.Time) {
		c.ep.register(cid, c)
		c.cids.onIssuedByProbe(seq, cid)
		c.probeRT.inject[appSpace] = append(c.probeRT.inject[appSpace], &wire.NewConnectionIDFrame{
			SequenceNumber: seq, RetirePriorTo: retirePriorTo, ConnectionID: cid, StatelessResetToken: c.ep.resetToken(cid)})
	}) {
		return nil, c.Err()
	}
	return cid, nil
}

// SendRawDatagram writes b to the peer's address as is.
func (c *Conn) SendRawDatagram(b []byte) error {
	c.mu.Lock()
	addr, ep := c.peerAddr, c.ep
	c.mu.Unlock()
	return ep.writeTo(b, addr)
}
