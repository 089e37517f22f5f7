package endpoint

import (
	"bytes"
	"context"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quiver-quic/quiver/internal/leakcheck"
	"github.com/quiver-quic/quiver/netem"
	"github.com/quiver-quic/quiver/peers"
	"github.com/quiver-quic/quiver/quic"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// TestUnsupportedExits127 checks the contract's rule that an unknown or
// unsupported TESTCASE exits with 127 at once, for both roles.
func TestUnsupportedExits127(t *testing.T) {
	for _, c := range []map[string]string{
		{"ROLE": "server", "TESTCASE": "no-such-test"},
		{"ROLE": "client", "TESTCASE": "no-such-test", "REQUESTS": "https://127.0.0.1:1/x"},
	} {
		if got := Main(context.Background(), nil, env(c), io.Discard); got != ExitUnsupported {
			t.Errorf("%v: exit %d, want %d", c, got, ExitUnsupported)
		}
	}
}

// TestFlagsAfterURLs: the endpoint's flags may follow its URLs; a bad one
// there is a usage error (exit 2), not taken for a URL.
func TestFlagsAfterURLs(t *testing.T) {
	var errb bytes.Buffer
	e := env(map[string]string{"ROLE": "client", "TESTCASE": "handshake"})
	if got := Main(context.Background(), []string{"https://127.0.0.1:1/x", "--bogus"}, e, &errb); got != 2 || !strings.Contains(errb.String(), "bogus") {
		t.Errorf("exit %d, stderr %q; want 2 naming the flag", got, errb.String())
	}
}

// TestPreferredAddress checks the address a connectionmigration server
// offers: its listening address with a port of its own.
func TestPreferredAddress(t *testing.T) {
	for listen, want := range map[string]quic.PreferredAddress{
		"127.0.0.1:443":    {IPv4: netip.MustParseAddrPort("127.0.0.1:0")},
		"[::1]:443":        {IPv6: netip.MustParseAddrPort("[::1]:0")},
		"198.18.100.100:0": {IPv4: netip.MustParseAddrPort("198.18.100.100:0")},
	} {
		got, err := preferredAddress(listen)
		if err != nil || *got != want {
			t.Errorf("preferredAddress(%q) = %+v, %v; want %+v", listen, got, err, want)
		}
	}
	if _, err := preferredAddress("no-port"); err == nil {
		t.Error("preferredAddress accepted an address without a port")
	}
}

// TestManifestAgrees keeps the peers manifest's entry for Quiver in step
// with what the endpoint supports, since peers cannot import the engine.
func TestManifestAgrees(t *testing.T) {
	im, err := peers.Find("quiver")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(im.ServerCases, ServerCases) || !slices.Equal(im.ClientCases, ClientCases) {
		t.Errorf("manifest lists server %v, client %v; the endpoint supports server %v, client %v",
			im.ServerCases, im.ClientCases, ServerCases, ClientCases)
	}
}

// lineWriter hands each line written to it to a channel.
type lineWriter struct {
	mu    sync.Mutex
	buf   []byte
	lines chan string
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		select {
		case w.lines <- string(w.buf[:i]):
		default: // nobody is reading: drop
		}
		w.buf = w.buf[i+1:]
	}
}

