package conformance

import (
	"strings"
	"testing"

	"github.com/quiver-quic/quiver/quic/wire"
)

var negativeAck = &wire.RawFrame{Bytes: []byte{0x02, 0x02, 0x00, 0x01, 0x00, 0x05, 0x00}}

func provokedExpectation() Expectation {
	return Expectation{Check: "close", Req: rfc9000("19.3.1", Must, "an endpoint MUST generate a connection error of type FRAME_ENCODING_ERROR."),
		Codes: transportCodes(wire.FrameEncodingError), Describe: "a bad ACK frame"}
}

// TestProvokedTriggerNeverAcknowledged: a target that acknowledges the
// tester's later PINGs but never the packet carrying the trigger may have
// dropped it unread (RFC 9001 §5.7): inconclusive, never fail, and worth
// a second try.
func TestProvokedTriggerNeverAcknowledged(t *testing.T) {
	j := newJudgeConn(t)
	j.add(true, 2, 5, 0, negativeAck)
	end := j.tt.mark()
	j.add(true, 2, 6, 0, &wire.PingFrame{})
	j.add(true, 2, 7, 0, &wire.PingFrame{})
	j.add(false, 2, 3, 0, ack(6, 7))
	o := j.tt.assessProvoked(j.tr, true, 0, end, provokedExpectation())
	if o.v != Inconclusive || !o.unprocessed || !o.retryable {
		t.Fatalf("trigger never acknowledged: got %s (unprocessed %v, retryable %v): %s", o.v, o.unprocessed, o.retryable, o.sentence)
	}
	if !strings.Contains(o.sentence, "never acknowledged packet 1RTT 5") {
		t.Errorf("the sentence does not name the unacknowledged trigger: %s", o.sentence)
	}
	// The second try was processed and the target went on: fail, and the
	// sentence says the first trigger was not acknowledged.
	k := newJudgeConn(t)
	k.add(true, 2, 8, 0, negativeAck)
	end = k.tt.mark()
	k.add(true, 2, 9, 0, &wire.PingFrame{})
	k.add(false, 2, 4, 0, ack(8, 9))
	o2 := k.tt.assessProvoked(k.tr, true, 0, end, provokedExpectation())
	o2.retried(o)
	if o2.v != Fail || !strings.Contains(o2.sentence, "second") {
		t.Fatalf("second trigger processed, target went on: got %s: %s", o2.v, o2.sentence)
	}
}

// TestProvokedTriggerAcknowledged: an acknowledged trigger and later
// PINGs with no close is a fail.
func TestProvokedTriggerAcknowledged(t *testing.T) {
	j := newJudgeConn(t)
	j.add(true, 2, 4, 0, ack(0, 1)) // the tester's own ACK, before the trigger
	j.add(true, 2, 5, 0, negativeAck)
	j.add(true, 2, 6, 0, &wire.PingFrame{})
	j.add(false, 2, 3, 0, ack(4, 6))
	o := j.tt.assessProvoked(j.tr, true, 0, -1, provokedExpectation())
	if o.v != Fail || o.unprocessed {
		t.Fatalf("trigger acknowledged, target went on: got %s: %s", o.v, o.sentence)
	}
	if len(o.trigger) != 1 || o.trigger[0].pn != 5 {
		t.Errorf("trigger taken as %s, want packet 5 (the ACK-only packet 4 carries no offence)", pnList(o.trigger))
	}
	// A close after an unacknowledged trigger counts as processing it.
	k := newJudgeConn(t)
	k.add(true, 2, 5, 0, negativeAck)
	k.add(false, 2, 3, 0, &wire.ConnectionCloseFrame{ErrorCode: uint64(wire.FrameEncodingError)})
	if o := k.tt.assessProvoked(k.tr, true, 0, 1, provokedExpectation()); o.v != Pass {
		t.Fatalf("close after the trigger: got %s: %s", o.v, o.sentence)
	}
}

