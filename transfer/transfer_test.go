package transfer

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/quiver-quic/quiver/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

func content(n int) []byte {
	b := make([]byte, n)
	r := rand.NewChaCha8([32]byte{byte(n), byte(n >> 8), byte(n >> 16)})
	r.Read(b)
	return b
}

// startServer serves a directory with files of the given sizes and returns
// its address and a stop function that waits for the server to end.
func startServer(t *testing.T, cfg ServerConfig, sizes ...int) string {
	t.Helper()
	root := t.TempDir()
	for _, n := range sizes {
		if err := os.WriteFile(filepath.Join(root, fmt.Sprint(n)), content(n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg.Addr = "127.0.0.1:0"
	cfg.Root = root
	cfg.Logf = t.Logf
	s, err := Listen(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return s.Addr().String()
}

func TestGetBothProtocols(t *testing.T) {
	sizes := []int{0, 1000, 65536, 3 << 20}
	addr := startServer(t, ServerConfig{}, sizes...)
	for _, alpn := range []string{"h3", "hq-interop"} {
		t.Run(alpn, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			out := t.TempDir()
			var urls []string
			for _, n := range sizes {
				urls = append(urls, fmt.Sprintf("https://%s/%d", addr, n))
			}
			var negotiated string
			res, err := Get(ctx, urls, ClientConfig{ALPN: []string{alpn}, OutDir: out, Insecure: true,
				Logf: func(f string, a ...any) { negotiated = fmt.Sprintf(f, a...) }})
			if err != nil {
				t.Fatal(err)
			}
			t.Log(negotiated)
			for i, n := range sizes {
				got, err := os.ReadFile(res[i].File)
				if err != nil || !bytes.Equal(got, content(n)) {
					t.Errorf("%s: %d bytes, err %v; want %d exact bytes", res[i].URL, len(got), err, n)
				}
			}
		})
	}
}

func TestGetMissingFile(t *testing.T) {
	addr := startServer(t, ServerConfig{}, 10)
	for _, alpn := range []string{"h3", "hq-interop"} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		var stdout bytes.Buffer
		res, err := Get(ctx, []string{"https://" + addr + "/10", "https://" + addr + "/nope"},
			ClientConfig{ALPN: []string{alpn}, Insecure: true, Stdout: &stdout})
		cancel()
		if err == nil || res[1].Err == nil {
			t.Errorf("%s: a missing file was not reported", alpn)
		}
		if res[0].Err != nil || !bytes.Equal(stdout.Bytes(), content(10)) {
			t.Errorf("%s: the present file was not written to stdout: %v", alpn, res[0].Err)
		}
	}
}

func TestGetRejectsBadURL(t *testing.T) {
	_, err := Get(context.Background(), []string{"http://x/"}, ClientConfig{})
	if err == nil {
		t.Fatal("an http:// URL was accepted")
	}
}

func TestServerRejectsUnknownALPN(t *testing.T) {
	if _, err := Listen(ServerConfig{Addr: "127.0.0.1:0", Root: t.TempDir(), ALPN: []string{"spdy"}}); err == nil {
		t.Fatal("unknown ALPN accepted")
	}
}

func TestRetryAndQlog(t *testing.T) {
	qdir := t.TempDir()
	addr := startServer(t, ServerConfig{Retry: true, QlogDir: qdir}, 5000)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var keys bytes.Buffer
	if _, err := Get(ctx, []string{"https://" + addr + "/5000"}, ClientConfig{Insecure: true, Stdout: new(bytes.Buffer), KeyLog: &keys}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(keys.Bytes(), []byte("CLIENT_TRAFFIC_SECRET_0 ")) {
		t.Errorf("key log lacks the 1-RTT client secret:\n%s", keys.String())
	}
}
