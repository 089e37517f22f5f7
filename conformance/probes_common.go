package conformance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/quiver-quic/quiver/conformance/rawquic"
	"github.com/quiver-quic/quiver/h3"
	"github.com/quiver-quic/quiver/quic"
	"github.com/quiver-quic/quiver/quic/wire"
	"golang.org/x/sys/unix"
)

// ampCounts returns what the tester sent and received on rc's first path.
func (t *T) ampCounts(rc *rawClient) (sent, recv, dgrams int) {
	sent, _ = t.datagramBytes(rc.onPath(0), true, time.Time{})
	recv, dgrams = t.datagramBytes(rc.onPath(0), false, time.Time{})
	return
}

// firstFlightResends lists when the server's Initial packets carrying
// CRYPTO data arrived, as offsets from the first: the PTO schedule of its
// first flight.
func firstFlightSchedule(ps []*packet, conn int) []string {
	var first time.Time
	var out []string
	seen := map[uint64]bool{}
	for _, p := range received(ps, conn, 0) {
		if p.space != 0 || !p.has(wire.FrameTypeCrypto) {
			continue
		}
		var off uint64
		for _, f := range p.frames {
			if c, ok := f.(*wire.CryptoFrame); ok {
				off = c.Offset
			}
		}
		if first.IsZero() {
			first = p.at
		}
		if seen[off] || len(out) == 0 {
			out = append(out, p.at.Sub(first).Round(time.Millisecond).String())
		}
		seen[off] = true
	}
	return out
}

// inlineRequest builds a request for path in protocol alpn as frames for
// one packet: over h3 the control stream, when it is not open yet, goes in
// the same packet rather than in one of its own ahead of it (as Request
// sends it), so that a packet that must travel alone (coalesced with the
// Finished, or in 0-RTT) carries everything.
func (rc *rawClient) inlineRequest(alpn, path string) ([]wire.Frame, *rawquic.Request) {
	var frames []wire.Frame
	if alpn == h3.ALPNH3 && !rc.H3Control {
		rc.H3Control = true
		frames = append(frames, &wire.StreamFrame{StreamID: 2, Data: append([]byte{0x00}, rawquic.H3Frame(0x04, nil)...)})
	}
	saved := rc.ALPN
	rc.ALPN = []string{alpn}
	id := 4 * rc.NextBidi
	rc.NextBidi++
	req := rc.PrepareRequest(id, path)
	rc.ALPN = saved
	return append(frames, req.Frame), req
}

// coalesced is what the server did with the tester's coalesced second
// flight.
type coalesced struct {
	hsDone   bool // the Handshake packet was processed: acknowledged, or HANDSHAKE_DONE came
	hsLost   bool // not processed while a later Handshake packet was acknowledged
	appDone  bool // the 1-RTT packet was acknowledged or its request answered
	appLost  bool // not processed while a later 1-RTT packet was acknowledged
	hsAck    *packet
	appAck   *packet
	laterAck *packet
}

// rawTPValue returns the raw value of transport parameter id.
func rawTPValue(tp *wire.TransportParameters, id uint64) ([]byte, bool) {
	if tp == nil {
		return nil, false
	}
	for _, p := range tp.Raw {
		if p.ID == id {
			return p.Value, true
		}
	}
	return nil, false
}

func rawTPVarint(tp *wire.TransportParameters, id uint64) (uint64, bool) {
	b, ok := rawTPValue(tp, id)
	if !ok {
		return 0, false
	}
	v, _, err := wire.ConsumeVarint(b)
	return v, err == nil
}

// burst sends n PINGs back to back, each in its own datagram, with
// packet numbers from the client's counter (skip, when set, names offsets
// from the first to leave out).
func (rc *rawClient) burst(n int, skip map[int]bool) []*packet {
	var out []*packet
	base := rc.NextPN[2]
	for i := 0; i < n; i++ {
		if skip[i] {
			continue
		}
		pn := base + uint64(i)
		out = append(out, rc.Send1RTT([]wire.Frame{&wire.PingFrame{}}, rawquic.ShortOpts{PN: &pn}))
	}
	rc.NextPN[2] = base + uint64(n)
	return out
}

// ackPackets counts the server packets carrying an ACK frame recorded
// from mark.
func (t *T) ackPackets(conn, mark int) int {
	return len(packetsOf(framesOf[*wire.AckFrame](t.rec.snapshot(), conn, mark, false)))
}

