package conformance

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/quiver-quic/quiver/h3"
)

// Family K, QPACK: the server's decoder against field sections and
// encoder instructions the tester writes by hand, and the server's encoder
// against the limits the tester advertises.

// NeedQPACKDyn is the catalogue's qpack-dyn need: the target's
// SETTINGS_QPACK_MAX_TABLE_CAPACITY is above 0. It is decided inside Run,
// from the SETTINGS frame.
const NeedQPACKDyn = "qpack-dyn"

var reqSectionAckQuote = "After the decoder finishes decoding a field section encoded using representations containing dynamic table references, it MUST emit a Section Acknowledgment instruction"

// qpackConn dials, opens the tester's control stream, and returns the
// server's QPACK_MAX_TABLE_CAPACITY and QPACK_BLOCKED_STREAMS.
func (t *T) qpackConn(ctx context.Context, label string) (c *Conn, maxCap, blocked uint64) {
	c = t.mustDial(ctx, DialOptions{Label: label})
	t.openUni(ctx, c, cat([]byte{0x00}, settingsFrame()))
	st := t.serverSettings(ctx, c)
	maxCap, _ = st.Get(h3.SettingQPACKMaxTableCapacity)
	blocked, _ = st.Get(h3.SettingQPACKBlockedStreams)
	t.Fact("qpack.capacity", maxCap)
	t.Fact("qpack.blocked-streams", blocked)
	return c, maxCap, blocked
}

// needDynamicTable ends the scenario as unsupported when the server
// allows no dynamic table.
func (t *T) needDynamicTable(maxCap uint64) {
	if maxCap == 0 {
		t.Unsupported("The server's SETTINGS_QPACK_MAX_TABLE_CAPACITY is 0 (or absent): it allows no dynamic table, which this scenario needs (qpack-dyn).")
	}
}

// encoderStream opens the tester's encoder stream with the given
// instructions and waits until the server has acknowledged them, so that
// a request sent next cannot arrive first and block.
func (t *T) encoderStream(ctx context.Context, c *Conn, instructions ...[]byte) {
	s := t.openUni(ctx, c, cat(append([][]byte{{0x02}}, instructions...)...))
	t.waitStreamAcked(ctx, c, uint64(s.ID()))
}

// dynamicRequest inserts the GET's :authority, :path and an x-quiver
// field into the server's dynamic table, as many as capacity holds, and
// returns the encoder instructions and a field section that references
// them (Base = Required Insert Count, RFC 9204 §4.5.1).
func dynamicRequest(p *Profile, path string, maxCap, capacity uint64) (instructions [][]byte, section []byte, inserted int) {
	fs := append(requestFields(p, "GET", path), hfield{"x-quiver", "dynamic"})
	instructions = [][]byte{setCapacity(capacity)}
	dyn := map[int]uint64{} // field index -> absolute index
	used := uint64(0)
	for i := 2; i < len(fs); i++ {
		size := uint64(len(fs[i].name)+len(fs[i].value)) + 32 // RFC 9204 §3.2.1
		if used+size > capacity {
			continue
		}
		used += size
		dyn[i] = uint64(len(dyn))
		instructions = append(instructions, insertLiteral(fs[i].name, fs[i].value))
	}
	n := uint64(len(dyn))
	section = append(qpackInt(0, 8, encodedInsertCount(n, maxCap)), 0x00)
	for i, f := range fs {
		if abs, ok := dyn[i]; ok {
			// Indexed Field Line (§4.5.2): 1, T = 0, relative index
			// Base − 1 − absolute.
			section = append(section, qpackInt(0x80, 6, n-1-abs)...)
			continue
		}
		section = append(section, literalLine(f)...)
	}
	return instructions, section, len(dyn)
}

