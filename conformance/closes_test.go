package conformance

import (
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/quiver-quic/quiver/conformance/rawquic"
	"github.com/quiver-quic/quiver/quic/protect"
	"github.com/quiver-quic/quiver/quic/wire"
)

// sealHandshake builds a server Handshake packet carrying frames, sealed
// with keys from secret.
func sealHandshake(t *testing.T, secret []byte, dcid, scid []byte, pn uint64, frames ...wire.Frame) []byte {
	t.Helper()
	k, err := protect.NewKeys(1, tls.TLS_AES_128_GCM_SHA256, secret)
	if err != nil {
		t.Fatal(err)
	}
	h := wire.LongHeader{Version: 1, Type: wire.PacketTypeHandshake, DCID: dcid, SCID: scid, LengthLen: 2, PNLen: 4, PacketNumber: pn}
	hdr, lengthOff, pnOff := h.Append(nil)
	payload := rawquic.AppendFrames(nil, frames)
	for len(payload) < 4 {
		payload = append(payload, 0)
	}
	wire.PutVarintLen(hdr[lengthOff:], uint64(h.PNLen+len(payload)+protect.TagSize), 2)
	pkt := k.Seal(append([]byte(nil), hdr...), hdr, payload, pn)
	if _, err := k.HeaderProtector().Apply(pkt, pnOff, true); err != nil {
		t.Fatal(err)
	}
	return pkt
}

// TestRecoverCloses: a CONNECTION_CLOSE in a Handshake packet the
// client never processed is found with the key log and judged; a packet
// no key opens is reported as what it is, never as silence.
func TestRecoverCloses(t *testing.T) {
	dcid, scid := []byte{1, 2, 3, 4, 5, 6, 7, 8}, []byte{9, 9, 9, 9, 9, 9, 9, 9}
	secret := make([]byte, 32)
	for i := range secret {
		secret[i] = byte(i)
	}
	cc := &wire.ConnectionCloseFrame{ErrorCode: uint64(wire.TransportParameterError)}
	e := Expectation{
		Check:    "close",
		Req:      rfc9000("7.4", Must, "MUST treat as TRANSPORT_PARAMETER_ERROR"),
		Codes:    transportCodes(wire.TransportParameterError),
		Describe: "bad transport parameters",
	}

	// With the secret in the key log: pass.
	j := newJudgeConn(t)
	j.tr.recordMeta(
		true,
		time.Now(),
		wire.PacketTypeInitial,
		1,
		0,
		0,
		dcid,
		scid,
		1200,
		1200,
		rawquic.AppendFrames(nil, []wire.Frame{&wire.CryptoFrame{Data: []byte{1}}}),
		pktMeta{},
	)
	fmt.Fprintf(j.tt.rec, "SERVER_HANDSHAKE_TRAFFIC_SECRET %s %s\n", strings.Repeat("00", 32), hex.EncodeToString(secret))
	j.tr.keepRaw(time.Now(), sealHandshake(t, secret, scid, dcid, 0, cc))
	o := j.tt.assessProvoked(j.tr, false, 0, -1, e)
	if o.v != Pass {
		t.Fatalf("close in a Handshake packet the client never processed: got %s: %s", o.v, o.sentence)
	}
	// Without it: inconclusive, and the sentence says a level the tester
	// has no keys for, not "sent nothing at all".
	k := newJudgeConn(t)
	k.tr.recordMeta(
		true,
		time.Now(),
		wire.PacketTypeInitial,
		1,
		0,
		0,
		dcid,
		scid,
		1200,
		1200,
		rawquic.AppendFrames(nil, []wire.Frame{&wire.CryptoFrame{Data: []byte{1}}}),
		pktMeta{},
	)
	k.tr.keepRaw(time.Now(), sealHandshake(t, secret, scid, dcid, 0, cc))
	o = k.tt.assessProvoked(k.tr, false, 0, -1, e)
	if o.v != Inconclusive || !strings.Contains(o.sentence, "closed at a level the tester has no keys for") {
		t.Fatalf("unopenable Handshake packet: got %s: %s", o.v, o.sentence)
	}
}
