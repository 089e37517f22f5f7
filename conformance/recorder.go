package conformance

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/quiver-quic/quiver/conformance/rawquic"
	"github.com/quiver-quic/quiver/h3"
	"github.com/quiver-quic/quiver/pcap"
	"github.com/quiver-quic/quiver/quic/wire"
)

// packet is one packet the tester sent or received, with its decoded frames
// kept for the checks and its PacketEvent kept for the evidence.
type packet struct {
	ev     PacketEvent
	at     time.Time
	conn   int  // index of the connection within the scenario
	sent   bool // sent by the tester
	space  int  // 0 Initial, 1 Handshake, 2 Application; -1 for none
	pn     uint64
	dcid   []byte
	scid   []byte
	frames []wire.Frame
	// ackEliciting is true when a frame other than ACK, PADDING or
	// CONNECTION_CLOSE is present.
	ackEliciting bool
	// firstByte is the unprotected first byte, when known.
	firstByte byte
	// datagram is the size of the whole UDP datagram.
	datagram int
	// path is the raw client's socket the packet used (0 for the first).
	path int
	// ecn is the ECN codepoint of the datagram, when known.
	ecn uint8
	// unparsed describes where the payload stopped parsing, if it did.
	unparsed string
}

// pktMeta carries what the raw client knows about a packet beyond its
// header and frames.
type pktMeta struct {
	path      int
	ecn       uint8
	firstByte byte
	keyPhase  int
	local     netip.AddrPort
}

// event is the packet's evidence entry, its frames rendered as text.
func (p *packet) event() PacketEvent {
	ev := p.ev
	ev.Frames = p.frameNames()
	return ev
}

// frameNames renders the packet's frames, one short line each (set by
// hand for packets without frames: Version Negotiation, Retry, resets).
func (p *packet) frameNames() []string {
	if p.ev.Frames != nil || len(p.frames) == 0 {
		return p.ev.Frames
	}
	names := make([]string, 0, len(p.frames))
	for _, f := range p.frames {
		if _, raw := f.(*wire.RawFrame); raw && p.unparsed != "" {
			names = append(names, p.unparsed)
			continue
		}
		names = append(names, frameString(f))
	}
	return names
}

// has reports whether the packet carries a frame of type ft.
func (p *packet) has(ft wire.FrameType) bool {
	for _, f := range p.frames {
		if f.Type() == ft {
			return true
		}
	}
	return false
}

// closeFrame returns the packet's CONNECTION_CLOSE frame, if any.
func (p *packet) closeFrame() *wire.ConnectionCloseFrame {
	for _, f := range p.frames {
		if cc, ok := f.(*wire.ConnectionCloseFrame); ok {
			return cc
		}
	}
	return nil
}

// datagramRec is one UDP datagram on the tester's socket, for the pcapng.
type datagramRec struct {
	at          time.Time
	sent        bool
	local, peer netip.AddrPort
	// b is the datagram, or its first bytes when truncated (see
	// keepDatagramBytes); size is its length on the wire.
	b         []byte
	size      int
	truncated bool
}

// recorder collects every packet and datagram of one scenario. Engine
// hooks call it from connection goroutines, so it locks.
type recorder struct {
	start time.Time

	mu        sync.Mutex
	packets   []*packet
	datagrams []datagramRec
	conns     []*connTrace
	keylog    bytes.Buffer
	changed   chan struct{}
	// The scenario's capture, when artifacts are kept (capture.go), and
	// how many datagram bytes memory holds.
	capture   *pcap.Writer
	capFile   *os.File
	capSpool  *os.File
	keptBytes int
	// What the recorder keeps and summarises (recorder_keep.go).
	keep keepState
}

func newRecorder(start time.Time) *recorder {
	return &recorder{start: start, changed: make(chan struct{})}
}

// Write collects key log lines (the recorder is the Config.KeyLog writer).
func (r *recorder) Write(b []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.keylog.Write(b)
}

func (r *recorder) notifyLocked() {
	close(r.changed)
	r.changed = make(chan struct{})
}

func (r *recorder) addPacket(p *packet) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p.ev.Time = p.at.Sub(r.start)
	if !r.keepPacketLocked(p) {
		return
	}
	r.packets = append(r.packets, p)
	r.notifyLocked()
}

func (r *recorder) addDatagram(d datagramRec) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.captureLocked(d)
	if !r.keepDatagramLocked(&d) {
		return
	}
	r.keepLocked(&d)
	r.datagrams = append(r.datagrams, d)
	r.notifyLocked()
}

