package conformance

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"time"

	"github.com/quiver-quic/quiver/quic/wire"
)

// Family B, ClientHello offers the server must refuse (RFC 9001 §4.2,
// §8.1, §8.2, §8.4) and one it must accept (§5.3). The raw client edits
// the ClientHello crypto/tls wrote (clienthello.go) before it is sent.
// TLS keeps hashing the original, so a server that goes on with an edited
// offer cannot finish the handshake; what it does is read from its
// Initial packets instead, which both sides protect with keys derived
// from the connection ID alone: a CONNECTION_CLOSE there, or ACKs of the
// tester's later Initial PINGs (the connection goes on).

func init() {
	registerHelloWithout("tls-alpn-absent", "ClientHello without ALPN", extALPN, "ALPN", 120, // no_application_protocol
		rfc9001("8.1", Must, "Unless another mechanism is used for agreeing on an application protocol, endpoints MUST use ALPN for this purpose."),
		rfc9000("7", Must, "Endpoints MUST explicitly negotiate an application protocol."))
	Register(&Scenario{
		ID: "tls-version-below-13", Title: "ClientHello offering only TLS 1.2", Family: "B", Needs: []string{NeedApp},
		Requirements: []Requirement{rfc9001("4.2", Must, "An endpoint MUST terminate the connection if a version of TLS older than 1.3 is negotiated.")},
		Run:          runTLSVersionBelow13,
	})
	registerHelloWithout("tls-missing-tp-extension", "ClientHello without quic_transport_parameters", extQUICTransportParams, "quic_transport_parameters", 109, // missing_extension
		rfc9001("8.2", Must, "endpoints that receive ClientHello or EncryptedExtensions messages without the quic_transport_parameters extension MUST close the connection with an error of type 0x016d"))
	Register(&Scenario{
		ID: "tls-compat-session-id", Title: "ClientHello with a 32-byte legacy_session_id", Family: "B", Needs: []string{NeedApp},
		Requirements: []Requirement{rfc9001("8.4", Should, "A server SHOULD treat the receipt of a TLS ClientHello with a non-empty legacy_session_id field as a connection error of type PROTOCOL_VIOLATION.")},
		Run: func(ctx context.Context, t *T) {
			rc, mark := t.helloExchange(ctx, "legacy_session_id", func(h *clientHello) error {
				h.sessionID = randomBytes(32)
				return nil
			})
			// A server that answers with a ServerHello echoing the session
			// ID has not treated it as an error; the ACKs of the later
			// PINGs show the connection going on, which the SHOULD makes
			// a warn.
			t.judgeProvoked(rc.trace, true, mark, Expectation{Check: "close", Req: t.sc.Requirements[0], GoesOnWarns: true,
				Codes: transportCodes(wire.ProtocolViolation), Describe: "a ClientHello with a 32-byte legacy_session_id (middlebox compatibility mode)"})
		},
	})
	Register(&Scenario{
		ID: "grease-tls-cipher-suites", Title: "Reserved GREASE cipher suites offered first", Family: "J", Needs: []string{NeedApp}, Exclusive: true,
		Requirements: []Requirement{rfc9001("5.3", MustNot, "An endpoint MUST NOT reject a ClientHello that offers a cipher suite that it does not support, or it would be impossible to deploy a new cipher suite.")},
		Run:          runGreaseTLSCipherSuites,
	})
}

// registerHelloWithout registers a scenario whose ClientHello lacks
// extension ext and which expects a close with TLS alert alert (the QUIC
// error 0x0100 + alert, RFC 9001 §4.8); reqs[0] is the requirement the
// close rests on.
func registerHelloWithout(id, title string, ext uint16, name string, alert uint8, reqs ...Requirement) {
	Register(&Scenario{
		ID: id, Title: title, Family: "B", Needs: []string{NeedApp}, Requirements: reqs,
		Run: func(ctx context.Context, t *T) {
			rc, mark := t.helloExchange(ctx, "no "+name, func(h *clientHello) error {
				if !h.remove(ext) {
					return fmt.Errorf("the ClientHello carries no %s extension to remove", name)
				}
				return nil
			})
			t.judgeProvoked(rc.trace, true, mark, Expectation{Check: "close", Req: reqs[0],
				Codes: transportCodes(wire.CryptoError(alert)), Describe: fmt.Sprintf("a ClientHello without the %s extension", name)})
		},
	})
}

// helloExchange sends a ClientHello edited by edit in a 1200-byte Initial,
// then, once the server has answered, a 1200-byte Initial PING every PTO
// for one settle window (the provoked-error pattern of catalogue §2.5, in
// the Initial space). It returns the raw client and the recorder mark
// before the ClientHello, for judgeProvoked.
func (t *T) helloExchange(ctx context.Context, label string, edit func(h *clientHello) error) (*rawClient, int) {
	var editErr error
	rc := t.newRaw(ctx, rawOptions{Label: label, RewriteHello: editClientHello(edit, &editErr)})
	rc.ClientHello(ctx)
	if editErr != nil {
		t.Errorf("rewrite the ClientHello: %v", editErr)
	}
	mark := t.mark()
	rc.sendClientHello(ctx, 1200)
	closed := func() bool {
		for _, p := range received(t.rec.snapshot(), rc.trace.id, mark) {
			if p.closeFrame() != nil || p.ev.PacketType == "stateless_reset" {
				return true
			}
		}
		return false
	}
	for waited := time.Duration(0); waited < t.Settle() && ctx.Err() == nil; waited += t.PTO() {
		rc.Receive(ctx, t.PTO(), closed)
		if closed() {
			break
		}
		if rc.serverSCID == nil {
			// Nothing from the server yet: the first flight again.
			pkt, _ := rc.longPacket(0, []wire.Frame{&wire.CryptoFrame{Data: rc.ClientHello(ctx)}}, longOpts{PadTo: 1200})
			rc.send(pkt)
			continue
		}
		pkt, _ := rc.longPacket(0, []wire.Frame{&wire.PingFrame{}}, longOpts{PadTo: 1200})
		rc.send(pkt)
	}
	return rc, mark
}