// fetchPath fetches path on c, bounded by the settle window plus 5 s.
func (t *T) fetchPath(ctx context.Context, c *Conn, path string) ([]byte, error) {
	fctx, cancel := context.WithTimeout(ctx, t.Settle()+5*time.Second)
	defer cancel()
	return c.Fetch(fctx, path)
}

// earlyFlight sends the ClientHello and receives the server's first
// flight without answering anything (no ACK, no Finished), until the
// client's TLS handshake is done or d passes. It reports whether the
// client holds Handshake keys, so that the server has them too.
func (rc *rawClient) earlyFlight(ctx context.Context, d time.Duration) bool {
	rc.Silent = true
	rc.SendClientHello(ctx, 1200)
	rc.Receive(ctx, d, func() bool { return rc.TLSDone || rc.PeerClosed || rc.TLSErr != nil })
	return rc.Seal[1] != nil && !rc.PeerClosed
}

// judgeOwn runs a run-wide judge over the scenario's own connections: a
// fail on the first violation, else a pass naming how many were judged.
func (t *T) judgeOwn(name string, req Requirement, judge func(connRecord) (string, []*packet), what string) {
	n := 0
	for _, c := range t.records() {
		if len(c.packets) == 0 {
			continue
		}
		n++
		if s, ps := judge(c); s != "" {
			t.Fail(name, req, fmt.Sprintf("On connection %d (%s) %s", c.conn, c.label, s), events(Response, ps...)...)
			return
		}
	}
	t.Pass(name, req, fmt.Sprintf("On the %d connections of this scenario, %s.", n, what))
}

// awaitRequests lets the raw client receive until every request is
// answered in full, the server closes, or d passes. Unlike Await it never
// resends a request: the order of the bytes is the point.
func (rc *rawClient) awaitRequests(ctx context.Context, d time.Duration, reqs ...*rawquic.Request) {
	rc.Receive(ctx, d, func() bool {
		if rc.PeerClosed {
			return true
		}
		for _, r := range reqs {
			if !rc.ResponseDone(r) {
				return false
			}
		}
		return true
	})
}

// promptness judges three delays against "at once" (the path's RTT plus
// 5 ms) and "held back" (half the max_ack_delay beyond the RTT).
type promptness struct {
	prompt, late int
	delays       []time.Duration
}

func (pr *promptness) add(d, rtt, mad time.Duration) {
	pr.delays = append(pr.delays, d)
	switch {
	case d >= 0 && d <= rtt+5*time.Millisecond:
		pr.prompt++
	case d < 0 || d > rtt+max(mad/2, 5*time.Millisecond):
		pr.late++
	}
}

// ecnSockOnce caches whether this host can set and read ECN on a UDP
// socket (the ecn-sock need of docs/conformance-model.md, Needs).
var ecnSockOnce = sync.OnceValue(func() bool {
	rx, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return false
	}
	defer rx.Close()
	tx, err := net.DialUDP("udp4", nil, rx.LocalAddr().(*net.UDPAddr))
	if err != nil {
		return false
	}
	defer tx.Close()
	ok := true
	for _, c := range []*net.UDPConn{rx, tx} {
		sc, err := c.SyscallConn()
		if err != nil {
			return false
		}
		sc.Control(func(fd uintptr) {
			if c == rx {
				ok = ok && unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_RECVTOS, 1) == nil
			} else {
				ok = ok && unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_TOS, 2) == nil
			}
		})
	}
	if !ok {
		return false
	}
	tx.Write([]byte("ecn"))
	rx.SetReadDeadline(time.Now().Add(time.Second))
	buf, oob := make([]byte, 16), make([]byte, 128)
	_, oobn, _, _, err := rx.ReadMsgUDPAddrPort(buf, oob)
	return err == nil && rawquic.ECNFromOOB(oob[:oobn]) == 2
})

// requireECNSock ends the scenario as inconclusive when the tester cannot
// mark and read ECN (a tester need, §2.2).
func (t *T) requireECNSock() {
	if !ecnSockOnce() {
		t.Inconclusive("The tester cannot set and read ECN codepoints on its UDP sockets on this host (needs ecn-sock).")
	}
}

// Family I (DATAGRAM) and family J (greasing the QUIC bit): the scenarios
// that need a DATAGRAM frame in a Handshake packet, a small tester limit,
// or the QUIC bit cleared on every packet the tester sends.

