package quic

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/quiver-quic/quiver/quic/wire"
)

// TestClientClosesFailedHandshake: a client whose handshake fails (here
// the certificate names another host) sends CONNECTION_CLOSE. Its close
// coalesces an Initial and a Handshake packet; padding the Initial alone
// to 1200 bytes made that datagram too large to send before the handshake
// is confirmed, and the client went silent (found by the client-facing
// provoked-error scenarios, which came out inconclusive).
func TestClientClosesFailedHandshake(t *testing.T) {
	scfg := testServerConfig(t, "hq-interop")
	got := make(chan string, 10)
	scfg.Probe = &Probe{OnPacketReceived: func(p PacketInfo) {
		for b := p.Payload; len(b) > 0; {
			f, k, err := wire.ParseFrame(b)
			if err != nil || k <= 0 {
				return
			}
			if cc, ok := f.(*wire.ConnectionCloseFrame); ok {
				got <- fmt.Sprintf("code %#x in space %d", cc.ErrorCode, p.Space)
			}
			b = b[k:]
		}
	}}
	ep, err := Listen("udp", "127.0.0.1:0", scfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ep.Close()
	ccfg := testClientConfig(t, "hq-interop")
	ccfg.TLSConfig.ServerName = "not-this-host.invalid"
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = Dial(ctx, "udp", ep.Addr().String(), ccfg)
	t.Logf("dial: %v", err)
	select {
	case s := <-got:
		t.Logf("close seen: %s", s)
	case <-time.After(5 * time.Second):
		t.Errorf("the server received no CONNECTION_CLOSE from the client")
	}
}

// TestServerRejectsCompatSessionID: RFC 9001 §8.4, a ClientHello with a
// non-empty legacy_session_id is a PROTOCOL_VIOLATION at the server.
func TestServerRejectsCompatSessionID(t *testing.T) {
	ep, err := Listen("udp", "127.0.0.1:0", testServerConfig(t, "hq-interop"))
	if err != nil {
		t.Fatal(err)
	}
	defer ep.Close()
	ccfg := testClientConfig(t, "hq-interop")
	ccfg.Probe = &Probe{RewriteClientHello: func(h []byte) []byte {
		if len(h) < 39 || h[38] != 0 {
			t.Errorf("unexpected ClientHello start % x", h[:min(len(h), 39)])
			return h
		}
		out := append([]byte(nil), h[:38]...)
		out = append(out, 32)
		out = append(out, make([]byte, 32)...)
		out = append(out, h[39:]...)
		n := len(out) - 4
		out[1], out[2], out[3] = byte(n>>16), byte(n>>8), byte(n)
		return out
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = Dial(ctx, "udp", ep.Addr().String(), ccfg)
	var te *TransportError
	if !errors.As(err, &te) || te.Code != wire.ProtocolViolation || !te.Remote {
		t.Fatalf("dial: %v, want the server's PROTOCOL_VIOLATION", err)
	}
}