// serverHelloOf returns the server's ServerHello on the raw client's
// connection and the Initial packet that completed it.
func (t *T) serverHelloOf(rc *rawClient) (*serverHello, *packet) {
	for _, m := range rc.trace.serverMessages(spaceInitial) {
		if m[0] != 2 {
			continue
		}
		sh, err := parseServerHello(m)
		if err != nil {
			return nil, nil
		}
		var at *packet
		for _, p := range received(t.rec.snapshot(), rc.trace.id, 0) {
			if p.space == spaceInitial && p.has(wire.FrameTypeCrypto) {
				at = p
				break
			}
		}
		return sh, at
	}
	return nil, nil
}

func runTLSVersionBelow13(ctx context.Context, t *T) {
	rc, mark := t.helloExchange(ctx, "TLS 1.2 only", func(h *clientHello) error {
		// supported_versions (RFC 8446 §4.2.1): a 1-byte list length,
		// then TLS 1.2 alone.
		if _, ok := h.ext(extSupportedVersions); !ok {
			return errors.New("the ClientHello carries no supported_versions extension")
		}
		h.set(extSupportedVersions, []byte{2, 0x03, 0x03})
		return nil
	})
	req := t.sc.Requirements[0]
	rcv := received(t.rec.snapshot(), rc.trace.id, mark)
	sh, at := t.serverHelloOf(rc)
	if sh != nil && sh.version() < tls.VersionTLS13 {
		t.Fail("version", req, fmt.Sprintf("The server's ServerHello negotiated %s although QUIC needs TLS 1.3.", tls.VersionName(sh.version())), events(Response, at)...)
		return
	}
	if firstClose(rcv) == nil {
		// The catalogue makes any reply other than a close or a
		// ServerHello selecting an old version observed.
		if sh != nil {
			t.Fact("tls.version-below-13", "ServerHello selecting "+tls.VersionName(sh.version()))
			t.Observe("version", fmt.Sprintf("Offered only TLS 1.2, the server answered with a ServerHello selecting %s and did not close.", tls.VersionName(sh.version())), events(Response, at)...)
			return
		}
		if a := ackedLaterPing(t.rec.snapshot(), rc.trace.id, mark); a != nil {
			t.Observe("version", "Offered only TLS 1.2, the server sent no ServerHello and no close, but kept acknowledging the tester's Initial packets.", events(Response, a)...)
			return
		}
	}
	// RFC 8446 §4.2.1 names protocol_version (70) for a server that
	// supports none of the offered versions.
	t.judgeProvoked(rc.trace, true, mark, Expectation{Check: "close", Req: req, Codes: transportCodes(wire.CryptoError(70)),
		Describe: "a ClientHello whose supported_versions offers only TLS 1.2"})
}

// ackedLaterPing returns a server packet that acknowledges one of the
// tester's PING packets sent on conn from index mark on.
func ackedLaterPing(ps []*packet, conn, mark int) *packet {
	for i, p := range ps {
		if i < mark || !p.sent || p.conn != conn || !p.has(wire.FrameTypePing) {
			continue
		}
		if a := ackedBy(ps, conn, p.space, p.pn); a != nil {
			return a
		}
	}
	return nil
}

// greaseSuites returns two distinct reserved GREASE cipher-suite values
// (RFC 8701 §2).
func greaseSuites() [2]uint16 {
	var b [2]byte
	rand.Read(b[:])
	i, j := uint16(b[0]&0x0f), uint16(b[1]&0x0f)
	if i == j {
		j = (j + 1) & 0x0f
	}
	g := func(n uint16) uint16 { return n<<12 | 0x0a00 | n<<4 | 0x0a }
	return [2]uint16{g(i), g(j)}
}

func runGreaseTLSCipherSuites(ctx context.Context, t *T) {
	req := t.sc.Requirements[0]
	gs := greaseSuites()
	t.withSuites([]uint16{gs[0], gs[1], tls.TLS_AES_128_GCM_SHA256}, func() {
		label := fmt.Sprintf("GREASE %#04x, %#04x, then AES-128-GCM", gs[0], gs[1])
		c, err := t.Dial(ctx, DialOptions{Label: label})
		ps := received(t.rec.snapshot(), c.trace.id, 0)
		if err != nil {
			if cl := firstClose(ps); cl != nil {
				t.Fail("accepted", req, fmt.Sprintf("The server closed the handshake (%s) when the ClientHello offered the reserved cipher suites %#04x and %#04x ahead of TLS_AES_128_GCM_SHA256.", closeCode(cl.closeFrame()), gs[0], gs[1]), events(Response, cl)...)
				return
			}
			t.dialFailure(c, err)
			return
		}
		defer c.Close(0, "")
		got := c.ConnectionState().CipherSuite
		if got != tls.TLS_AES_128_GCM_SHA256 {
			t.Errorf("the handshake completed with %s although only TLS_AES_128_GCM_SHA256 could be selected", tls.CipherSuiteName(got))
			return
		}
		t.Fact("tls.cipher-suite", tls.CipherSuiteName(got))
		t.Pass("accepted", req, fmt.Sprintf("The server ignored the reserved cipher suites %#04x and %#04x and completed the handshake with TLS_AES_128_GCM_SHA256.", gs[0], gs[1]), events(Response, lastN(ps, 1)...)...)
	})
}
