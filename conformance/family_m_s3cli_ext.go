package conformance

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/quiver-quic/quiver/quic/protect"
	"github.com/quiver-quic/quiver/quic/wire"
)

// Family M, extensions and paths: grease_quic_bit, ACK frequency and a
// packet from an unknown server address (catalogue §4).

var (
	reqCliAFInvalid   = rfc("ACK-FREQ", "4", Must, "Receipt of an invalid value MUST be treated as a connection error of type PROTOCOL_VIOLATION.")
	reqCliAFThreshold = rfc("ACK-FREQ", "4", Should, "A receiving endpoint SHOULD send at least one ACK frame after receiving more than this many ack-eliciting packets.")
	reqCliAFImmediate = rfc("ACK-FREQ", "5", Should, "An endpoint SHOULD send a packet containing an ACK frame immediately upon receiving an IMMEDIATE_ACK frame.")
	reqCliUnknownAddr = rfc9000("9", Must, "If a client receives packets from an unknown server address, the client MUST discard these packets.")
)

func init() {
	registerClientGreaseBit()
	registerClientAckFreq()
	registerClientUnknownAddress()
}

// clearQUICBits clears the QUIC bit of every Handshake and 1-RTT packet in
// the datagram d, in place, and reports how many it cleared.
func clearQUICBits(d []byte) int {
	n := 0
	for off := 0; off < len(d); {
		h, err := wire.ParseHeader(d[off:], 8)
		if err != nil {
			break
		}
		if h.Type == wire.PacketTypeHandshake || h.Type == wire.PacketType1RTT {
			d[off] &^= 0x40
			n++
		}
		off += h.PacketLen
	}
	return n
}

func registerClientGreaseBit() {
	registerClient(&Scenario{
		ID: "cli-grease-quic-bit", Title: "The client accepts packets with the QUIC bit cleared", Requirements: []Requirement{reqGreaseBitAccept},
		Run: func(ctx context.Context, t *T) {
			var mu sync.Mutex
			var s *testServer
			var greased bool
			cleared := 0
			// Once the client's transport parameters say it accepts them,
			// every Handshake and 1-RTT packet leaves with the bit at 0.
			out := func(d []byte) [][]byte {
				mu.Lock()
				defer mu.Unlock()
				if !greased {
					if tp := s.clientTP(); tp != nil && tp.GreaseQUICBit {
						greased = true
					}
				}
				if greased {
					cleared += clearQUICBits(d)
				}
				return [][]byte{d}
			}
			s = t.serve(ctx, serveOptions{Label: "quic bit cleared", Out: out})
			cr := t.launch(ctx, s, smallResource)
			cr.wait(ctx, clientRunWait)
			tp := s.clientTP()
			if tp == nil {
				t.Inconclusive("The client's transport parameters could not be read from its ClientHello.")
			}
			if !tp.GreaseQUICBit {
				t.Unsupported("The client does not advertise grease_quic_bit.")
			}
			own := 0
			for _, d := range s.rawIn() {
				if len(d.b) > 0 && d.b[0]&0x40 == 0 {
					own++
				}
			}
			t.Fact("grease.client-cleared-datagrams", own)
			mu.Lock()
			n := cleared
			mu.Unlock()
			t.Fact("grease.server-cleared-packets", n)
			if cr.downloaded(smallResource) {
				t.Pass("accept", reqGreaseBitAccept, fmt.Sprintf("The client completed the download although %d Handshake and 1-RTT packets from the tester had the QUIC bit cleared.", n))
				return
			}
			if _, _, ok := t.download(ctx, serveOptions{Label: "control"}); ok {
				t.Fail("accept", reqGreaseBitAccept, fmt.Sprintf("The client advertised grease_quic_bit but did not complete the download when the tester cleared the QUIC bit (%d packets), while a control run did (%v).", n, cr.err))
				return
			}
			t.Inconclusive("The client did not complete the download, with or without the QUIC bit cleared.")
		},
	})
}