var (
	reqGreaseBitAccept = fromKnowledge("RFC 9287", "3", Must, "an endpoint that advertises grease_quic_bit must accept packets with the QUIC bit set to 0.")
	reqGreaseBitEmpty  = fromKnowledge(
		"RFC 9287",
		"3",
		Must,
		"an endpoint that understands grease_quic_bit treats a non-empty value as a connection error of type TRANSPORT_PARAMETER_ERROR.",
	)
	reqGreaseBitVaries = fromKnowledge(
		"RFC 9287",
		"3.1",
		Should,
		"an endpoint that receives grease_quic_bit from its peer sets the QUIC bit to an unpredictable value, unless another extension gives the bit a meaning.",
	)
	reqDgramProtected = rfc9221(
		"5",
		Must,
		"Like STREAM frames, DATAGRAM frames contain application data and MUST be protected with either 0-RTT or 1-RTT keys.",
	)
	reqDgramPeerLimit = rfc9221(
		"3",
		MustNot,
		"An endpoint MUST NOT send DATAGRAM frames that are larger than the max_datagram_frame_size value it has received from its peer.",
	)
)

// Family C: packet and frame validity (docs/scenarios.md).

var (
	reqFrameNotPermitted = rfc9000(
		"12.4",
		Must,
		"An endpoint MUST treat receipt of a frame in a packet type that is not permitted as a connection error of type PROTOCOL_VIOLATION.",
	)
	reqNoAckBeforeOpen = rfc9000(
		"13.1",
		MustNot,
		"A packet MUST NOT be acknowledged until packet protection has been successfully removed and all frames contained in the packet have been processed.",
	)
	reqFixedBitDiscard = rfc9000("17.3.1", Must, "Packets containing a zero value for this bit are not valid packets in this version and MUST be discarded.")
)

// unknownFrameType is a frame type the IANA registry lists as unassigned
// and no known extension uses (two-byte varint 0x1d6c).
const unknownFrameType = 0x1d6c

// rawHandshake completes a raw handshake or ends the scenario.
func (t *T) rawHandshake(ctx context.Context) *rawClient {
	rc := t.newRaw(ctx, rawquic.Options{Label: "raw"})
	if err := rc.Handshake(ctx, t.Settle()+2*time.Second); err != nil {
		ps := received(t.rec.snapshot(), rc.trace.id, 0)
		t.Inconclusive(fmt.Sprintf("The tester's scripted handshake did not complete: %v.", err), events(Context, lastN(ps, 3)...)...)
	}
	return rc
}

// discardedPacket sends a packet the server must discard, then normal PINGs,
// and passes when the bad packet is never acknowledged while later ones
// are and the connection stays open.
func (t *T) discardedPacket(ctx context.Context, rc *rawClient, name string, req Requirement, what string, send func() *packet) {
	mark := len(t.rec.snapshot())
	bad := send()
	var pings []*packet
	for waited := time.Duration(0); waited < t.Settle(); waited += t.PTO() {
		pings = append(pings, rc.Send1RTT([]wire.Frame{&wire.PingFrame{}}, rawquic.ShortOpts{}))
		rc.Receive(ctx, t.PTO(), nil)
	}
	ps := t.rec.snapshot()
	if a := ackedBy(ps, rc.trace.id, 2, bad.pn); a != nil {
		t.Fail(
			name,
			req,
			fmt.Sprintf("The server acknowledged %s (packet %d) instead of discarding it.", what, bad.pn),
			evidence(events(Trigger, bad), events(Response, a))...)
		return
	}
	if cl := firstClose(received(ps, rc.trace.id, mark)); cl != nil {
		t.Fail(
			name,
			req,
			fmt.Sprintf("The server closed the connection (%s) after %s; it must discard the packet and go on.", closeCode(cl.closeFrame()), what),
			evidence(events(Trigger, bad), events(Response, cl))...)
		return
	}
	for _, pg := range pings {
		if a := ackedBy(ps, rc.trace.id, 2, pg.pn); a != nil {
			t.Pass(
				name,
				req,
				fmt.Sprintf("The server never acknowledged %s (packet %d) but acknowledged later PINGs.", what, bad.pn),
				evidence(events(Trigger, bad), events(Response, a))...)
			return
		}
	}
	t.Check(name, Inconclusive, req, fmt.Sprintf("After %s the server acknowledged none of the tester's later PINGs either.", what), events(Trigger, bad)...)
}

// fcViolation is the first server byte beyond a flow-control limit.
type fcViolation struct {
	p        *packet
	stream   uint64 // the stream, or ^0 for the connection limit
	end      uint64 // the offset (or connection total) reached
	limit    uint64 // the limit in force
	fromPeer bool
}

