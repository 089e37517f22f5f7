package conformance

import (
	"context"
	"crypto/tls"
	"fmt"
	"sync"

	"github.com/quiver-quic/quiver/quic"
	"github.com/quiver-quic/quiver/quic/wire"
)

// Family B, cipher-suite offers. crypto/tls builds the tester's ClientHello
// and has no per-connection choice of TLS 1.3 suites, so these scenarios
// narrow the process-wide list (quic.RestrictTLS13Suites) and run alone:
// suitesGate is held shared by every other scenario and exclusively by
// these (Scenario.Exclusive).
var suitesGate sync.RWMutex

// reqAEADAny is RFC 9001 §5.3's statement that any TLS 1.3 suite but CCM_8
// may protect QUIC packets.
var reqAEADAny = rfc9001("5.3", Descriptive, "QUIC can use any of the cipher suites defined in [TLS13] with the exception of TLS_AES_128_CCM_8_SHA256.")

func init() {
	for _, s := range []struct {
		id, title, name string
		suite           uint16
		needs           []string
	}{
		{"tls-chacha20-only", "Only TLS_CHACHA20_POLY1305_SHA256 offered", "ChaCha20-Poly1305", tls.TLS_CHACHA20_POLY1305_SHA256, []string{NeedApp, NeedLarge}},
		{"tls-aes256-only", "Only TLS_AES_256_GCM_SHA384 offered", "AES-256-GCM", tls.TLS_AES_256_GCM_SHA384, []string{NeedApp}},
	} {
		Register(&Scenario{
			ID: s.id, Title: s.title, Family: "B", Needs: s.needs, Exclusive: true, PassOnly: true,
			Requirements: []Requirement{reqAEADAny},
			Run: func(ctx context.Context, t *T) {
				t.runOnlySuite(ctx, s.suite, s.name)
			},
		})
	}
	Register(&Scenario{
		ID: "tls-ccm8-only", Title: "Only TLS_AES_128_CCM_8_SHA256 offered", Family: "B", Needs: []string{NeedApp}, Exclusive: true,
		Requirements: []Requirement{rfc9001("5.3", MustNot, "A cipher suite MUST NOT be negotiated unless a header protection scheme is defined for the cipher suite.")},
		Run:          runCCM8Only,
	})
	Register(&Scenario{
		ID: "tls-ccm8-offered-first", Title: "TLS_AES_128_CCM_8_SHA256 offered first", Family: "B", Needs: []string{NeedApp}, Exclusive: true,
		Requirements: []Requirement{
			rfc9001("5.3", MustNot, "An endpoint MUST NOT reject a ClientHello that offers a cipher suite that it does not support, or it would be impossible to deploy a new cipher suite.  This also applies to TLS_AES_128_CCM_8_SHA256."),
			rfc9001("5.3", MustNot, "A cipher suite MUST NOT be negotiated unless a header protection scheme is defined for the cipher suite."),
		},
		Run: runCCM8OfferedFirst,
	})
}

// withSuites runs f with the tester offering exactly suites. The caller
// holds suitesGate exclusively (the runner does, for Exclusive scenarios).
func (t *T) withSuites(suites []uint16, f func()) {
	restore, err := quic.RestrictTLS13Suites(suites...)
	if err != nil {
		t.Errorf("restrict cipher suites: %v", err)
		return
	}
	defer restore()
	f()
}

// serverHelloSuite finds the cipher suite the server's ServerHello selected
// on connection c, from the server's Initial CRYPTO stream (RFC 8446 §4.1.3:
// legacy_version, random, legacy_session_id_echo, cipher_suite).
func (t *T) serverHelloSuite(c *Conn) (suite uint16, at *packet, ok bool) {
	for _, p := range received(t.rec.snapshot(), c.trace.id, 0) {
		if p.space == spaceInitial {
			at = p
		}
	}
	for _, m := range c.trace.serverMessages(spaceInitial) {
		if m[0] != 2 { // server_hello
			continue
		}
		b := m[4:]
		if len(b) < 2+32+1 {
			return 0, at, false
		}
		n := int(b[34])
		if len(b) < 35+n+2 {
			return 0, at, false
		}
		return uint16(b[35+n])<<8 | uint16(b[36+n]), at, true
	}
	return 0, at, false
}

