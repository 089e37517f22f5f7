package quic

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// TestRestrictTLS13Suites runs a transfer with each TLS 1.3 suite as the only
// one offered and checks both ends negotiated it and the data arrived intact:
// the packet protection of RFC 9001 §5.3 must work with every suite.
func TestRestrictTLS13Suites(t *testing.T) {
	EnableTLS13SuiteControl()
	for _, name := range []string{"aes128", "aes256", "chacha20"} {
		t.Run(name, func(t *testing.T) {
			suite, err := ParseTLS13Suite(name)
			if err != nil {
				t.Fatal(err)
			}
			restore, err := RestrictTLS13Suites(suite)
			if err != nil {
				t.Fatal(err)
			}
			defer restore()
			if got := TLS13Suites(); len(got) != 1 || got[0] != suite {
				t.Fatalf("TLS13Suites() = %x, want [%x]", got, suite)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			ep, err := Listen("udp", "127.0.0.1:0", testServerConfig(t, "hq-interop"))
			if err != nil {
				t.Fatal(err)
			}
			defer ep.Close()
			accepted := make(chan *Conn, 1)
			go func() {
				c, err := ep.Accept(ctx)
				if err != nil {
					return
				}
				accepted <- c
				s, err := c.AcceptStream(ctx)
				if err != nil {
					return
				}
				io.ReadAll(s)
				s.Write(pattern(300 << 10))
				s.CloseWrite()
			}()
			c, err := Dial(ctx, "udp", ep.Addr().String(), testClientConfig(t, "hq-interop"))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close(0, "")
			s, err := c.OpenStream(ctx)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprint(s, "GET /\r\n")
			s.CloseWrite()
			got, err := io.ReadAll(s)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, pattern(300<<10)) {
				t.Fatalf("body differs: %d bytes", len(got))
			}
			if cs := c.ConnectionState().CipherSuite; cs != suite {
				t.Errorf("client negotiated %s, want %s", tls.CipherSuiteName(cs), tls.CipherSuiteName(suite))
			}
			sc := <-accepted
			if cs := sc.ConnectionState().CipherSuite; cs != suite {
				t.Errorf("server negotiated %s, want %s", tls.CipherSuiteName(cs), tls.CipherSuiteName(suite))
			}
		})
	}
	if got := TLS13Suites(); len(got) != 3 {
		t.Errorf("after restore TLS13Suites() = %x, want the three defaults", got)
	}
}

func TestRestrictTLS13SuitesRejects(t *testing.T) {
	EnableTLS13SuiteControl()
	before := TLS13Suites()
	for _, bad := range [][]uint16{nil, {tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256}, {0x0a1a}, {0x0b0b}} {
		if _, err := RestrictTLS13Suites(bad...); err == nil {
			t.Errorf("RestrictTLS13Suites(%x) accepted", bad)
		}
	}
	if got := TLS13Suites(); !slices.Equal(got, before) {
		t.Errorf("a rejected call changed the suites: %x, was %x", got, before)
	}
	if _, err := ParseTLS13Suite("rc4"); err == nil {
		t.Error("ParseTLS13Suite(rc4) accepted")
	}
}

func TestRestrictTLS13SuitesGrease(t *testing.T) {
	EnableTLS13SuiteControl()
	restore, err := RestrictTLS13Suites(0x0a0a, 0xfafa, tls.TLS_AES_128_GCM_SHA256)
	if err != nil {
		t.Fatalf("GREASE values refused: %v", err)
	}
	defer restore()
	if got := TLS13Suites(); !slices.Equal(got, []uint16{0x0a0a, 0xfafa, tls.TLS_AES_128_GCM_SHA256}) {
		t.Errorf("TLS13Suites() = %x", got)
	}
	for v := 0; v < 1<<16; v++ {
		want := v>>8 == v&0xff && v&0x0f == 0x0a
		if got := IsGreaseValue(uint16(v)); got != want {
			t.Errorf("IsGreaseValue(%#04x) = %v", v, got)
		}
	}
}