// judgeSectionAck checks that the server acknowledged the field section
// of request stream id on its decoder stream.
func judgeSectionAck(v *h3Seen, id uint64) judged {
	dec, ps, _ := v.streamOfType(0x03)
	ins, _ := parseDecoderStream(dec)
	for _, in := range ins {
		if in.kind == qpackSectionAck && in.value == id {
			return judged{Pass, fmt.Sprintf("The server's decoder stream carried a Section Acknowledgment for stream %d.", id), ps, 0}
		}
	}
	r := v.response(id)
	if cc := v.closeOf(); cc != nil {
		return judged{
			Inconclusive,
			fmt.Sprintf(
				"The server closed the connection with %s instead of answering a request whose field section references its dynamic table.",
				closeCode(cc),
			),
			[]*packet{v.close},
			0,
		}
	}
	if r.headers {
		return judged{
			Fail,
			fmt.Sprintf(
				"The server answered the request (status %d) whose field section references its dynamic table, but its decoder stream carried no Section Acknowledgment for stream %d (%d decoder instruction(s) seen).",
				r.status,
				id,
				len(ins),
			),
			append(v.carried[id][:1:1], ps...),
			0,
		}
	}
	if fa, code, ok := v.streamError(id); ok {
		return judged{Inconclusive, fmt.Sprintf("The server aborted the request with %s (%s).", describeCode(code), frameString(fa.f)), []*packet{fa.p}, 0}
	}
	return judged{Inconclusive, "The request whose field section references the dynamic table got no answer.", nil, 0}
}

// judgeZeroCapacity checks that a server told the tester's table capacity
// is 0 sent no encoder instruction and no field section needing the
// dynamic table.
func judgeZeroCapacity(v *h3Seen, ids []uint64) judged {
	if enc, ps, ok := v.streamOfType(0x02); ok && len(enc) > 0 {
		ins, _ := parseEncoderStream(enc)
		return judged{
			Fail,
			fmt.Sprintf(
				"The server sent %d byte(s) of encoder instructions (%d parsed) although the tester's SETTINGS_QPACK_MAX_TABLE_CAPACITY is 0.",
				len(enc),
				len(ins),
			),
			ps,
			0,
		}
	}
	answered := 0
	for _, id := range ids {
		r := v.response(id)
		if r.headers && r.insertCnt != 0 {
			return judged{
				Fail,
				fmt.Sprintf(
					"The server's response on stream %d has an encoded Required Insert Count of %d although the tester allows no dynamic table.",
					id,
					r.insertCnt,
				),
				v.carried[id][:1],
				0,
			}
		}
		if r.headers {
			answered++
		}
	}
	if answered == 0 {
		return judged{Inconclusive, "The server answered none of the requests, so no field section could be judged.", nil, 0}
	}
	return judged{Pass, fmt.Sprintf("The server sent no encoder instruction and %d response field section(s) with Required Insert Count 0.", answered), nil, 0}
}

// judgeCapacityRespected checks the server's encoder against a tester
// that advertised maxCap and blocked streams and acknowledged nothing: no
// capacity above maxCap (requirement 0), and at most blocked streams whose
// field sections need inserts the tester has not acknowledged
// (requirement 1). It also reports whether the table was used.
func judgeCapacityRespected(v *h3Seen, ids []uint64, maxCap uint64, blocked int) (out []namedJudgement, dynamic bool) {
	enc, ps, _ := v.streamOfType(0x02)
	ins, _ := parseEncoderStream(enc)
	capOK := judged{Pass, fmt.Sprintf("The server never set a dynamic table capacity above %d (%d encoder instruction(s)).", maxCap, len(ins)), nil, 0}
	for _, in := range ins {
		if in.kind == qpackSetCapacity && in.value > maxCap {
			capOK = judged{
				Fail,
				fmt.Sprintf("The server set a dynamic table capacity of %d, above the tester's SETTINGS_QPACK_MAX_TABLE_CAPACITY of %d.", in.value, maxCap),
				ps,
				0,
			}
			break
		}
		if in.kind != qpackSetCapacity {
			dynamic = true
		}
	}
	var needing []string
	var evs []*packet
	answered := 0
	for _, id := range ids {
		r := v.response(id)
		if r.headers {
			answered++
		}
		if r.headers && r.insertCnt != 0 {
			dynamic = true
			needing = append(needing, fmt.Sprint(id))
			evs = append(evs, v.carried[id][:1]...)
		}
	}
	out = append(out, namedJudgement{"capacity", capOK})
	switch {
	case len(needing) > blocked:
		out = append(
			out,
			namedJudgement{
				"blocked-streams",
				judged{
					Fail,
					fmt.Sprintf(
						"%d response field sections (streams %s) need dynamic table entries the tester never acknowledged, so all could block its decoder; it allows %d blocked stream(s).",
						len(needing),
						strings.Join(needing, ", "),
						blocked,
					),
					evs,
					1,
				},
			},
		)
	case answered == 0:
		out = append(out, namedJudgement{"blocked-streams", judged{Inconclusive, "The server answered none of the requests.", nil, 1}})
	default:
		out = append(
			out,
			namedJudgement{
				"blocked-streams",
				judged{
					Pass,
					fmt.Sprintf(
						"%d of %d response field sections need unacknowledged inserts, within the tester's limit of %d.",
						len(needing),
						answered,
						blocked,
					),
					evs,
					1,
				},
			},
		)
	}
	return out, dynamic
}