// TestProvokedHandshakeTriggerActedOn: a Handshake-level trigger the
// server never acknowledges is still processed when HANDSHAKE_DONE
// follows it; STREAM data counts when a retransmission is acknowledged.
func TestProvokedHandshakeTriggerActedOn(t *testing.T) {
	j := newJudgeConn(t)
	j.add(true, 1, 0, 0, &wire.CryptoFrame{Data: []byte{20, 0, 0, 32}})
	end := j.tt.mark()
	j.add(false, 2, 0, 0, &wire.HandshakeDoneFrame{})
	j.add(true, 2, 0, 0, &wire.PingFrame{})
	j.add(false, 2, 1, 0, ack(0, 0))
	o := j.tt.assessProvoked(j.tr, true, 0, end, provokedExpectation())
	if o.v != Fail || o.retryable {
		t.Fatalf("handshake trigger followed by HANDSHAKE_DONE: got %s (retryable %v): %s", o.v, o.retryable, o.sentence)
	}
	k := newJudgeConn(t)
	k.add(true, 2, 0, 0, &wire.StreamFrame{StreamID: 2, Data: []byte("abc")})
	end = k.tt.mark()
	k.add(true, 2, 1, 0, &wire.PingFrame{})
	k.add(true, 2, 2, 0, &wire.StreamFrame{StreamID: 2, Data: []byte("abc")})
	k.add(false, 2, 0, 0, ack(1, 2))
	if o := k.tt.assessProvoked(k.tr, true, 0, end, provokedExpectation()); o.v != Fail {
		t.Fatalf("stream trigger retransmitted and acknowledged: got %s: %s", o.v, o.sentence)
	}
}

// TestFinalSizeCountedGoesOn: a server that counted the reset streams'
// final sizes but raised its limit before announcing it is blamed under
// RFC 9000 §4.1 (data beyond the advertised limit), not §4.5.
func TestFinalSizeCountedGoesOn(t *testing.T) {
	const limit = 1000
	j := newJudgeConn(t)
	j.add(true, 2, 5, 0, &wire.StreamFrame{StreamID: 0, Data: []byte("x")}, &wire.ResetStreamFrame{StreamID: 0, FinalSize: limit - 10},
		&wire.StreamFrame{StreamID: 4, Offset: 19, Data: []byte("x")})
	end := j.tt.mark()
	j.add(true, 2, 6, 0, &wire.PingFrame{})
	j.add(false, 2, 3, 0, ack(5, 6), &wire.MaxDataFrame{Maximum: 2 * limit})
	e := provokedExpectation()
	e.Req = rfc9000(
		"4.5",
		Must,
		"The receiver MUST use the final size of the stream to account for all bytes sent on the stream in its connection-level flow controller.",
	)
	e.GoesOn = func(ps []*packet, conn, mark int) (Requirement, string) {
		return judgeFinalSizeGoesOn(ps, conn, mark, limit)
	}
	o := j.tt.assessProvoked(j.tr, true, 0, end, e)
	if o.v != Fail || o.req.Section != "4.1" || !strings.Contains(o.sentence, "released their credit before announcing it") {
		t.Fatalf("credit released early: got %s under §%s: %s", o.v, o.req.Section, o.sentence)
	}
	// Without a MAX_DATA the requirement stays §4.5 and the sentence
	// claims no more than the wire shows.
	k := newJudgeConn(t)
	k.add(true, 2, 5, 0, &wire.ResetStreamFrame{StreamID: 0, FinalSize: limit - 10}, &wire.StreamFrame{StreamID: 4, Offset: 19, Data: []byte("x")})
	end = k.tt.mark()
	k.add(true, 2, 6, 0, &wire.PingFrame{})
	k.add(false, 2, 3, 0, ack(5, 6))
	o = k.tt.assessProvoked(k.tr, true, 0, end, e)
	if o.v != Fail || o.req.Section != "4.5" || !strings.Contains(o.sentence, "sent no MAX_DATA") {
		t.Fatalf("no MAX_DATA: got %s under §%s: %s", o.v, o.req.Section, o.sentence)
	}
}
