package conformance

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"time"

	"github.com/quiver-quic/quiver/quic"
	"github.com/quiver-quic/quiver/quic/wire"
)

// registerPassiveClient registers the passive checks; each judges the
// client connection of one plain download.
func registerPassiveClient() {
	registerClient(&Scenario{
		ID: "cli-initial-datagram-size", Title: "Client Initial datagrams are at least 1200 bytes", Passive: true,
		Requirements: []Requirement{reqCliInitialSize},
		Run: func(ctx context.Context, t *T) {
			s, _, _ := t.download(ctx, serveOptions{Label: "download"})
			n, small := 0, 0
			var ev []*packet
			for _, d := range s.rawIn() {
				if d.err != nil || d.header.Type != wire.PacketTypeInitial {
					continue
				}
				if n == 0 {
					// The size the client pads its first flight to, an
					// implementation's setting (RFC 9000 §14.1: "a
					// client MUST expand the payload of all UDP datagrams
					// carrying Initial packets to at least the smallest
					// allowed maximum datagram size of 1200 bytes"; how far
					// above 1200 is its choice).
					t.Fact("initial.client-first-datagram-size", d.size)
				}
				n++
				if d.size < 1200 {
					small++
					if ci, ok := openClientInitial(d.b); ok {
						ev = append(ev, &packet{ev: PacketEvent{Direction: "received", PacketType: "initial", Number: int64(ci.pn), Size: d.size}})
					}
				}
			}
			switch {
			case n == 0:
				t.Inconclusive("The client sent no Initial packet to the tester's server.")
			case small > 0:
				t.Fail("size", reqCliInitialSize, fmt.Sprintf("%d of the client's %d datagrams carrying Initial packets were smaller than 1200 bytes.", small, n), events(Response, ev...)...)
			default:
				t.Pass("size", reqCliInitialSize, fmt.Sprintf("All %d datagrams carrying client Initial packets had at least 1200 bytes.", n))
			}
		},
	})
	registerClient(&Scenario{
		ID: "cli-initial-dcid", Title: "The client's first Destination Connection ID is long enough and stable", Passive: true,
		Requirements: []Requirement{reqCliDCIDLen, reqCliDCIDSame},
		Run: func(ctx context.Context, t *T) {
			s, _, _ := t.download(ctx, serveOptions{Label: "download"})
			var firstServer time.Time
			t.rec.mu.Lock()
			for _, d := range t.rec.allDatagramsLocked() {
				if d.sent {
					firstServer = d.at
					break
				}
			}
			t.rec.mu.Unlock()
			var first []byte
			changed := 0
			for _, d := range s.rawIn() {
				if d.err != nil || !d.header.Long || (!firstServer.IsZero() && d.at.After(firstServer)) {
					continue
				}
				if first == nil {
					first = append([]byte(nil), d.header.DCID...)
					continue
				}
				if !bytes.Equal(first, d.header.DCID) {
					changed++
				}
			}
			if first == nil {
				t.Inconclusive("The client sent no long-header packet to the tester's server.")
			}
			t.Fact("cid.client-initial-dcid-length", len(first))
			if len(first) < 8 {
				t.Fail("length", reqCliDCIDLen, fmt.Sprintf("The client's first Destination Connection ID is %d bytes long.", len(first)))
			} else {
				t.Pass("length", reqCliDCIDLen, fmt.Sprintf("The client's first Destination Connection ID is %d bytes long.", len(first)))
			}
			if changed > 0 {
				t.Fail("stable", reqCliDCIDSame, fmt.Sprintf("The client changed its Destination Connection ID on %d packet(s) before any server packet.", changed))
			} else {
				t.Pass("stable", reqCliDCIDSame, "The client kept its first Destination Connection ID until the server answered.")
			}
		},
	})
	registerClient(&Scenario{
		ID: "cli-inv-packet-rules", Title: "Client packet numbers, frame placement and acknowledgments", Passive: true,
		Requirements: []Requirement{reqCliPNReuse, reqCliAppSpace, reqCliAckOnly},
		Run: func(ctx context.Context, t *T) {
			s, _, _ := t.download(ctx, serveOptions{Label: "download"})
			ps := t.rec.snapshot()
			seen := map[[2]uint64]*packet{}
			sent := map[[2]uint64]bool{}
			var reuse, placement, bogusAck []*packet
			for _, p := range ps {
				if p.conn != s.trace.id || p.space < 0 {
					continue
				}
				key := [2]uint64{uint64(p.space), p.pn}
				if p.sent {
					sent[key] = true
					continue
				}
				if q := seen[key]; q != nil && p.closeFrame() == nil && q.closeFrame() == nil {
					reuse = append(reuse, q, p)
				}
				seen[key] = p
				if p.space != spaceApp {
					for _, f := range p.frames {
						switch f.Type() {
						case wire.FrameTypePadding, wire.FrameTypePing, wire.FrameTypeAck, wire.FrameTypeAckECN, wire.FrameTypeCrypto, wire.FrameTypeConnectionClose:
						default:
							placement = append(placement, p)
						}
					}
				}
			}
			for _, p := range ps {
				if p.sent || p.conn != s.trace.id {
					continue
				}
				for _, f := range p.frames {
					a, ok := f.(*wire.AckFrame)
					if !ok {
						continue
					}
					for _, r := range a.Ranges {
						for pn := r.Smallest; pn <= r.Largest && pn < r.Smallest+10000; pn++ {
							if !sent[[2]uint64{uint64(p.space), pn}] {
								bogusAck = append(bogusAck, p)
								break
							}
						}
					}
				}
			}
			if len(seen) == 0 {
				t.Inconclusive("The tester decrypted no packet from the client.")
			}
			check := func(name string, req Requirement, bad []*packet, failMsg, passMsg string) {
				if len(bad) > 0 {
					t.Fail(name, req, failMsg, events(Response, lastN(bad, 4)...)...)
				} else {
					t.Pass(name, req, passMsg)
				}
			}
			check("pn-reuse", reqCliPNReuse, reuse, fmt.Sprintf("The client used %d packet number(s) twice in one space.", len(reuse)/2), fmt.Sprintf("The client never reused a packet number over %d packets.", len(seen)))
			check("frame-placement", reqCliAppSpace, placement, fmt.Sprintf("The client sent application-only frames in %d Initial or Handshake packet(s).", len(placement)), "Every frame in the client's Initial and Handshake packets is allowed there.")
			check("acks", reqCliAckOnly, bogusAck, fmt.Sprintf("The client acknowledged packet numbers the tester never sent, in %d ACK frame(s).", len(bogusAck)), "The client acknowledged only packets the tester sent.")
		},
	})
}