// snapshot returns the packets recorded so far.
func (r *recorder) snapshot() []*packet {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.noteReadLocked()
	return append([]*packet(nil), r.packets...)
}

// wait returns once cond holds over the packets recorded so far, d has
// passed, or ctx is done; it reports whether cond held.
func (r *recorder) wait(ctx context.Context, d time.Duration, cond func([]*packet) bool) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		r.mu.Lock()
		ch := r.changed
		r.noteReadLocked()
		pk := append([]*packet(nil), r.packets...)
		r.mu.Unlock()
		if cond != nil && cond(pk) {
			return true
		}
		select {
		case <-ch:
		case <-timer.C:
			return cond != nil && cond(r.snapshot())
		case <-ctx.Done():
			return false
		}
	}
}

// connTrace is what the recorder knows about one tester connection.
type connTrace struct {
	r     *recorder
	id    int
	label string
	// compactOnRecord releases each packet's payload as it is recorded
	// (compactFrames): set for engine connections, whose frames nobody
	// else reads; the raw client compacts after it processed a packet.
	compactOnRecord bool

	// Guarded by r.mu.
	local, peer netip.AddrPort
	cryptoIn    [3]rawquic.CryptoBuffer
	serverTP    *wire.TransportParameters
	serverTPRaw []byte
	tpErr       error
	resetTokens [][16]byte
	h3          *h3.ClientConn
	closeNoted  bool
	rawIn       []inDatagram // what the target sent, for recoverCloses
}

func (r *recorder) newConn(label string) *connTrace {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := &connTrace{r: r, id: len(r.conns), label: label}
	r.conns = append(r.conns, c)
	return c
}

// transportParameters returns the server's transport parameters once its
// EncryptedExtensions has been seen.
func (c *connTrace) transportParameters() (*wire.TransportParameters, error) {
	c.r.mu.Lock()
	defer c.r.mu.Unlock()
	return c.serverTP, c.tpErr
}

func (c *connTrace) setAddrs(local, peer netip.AddrPort) {
	c.r.mu.Lock()
	defer c.r.mu.Unlock()
	c.local, c.peer = local, peer
}

// isStatelessReset reports whether b ends with a stateless reset token the
// server gave this connection.
func (c *connTrace) isStatelessReset(b []byte) bool {
	if len(b) < 21 || b[0]&0x80 != 0 {
		return false
	}
	c.r.mu.Lock()
	defer c.r.mu.Unlock()
	tail := b[len(b)-16:]
	for _, tok := range c.resetTokens {
		if bytes.Equal(tok[:], tail) {
			return true
		}
	}
	return false
}

// record builds a packet from decrypted frames. payload is copied.
func (c *connTrace) record(
	sent bool,
	at time.Time,
	pt wire.PacketType,
	version uint32,
	space int,
	pn uint64,
	dcid, scid []byte,
	size, dgram int,
	payload []byte,
) *packet {
	return c.recordMeta(sent, at, pt, version, space, pn, dcid, scid, size, dgram, payload, pktMeta{})
}

// recordMeta is record with the path, ECN mark and first byte.
func (c *connTrace) recordMeta(
	sent bool,
	at time.Time,
	pt wire.PacketType,
	version uint32,
	space int,
	pn uint64,
	dcid, scid []byte,
	size, dgram int,
	payload []byte,
	m pktMeta,
) *packet {
	p := &packet{at: at, conn: c.id, sent: sent, space: space, pn: pn, datagram: dgram, path: m.path, ecn: m.ecn, firstByte: m.firstByte}
	p.dcid = append([]byte(nil), dcid...)
	p.scid = append([]byte(nil), scid...)
	p.ev = PacketEvent{
		Direction:  "received",
		PacketType: packetTypeName(pt),
		Version:    version,
		Number:     int64(pn),
		DCID:       hex.EncodeToString(dcid),
		SCID:       hex.EncodeToString(scid),
		Size:       size,
	}
	if sent {
		p.ev.Direction = "sent"
	}
	p.ev.KeyPhase = m.keyPhase
	p.ev.ECN = rawquic.ECNName(m.ecn)
	if m.path > 0 || m.local.IsValid() {
		p.ev.Path = fmt.Sprintf("path %d (%v)", m.path, m.local)
	}
	// The frames' text (PacketEvent.Frames) is rendered when the packet is
	// cited (packet.event), not for every packet recorded.
	var names []string
	p.frames, names = decodeFrames(payload)
	if n := len(names); n > 0 && strings.HasPrefix(names[n-1], "unparsed") {
		p.unparsed = names[n-1]
	}
	if c.compactOnRecord {
		p.frames = compactFrames(p.frames)
	}
	for _, f := range p.frames {
		if t := f.Type(); t.AckEliciting() || !t.Known() {
			p.ackEliciting = true
		}
	}
	if !sent {
		c.learn(p)
	}
	c.r.addPacket(p)
	return p
}