// TestClientCases runs the endpoint as server and client on loopback for
// the test cases that change how the client connects, and checks from the
// client's own report that it did what the case asks: a second connection
// that resumes (resumption), that also carries 0-RTT (zerortt), and a
// connection that went through Version Negotiation (versionnegotiation),
// one upgraded to v2 (v2), one that offered only ChaCha20 (chacha20), and
// one that moved to the server's preferred address (connectionmigration).
func TestClientCases(t *testing.T) {
	dir := t.TempDir()
	cert, key, err := peers.WriteSelfSignedCert(dir)
	if err != nil {
		t.Fatal(err)
	}
	www := filepath.Join(dir, "www")
	os.Mkdir(www, 0o755)
	for _, n := range []string{"a", "b", "c"} {
		if err := os.WriteFile(filepath.Join(www, n), bytes.Repeat([]byte(n), 3000), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// connectionmigration moves after the handshake is confirmed: three
	// 3000-byte files could all arrive before that (the test then failed
	// about one run in three), so it fetches 2 MiB, as the interop
	// runner's own connectionmigration test does.
	if err := os.WriteFile(filepath.Join(www, "big"), bytes.Repeat([]byte("m"), 2<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, clientCase string
		want             []string // in the client's last "requests done" line
	}{
		// The server offers its own address on a second port; the
		// client (TESTCASE=transfer, as in the runner) moves there,
		// leaving the relay's address ({relay} is replaced by it).
		{"connectionmigration", "transfer", []string{"server at 127.0.0.1:", "!server at {relay}"}},
		{"resumption", "", []string{"resumed true", "0-RTT false"}},
		{"zerortt", "", []string{"resumed true", "0-RTT true"}},
		{"versionnegotiation", "", []string{"version 0x1,", "version negotiated true"}},
		{"v2", "", []string{"version 0x6b3343cf,", "version negotiated false"}},
		{"chacha20", "", []string{"cipher TLS_CHACHA20_POLY1305_SHA256"}},
		{"handshake", "", []string{"cipher TLS_AES_128_GCM_SHA256"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			serr := &lineWriter{lines: make(chan string, 16)}
			done := make(chan int)
			go func() {
				done <- Main(ctx, []string{"-listen", "127.0.0.1:0", "-cert", cert, "-key", key, "-root", www},
					env(map[string]string{"ROLE": "server", "TESTCASE": tc.name}), serr)
			}()
			defer func() {
				cancel()
				if code := <-done; code != 0 {
					t.Errorf("server exited with %d", code)
				}
			}()
			var addr string
			for addr == "" {
				line := <-serr.lines
				if _, rest, ok := strings.Cut(line, " on "); ok {
					addr, _, _ = strings.Cut(rest, " ")
				}
			}
			// The client reaches the server through a relay with 25 ms each
			// way, as in an interop cell: on bare loopback the server's
			// whole flight can arrive before the client has written its
			// requests, which then go in 1-RTT instead of 0-RTT.
			saddr, err := netip.ParseAddrPort(addr)
			if err != nil {
				t.Fatal(err)
			}
			link := netem.Link{Delay: 25 * time.Millisecond}
			relay, err := netem.NewRelay(netem.RelayConfig{Listen: netip.MustParseAddrPort("127.0.0.1:0"), Server: saddr, ToServer: link, ToClient: link})
			if err != nil {
				t.Fatal(err)
			}
			if err := relay.Start(ctx); err != nil {
				t.Fatal(err)
			}
			defer relay.Stop()
			addr = relay.Addr().String()
			out := filepath.Join(dir, "dl-"+tc.name)
			cerr := &lineWriter{lines: make(chan string, 64)}
			urls := []string{"https://" + addr + "/a", "https://" + addr + "/b", "https://" + addr + "/c"}
			if tc.name == "connectionmigration" {
				urls = []string{"https://" + addr + "/big"}
			}
			clientCase := tc.name
			if tc.clientCase != "" {
				clientCase = tc.clientCase
			}
			if code := Main(ctx, append([]string{"-output", out}, urls...), env(map[string]string{"ROLE": "client", "TESTCASE": clientCase}), cerr); code != 0 {
				t.Fatalf("client exited with %d", code)
			}
			close(cerr.lines)
			var last string
			for l := range cerr.lines {
				if strings.Contains(l, "requests done") {
					last = l
				}
			}
			for _, w := range tc.want {
				w = strings.ReplaceAll(w, "{relay}", addr)
				if not, ok := strings.CutPrefix(w, "!"); ok {
					if strings.Contains(last, not) {
						t.Errorf("client reported %q, want no %q in it", last, not)
					}
				} else if !strings.Contains(last, w) {
					t.Errorf("client reported %q, want %q in it", last, w)
				}
			}
			for _, u := range urls {
				n := u[strings.LastIndex(u, "/")+1:]
				want, _ := os.ReadFile(filepath.Join(www, n))
				if b, err := os.ReadFile(filepath.Join(out, n)); err != nil || !bytes.Equal(b, want) {
					t.Errorf("%s: %d bytes, %v", n, len(b), err)
				}
			}
		})
	}
}