// registerClientTP registers the transport parameter scenarios.
func registerClientTP() {
	type tpCase struct {
		name string
		edit func(p *wire.TransportParameters)
	}
	run := func(id string, e Expectation, cases []tpCase) func(ctx context.Context, t *T) {
		return func(ctx context.Context, t *T) {
			for _, c := range cases {
				ee := e
				ee.Check = c.name
				ee.Describe = fmt.Sprintf("%s (%s)", e.Describe, c.name)
				edit := c.edit
				t.judgeClientHandshake(ctx, c.name, serveOptions{Label: c.name, Probe: quic.Probe{TransportParameters: edit}}, ee)
			}
		}
	}
	tpErr := transportCodes(wire.TransportParameterError)
	tpOrPV := transportCodes(wire.TransportParameterError, wire.ProtocolViolation)
	registerClient(&Scenario{
		ID: "cli-tp-invalid-value", Title: "Server transport parameters with invalid values", Requirements: []Requirement{reqCliTPInvalid, reqCliTPClient},
		Run: run("cli-tp-invalid-value", Expectation{Req: reqCliTPInvalid, Codes: tpErr, Describe: "an invalid server transport parameter"}, []tpCase{
			{"max_udp_payload_size=1199", func(p *wire.TransportParameters) { p.MaxUDPPayloadSize = 1199 }},
			{"ack_delay_exponent=21", func(p *wire.TransportParameters) { p.AckDelayExponent = 21 }},
			{"max_ack_delay=16384", func(p *wire.TransportParameters) { p.MaxAckDelay = 16384 }},
			{"active_connection_id_limit=1", func(p *wire.TransportParameters) { p.ActiveConnectionIDLimit = 1 }},
		}),
	})
	registerClient(&Scenario{
		ID: "cli-tp-cid-mismatch", Title: "Server connection ID transport parameters that do not match", Requirements: []Requirement{reqCliTPMatch, reqCliTPMatchErr},
		Run: run("cli-tp-cid-mismatch", Expectation{Req: reqCliTPMatch, Codes: tpOrPV, Describe: "a server connection ID transport parameter that does not match"}, []tpCase{
			{"original_destination_connection_id wrong", func(p *wire.TransportParameters) {
				p.OriginalDestinationConnectionID = bytes.Repeat([]byte{0xee}, 8)
			}},
			{"initial_source_connection_id wrong", func(p *wire.TransportParameters) {
				p.InitialSourceConnectionID = bytes.Repeat([]byte{0xdd}, 8)
			}},
			{"retry_source_connection_id without Retry", func(p *wire.TransportParameters) {
				p.HasRetrySourceConnectionID = true
				p.RetrySourceConnectionID = bytes.Repeat([]byte{0xcc}, 8)
			}},
		}),
	})
	registerClient(&Scenario{
		ID: "cli-tp-missing-odcid", Title: "Server transport parameters without original_destination_connection_id", Requirements: []Requirement{reqCliTPAbsent},
		Run: run("cli-tp-missing-odcid", Expectation{Req: reqCliTPAbsent, Codes: tpErr, Describe: "server transport parameters without original_destination_connection_id"}, []tpCase{
			{"close", func(p *wire.TransportParameters) {
				p.HasOriginalDestinationConnectionID = false
				p.OriginalDestinationConnectionID = nil
			}},
		}),
	})
	registerClient(&Scenario{
		ID: "cli-retry-tp-missing", Title: "Retry without retry_source_connection_id in the transport parameters", Requirements: []Requirement{reqCliRetryTP},
		Run: func(ctx context.Context, t *T) {
			t.judgeClientHandshake(ctx, "close", serveOptions{Label: "retry",
				Config: func(c *quic.Config) { c.RequireRetry = true },
				Probe: quic.Probe{TransportParameters: func(p *wire.TransportParameters) {
					p.HasRetrySourceConnectionID = false
					p.RetrySourceConnectionID = nil
				}}},
				Expectation{Req: reqCliRetryTP, Codes: tpOrPV, Describe: "a Retry followed by transport parameters without retry_source_connection_id"})
		},
	})
	registerClient(&Scenario{
		ID: "cli-tp-reserved", Title: "Reserved and unknown server transport parameters are ignored", Requirements: []Requirement{reqCliTPIgnore},
		Run: func(ctx context.Context, t *T) {
			edit := func(p *wire.TransportParameters) {
				for i, n := range []uint64{1, 7, 1000, 31337} {
					p.Unknown = append(p.Unknown, wire.TransportParameter{ID: 31*n + 27, Value: bytes.Repeat([]byte{byte(i)}, i*3)})
				}
				p.Unknown = append(p.Unknown, wire.TransportParameter{ID: 0x3f3f3f, Value: bytes.Repeat([]byte{0x5a}, 500)})
			}
			s, cr, ok := t.download(ctx, serveOptions{Label: "reserved", Probe: quic.Probe{TransportParameters: edit}})
			if ok {
				t.Pass("ignored", reqCliTPIgnore, "The client downloaded the file although the server sent four reserved and one unknown 500-byte transport parameter.")
				return
			}
			rcv := received(t.rec.snapshot(), s.trace.id, 0)
			if p := firstClose(rcv); p != nil {
				t.Fail("ignored", reqCliTPIgnore, fmt.Sprintf("The client closed with %s when the server sent reserved and unknown transport parameters.", closeCode(p.closeFrame())), events(Response, p)...)
				return
			}
			t.judgeControlDownload(ctx, cr, "The client did not complete the download with reserved transport parameters")
		},
	})
}