// clientMinAckDelay returns the client's min_ack_delay in microseconds, or
// ends the scenario as unsupported.
func (t *T) clientMinAckDelay(s *testServer) uint64 {
	tp := t.clientTPOf(s)
	if !tp.HasMinAckDelay {
		t.Unsupported("The client does not advertise min_ack_delay (no ACK frequency extension).")
	}
	t.Fact("tp.client.min_ack_delay_us", tp.MinAckDelay)
	return tp.MinAckDelay
}

// pingAckDelays sends n lone PINGs gap apart and returns, for each, how
// long the client took to acknowledge it (-1 when it did not within wait).
func (t *T) pingAckDelays(ctx context.Context, s *testServer, c *Conn, n int, gap, wait time.Duration, frames ...wire.Frame) []time.Duration {
	var out []time.Duration
	for i := 0; i < n; i++ {
		mark := t.mark()
		c.Inject(spaceApp, append([]wire.Frame{&wire.PingFrame{}}, frames...)...)
		var sent *packet
		find := func(ps []*packet) bool {
			if sent == nil {
				for _, p := range ps[min(mark, len(ps)):] {
					if p.sent && p.conn == s.trace.id && p.space == spaceApp && p.has(wire.FrameTypePing) {
						sent = p
						break
					}
				}
			}
			return sent != nil && ackedBy(ps[mark:], s.trace.id, spaceApp, sent.pn) != nil
		}
		if t.rec.wait(ctx, wait, find) {
			a := ackedBy(t.rec.snapshot()[mark:], s.trace.id, spaceApp, sent.pn)
			out = append(out, a.at.Sub(sent.at))
		} else {
			out = append(out, -1)
		}
		t.rec.wait(ctx, gap, nil)
	}
	return out
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func ackDelayList(ds []time.Duration) string {
	var parts []string
	for _, d := range ds {
		if d < 0 {
			parts = append(parts, "none")
		} else {
			parts = append(parts, d.Round(100*time.Microsecond).String())
		}
	}
	return strings.Join(parts, ", ")
}

func registerClientAckFreq() {
	registerClient(&Scenario{
		ID: "cli-ackfreq-invalid", Title: "ACK_FREQUENCY with an invalid Requested Max Ack Delay", Requirements: []Requirement{reqCliAFInvalid},
		Needs: []string{NeedCAny, "c-ackfreq"},
		Run: func(ctx context.Context, t *T) {
			for _, v := range []struct {
				name  string
				delay func(minAck uint64) (uint64, bool)
			}{
				{"below min_ack_delay", func(m uint64) (uint64, bool) { return m - 1, m > 0 }},
				{"2^14 ms", func(uint64) (uint64, bool) { return 1 << 14 * 1000, true }},
			} {
				s, c := t.holdOpen(ctx, serveOptions{Label: v.name})
				d, ok := v.delay(t.clientMinAckDelay(s))
				if !ok {
					t.Check(v.name, Inconclusive, Requirement{}, "The client's min_ack_delay is 0, so no Requested Max Ack Delay is below it.")
					continue
				}
				e := Expectation{Check: v.name, Req: reqCliAFInvalid, Codes: transportCodes(wire.ProtocolViolation),
					Describe: fmt.Sprintf("ACK_FREQUENCY with Requested Max Ack Delay %d µs (%s)", d, v.name)}
				t.Provoke(ctx, c, e, func() {
					c.Inject(spaceApp, &wire.AckFrequencyFrame{SequenceNumber: 0, AckElicitingThreshold: 1, RequestedMaxAckDelay: d, ReorderingThreshold: 1})
				})
			}
		},
	})
	registerClient(&Scenario{
		ID: "cli-ackfreq-honoured", Title: "The client follows ACK_FREQUENCY and IMMEDIATE_ACK", Requirements: []Requirement{reqCliAFThreshold, reqCliAFImmediate},
		Needs: []string{NeedCAny, "c-ackfreq"},
		Run: func(ctx context.Context, t *T) {
			// The catalogue sends these during a download; the tester holds
			// a request open instead and times lone PINGs, so that each
			// acknowledgment delay is measured on its own packet.
			s, c := t.holdOpen(ctx, serveOptions{Label: "ack frequency"})
			minAck := time.Duration(t.clientMinAckDelay(s)) * time.Microsecond
			if minAck > 10*time.Millisecond {
				t.Inconclusive(fmt.Sprintf("The client's min_ack_delay (%v) is too close to the default 25 ms max_ack_delay to tell an immediate acknowledgment from a delayed one.", minAck))
			}
			const gap = 40 * time.Millisecond
			wait := 300 * time.Millisecond
			// Threshold 0: every ack-eliciting packet is acknowledged at
			// once (within the requested min_ack_delay).
			c.Inject(spaceApp, &wire.AckFrequencyFrame{SequenceNumber: 0, AckElicitingThreshold: 0, RequestedMaxAckDelay: uint64(minAck / time.Microsecond), ReorderingThreshold: 1})
			t.rec.wait(ctx, t.PTO(), nil)
			ds := t.pingAckDelays(ctx, s, c, 6, gap, wait)
			t.Fact("ackfreq.threshold0-ack-delays", ackDelayList(ds))
			limit := minAck + t.RTT() + 10*time.Millisecond
			if m := median(ds); m < 0 || m > limit {
				t.Warn("threshold", reqCliAFThreshold, fmt.Sprintf("With Ack-Eliciting Threshold 0 and Requested Max Ack Delay %v, the client acknowledged lone PINGs after %s (median above %v).", minAck, ackDelayList(ds), limit.Round(time.Millisecond)))
			} else {
				t.Pass("threshold", reqCliAFThreshold, fmt.Sprintf("With Ack-Eliciting Threshold 0 the client acknowledged lone PINGs after %s.", ackDelayList(ds)))
			}
			// Threshold 9 and a 200 ms delay: a lone PING may wait, one
			// with IMMEDIATE_ACK may not.
			const long = 200 * time.Millisecond
			c.Inject(spaceApp, &wire.AckFrequencyFrame{SequenceNumber: 1, AckElicitingThreshold: 9, RequestedMaxAckDelay: uint64(long / time.Microsecond), ReorderingThreshold: 1})
			t.rec.wait(ctx, t.PTO(), nil)
			lone := t.pingAckDelays(ctx, s, c, 2, gap, 2*long)
			imm := t.pingAckDelays(ctx, s, c, 4, gap, 2*long, &wire.ImmediateAckFrame{})
			t.Fact("ackfreq.threshold9-ack-delays", ackDelayList(lone))
			t.Fact("ackfreq.immediate-ack-delays", ackDelayList(imm))
			if m := median(imm); m < 0 || m > long/2 {
				t.Warn("immediate-ack", reqCliAFImmediate, fmt.Sprintf("With Ack-Eliciting Threshold 9 and a %v Requested Max Ack Delay, the client acknowledged PINGs that carried IMMEDIATE_ACK after %s, not at once.", long, ackDelayList(imm)))
				return
			}
			t.Pass("immediate-ack", reqCliAFImmediate, fmt.Sprintf("The client acknowledged PINGs carrying IMMEDIATE_ACK after %s (lone PINGs under the same settings: %s).", ackDelayList(imm), ackDelayList(lone)))
		},
	})
}

// serverAppKeys returns the tester's server 1-RTT keys (key phase 0) for
// the connection, from the key log and the negotiated cipher suite.
func (s *testServer) serverAppKeys(version uint32, suite uint16) *protect.Keys {
	s.t.rec.mu.Lock()
	log := s.t.rec.keylog.String()
	s.t.rec.mu.Unlock()
	var k *protect.Keys
	for _, line := range strings.Split(log, "\n") {
		f := strings.Fields(line)
		if len(f) != 3 || f[0] != "SERVER_TRAFFIC_SECRET_0" {
			continue
		}
		secret, err := hexDecode(f[2])
		if err != nil {
			continue
		}
		if kk, err := protect.NewKeys(version, suite, secret); err == nil {
			k = kk
		}
	}
	return k
}

func registerClientUnknownAddress() {
	registerClient(&Scenario{
		ID: "cli-unknown-server-address", Title: "A packet from an unknown server address is discarded", Requirements: []Requirement{reqCliUnknownAddr},
		Run: func(ctx context.Context, t *T) {
			s, c := t.holdOpen(ctx, serveOptions{Label: "unknown address"})
			ps := t.rec.snapshot()
			var last *packet
			for _, p := range ps {
				if p.sent && p.conn == s.trace.id && p.space == spaceApp {
					last = p
				}
			}
			if last == nil {
				t.Inconclusive("The tester's server sent no 1-RTT packet to take the client's connection ID from.")
			}
			k := s.serverAppKeys(c.ConnectionInfo().Version, c.ConnectionState().CipherSuite)
			if k == nil {
				t.Inconclusive("The tester found no 1-RTT secret of its server in its key log.")
			}
			peer := s.trace.peerAddr()
			other, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
			if err != nil {
				t.Inconclusive(fmt.Sprintf("The tester cannot open a second UDP socket: %v.", err))
			}
			defer other.Close()
			// A packet number far beyond the engine's, so that only this
			// packet can be acknowledged under it; a PING and response data
			// on the request stream the client has not seen.
			pn := last.pn + 100000
			h := wire.ShortHeader{DCID: last.dcid, PNLen: 4, PacketNumber: pn}
			hdr, pnOff := h.Append(nil)
			payload := appendFrames(nil, []wire.Frame{&wire.PingFrame{}, &wire.StreamFrame{StreamID: requestStream(t, s), Data: []byte("data from an unknown server address\n")}})
			pkt := k.Seal(append([]byte(nil), hdr...), hdr, payload, pn)
			if _, err := k.HeaderProtector().Apply(pkt, pnOff, false); err != nil {
				t.Errorf("header protection: %v", err)
			}
			mark := t.mark()
			at := time.Now()
			if _, err := other.WriteToUDPAddrPort(pkt, peer); err != nil {
				t.Inconclusive(fmt.Sprintf("The tester could not send from its second socket: %v.", err))
			}
			t.rec.addDatagram(datagramRec{at: at, sent: true, local: other.LocalAddr().(*net.UDPAddr).AddrPort(), peer: peer, b: pkt})
			t.Fact("unknown-address.from", other.LocalAddr().String())
			// The connection goes on: PINGs on the real path every PTO.
			e := Expectation{Check: "discarded", Req: reqCliUnknownAddr, Describe: "a 1-RTT packet from an unknown server address"}
			acked := func(ps []*packet) bool { return ackedBy(ps[min(mark, len(ps)):], s.trace.id, spaceApp, pn) != nil }
			for waited := time.Duration(0); waited < t.Settle(); waited += t.PTO() {
				c.Ping()
				if t.rec.wait(ctx, t.PTO(), acked) {
					break
				}
			}
			ps = t.rec.snapshot()
			if p := ackedBy(ps[mark:], s.trace.id, spaceApp, pn); p != nil {
				t.Fail(e.Check, e.Req, fmt.Sprintf("The client acknowledged packet %d, which came from %s, an address the server never used.", pn, other.LocalAddr()), events(Response, p)...)
				return
			}
			var pings int
			for _, p := range ps[mark:] {
				if p.sent && p.conn == s.trace.id && p.has(wire.FrameTypePing) && ackedBy(ps[mark:], s.trace.id, spaceApp, p.pn) != nil {
					pings++
				}
			}
			if pings == 0 {
				t.Inconclusive("The client acknowledged neither the packet from the unknown address nor the tester's later PINGs.")
			}
			t.Pass(e.Check, e.Req, fmt.Sprintf("The client never acknowledged the packet from the unknown address %s, and acknowledged %d later PING(s) on the real path.", other.LocalAddr(), pings))
		},
	})
}