// learn extracts what the checks need from a received packet: the server's
// transport parameters (from EncryptedExtensions in Handshake CRYPTO data)
// and its stateless reset tokens.
func (c *connTrace) learn(p *packet) {
	c.r.mu.Lock()
	defer c.r.mu.Unlock()
	for _, f := range p.frames {
		switch f := f.(type) {
		case *wire.CryptoFrame:
			if p.space < 0 || p.space > 2 {
				continue
			}
			c.cryptoIn[p.space].Add(f.Offset, f.Data)
			if p.space == 1 && c.serverTP == nil && c.tpErr == nil {
				if ext, ok := findTransportParameters(c.cryptoIn[1].Contiguous()); ok {
					c.serverTPRaw = append([]byte(nil), ext...)
					tp, err := wire.ParseTransportParameters(c.serverTPRaw, true)
					if err != nil {
						c.tpErr = err
						// Keep the raw list for the passive checks.
						if raw, err2 := wire.ParseTransportParameterList(c.serverTPRaw); err2 == nil {
							c.serverTP = &wire.TransportParameters{Raw: raw}
						}
					} else {
						c.serverTP = tp
						if tp.HasStatelessResetToken {
							c.resetTokens = append(c.resetTokens, tp.StatelessResetToken)
						}
					}
				}
			}
		case *wire.NewConnectionIDFrame:
			c.resetTokens = append(c.resetTokens, f.StatelessResetToken)
		}
	}
}

// tlsMessages splits a CRYPTO stream into complete TLS handshake messages.
func tlsMessages(b []byte) (msgs [][]byte) {
	for len(b) >= 4 {
		n := int(b[1])<<16 | int(b[2])<<8 | int(b[3])
		if len(b) < 4+n {
			break
		}
		msgs = append(msgs, b[:4+n])
		b = b[4+n:]
	}
	return msgs
}

// TLS handshake message types (RFC 8446 §4).
const (
	tlsEncryptedExtensions = 8
	tlsCertificateRequest  = 13
	tlsKeyUpdate           = 24
	tlsNewSessionTicket    = 4
	extQUICTransportParams = 0x39
)

// findTransportParameters returns the quic_transport_parameters extension
// of the EncryptedExtensions message in a Handshake CRYPTO stream.
func findTransportParameters(stream []byte) ([]byte, bool) {
	for _, m := range tlsMessages(stream) {
		if m[0] != tlsEncryptedExtensions {
			continue
		}
		return findExtension(m[4:], extQUICTransportParams)
	}
	return nil, false
}

// findExtension returns the body of extension typ in a TLS extensions
// block (a 2-byte length, then type, length, body entries).
func findExtension(b []byte, typ uint16) ([]byte, bool) {
	if len(b) < 2 {
		return nil, false
	}
	exts := b[2:]
	if n := int(binary.BigEndian.Uint16(b)); n <= len(exts) {
		exts = exts[:n]
	}
	for len(exts) >= 4 {
		t := binary.BigEndian.Uint16(exts)
		n := int(binary.BigEndian.Uint16(exts[2:]))
		if len(exts) < 4+n {
			return nil, false
		}
		if t == typ {
			return exts[4 : 4+n], true
		}
		exts = exts[4+n:]
	}
	return nil, false
}

// decodeFrames parses a plaintext payload. Frames are independent copies.
// A payload that stops parsing is recorded up to that point, plus one
// "unparsed" entry.
func decodeFrames(payload []byte) ([]wire.Frame, []string) {
	b := append([]byte(nil), payload...)
	var frames []wire.Frame
	var names []string
	var parser wire.Parser
	for len(b) > 0 {
		f, n, err := parser.Parse(b)
		if err != nil {
			ft, _, _ := wire.ConsumeVarint(b)
			names = append(names, fmt.Sprintf("unparsed type=0x%x (%d bytes): %v", ft, len(b), err))
			frames = append(frames, &wire.RawFrame{Bytes: b})
			break
		}
		f = cloneFrame(f)
		frames = append(frames, f)
		names = append(names, frameString(f))
		b = b[n:]
	}
	return frames, names
}

