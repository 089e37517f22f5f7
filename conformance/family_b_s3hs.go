package conformance

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"

	"github.com/quiver-quic/quiver/quic"
)

// Family B, TLS (catalogue §3.B): tls-hello-retry-request.

func init() {
	Register(&Scenario{
		ID: "tls-hello-retry-request", Title: "HelloRetryRequest for a key share the server does not prefer", Family: "B",
		Needs: []string{NeedApp}, PassOnly: true,
		Requirements: []Requirement{rfc9001("4.7", Descriptive, "From the perspective of QUIC, HelloRetryRequest is not differentiated from other cryptographic handshake messages that are carried in Initial packets.")},
		Run:          runTLSHelloRetryRequest,
	})
}

// helloRetryRandom is the ServerHello.random that marks a
// HelloRetryRequest (RFC 8446 §4.1.3: SHA-256 of "HelloRetryRequest").
var helloRetryRandom = []byte{
	0xcf, 0x21, 0xad, 0x74, 0xe5, 0x9a, 0x61, 0x11, 0xbe, 0x1d, 0x8c, 0x02, 0x1e, 0x65, 0xb8, 0x91,
	0xc2, 0xa2, 0x11, 0x16, 0x7a, 0xbb, 0x8c, 0x5e, 0x07, 0x9e, 0x09, 0xe2, 0xc8, 0xa8, 0x33, 0x9c,
}

const tlsServerHello = 2

// isHelloRetryRequest reports whether a TLS handshake message is a
// ServerHello carrying the HelloRetryRequest random.
func isHelloRetryRequest(m []byte) bool {
	// type(1) length(3) legacy_version(2) random(32)
	return len(m) >= 38 && m[0] == tlsServerHello && bytes.Equal(m[6:38], helloRetryRandom)
}

// helloRetryInInitial returns the server's Initial CRYPTO messages of a
// connection and whether the first ServerHello was a HelloRetryRequest.
func helloRetryInInitial(c *connTrace) (hrr bool, serverHellos int) {
	c.r.mu.Lock()
	msgs := tlsMessages(append([]byte(nil), c.cryptoIn[0].contiguous()...))
	c.r.mu.Unlock()
	for _, m := range msgs {
		if m[0] == tlsServerHello {
			serverHellos++
			if serverHellos == 1 && isHelloRetryRequest(m) {
				hrr = true
			}
		}
	}
	return hrr, serverHellos
}

func runTLSHelloRetryRequest(ctx context.Context, t *T) {
	// The catalogue asks for supported_groups secp384r1, x25519,
	// secp256r1 with a key share for secp384r1 only. crypto/tls cannot send
	// that: it ignores the order of CurvePreferences and sends a key share
	// for the first group of its own fixed order (hybrids, then X25519,
	// P-256, P-384), plus the hybrid's classical share when that group is
	// listed. The nearest it can send is a key share for the rarely
	// preferred P-384/ML-KEM-1024 hybrid alone (P-384 left out, so no
	// fallback share), with X25519 and P-256 listed: a server that does not
	// know the hybrid, or prefers a listed group, must ask again.
	c, err := t.Dial(ctx, DialOptions{Label: "SecP384r1MLKEM1024 key share", Config: func(cfg *quic.Config) {
		cfg.TLSConfig.CurvePreferences = []tls.CurveID{tls.SecP384r1MLKEM1024, tls.X25519, tls.CurveP256}
	}})
	hrr, shs := helloRetryInInitial(c.trace)
	t.Fact("tls.hrr", hrr)
	req := t.sc.Requirements[0]
	if err != nil {
		if hrr {
			t.Inconclusive(fmt.Sprintf("The server sent HelloRetryRequest in an Initial packet, but the handshake on the second ClientHello failed: %v.", err),
				events(Context, lastN(received(t.rec.snapshot(), c.ID(), 0), 3)...)...)
		}
		t.dialFailure(c, err)
	}
	group := c.ConnectionState().CurveID
	t.Fact("tls.group", group.String())
	if !hrr {
		t.Observe("hrr", fmt.Sprintf("Offered a key share for SecP384r1MLKEM1024 only (X25519 and P-256 listed), the server accepted it without HelloRetryRequest (group %s).", group))
		return
	}
	t.Pass("hrr", req, fmt.Sprintf("The server answered a SecP384r1MLKEM1024-only key share with HelloRetryRequest in an Initial packet, and the handshake completed on the second ClientHello (group %s, %d ServerHello messages).", group, shs))
}