func (v *fcViolation) String() string {
	if v.stream == ^uint64(0) {
		return fmt.Sprintf("the server's stream data reached %d bytes in total, beyond the connection limit of %d the tester had advertised", v.end, v.limit)
	}
	return fmt.Sprintf("the server sent stream %d up to offset %d, beyond the stream limit of %d the tester had advertised", v.stream, v.end, v.limit)
}

// fcClient runs a raw handshake advertising the tester defaults edited by
// edit.
func (t *T) fcClient(ctx context.Context, label string, edit func(tp *wire.TransportParameters)) (*rawClient, *wire.TransportParameters) {
	scid := randomBytes(8)
	tp := rawquic.DefaultClientTP(scid)
	edit(tp)
	rc := t.rawEstablished(ctx, rawquic.Options{Label: label, SCID: scid, TP: tp}, nil)
	return rc, tp
}

// streamEnd is how far the server's data on stream id has reached on rc.
func (rc *rawClient) streamEnd(id uint64) uint64 {
	s := rc.Stream(id)
	if s == nil {
		return 0
	}
	return s.End()
}

// stallOn receives for one settle window, or until cond holds; it returns
// whether cond held.
func (rc *rawClient) stallOn(ctx context.Context, cond func() bool) bool {
	rc.Receive(ctx, rc.t.Settle(), func() bool { return cond() || rc.PeerClosed })
	return cond()
}

// Family E: connection IDs, path validation and migration (docs/scenarios.md).
// Connection ID management uses the engine (IssueConnectionID); paths use
// the raw client, which can send from several sockets.

var (
	reqCIDLimit  = rfc9000("5.1.1", MustNot, "An endpoint MUST NOT provide more connection IDs than the peer's limit.")
	reqCIDAccept = rfc9000(
		"5.1.1",
		Must,
		"When an endpoint issues a connection ID, it MUST accept packets that carry this connection ID for the duration of the connection or until its peer invalidates the connection ID",
	)
	reqPathResponseEcho = rfc9000(
		"8.2.2",
		Must,
		"On receiving a PATH_CHALLENGE frame, an endpoint MUST respond by echoing the data contained in the PATH_CHALLENGE frame in a PATH_RESPONSE frame.",
	)
	reqPathResponseNoDly = rfc9000(
		"8.2.2",
		MustNot,
		"An endpoint MUST NOT delay transmission of a packet containing a PATH_RESPONSE frame unless constrained by congestion control.",
	)
	reqPathResponseSize = rfc9000(
		"8.2.2",
		Must,
		"An endpoint MUST expand datagrams that contain a PATH_RESPONSE frame to at least the smallest allowed maximum datagram size of 1200 bytes.",
	)
	reqPathResponsePath = rfc9000("8.2.2", Must, "A PATH_RESPONSE frame MUST be sent on the network path where the PATH_CHALLENGE frame was received.")
	reqMigrateFollow    = rfc9000(
		"9.3",
		Must,
		"If the recipient permits the migration, it MUST send subsequent packets to the new peer address and MUST initiate path validation",
	)
	reqMigrateDropNoSR = rfc9000(
		"9",
		Must,
		"the endpoint MUST either drop the incoming packets on that path without generating a Stateless Reset or proceed with path validation and allow the peer to migrate.",
	)
	reqCIDNotReused      = rfc9000("9.5", MustNot, "Similarly, an endpoint MUST NOT reuse a connection ID when sending to more than one destination address.")
	reqPathChallengeSize = rfc9000(
		"8.2.1",
		Must,
		"MUST expand datagrams that contain a PATH_CHALLENGE frame to at least … 1200 bytes, unless the anti-amplification limit for the path does not permit",
	)
	reqAmpUnvalidated = rfc9000(
		"8",
		Must,
		"an endpoint MUST limit the amount of data it sends to the unvalidated address to three times the amount of data received from that address.",
	)
	reqOldPathValidated = rfc9000(
		"9.3.3",
		Must,
		"In response to an apparent migration, endpoints MUST validate the previously active path using a PATH_CHALLENGE frame.",
	)
	reqCIDLengthInvalid = rfc9000(
		"19.15",
		Must,
		"Values less than 1 and greater than 20 are invalid and MUST be treated as a connection error of type FRAME_ENCODING_ERROR.",
	)
)