// judgeControlDownload ends a scenario whose client did not download:
// with a control run that downloads, the deviation is to blame (still
// inconclusive, since no close says so); without one, the client cannot
// download at all.
func (t *T) judgeControlDownload(ctx context.Context, cr *clientRun, what string) {
	_, _, ok := t.download(ctx, serveOptions{Label: "control"})
	if !ok {
		t.Inconclusive(fmt.Sprintf("%s, and a control run without the deviation did not download either (%v).", what, cr.err))
	}
	t.Inconclusive(fmt.Sprintf("%s and sent no CONNECTION_CLOSE, while a control run downloaded.", what))
}

func registerClientTimers() {
	registerClient(&Scenario{
		ID: "cli-initial-retransmit", Title: "The client retransmits its first Initial on PTO",
		Requirements: []Requirement{reqCliPTOPackets, reqCliPTOProbe, reqCliInitialRTT}, Long: true,
		Run: func(ctx context.Context, t *T) {
			// The first flight may take several datagrams (a large
			// ClientHello): drop every datagram of it, i.e. all that come
			// within 200 ms of the first.
			var first time.Time
			var mu sync.Mutex
			in := func(d []byte, reply func([]byte)) bool {
				mu.Lock()
				defer mu.Unlock()
				if first.IsZero() {
					first = time.Now()
				}
				return time.Since(first) < 200*time.Millisecond
			}
			s := t.serve(ctx, serveOptions{Label: "drop first flight", In: in})
			cr := t.launch(ctx, s, smallResource)
			retransmit := func() (rawDatagram, *clientInitial, bool) {
				ds := s.rawIn()
				for _, d := range ds {
					if d.at.Sub(ds[0].at) < 200*time.Millisecond {
						continue
					}
					if ci, ok := openClientInitial(d.b); ok {
						for _, f := range ci.frames {
							if cf, ok := f.(*wire.CryptoFrame); ok && cf.Offset == 0 {
								return d, ci, true
							}
						}
					}
				}
				return rawDatagram{}, nil, false
			}
			if !t.rec.wait(ctx, 10*time.Second, func([]*packet) bool { _, _, ok := retransmit(); return ok }) {
				if len(s.rawIn()) == 0 {
					t.Inconclusive("The client sent nothing to the tester's server.")
				}
				t.Fail("retransmit", reqCliPTOPackets, "The client did not send its ClientHello again within 10 s after its first flight went unanswered.")
				return
			}
			cr.wait(ctx, clientRunWait)
			ds := s.rawIn()
			d, b, _ := retransmit()
			a, _ := openClientInitial(ds[0].b)
			gap := d.at.Sub(ds[0].at)
			t.Fact("pto.first-retransmit-ms", gap.Milliseconds())
			if a != nil && b.pn <= a.pn {
				t.Fail("probe", reqCliPTOProbe, fmt.Sprintf("The client's retransmission reused packet number %d.", b.pn))
			} else {
				t.Pass("probe", reqCliPTOProbe, fmt.Sprintf("The client sent its ClientHello again in a new Initial %v after the first (datagram of %d bytes).", gap.Round(time.Millisecond), d.size))
			}
			if gap > 3*time.Second {
				t.Warn("initial-rtt", reqCliInitialRTT, fmt.Sprintf("The first retransmission came %v after the first Initial; with an initial RTT of 333 ms it comes about 1 s later.", gap.Round(time.Millisecond)))
			} else {
				t.Pass("initial-rtt", reqCliInitialRTT, fmt.Sprintf("The first retransmission came %v after the first Initial.", gap.Round(time.Millisecond)))
			}
			t.Fact("download-after-retransmit", cr.downloaded(smallResource))
		},
	})
}