func (t *T) runOnlySuite(ctx context.Context, suite uint16, name string) {
	req := t.sc.Requirements[0]
	t.withSuites([]uint16{suite}, func() {
		c, err := t.Dial(ctx, DialOptions{Label: "only " + tls.CipherSuiteName(suite)})
		if err != nil {
			ps := received(t.rec.snapshot(), c.trace.id, 0)
			if cl := firstClose(ps); cl != nil {
				if cc := cl.closeFrame(); cc != nil && cc.ErrorCode == uint64(wire.CryptoError(40)) {
					t.Unsupported(fmt.Sprintf("The server refused a ClientHello offering only %s with handshake_failure (0x0128); supporting this suite is a TLS-level choice.", tls.CipherSuiteName(suite)), events(Response, cl)...)
				}
			}
			if s, at, ok := t.serverHelloSuite(c); ok && s == suite {
				t.Inconclusive(fmt.Sprintf("The server selected %s but the handshake then failed (%v); the raw packets are in the evidence.", tls.CipherSuiteName(suite), err), events(Response, at)...)
			}
			t.dialFailure(c, err)
			return
		}
		defer c.Close(0, "")
		if got := c.ConnectionState().CipherSuite; got != suite {
			t.Errorf("the handshake completed with %s although only %s was offered", tls.CipherSuiteName(got), tls.CipherSuiteName(suite))
			return
		}
		path, what := t.profile.SmallPath, "the small resource"
		if t.profile.Target.LargePath != "" {
			path, what = t.profile.Target.LargePath, "the large resource"
		}
		body, err := c.Fetch(ctx, path)
		ps := received(t.rec.snapshot(), c.trace.id, 0)
		if err != nil {
			t.Inconclusive(fmt.Sprintf("The handshake completed with %s, but fetching %s failed: %v.", name, what, err), events(Response, lastN(ps, 3)...)...)
		}
		t.Fact("tls.cipher-suite", tls.CipherSuiteName(suite))
		t.Pass("suite", req, fmt.Sprintf("The handshake completed with %s and %d bytes of %s arrived in %d packets protected with it (packet and header protection).", name, len(body), what, len(ps)),
			events(Response, lastN(ps, 2)...)...)
	})
}

func runCCM8Only(ctx context.Context, t *T) {
	req := t.sc.Requirements[0]
	t.withSuites([]uint16{quic.TLS_AES_128_CCM_8_SHA256}, func() {
		mark := len(t.rec.snapshot())
		c, err := t.Dial(ctx, DialOptions{Label: "only TLS_AES_128_CCM_8_SHA256"})
		if s, at, ok := t.serverHelloSuite(c); ok && s == quic.TLS_AES_128_CCM_8_SHA256 {
			t.Fail("negotiated", req, "The server's ServerHello selected TLS_AES_128_CCM_8_SHA256, a suite with no QUIC header protection scheme.", events(Response, at)...)
			return
		}
		if err == nil {
			c.Close(0, "")
			t.Errorf("the handshake completed although only TLS_AES_128_CCM_8_SHA256 was offered")
			return
		}
		t.judgeProvoked(c.trace, false, mark, Expectation{
			Check: "close", Req: req, Codes: transportCodes(wire.CryptoError(40)),
			Describe: "a ClientHello offering only TLS_AES_128_CCM_8_SHA256"})
	})
}

func runCCM8OfferedFirst(ctx context.Context, t *T) {
	t.withSuites([]uint16{quic.TLS_AES_128_CCM_8_SHA256, tls.TLS_AES_128_GCM_SHA256}, func() {
		c, err := t.Dial(ctx, DialOptions{Label: "CCM_8 first, then AES-128-GCM"})
		ps := received(t.rec.snapshot(), c.trace.id, 0)
		if s, at, ok := t.serverHelloSuite(c); ok && s == quic.TLS_AES_128_CCM_8_SHA256 {
			t.Fail("negotiated", t.sc.Requirements[1], "The server's ServerHello selected TLS_AES_128_CCM_8_SHA256, a suite with no QUIC header protection scheme.", events(Response, at)...)
			return
		}
		if err != nil {
			if cl := firstClose(ps); cl != nil {
				t.Fail("accepted", t.sc.Requirements[0], fmt.Sprintf("The server closed the handshake (%s) because the ClientHello offered TLS_AES_128_CCM_8_SHA256 first, although TLS_AES_128_GCM_SHA256 was offered too.", closeCode(cl.closeFrame())), events(Response, cl)...)
				return
			}
			t.dialFailure(c, err)
			return
		}
		defer c.Close(0, "")
		t.Pass("accepted", t.sc.Requirements[0], fmt.Sprintf("The server ignored the unsupported TLS_AES_128_CCM_8_SHA256 and completed the handshake with %s.", tls.CipherSuiteName(c.ConnectionState().CipherSuite)), events(Response, lastN(ps, 1)...)...)
	})
}