// serverHandshakeSCID is the Source Connection ID of the server's first
// Initial or Handshake packet on the connection.
func (c *connTrace) serverHandshakeSCID() []byte {
	c.r.mu.Lock()
	defer c.r.mu.Unlock()
	for _, p := range c.r.packets {
		if p.conn == c.id && !p.sent && (p.space == 0 || p.space == 1) && p.ev.PacketType != "retry" {
			return p.scid
		}
	}
	return nil
}

// rawSpareCID waits for the server's first spare connection ID on the raw
// client and returns its frame, or ends the scenario as unsupported.
func (t *T) rawSpareCID(ctx context.Context, rc *rawClient) *wire.NewConnectionIDFrame {
	rc.receiveUntil(ctx, t.Settle(), 0, hasFrame[*wire.NewConnectionIDFrame]())
	fs := framesOf[*wire.NewConnectionIDFrame](t.rec.snapshot(), rc.trace.id, 0, false)
	for _, fa := range fs {
		if f := fa.f.(*wire.NewConnectionIDFrame); f.SequenceNumber >= 1 && len(f.ConnectionID) > 0 {
			return f
		}
	}
	t.Unsupported(fmt.Sprintf("The server issued no spare connection ID within %v, so there is none to switch to.", t.Settle().Round(time.Millisecond)))
	return nil
}

// Family I (DATAGRAM, RFC 9221) and family J (greasing) (docs/scenarios.md,
// §3.J).

const (
	tpMaxDatagramFrameSize = 0x20
	tpGreaseQUICBit        = 0x2ab2
)

// Family F (a stale Retry token) and family H (the reordering window and
// CE marks under ACK_FREQUENCY), on the raw client.

var (
	reqRetryTokenShort = rfc9000(
		"8.1.4",
		Should,
		"Servers SHOULD ensure that tokens sent in Retry packets are only accepted for a short time, as they are returned immediately by clients.",
	)
	reqAFReorderWindow = ackFreq(
		"6.2",
		Should,
		"SHOULD send an immediate ACK whenever it receives an ack-eliciting, out-of order packet whose packet number is outside the reordering window of the peer",
	)
	reqAFCEImmediate = ackFreq(
		"6.3",
		Should,
		"an endpoint SHOULD send an immediate acknowledgement when a packet marked with the ECN Congestion Experienced (CE) … is received and the previously received packet was not marked CE.",
	)
)

// finishedSent returns the tester's Handshake packet that carried its
// Finished (the first sent Handshake packet with CRYPTO data).
func finishedSent(ps []*packet, conn int) *packet {
	for _, p := range ps {
		if p.sent && p.conn == conn && p.space == 1 && p.has(wire.FrameTypeCrypto) {
			return p
		}
	}
	return nil
}

// Family A: handshake and versions (docs/scenarios.md).

var (
	reqHandshakeDone    = rfc9001("4.1.2", Must, "The server MUST send a HANDSHAKE_DONE frame as soon as the handshake is complete.")
	reqDiscardOtherSCID = rfc9000(
		"7.2",
		Must,
		"Once a client has received a valid Initial packet from the server, it MUST discard any subsequent packet it receives on that connection with a different Source Connection ID.",
	)
	reqDCIDFromFirst = rfc9000(
		"7.2",
		Must,
		"A server MUST set the Destination Connection ID it uses for sending packets based on the first received Initial packet.",
	)
	reqTPInvalid = rfc9000(
		"7.4",
		Must,
		"An endpoint MUST treat receipt of a transport parameter with an invalid value as a connection error of type TRANSPORT_PARAMETER_ERROR.",
	)
	reqVNSmallDrop = rfc9000("5.2.2", Must, "Servers MUST drop smaller packets that specify unsupported versions.")
	reqVNShould    = rfc9000("5.2.2", Should, "Servers SHOULD respond with a Version Negotiation packet, provided that the datagram is sufficiently long.")
	reqVNOnce      = rfc9000("17.2.1", MustNot, "A server MUST NOT send more than one Version Negotiation packet in response to a single UDP datagram.")
	reqVNEchoSCID  = rfc9000(
		"17.2.1",
		Must,
		"The server MUST include the value from the Source Connection ID field of the packet it receives in the Destination Connection ID field.",
	)
	reqVNEchoDCID   = rfc9000("17.2.1", Must, "The value for Source Connection ID MUST be copied from the Destination Connection ID of the received packet")
	reqV2Implements = rfc("RFC 9369", "3", Must, "Except for a few differences, QUIC version 2 endpoints MUST implement the QUIC version 1 specification")
	reqV2Negotiated = rfc("RFC 9369", "4.1", Must, "Both endpoints MUST send Handshake and 1-RTT packets using the negotiated version.")
)

