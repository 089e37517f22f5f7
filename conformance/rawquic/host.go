package rawquic

import (
	"io"
	"net/netip"
	"time"

	"github.com/quiver-quic/quiver/quic/wire"
)

// Packet is what the raw client reads back from a packet its host
// recorded: the decoded frames and whether they elicit an ACK.
type Packet interface {
	Frames() []wire.Frame
	AckEliciting() bool
}

// PacketInfo describes one packet the raw client sent or received
// (decrypted), beyond its payload.
type PacketInfo struct {
	Sent       bool
	At         time.Time
	Type       wire.PacketType
	Version    uint32 // 0 for short-header packets
	Space      int    // 0 Initial, 1 Handshake, 2 Application
	PN         uint64
	DCID, SCID []byte
	Size       int // the packet's size
	Datagram   int // the size of the datagram it came in (0 when sent)
	Path       int // the client's socket (0 for the first)
	// Local is the socket's local address, set for packets off path 0.
	Local     netip.AddrPort
	ECN       uint8 // the datagram's ECN codepoint, when known
	FirstByte byte  // the unprotected first byte
	KeyPhase  int
}

// Host is what the raw client needs from the scenario that drives it
// (failures, facts, cleanups, timing) and from the recorder that keeps the
// evidence. P is the host's record of one packet.
type Host[P Packet] interface {
	// Errorf reports that the tester itself failed and ends the scenario
	// (it does not return).
	Errorf(format string, args ...any)
	// Fact notes something learnt about the server.
	Fact(key string, v any)
	// Cleanup runs f when the scenario ends.
	Cleanup(f func())
	// PTO is the probe timeout the client waits before it resends a
	// request that got no answer.
	PTO() time.Duration
	// NoteRTT offers a first round-trip sample.
	NoteRTT(d time.Duration)
	// KeyLog receives the TLS key log.
	KeyLog() io.Writer

	// Datagram records one UDP datagram sent or received on the socket
	// local, towards or from peer (received ones dropped by DropIn too).
	Datagram(at time.Time, sent bool, local, peer netip.AddrPort, b []byte)
	// KeepRaw keeps a received datagram the client processes, so that a
	// close it could not read can be recovered later.
	KeepRaw(at time.Time, b []byte)
	// Packet records a packet with its decrypted payload (copied).
	Packet(info PacketInfo, payload []byte) P
	// HeaderOnly records a packet the client does not decrypt (Version
	// Negotiation, Retry, unknown versions).
	HeaderOnly(at time.Time, b []byte, datagram int) P
	// Undecryptable notes a short-header datagram the client cannot open,
	// which may be a stateless reset.
	Undecryptable(at time.Time, b []byte)
	// Processed tells that the client is done with p's frames.
	Processed(p P)
	// LastSent returns the last packet the client sent (the zero P
	// before any).
	LastSent() P
}