// TestPerConnectionTLS13Suites: a client with Config.TLS13Suites offers
// exactly those in its own ClientHello while connections beside it offer
// crypto/tls's list, and the process-wide list is left as it was.
func TestPerConnectionTLS13Suites(t *testing.T) {
	EnableTLS13SuiteControl()
	before := TLS13Suites()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ep, err := Listen("udp", "127.0.0.1:0", testServerConfig(t, "hq-interop"))
	if err != nil {
		t.Fatal(err)
	}
	defer ep.Close()
	go func() {
		for {
			if _, err := ep.Accept(ctx); err != nil {
				return
			}
		}
	}()
	type result struct {
		want, got uint16
		err       error
	}
	cases := []uint16{tls.TLS_CHACHA20_POLY1305_SHA256, 0, tls.TLS_AES_256_GCM_SHA384, 0, tls.TLS_CHACHA20_POLY1305_SHA256, 0}
	out := make(chan result, len(cases))
	for _, suite := range cases {
		go func() {
			cfg := testClientConfig(t, "hq-interop")
			want := uint16(tls.TLS_AES_128_GCM_SHA256)
			if suite != 0 {
				cfg.TLS13Suites = []uint16{0x2a2a, suite}
				want = suite
			}
			c, err := Dial(ctx, "udp", ep.Addr().String(), cfg)
			if err != nil {
				out <- result{want: want, err: err}
				return
			}
			defer c.Close(0, "")
			out <- result{want: want, got: c.ConnectionState().CipherSuite}
		}()
	}
	for range cases {
		r := <-out
		if r.err != nil {
			t.Errorf("dial offering %s: %v", tls.CipherSuiteName(r.want), r.err)
		} else if r.got != r.want && !(r.want == tls.TLS_AES_128_GCM_SHA256 && r.got == tls.TLS_CHACHA20_POLY1305_SHA256) {
			// Without AES hardware crypto/tls prefers ChaCha20 by default.
			t.Errorf("negotiated %s, want %s", tls.CipherSuiteName(r.got), tls.CipherSuiteName(r.want))
		}
	}
	if got := TLS13Suites(); !slices.Equal(got, before) {
		t.Errorf("the process-wide list changed: %x, was %x", got, before)
	}
	cfg := testClientConfig(t, "hq-interop")
	cfg.TLS13Suites = []uint16{tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256}
	if _, err := Dial(ctx, "udp", ep.Addr().String(), cfg); err == nil {
		t.Error("a TLS 1.2 suite in TLS13Suites was accepted")
	}
}

// TestTLS13SuiteControlOptIn: without EnableTLS13SuiteControl nothing
// rewrites crypto/tls's list: RestrictTLS13Suites, a per-connection list
// and a client with Config.TLS13Suites fail, and a handshake step runs as
// it is.
func TestTLS13SuiteControlOptIn(t *testing.T) {
	defer suiteControl.Store(suiteControl.Load())
	suiteControl.Store(false)
	before := TLS13Suites()
	if _, err := RestrictTLS13Suites(tls.TLS_AES_256_GCM_SHA384); !errors.Is(err, errNoSuiteControl) {
		t.Errorf("RestrictTLS13Suites without the opt-in: %v", err)
	}
	ran := false
	if err := WithTLS13Suites([]uint16{tls.TLS_AES_256_GCM_SHA384}, func() error { ran = true; return nil }); !errors.Is(err, errNoSuiteControl) || ran {
		t.Errorf("WithTLS13Suites with a list without the opt-in: %v, ran %v", err, ran)
	}
	if err := WithTLS13Suites(nil, func() error { ran = true; return nil }); err != nil || !ran {
		t.Errorf("WithTLS13Suites(nil) without the opt-in: %v, ran %v", err, ran)
	}
	synctest.Test(t, func(t *testing.T) {
		n := newMemNet(10 * time.Millisecond)
		ccfg := testClientConfig(t, "hq-interop")
		ccfg.TLS13Suites = []uint16{tls.TLS_AES_256_GCM_SHA384}
		sep, cep, c, err := pair(t, n, testServerConfig(t, "hq-interop"), ccfg)
		defer sep.Close()
		defer cep.Close()
		if err == nil {
			c.Close(0, "")
			t.Error("a client with Config.TLS13Suites dialled without the opt-in")
		} else if !strings.Contains(err.Error(), "EnableTLS13SuiteControl") {
			t.Errorf("dial error %v does not name EnableTLS13SuiteControl", err)
		}
	})
	if got := TLS13Suites(); !slices.Equal(got, before) {
		t.Errorf("the process-wide list changed: %x, was %x", got, before)
	}
}