func registerQPACKProvoked(id, title string, needs []string, reqs []Requirement, run func(ctx context.Context, t *T)) {
	Register(&Scenario{ID: id, Title: title, Family: "K", Needs: needs, Requirements: reqs, Run: run})
}

// setCapacity is Set Dynamic Table Capacity (RFC 9204 §4.3.1): 001 and
// a 5-bit prefix integer.
func setCapacity(c uint64) []byte { return qpackInt(0x20, 5, c) }

// insertLiteral is Insert with Literal Name (RFC 9204 §4.3.3): 01, H = 0,
// a 5-bit name length, the name, then H = 0 and a 7-bit value length.
func insertLiteral(name, value string) []byte {
	return append(qpackString(0x40, 5, name), qpackString(0x00, 7, value)...)
}

// insertStaticNameRef is Insert with Name Reference (RFC 9204 §4.3.2) to
// static table entry index: 1, T = 1, a 6-bit index, then the value.
func insertStaticNameRef(index uint64, value string) []byte {
	return append(qpackInt(0xc0, 6, index), qpackString(0x00, 7, value)...)
}

// encodedInsertCount encodes a Required Insert Count for a decoder whose
// SETTINGS_QPACK_MAX_TABLE_CAPACITY is maxCapacity (RFC 9204 §4.5.1.1).
func encodedInsertCount(ric, maxCapacity uint64) uint64 {
	if ric == 0 {
		return 0
	}
	maxEntries := maxCapacity / 32
	if maxEntries == 0 {
		return ric // no conformant encoding exists; the caller wants an invalid one
	}
	return ric%(2*maxEntries) + 1
}

// qpackSkipString returns the length in bytes of a string literal whose
// length prefix has bits bits, or 0 when b ends first.
func qpackSkipString(b []byte, bits int) int {
	l, n := qpackReadInt(b, bits)
	if n == 0 || uint64(len(b)-n) < l {
		return 0
	}
	return n + int(l)
}

// Encoder instructions (RFC 9204 §4.3).
const (
	qpackSetCapacity = iota
	qpackInsertNameRef
	qpackInsertLiteral
	qpackDuplicate
)

// qpackInstr is one QPACK encoder or decoder instruction: its kind and its
// integer (the capacity, name index, duplicated index, stream ID or
// increment).
type qpackInstr struct {
	kind   int
	value  uint64
	static bool // Insert with Name Reference to the static table
}

// parseEncoderStream splits the payload of an encoder stream (after its
// type) into instructions; rest is an incomplete tail.
func parseEncoderStream(b []byte) (ins []qpackInstr, rest []byte) {
	for len(b) > 0 {
		var in qpackInstr
		var n int
		switch c := b[0]; {
		case c&0x80 != 0: // 1 T index(6+) value
			in.kind, in.static = qpackInsertNameRef, c&0x40 != 0
			if in.value, n = qpackReadInt(b, 6); n > 0 {
				if m := qpackSkipString(b[n:], 7); m > 0 {
					n += m
				} else {
					n = 0
				}
			}
		case c&0x40 != 0: // 01 H name(5+) value
			in.kind = qpackInsertLiteral
			if n = qpackSkipString(b, 5); n > 0 {
				if m := qpackSkipString(b[n:], 7); m > 0 {
					n += m
				} else {
					n = 0
				}
			}
		case c&0x20 != 0: // 001 capacity(5+)
			in.kind = qpackSetCapacity
			in.value, n = qpackReadInt(b, 5)
		default: // 000 index(5+)
			in.kind = qpackDuplicate
			in.value, n = qpackReadInt(b, 5)
		}
		if n == 0 {
			break
		}
		ins = append(ins, in)
		b = b[n:]
	}
	return ins, b
}