func registerClientKeyUpdate() {
	registerClient(&Scenario{
		ID: "cli-key-update-server", Title: "The client follows key updates the server starts", Requirements: []Requirement{reqCliKUFollow, reqCliKUAckNew},
		Run: func(ctx context.Context, t *T) {
			// The catalogue updates keys mid-download; a loopback download of
			// 1 MiB ends before three updates and 3 × PTO pauses, so the
			// tester holds a request open and carries each update on a PING
			// instead: the rules judged (follow, acknowledge in the new
			// phase) are the same.
			var pl kuPhaseLog
			s, c := t.holdOpen(ctx, serveOptions{Label: "key update", Probe: pl.probe()})
			t.rec.wait(ctx, t.PTO(), nil) // let the handshake be confirmed
			for round := 1; round <= 3; round++ {
				mark := t.mark()
				if err := c.ForceKeyUpdate(); err != nil {
					t.Inconclusive(fmt.Sprintf("The tester's server could not start key update %d: %v.", round, err))
				}
				c.Ping()
				// ackOfNew finds the client packets that acknowledge a
				// packet the tester sent in the new phase.
				var newPhase, havePhase bool
				ackOfNew := func(ps []*packet) []*packet {
					var out []*packet
					for _, p := range ps[min(mark, len(ps)):] {
						if p.conn != s.trace.id || p.space != spaceApp {
							continue
						}
						if p.sent {
							if !havePhase && p.has(wire.FrameTypePing) {
								newPhase, havePhase = pl.phase(true, p.pn)
							}
							continue
						}
						if !havePhase {
							continue
						}
						for _, f := range p.frames {
							a, ok := f.(*wire.AckFrame)
							if !ok {
								continue
							}
							for _, q := range ps[mark:] {
								if q.sent && q.conn == s.trace.id && q.space == spaceApp && a.Acks(q.pn) {
									if ph, ok := pl.phase(true, q.pn); ok && ph == newPhase {
										out = append(out, p)
										break
									}
								}
							}
						}
					}
					return out
				}
				if !t.rec.wait(ctx, t.Settle(), func(ps []*packet) bool { return len(ackOfNew(ps)) > 0 }) {
					rcv := received(t.rec.snapshot(), s.trace.id, mark)
					if firstClose(rcv) != nil {
						t.Fail("follow", reqCliKUFollow, fmt.Sprintf("The client closed the connection after key update %d (%s).", round, closeCode(firstClose(rcv).closeFrame())), events(Response, firstClose(rcv))...)
						return
					}
					t.Fail("follow", reqCliKUFollow, fmt.Sprintf("The client never acknowledged a packet of the new key phase within %v of key update %d: it stopped responding after the update.", t.Settle().Round(time.Millisecond), round), events(Context, lastN(rcv, 3)...)...)
					return
				}
				// Room for acknowledgments in flight, then judge every
				// acknowledgment of a new-phase packet.
				t.rec.wait(ctx, t.RTT()+10*time.Millisecond, nil)
				for _, p := range ackOfNew(t.rec.snapshot()) {
					if ph, ok := pl.phase(false, p.pn); ok && ph != newPhase {
						t.Fail("ack-in-new-phase", reqCliKUAckNew, fmt.Sprintf("In key update %d the client acknowledged a new-phase packet in packet %d, still protected with the old keys (Key Phase %v).", round, p.pn, ph), events(Response, p)...)
						return
					}
				}
				t.rec.wait(ctx, 3*t.PTO(), nil)
			}
			t.Pass("follow", reqCliKUFollow, "The client followed three key updates started by the server.")
			t.Pass("ack-in-new-phase", reqCliKUAckNew, "Every acknowledgment of a new-phase packet came in a packet of the new phase.")
		},
	})
}