// frameString renders a frame in one short line for the evidence.
func frameString(f wire.Frame) string {
	switch f := f.(type) {
	case *wire.PaddingFrame:
		return fmt.Sprintf("PADDING ×%d", f.Length)
	case *wire.AckFrame:
		var rs []string
		for _, r := range f.Ranges {
			if r.Smallest == r.Largest {
				rs = append(rs, fmt.Sprint(r.Largest))
			} else {
				rs = append(rs, fmt.Sprintf("%d-%d", r.Smallest, r.Largest))
			}
		}
		return fmt.Sprintf("%s [%s] delay=%d", f.Type(), strings.Join(rs, ","), f.AckDelay)
	case *wire.CryptoFrame:
		return fmt.Sprintf("CRYPTO off=%d len=%d", f.Offset, len(f.Data))
	case *wire.StreamFrame:
		fin := ""
		if f.Fin {
			fin = " fin"
		}
		return fmt.Sprintf("STREAM id=%d off=%d len=%d%s", f.StreamID, f.Offset, len(f.Data), fin)
	case *wire.ConnectionCloseFrame:
		if f.Application {
			return fmt.Sprintf("CONNECTION_CLOSE(0x1d) code=0x%x reason=%q", f.ErrorCode, f.Reason)
		}
		return fmt.Sprintf("CONNECTION_CLOSE(0x1c) code=%s frame=0x%x reason=%q", wire.TransportErrorCode(f.ErrorCode), uint64(f.FrameType), f.Reason)
	case *wire.ResetStreamFrame:
		return fmt.Sprintf("RESET_STREAM id=%d code=0x%x final=%d", f.StreamID, f.ErrorCode, f.FinalSize)
	case *wire.StopSendingFrame:
		return fmt.Sprintf("STOP_SENDING id=%d code=0x%x", f.StreamID, f.ErrorCode)
	case *wire.MaxDataFrame:
		return fmt.Sprintf("MAX_DATA %d", f.Maximum)
	case *wire.MaxStreamDataFrame:
		return fmt.Sprintf("MAX_STREAM_DATA id=%d %d", f.StreamID, f.Maximum)
	case *wire.MaxStreamsFrame:
		return fmt.Sprintf("%s %d", f.Type(), f.Maximum)
	case *wire.NewConnectionIDFrame:
		return fmt.Sprintf("NEW_CONNECTION_ID seq=%d rpt=%d cid=%x", f.SequenceNumber, f.RetirePriorTo, f.ConnectionID)
	case *wire.RetireConnectionIDFrame:
		return fmt.Sprintf("RETIRE_CONNECTION_ID seq=%d", f.SequenceNumber)
	case *wire.PathChallengeFrame:
		return fmt.Sprintf("PATH_CHALLENGE %x", f.Data)
	case *wire.PathResponseFrame:
		return fmt.Sprintf("PATH_RESPONSE %x", f.Data)
	case *wire.NewTokenFrame:
		return fmt.Sprintf("NEW_TOKEN len=%d", len(f.Token))
	case *wire.RawFrame:
		return fmt.Sprintf("raw %x", f.Bytes[:min(len(f.Bytes), 16)])
	}
	return f.Type().String()
}

func packetTypeName(t wire.PacketType) string {
	switch t {
	case wire.PacketTypeInitial:
		return "initial"
	case wire.PacketTypeHandshake:
		return "handshake"
	case wire.PacketType0RTT:
		return "0RTT"
	case wire.PacketType1RTT:
		return "1RTT"
	case wire.PacketTypeRetry:
		return "retry"
	case wire.PacketTypeVersionNegotiation:
		return "version_negotiation"
	}
	return "unparsed"
}

// events turns packets into evidence, marking each with role.
func events(role EventRole, ps ...*packet) []PacketEvent {
	out := make([]PacketEvent, 0, len(ps))
	for _, p := range ps {
		if p == nil {
			continue
		}
		ev := p.event()
		ev.Role = role
		out = append(out, ev)
	}
	return out
}

// ackedBy returns the first received packet in space (from the server, or
// from the client under test) whose ACK frame covers pn.
func ackedBy(ps []*packet, conn, space int, pn uint64) *packet {
	for _, p := range ps {
		if p.sent || p.conn != conn || p.space != space {
			continue
		}
		for _, f := range p.frames {
			if a, ok := f.(*wire.AckFrame); ok && a.Acks(pn) {
				return p
			}
		}
	}
	return nil
}

// evidence joins groups of packet events (a trigger's, a response's, …)
// into one list, in order: the evidence a check reports.
func evidence(groups ...[]PacketEvent) []PacketEvent {
	var out []PacketEvent
	for _, g := range groups {
		out = append(out, g...)
	}
	return out
}