// Decoder instructions (RFC 9204 §4.4).
const (
	qpackSectionAck = iota
	qpackStreamCancel
	qpackInsertCountIncrement
)

// parseDecoderStream splits the payload of a decoder stream (after its
// type) into instructions; rest is an incomplete tail.
func parseDecoderStream(b []byte) (ins []qpackInstr, rest []byte) {
	for len(b) > 0 {
		var in qpackInstr
		var n int
		switch c := b[0]; {
		case c&0x80 != 0:
			in.kind = qpackSectionAck
			in.value, n = qpackReadInt(b, 7)
		case c&0x40 != 0:
			in.kind = qpackStreamCancel
			in.value, n = qpackReadInt(b, 6)
		default:
			in.kind = qpackInsertCountIncrement
			in.value, n = qpackReadInt(b, 6)
		}
		if n == 0 {
			break
		}
		ins = append(ins, in)
		b = b[n:]
	}
	return ins, b
}

func init() {
	Register(&Scenario{
		ID: "qpack-streams-allowed", Title: "QPACK streams allowed when the settings prevent their use", Family: "K", Needs: []string{NeedH3},
		Requirements: []Requirement{
			rfc(
				"RFC 9204",
				"4.2",
				Must,
				"An endpoint MUST allow its peer to create an encoder stream and a decoder stream even if the connection's settings prevent their use.",
			),
		},
		Run: func(ctx context.Context, t *T) {
			c := t.h3Start(ctx, "qpack-streams", []uint64{h3.SettingQPACKMaxTableCapacity, 0, h3.SettingQPACKBlockedStreams, 0}, true)
			id := t.get(ctx, c, t.profile.SmallPath)
			t.goesOn(ctx, c, id, "an encoder and a decoder stream while advertising QPACK_MAX_TABLE_CAPACITY 0 and QPACK_BLOCKED_STREAMS 0")
		},
	})
	qpackReq := func(section string, kw Keyword, quote string) Requirement { return rfc("RFC 9204", section, kw, quote) }
	decompression := h3Codes(h3.ErrCodeQPACKDecompression)
	encoderErr := h3Codes(h3.ErrCodeQPACKEncoderStream)
	Register(&Scenario{
		ID: "qpack-dynamic-table-used", Title: "Section Acknowledgment for a dynamic-table request", Family: "K", Needs: []string{NeedH3, NeedQPACKDyn},
		Requirements: []Requirement{qpackReq("2.2.2.1", Must, reqSectionAckQuote)},
		Run: func(ctx context.Context, t *T) {
			c, maxCap, _ := t.qpackConn(ctx, "dynamic-table")
			t.needDynamicTable(maxCap)
			ins, section, n := dynamicRequest(t.profile, t.profile.SmallPath, maxCap, min(maxCap, 4096))
			if n == 0 {
				t.Inconclusive(fmt.Sprintf("The server's table capacity of %d bytes holds none of the request's fields.", maxCap))
			}
			t.Fact("qpack.tester-inserts", n)
			t.encoderStream(ctx, c, ins...)
			t.openUni(ctx, c, []byte{0x03})
			id := uint64(t.openRequest(ctx, c, headersFrameOf(section), true).ID())
			v := t.h3Await(ctx, c, t.Settle()+time.Second, func(v *h3Seen) bool { return judgeSectionAck(v, id).v == Pass })
			t.report("section-ack", judgeSectionAck(v, id))
		},
	})
	registerQPACKProvoked(
		"qpack-entry-too-large",
		"Insert larger than the dynamic table",
		[]string{NeedH3, NeedQPACKDyn},
		[]Requirement{
			qpackReq(
				"3.2.2",
				Must,
				"the encoder attempts to add an entry that is larger than the dynamic table capacity; the decoder MUST treat this as a connection error of type QPACK_ENCODER_STREAM_ERROR.",
			),
		},
		func(ctx context.Context, t *T) {
			c, maxCap, _ := t.qpackConn(ctx, "entry-too-large")
			t.needDynamicTable(maxCap)
			capacity := min(maxCap, 64)
			t.Provoke(ctx, c, Expectation{Check: "close", Req: t.sc.Requirements[0], Codes: encoderErr, Application: true,
				Describe: fmt.Sprintf("a 200-byte insert into a dynamic table of capacity %d", capacity)}, func() {
				t.openUni(ctx, c, cat([]byte{0x02}, setCapacity(capacity), insertLiteral("x-quiver", strings.Repeat("q", 160))))
			})
		},
	)
	registerQPACKProvoked(
		"qpack-blocked-streams-exceeded",
		"More blocked streams than allowed",
		[]string{NeedH3, NeedQPACKDyn},
		[]Requirement{
			qpackReq(
				"2.1.2",
				Must,
				"If a decoder encounters more blocked streams than it promised to support, it MUST treat this as a connection error of type QPACK_DECOMPRESSION_FAILED.",
			),
		},
		func(ctx context.Context, t *T) {
			c, maxCap, blocked := t.qpackConn(ctx, "blocked-streams")
			t.needDynamicTable(maxCap)
			n := blocked + 1
			if bidi := t.serverTP(c).InitialMaxStreamsBidi; bidi < n {
				t.Inconclusive(
					fmt.Sprintf(
						"Exceeding the server's %d blocked streams takes %d request streams at once, but its initial_max_streams_bidi is %d.",
						blocked,
						n,
						bidi,
					),
				)
			}
			// Required Insert Count 1, Base 1, one Indexed Field Line
			// for absolute index 0: an insert the tester never sends.
			section := cat(qpackInt(0, 8, encodedInsertCount(1, maxCap)), []byte{0x00}, qpackInt(0x80, 6, 0))
			t.Provoke(ctx, c, Expectation{Check: "close", Req: t.sc.Requirements[0], Codes: decompression, Application: true,
				Describe: fmt.Sprintf("%d request streams blocked on an insert that never comes (the server allows %d)", n, blocked)}, func() {
				for i := uint64(0); i < n; i++ {
					t.openRequest(ctx, c, headersFrameOf(section), true)
				}
			})
		},
	)
	registerQPACKProvoked("qpack-invalid-static-index", "Static table index out of range", []string{NeedH3},
		[]Requirement{
			qpackReq(
				"3.1",
				Must,
				"When the decoder encounters an invalid static table index in a field line representation, it MUST treat this as a connection error of type QPACK_DECOMPRESSION_FAILED.",
			),
			qpackReq(
				"3.1",
				Must,
				"If this index is received on the encoder stream, this MUST be treated as a connection error of type QPACK_ENCODER_STREAM_ERROR.",
			),
		},
		func(ctx context.Context, t *T) {
			c, maxCap, _ := t.qpackConn(ctx, "field-line")
			// Indexed Field Line (§4.5.2): 1, T = 1, index 120; the
			// static table has 99 entries (Appendix A).
			section := cat([]byte{0x00, 0x00}, qpackInt(0xc0, 6, 120))
			t.Provoke(ctx, c, Expectation{Check: "field-line", Req: t.sc.Requirements[0], Codes: decompression, Application: true,
				Describe: "a field line referencing static table index 120"}, func() {
				t.openRequest(ctx, c, headersFrameOf(section), true)
			})
			if maxCap == 0 {
				t.Observe(
					"encoder-stream",
					"The encoder-stream variant was not run: the server's SETTINGS_QPACK_MAX_TABLE_CAPACITY is 0, so it allows no insert.",
				)
				return
			}
			c2, _, _ := t.qpackConn(ctx, "encoder-stream")
			t.Provoke(ctx, c2, Expectation{Check: "encoder-stream", Req: t.sc.Requirements[1], Codes: encoderErr, Application: true,
				Describe: "an Insert with Name Reference to static table index 120"}, func() {
				t.openUni(ctx, c2, cat([]byte{0x02}, setCapacity(min(maxCap, 256)), insertStaticNameRef(120, "x")))
			})
		})
	registerQPACKProvoked("qpack-invalid-dynamic-reference", "Reference beyond the Required Insert Count", []string{NeedH3},
		[]Requirement{
			qpackReq(
				"2.2.3",
				Must,
				"that has an absolute index greater than or equal to the declared Required Insert Count … it MUST treat this as a connection error of type QPACK_DECOMPRESSION_FAILED.",
			),
			qpackReq(
				"4.5.1.1",
				Must,
				"If the decoder encounters a value of EncodedInsertCount that could not have been produced by a conformant encoder, it MUST treat this as a connection error of type QPACK_DECOMPRESSION_FAILED.",
			),
		},
		func(ctx context.Context, t *T) {
			c, maxCap, _ := t.qpackConn(ctx, "insert-count")
			// §4.5.1.1: a conformant EncodedInsertCount is at most
			// 2 × MaxEntries; with no dynamic table, only 0.
			enc := 2*(maxCap/32) + 1
			t.Provoke(ctx, c, Expectation{Check: "insert-count", Req: t.sc.Requirements[1], Codes: decompression, Application: true,
				Describe: fmt.Sprintf("a field section with EncodedInsertCount %d (the server's table capacity is %d)", enc, maxCap)}, func() {
				t.openRequest(ctx, c, headersFrameOf(cat(qpackInt(0, 8, enc), []byte{0x00}, qpackInt(0x80, 6, 0))), true)
			})
			if maxCap == 0 {
				t.Observe(
					"reference",
					"The dynamic-reference variant was not run: the server's SETTINGS_QPACK_MAX_TABLE_CAPACITY is 0, so it allows no insert.",
				)
				return
			}
			c2, _, _ := t.qpackConn(ctx, "reference")
			t.encoderStream(ctx, c2, setCapacity(min(maxCap, 256)), insertLiteral("x-quiver", "1"))
			// Required Insert Count 1, Base 1, and a Post-Base Indexed
			// Field Line (§4.5.3) for absolute index 1.
			section := cat(qpackInt(0, 8, encodedInsertCount(1, maxCap)), []byte{0x00}, []byte{0x10})
			t.Provoke(ctx, c2, Expectation{Check: "reference", Req: t.sc.Requirements[0], Codes: decompression, Application: true,
				Describe: "a field line referencing absolute index 1 with Required Insert Count 1"}, func() {
				t.openRequest(ctx, c2, headersFrameOf(section), true)
			})
		})
	Register(&Scenario{
		ID: "qpack-zero-capacity-respected", Title: "No dynamic table towards a zero-capacity decoder", Family: "K", Needs: []string{NeedH3}, Passive: true,
		Requirements: []Requirement{
			qpackReq(
				"3.2.3",
				MustNot,
				"When the maximum table capacity is zero, the encoder MUST NOT insert entries into the dynamic table and MUST NOT send any encoder instructions on the encoder stream.",
			),
		},
		Run: func(ctx context.Context, t *T) {
			c := t.h3Start(ctx, "zero-capacity", nil, true)
			ids := []uint64{t.get(ctx, c, t.profile.SmallPath), t.get(ctx, c, t.profile.SmallPath), t.get(ctx, c, "/")}
			v := t.h3Answers(ctx, c, t.Settle()+time.Second, completed(ids...))
			t.report("zero-capacity", judgeZeroCapacity(v, ids))
		},
	})
	Register(&Scenario{
		ID: "qpack-capacity-respected", Title: "The server's encoder within the tester's QPACK limits", Family: "K", Needs: []string{NeedH3},
		Requirements: []Requirement{
			qpackReq("3.2.3", MustNot, "The encoder MUST NOT set a dynamic table capacity that exceeds this maximum"),
			qpackReq(
				"2.1.2",
				Must,
				"An encoder MUST limit the number of streams that could become blocked to the value of SETTINGS_QPACK_BLOCKED_STREAMS at all times.",
			),
		},
		Run: func(ctx context.Context, t *T) {
			// The tester never acknowledges anything on its decoder
			// stream, so the server's Known Received Count stays 0 and
			// every field section with a non-zero Required Insert Count
			// could block.
			c := t.h3Start(ctx, "capacity-256", []uint64{h3.SettingQPACKMaxTableCapacity, 256, h3.SettingQPACKBlockedStreams, 1}, true)
			var ids []uint64
			for i := 0; i < 10; i++ {
				ids = append(ids, t.get(ctx, c, t.profile.SmallPath))
			}
			v := t.h3Answers(ctx, c, t.Settle(), completed(ids...))
			js, dynamic := judgeCapacityRespected(v, ids, 256, 1)
			t.Fact("qpack.server-uses-dynamic-table", dynamic)
			for _, j := range js {
				t.report(j.name, j.judged)
			}
		},
	})

}