// Family M, resumption, 0-RTT and tokens (docs/scenarios.md, Client-facing, needs c-resume,
// c-0rtt, c-token): the client is started with its resume command
// (ClientTarget.ResumeCommand), which fetches the first URL on one
// connection and the rest on the next ones, each resuming the session of
// the one before. One tester server serves them all; connections are told
// apart by the client's first-flight Initials.

var (
	reqCliTicketEarly = rfc9001("4.6.1", Must, "A client MUST treat receipt of a NewSessionTicket that contains an early_data extension with any other value as a connection error of type PROTOCOL_VIOLATION.")
	reqCli0RTTAfter   = rfc9001("5.6", MustNot, "Once a client has installed 1-RTT keys, it MUST NOT send any more 0-RTT packets.")
	reqCli0RTTLimits  = rfc9000("7.4.1", Must, "When sending frames in 0-RTT packets, a client MUST only use remembered transport parameters")
	reqCli0RTTReset   = rfc9001("4.6.2", Must, "The client therefore MUST reset the state of all streams, including application state bound to those streams.")
	reqCli0RTTStop    = rfc9001("5.6", Should, "A client SHOULD stop sending 0-RTT data if it receives an indication that 0-RTT data has been rejected.")
	reqCliTokenUsed   = rfc9000("8.1.3", Should, "When connecting to a server for which the client retains an applicable and unused token, it SHOULD include that token in the Token field of its Initial packet.")
	reqCliTokenOnce   = rfc9000("8.1.3", ShouldNot, "A client SHOULD NOT reuse a token from a NEW_TOKEN frame for different connection attempts.")
)

// connStart is the first datagram of one of the client's connections.
type connStart struct {
	at    time.Time
	dcid  []byte
	token []byte
}

// clientConnStarts lists the client's connections in order: each begins
// with an Initial protected with keys from its own, new Destination
// Connection ID.
func clientConnStarts(ds []rawDatagram) []connStart {
	var out []connStart
	seen := map[string]bool{}
	for _, d := range ds {
		ci, ok := openClientInitial(d.b)
		if !ok || seen[string(ci.dcid)] {
			continue
		}
		seen[string(ci.dcid)] = true
		out = append(out, connStart{at: d.at, dcid: ci.dcid, token: ci.token})
	}
	return out
}

// packetTypesAfter lists the long-header type (or 1-RTT) of every packet
// in the client's datagrams from at on, in arrival order.
func packetTypesAfter(ds []rawDatagram, from, to time.Time) []wire.PacketType {
	var out []wire.PacketType
	for _, d := range ds {
		if d.at.Before(from) || (!to.IsZero() && !d.at.Before(to)) {
			continue
		}
		for rest := d.b; len(rest) > 0; {
			h, err := wire.ParseHeader(rest, 8)
			if err != nil {
				break
			}
			out = append(out, h.Type)
			rest = rest[h.PacketLen:]
		}
	}
	return out
}

// zeroRTTAfter1RTT counts the 0-RTT packets that follow the first 1-RTT
// packet, and the 0-RTT packets in all.
func zeroRTTAfter1RTT(types []wire.PacketType) (after, total int) {
	oneRTT := false
	for _, pt := range types {
		switch pt {
		case wire.PacketType1RTT:
			oneRTT = true
		case wire.PacketType0RTT:
			total++
			if oneRTT {
				after++
			}
		}
	}
	return after, total
}