// reservedVersion is a version of the reserved 0x?a?a?a?a form (RFC 9000 §15).
const reservedVersion = 0x1a2a3a4a

// fetchSmall fetches the small resource and records whether it arrived.
// With no resource named in the profile, any complete answer counts.
func (t *T) fetchSmall(ctx context.Context, c *Conn) (answered bool, detail string) {
	fctx, cancel := context.WithTimeout(ctx, t.Settle()+2*time.Second)
	defer cancel()
	body, err := c.Fetch(fctx, t.profile.SmallPath)
	if err == nil {
		t.Fact("resource.small-bytes", len(body))
		return true, fmt.Sprintf("%d bytes of %s arrived", len(body), t.profile.SmallPath)
	}
	if t.profile.Target.SmallPath == "" && fctx.Err() == nil && c.Err() == nil {
		// No resource was named: an error response is still an answer.
		return true, fmt.Sprintf("the request for %s was answered (%v)", t.profile.SmallPath, err)
	}
	return false, fmt.Sprintf("the request for %s failed: %v", t.profile.SmallPath, err)
}

// dialFailure ends a scenario whose normal handshake failed, with the
// verdict the failure supports.
func (t *T) dialFailure(c *Conn, err error) {
	ps := received(t.rec.snapshot(), c.trace.id, 0)
	var vne *quic.VersionNegotiationError
	if errors.As(err, &vne) {
		t.Unsupported(
			fmt.Sprintf("The server answered with Version Negotiation listing %s, which lacks the version the tester offered.", versionList(vne.Theirs)),
			events(Response, lastN(ps, 1)...)...)
	}
	if len(ps) == 0 {
		t.Inconclusive(fmt.Sprintf("The server sent nothing in reply to the tester's Initial (%v).", err))
	}
	t.Inconclusive(fmt.Sprintf("The handshake failed: %v.", err), events(Response, lastN(ps, 3)...)...)
}

func versionList(vs []uint32) string {
	var b bytes.Buffer
	for i, v := range vs {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "0x%08x", v)
	}
	return "[" + b.String() + "]"
}

// serverAnswer classifies what came back on a raw connection.
type serverAnswer struct {
	vn        []*packet // Version Negotiation packets
	handshake []*packet // decrypted Initial or Handshake packets
	closes    []*packet
	other     []*packet // anything else (undecryptable, stateless reset, short)
}

func classify(ps []*packet, conn int) serverAnswer {
	var a serverAnswer
	for _, p := range received(ps, conn, 0) {
		switch {
		case p.ev.PacketType == "version_negotiation":
			a.vn = append(a.vn, p)
		case p.closeFrame() != nil:
			a.closes = append(a.closes, p)
		case p.space == 0 || p.space == 1:
			a.handshake = append(a.handshake, p)
		default:
			a.other = append(a.other, p)
		}
	}
	return a
}

func (t *T) datagramsReceived(conn int) int {
	t.rec.mu.Lock()
	defer t.rec.mu.Unlock()
	n := 0
	for _, d := range t.rec.allDatagramsLocked() {
		if !d.sent && d.local == t.rec.conns[conn].local {
			n++
		}
	}
	return n
}

// sendUnknownVersion sends one Initial of a reserved version in a datagram
// of size bytes and returns the sent packet.
func sendUnknownVersion(ctx context.Context, rc *rawClient, size int) *packet {
	pkt, _ := rc.LongPacket(0, []wire.Frame{&wire.CryptoFrame{Data: rc.ClientHello(ctx)}}, rawquic.LongOpts{PadTo: size})
	rc.Send(pkt)
	return rc.LastSent()
}

// vnProbe sends an unknown-version Initial and collects the Version
// Negotiation replies to that single datagram.
func vnProbe(ctx context.Context, t *T, label string, dcid, scid []byte, size int) (*packet, []*packet) {
	rc := t.newRaw(ctx, rawquic.Options{Label: label, Version: reservedVersion, DCID: dcid, SCID: scid})
	trig := sendUnknownVersion(ctx, rc, size)
	vns := func() []*packet { return classify(t.rec.snapshot(), rc.trace.id).vn }
	rc.Receive(ctx, t.Settle(), func() bool { return len(vns()) > 0 })
	if len(vns()) > 0 {
		// Listen a little longer for a second reply to the same datagram.
		rc.Receive(ctx, max(t.PTO(), 300*time.Millisecond), nil)
	}
	return trig, vns()
}
