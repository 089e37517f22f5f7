package rawquic

import (
	"bytes"
	"context"
	"crypto/tls"
	"slices"
	"testing"
)

// extQUICTransportParams is the quic_transport_parameters extension
// (RFC 9001 §8.2).
const extQUICTransportParams = 0x39

// realClientHello is a ClientHello as crypto/tls writes it for QUIC.
func realClientHello(t testing.TB) []byte {
	q := tls.QUICClient(&tls.QUICConfig{TLSConfig: &tls.Config{ServerName: "localhost", NextProtos: []string{"hq-interop"}, MinVersion: tls.VersionTLS13}})
	defer q.Close()
	q.SetTransportParameters([]byte{0x04, 0x01, 0x10})
	if err := q.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	for {
		ev := q.NextEvent()
		switch ev.Kind {
		case tls.QUICNoEvent:
			t.Fatal("no ClientHello written")
		case tls.QUICWriteData:
			return append([]byte(nil), ev.Data...)
		}
	}
}

func TestClientHelloRoundTrip(t *testing.T) {
	msg := realClientHello(t)
	h, err := ParseClientHello(msg)
	if err != nil {
		t.Fatal(err)
	}
	if got := h.Marshal(); !bytes.Equal(got, msg) {
		t.Fatalf("marshal(parse(hello)) differs from the original")
	}
	if _, ok := h.Ext(ExtALPN); !ok {
		t.Error("no ALPN extension found in crypto/tls's ClientHello")
	}
	if _, ok := h.Ext(extQUICTransportParams); !ok {
		t.Error("no quic_transport_parameters found in crypto/tls's ClientHello")
	}
	for _, cut := range []int{1, 5, 40, len(msg) - 1} {
		if _, err := ParseClientHello(msg[:cut]); err == nil {
			t.Errorf("a ClientHello cut to %d bytes parsed", cut)
		}
	}
	if _, err := ParseClientHello(append(slices.Clone(msg), 0)); err == nil {
		t.Error("a ClientHello with a trailing byte parsed")
	}
}

func TestClientHelloEdits(t *testing.T) {
	msg := realClientHello(t)
	var failed error
	for _, tc := range []struct {
		name  string
		edit  func(h *ClientHello) error
		check func(h *ClientHello) bool
	}{
		{"no ALPN", func(h *ClientHello) error { h.Remove(ExtALPN); return nil },
			func(h *ClientHello) bool { _, ok := h.Ext(ExtALPN); return !ok }},
		{"no TP", func(h *ClientHello) error { h.Remove(extQUICTransportParams); return nil },
			func(h *ClientHello) bool { _, ok := h.Ext(extQUICTransportParams); return !ok }},
		{"session ID", func(h *ClientHello) error { h.SessionID = bytes.Repeat([]byte{7}, 32); return nil },
			func(h *ClientHello) bool { return len(h.SessionID) == 32 }},
		{"TLS 1.2 only", func(h *ClientHello) error { h.Set(ExtSupportedVersions, []byte{2, 3, 3}); return nil },
			func(h *ClientHello) bool {
				v, _ := h.Ext(ExtSupportedVersions)
				return bytes.Equal(v, []byte{2, 3, 3})
			}},
	} {
		out := EditClientHello(tc.edit, &failed)(msg)
		h, err := ParseClientHello(out)
		if err != nil || failed != nil {
			t.Fatalf("%s: the edited ClientHello does not parse: %v %v", tc.name, err, failed)
		}
		if !tc.check(h) {
			t.Errorf("%s: the edit did not take", tc.name)
		}
		if bytes.Equal(out, msg) {
			t.Errorf("%s: nothing changed", tc.name)
		}
	}
	// A message that is no ClientHello goes out unchanged, with the
	// failure reported.
	failed = nil
	if out := EditClientHello(func(*ClientHello) error { return nil }, &failed)([]byte{2, 0, 0, 0}); !bytes.Equal(out, []byte{2, 0, 0, 0}) || failed == nil {
		t.Errorf("an unparsable message was changed (%x) or not reported (%v)", out, failed)
	}
}

func TestParseServerHello(t *testing.T) {
	// legacy_version 0x0303, random, a 32-byte session ID echo, suite
	// 0x1301, compression 0, then supported_versions = 0x0304.
	body := []byte{3, 3}
	body = append(body, make([]byte, 32)...)
	body = append(body, 32)
	body = append(body, bytes.Repeat([]byte{9}, 32)...)
	body = append(body, 0x13, 0x01, 0)
	body = append(body, 0, 6, 0, ExtSupportedVersions, 0, 2, 3, 4)
	msg := append([]byte{2, 0, 0, byte(len(body))}, body...)
	sh, err := ParseServerHello(msg)
	if err != nil {
		t.Fatal(err)
	}
	if sh.Version() != tls.VersionTLS13 || sh.Suite != tls.TLS_AES_128_GCM_SHA256 || len(sh.SessionID) != 32 {
		t.Errorf("parsed %+v", sh)
	}
	// Without supported_versions the legacy version counts: TLS 1.2.
	old := append([]byte{2, 0, 0, byte(len(body) - 8)}, body[:len(body)-8]...)
	if sh, err := ParseServerHello(old); err != nil || sh.Version() != tls.VersionTLS12 {
		t.Errorf("a TLS 1.2 ServerHello parsed as %+v, %v", sh, err)
	}
}

func FuzzParseClientHello(f *testing.F) {
	f.Add(realClientHello(f))
	f.Add([]byte{1, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ParseClientHello(b)
		if err != nil {
			return
		}
		if out := h.Marshal(); !bytes.Equal(out, b) {
			t.Fatalf("marshal(parse(%x)) = %x", b, out)
		}
		ParseServerHello(b)
		Extensions(b)
	})
}