// newSessionTicket builds a TLS NewSessionTicket message (RFC 8446 §4.6.1)
// whose early_data extension carries maxEarly.
func newSessionTicket(maxEarly uint32) []byte {
	var body []byte
	body = binary.BigEndian.AppendUint32(body, 3600)       // ticket_lifetime
	body = binary.BigEndian.AppendUint32(body, 0x5a5a5a5a) // ticket_age_add
	body = append(body, 1, 0)                              // ticket_nonce
	body = binary.BigEndian.AppendUint16(body, 16)
	body = append(body, randomBytes(16)...)       // ticket
	ext := binary.BigEndian.AppendUint16(nil, 42) // early_data
	ext = binary.BigEndian.AppendUint16(ext, 4)
	ext = binary.BigEndian.AppendUint32(ext, maxEarly)
	body = binary.BigEndian.AppendUint16(body, uint16(len(ext)))
	body = append(body, ext...)
	return append([]byte{4, byte(len(body) >> 16), byte(len(body) >> 8), byte(len(body))}, body...)
}

func registerClientResume() {
	registerClient(&Scenario{
		ID: "cli-ticket-max-early-data", Title: "A NewSessionTicket with max_early_data_size other than 0xffffffff", Requirements: []Requirement{reqCliTicketEarly},
		Needs: []string{NeedCAny, "c-resume"},
		Run: func(ctx context.Context, t *T) {
			s, c := t.holdOpenWith(ctx, serveOptions{Label: "ticket"}, func(s *testServer) { t.launchResume(ctx, s, holdResource, smallResource) })
			e := Expectation{Check: "close", Req: reqCliTicketEarly, Codes: transportCodes(wire.ProtocolViolation), Describe: "a NewSessionTicket whose early_data extension has max_early_data_size 16384"}
			t.Provoke(ctx, c, e, func() {
				c.Inject(spaceApp, &wire.CryptoFrame{Offset: appCryptoEnd(t, s), Data: newSessionTicket(16384)})
			})
		},
	})
	registerClient(&Scenario{
		ID: "cli-0rtt-after-1rtt", Title: "No 0-RTT packet after the client's first 1-RTT packet", Requirements: []Requirement{reqCli0RTTAfter}, Passive: true,
		Needs: []string{NeedCAny, "c-0rtt"},
		Run: func(ctx context.Context, t *T) {
			s := t.serve(ctx, serveOptions{Label: "0-RTT accepted", Config: func(c *quic.Config) { c.Allow0RTT = true }})
			cr := t.launchResume(ctx, s, smallResource, smallResource)
			cr.wait(ctx, 2*clientRunWait)
			starts := clientConnStarts(s.rawIn())
			if len(starts) < 2 {
				t.Inconclusive(fmt.Sprintf("The client made %d connection(s), not a resumed second one (%v).", len(starts), cr.err))
			}
			after, total := zeroRTTAfter1RTT(packetTypesAfter(s.rawIn(), starts[1].at, time.Time{}))
			t.Fact("0rtt.packets", total)
			if total == 0 {
				t.Unsupported("The client sent no 0-RTT packet on its resumed connection, although the ticket allowed early data.")
			}
			if after > 0 {
				t.Fail("after-1rtt", reqCli0RTTAfter, fmt.Sprintf("The client sent %d of its %d 0-RTT packets after its first 1-RTT packet.", after, total))
				return
			}
			t.Pass("after-1rtt", reqCli0RTTAfter, fmt.Sprintf("All %d of the client's 0-RTT packets came before its first 1-RTT packet.", total))
		},
	})
	registerClient(&Scenario{
		ID: "cli-0rtt-remembered-limits", Title: "0-RTT uses only the remembered stream limit", Requirements: []Requirement{reqCli0RTTLimits},
		Needs: []string{NeedCAny, "c-0rtt"},
		Run: func(ctx context.Context, t *T) {
			// The catalogue raises the limit to 100 on the second
			// connection; Quiver's server accepts 0-RTT only when its
			// parameters are unchanged, so both connections advertise
			// initial_max_streams_bidi = 2. A 0-RTT packet can only use the
			// remembered value either way.
			s := t.serve(ctx, serveOptions{Label: "two streams", Config: func(c *quic.Config) { c.Allow0RTT = true; c.MaxBidiStreams = 2 }})
			names := []string{smallResource}
			for i := 0; i < 10; i++ {
				names = append(names, smallResource)
			}
			cr := t.launchResume(ctx, s, names...)
			cr.wait(ctx, 2*clientRunWait)
			starts := clientConnStarts(s.rawIn())
			if len(starts) < 2 {
				t.Inconclusive(fmt.Sprintf("The client made %d connection(s), not a resumed second one (%v).", len(starts), cr.err))
			}
			streams := map[uint64]bool{}
			var early []*packet
			for _, p := range received(t.rec.snapshot(), s.trace.id, 0) {
				if p.at.Before(starts[1].at) || p.ev.PacketType != packetTypeName(wire.PacketType0RTT) {
					continue
				}
				early = append(early, p)
				for _, f := range p.frames {
					if sf, ok := f.(*wire.StreamFrame); ok && sf.StreamID%4 == 0 {
						streams[sf.StreamID] = true
					}
				}
			}
			if len(early) == 0 {
				if _, total := zeroRTTAfter1RTT(packetTypesAfter(s.rawIn(), starts[1].at, time.Time{})); total == 0 {
					t.Unsupported("The client sent no 0-RTT packet on its resumed connection.")
				}
				t.Inconclusive("The tester's server decrypted none of the client's 0-RTT packets.")
			}
			t.Fact("0rtt.streams", len(streams))
			if len(streams) > 2 {
				t.Fail("streams", reqCli0RTTLimits, fmt.Sprintf("The client opened %d bidirectional streams in 0-RTT packets although the remembered initial_max_streams_bidi was 2.", len(streams)), events(Response, lastN(early, 3)...)...)
				return
			}
			t.Pass("streams", reqCli0RTTLimits, fmt.Sprintf("The client opened %d bidirectional stream(s) in %d 0-RTT packets, within the remembered limit of 2 (ten resources asked).", len(streams), len(early)))
		},
	})
	registerClient(&Scenario{
		ID: "cli-0rtt-rejected", Title: "The client starts again in 1-RTT after its 0-RTT is rejected", Requirements: []Requirement{reqCli0RTTReset, reqCli0RTTStop},
		Needs: []string{NeedCAny, "c-0rtt"},
		Run: func(ctx context.Context, t *T) {
			// The second connection's transport parameters differ from the
			// remembered ones (1 KiB less initial_max_data, which a server
			// accepting 0-RTT must not do: RFC 9000 §7.4.1), so Quiver's
			// server rejects
			// the early data: no early_data in EncryptedExtensions, and the
			// 0-RTT packets go unread.
			var mu sync.Mutex
			var firstDCID []byte
			second := false
			probe := quic.Probe{TransportParameters: func(p *wire.TransportParameters) {
				mu.Lock()
				defer mu.Unlock()
				if second {
					p.InitialMaxData -= 1024
				}
			}}
			// The second connection is known by its first Initial, before
			// the engine computes its parameters.
			in := func(d []byte, reply func([]byte)) bool {
				if ci, ok := openClientInitial(d); ok {
					mu.Lock()
					if firstDCID == nil {
						firstDCID = ci.dcid
					} else if !bytes.Equal(ci.dcid, firstDCID) {
						second = true
					}
					mu.Unlock()
				}
				return false
			}
			s := t.serve(ctx, serveOptions{Label: "0-RTT rejected", Probe: probe, In: in, Config: func(c *quic.Config) { c.Allow0RTT = true }})
			cr := t.launchResume(ctx, s, smallResource, smallResource)
			cr.wait(ctx, 2*clientRunWait)
			ds := s.rawIn()
			starts := clientConnStarts(ds)
			if len(starts) < 2 {
				t.Inconclusive(fmt.Sprintf("The client made %d connection(s), not a resumed second one (%v).", len(starts), cr.err))
			}
			after, total := zeroRTTAfter1RTT(packetTypesAfter(ds, starts[1].at, time.Time{}))
			if total == 0 {
				t.Unsupported("The client sent no 0-RTT packet on its resumed connection.")
			}
			first := map[uint64]uint64{}
			for _, p := range received(t.rec.snapshot(), s.trace.id, 0) {
				if !p.at.Before(starts[1].at) && p.ev.PacketType == packetTypeName(wire.PacketType0RTT) {
					t.Inconclusive("The tester's server accepted the client's 0-RTT data instead of rejecting it.")
				}
			}
			for _, p := range received(t.rec.snapshot(), s.trace.id, 0) {
				if p.at.Before(starts[1].at) || p.ev.PacketType != packetTypeName(wire.PacketType1RTT) {
					continue
				}
				for _, f := range p.frames {
					if sf, ok := f.(*wire.StreamFrame); ok && sf.StreamID%4 == 0 {
						if _, seen := first[sf.StreamID]; !seen {
							first[sf.StreamID] = sf.Offset
						}
					}
				}
			}
			for id, off := range first {
				if off > 0 {
					t.Fail("reset", reqCli0RTTReset, fmt.Sprintf("After the rejection the client went on with stream %d in 1-RTT from offset %d, as if its 0-RTT data had arrived.", id, off))
					return
				}
			}
			switch {
			case len(first) == 0 && !cr.downloaded(smallResource):
				// Dropping the requests is a reset of the stream state too;
				// sending them again is up to the application (quic-go
				// hands the rejection to it), so this proves nothing.
				t.Inconclusive(fmt.Sprintf("After the server rejected its %d 0-RTT packet(s) the client sent no request in 1-RTT and did not download the file, so no stream went on (client: %v).", total, cr.err))
			case len(first) == 0:
				t.Inconclusive("The client downloaded the file but the tester saw no request in a 1-RTT packet of the resumed connection.")
			}
			t.Pass("reset", reqCli0RTTReset, fmt.Sprintf("After the rejection the client sent its %d request(s) again from offset 0 in 1-RTT.", len(first)))
			if after > 0 {
				t.Warn("stop", reqCli0RTTStop, fmt.Sprintf("The client sent %d more 0-RTT packet(s) after its first 1-RTT packet, when it knew of the rejection.", after))
			} else {
				t.Pass("stop", reqCli0RTTStop, "The client sent no 0-RTT packet once it knew of the rejection.")
			}
		},
	})
	newTokens := func(ps []*packet, conn int, before time.Time) [][]byte {
		var out [][]byte
		for _, p := range ps {
			if !p.sent || p.conn != conn || (!before.IsZero() && !p.at.Before(before)) {
				continue
			}
			for _, f := range p.frames {
				if nt, ok := f.(*wire.NewTokenFrame); ok {
					out = append(out, nt.Token)
				}
			}
		}
		return out
	}
	registerClient(&Scenario{
		ID: "cli-new-token-used", Title: "The client presents a NEW_TOKEN token on its next connection", Requirements: []Requirement{reqCliTokenUsed},
		Needs: []string{NeedCAny, "c-token"},
		Run: func(ctx context.Context, t *T) {
			s := t.serve(ctx, serveOptions{Label: "token"})
			cr := t.launchResume(ctx, s, smallResource, smallResource)
			cr.wait(ctx, 2*clientRunWait)
			starts := clientConnStarts(s.rawIn())
			if len(starts) < 2 {
				t.Inconclusive(fmt.Sprintf("The client made %d connection(s), not a second one (%v).", len(starts), cr.err))
			}
			toks := newTokens(t.rec.snapshot(), s.trace.id, starts[1].at)
			if len(toks) == 0 {
				t.Inconclusive("The tester's server sent no NEW_TOKEN on the first connection.")
			}
			for _, tok := range toks {
				if bytes.Equal(tok, starts[1].token) {
					t.Pass("token", reqCliTokenUsed, fmt.Sprintf("The client's first Initial of its second connection carried the %d-byte NEW_TOKEN token of the first.", len(tok)))
					return
				}
			}
			t.Warn("token", reqCliTokenUsed, fmt.Sprintf("The client's first Initial of its second connection carried a %d-byte token, not the NEW_TOKEN token of the first connection.", len(starts[1].token)))
		},
	})
	registerClient(&Scenario{
		ID: "cli-new-token-not-reused", Title: "The client does not present one NEW_TOKEN token twice", Requirements: []Requirement{reqCliTokenOnce},
		Needs: []string{NeedCAny, "c-token"},
		Run: func(ctx context.Context, t *T) {
			// Only the first NEW_TOKEN frame goes out: later ones are
			// turned into PING and PADDING, so the second connection gets
			// no fresh token and the third has only the used one.
			var mu sync.Mutex
			sentOne := false
			probe := quic.Probe{OnPacketSent: func(pi quic.PacketInfo) {
				for off := 0; off < len(pi.Payload); {
					f, n, err := wire.ParseFrame(pi.Payload[off:])
					if err != nil {
						return
					}
					if f.Type() == wire.FrameTypeNewToken {
						mu.Lock()
						if sentOne {
							pi.Payload[off] = byte(wire.FrameTypePing)
							clear(pi.Payload[off+1 : off+n])
						}
						sentOne = true
						mu.Unlock()
					}
					off += n
				}
			}}
			s := t.serve(ctx, serveOptions{Label: "one token", Probe: probe})
			cr := t.launchResume(ctx, s, smallResource, smallResource, smallResource)
			cr.wait(ctx, 2*clientRunWait)
			starts := clientConnStarts(s.rawIn())
			if len(starts) < 3 {
				t.Unsupported(fmt.Sprintf("The client's resume command made %d connection(s) for three URLs; the check needs a third connection.", len(starts)))
			}
			if len(starts[1].token) == 0 {
				t.Inconclusive("The client did not present the first connection's token on its second connection, so reuse cannot be seen.")
			}
			if bytes.Equal(starts[1].token, starts[2].token) {
				t.Warn("token", reqCliTokenOnce, "The client presented the same NEW_TOKEN token on its second and third connections.")
				return
			}
			t.Pass("token", reqCliTokenOnce, "The client did not present the token it had used on its second connection again on its third.")
		},
	})
}

func init() {
	registerPassiveClient()
	registerClientTP()
	registerClientTimers()
	registerClientKeyUpdate()
	registerClientResume()
}
