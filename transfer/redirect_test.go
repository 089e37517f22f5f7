package transfer

import (
	"context"
	"crypto/tls"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quiver-quic/quiver/certs"
	"github.com/quiver-quic/quiver/h3"
	"github.com/quiver-quic/quiver/quic"
)

// startH3 serves handler over HTTP/3 on a loopback port until the test
// ends.
func startH3(t *testing.T, handler http.Handler) string {
	t.Helper()
	cert, _, err := certs.SelfSigned()
	if err != nil {
		t.Fatal(err)
	}
	ep, err := quic.Listen("udp", "127.0.0.1:0", &quic.Config{TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{h3.ALPNH3}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	srv := &h3.Server{Handler: handler}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ep.Accept(ctx)
			if err != nil {
				return
			}
			wg.Add(1)
			go func() { defer wg.Done(); srv.ServeConn(ctx, h3.FromQUIC(c)) }()
		}
	}()
	t.Cleanup(func() { cancel(); ep.Close(); wg.Wait() })
	return ep.Addr().String()
}

// The file server answers /index.html with a redirect to ./ (as
// net/http's does); a download follows it (issue 19).
func TestGetFollowsFileServerRedirect(t *testing.T) {
	root := t.TempDir()
	os.WriteFile(filepath.Join(root, "index.html"), []byte("<p>hello</p>\n"), 0o644)
	s, err := Listen(ServerConfig{Addr: "127.0.0.1:0", Root: root})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	defer func() { cancel(); <-done }()
	out := t.TempDir()
	cfg := ClientConfig{ALPN: []string{"h3"}, Insecure: true, OutDir: out}
	res, err := Get(context.Background(), []string{"https://" + s.Addr().String() + "/index.html"}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(res[0].File); string(b) != "<p>hello</p>\n" || filepath.Base(res[0].File) != "index.html" {
		t.Errorf("got %q in %s", b, res[0].File)
	}
}

func TestGetRedirects(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/file", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("the file")) })
	mux.HandleFunc("/hop/{n}", func(w http.ResponseWriter, r *http.Request) {
		n := r.PathValue("n")
		if n == "0" {
			http.Redirect(w, r, "/file", http.StatusFound)
			return
		}
		http.Redirect(w, r, "/hop/"+string(rune(n[0]-1)), http.StatusTemporaryRedirect)
	})
	mux.HandleFunc("/away", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "https://example.com/file", http.StatusMovedPermanently)
	})
	mux.HandleFunc("/noloc", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusSeeOther) })
	addr := startH3(t, mux)
	get := func(path string) (string, error) {
		var out strings.Builder
		_, err := Get(context.Background(), []string{"https://" + addr + path}, ClientConfig{Insecure: true, Stdout: &out})
		return out.String(), err
	}
	// /hop/4 → 3 → 2 → 1 → 0 → /file: five redirects.
	if body, err := get("/hop/4"); err != nil || body != "the file" {
		t.Errorf("five redirects: %q, %v", body, err)
	}
	for path, want := range map[string]string{
		"/hop/5": "more than 5 redirects",
		"/away":  "another origin (https://example.com/file), not followed",
		"/noloc": "redirect without a Location",
	} {
		if _, err := get(path); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", path, err, want)
		}
	}
}

func TestRedirectTarget(t *testing.T) {
	from, _ := url.Parse("https://example.com:443/a/b.html")
	for loc, want := range map[string]string{
		"c.html":                      "https://example.com:443/a/c.html",
		"/x":                          "https://example.com:443/x",
		"https://example.com/y#frag":  "https://example.com/y",
		"//example.com:443/z":         "https://example.com:443/z",
		"https://example.com:8443/":   "",
		"http://example.com/":         "",
		"https://other.example.com/":  "",
		"https://[::1]:443/":          "",
		"https://example.com:443/%zz": "",
		"":                            "",
	} {
		got, err := redirectTarget(from, loc)
		if want == "" {
			if err == nil {
				t.Errorf("%q: followed to %s", loc, got)
			}
			continue
		}
		if err != nil || got.String() != want {
			t.Errorf("%q: %v, %v; want %s", loc, got, err, want)
		}
	}
}

// The watch tells after every quiet period, and starts over when bytes
// arrive (synctest: the clock moves only when everything waits).
func TestStallWatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		type notice struct {
			n    int64
			idle time.Duration
		}
		var got []notice
		sw := newStallWatch("u", 5*time.Second, func(url string, n int64, idle time.Duration) { got = append(got, notice{n, idle}) })
		time.Sleep(4 * time.Second)
		synctest.Wait()
		if len(got) != 0 {
			t.Fatalf("notice after 4s: %v", got)
		}
		sw.progress(100)
		time.Sleep(4 * time.Second) // 8s since the start, 4s since bytes
		synctest.Wait()
		if len(got) != 0 {
			t.Fatalf("notice 4s after progress: %v", got)
		}
		time.Sleep(7 * time.Second) // 11s since bytes
		synctest.Wait()
		if len(got) != 2 || got[0] != (notice{100, 5 * time.Second}) || got[1] != (notice{100, 10 * time.Second}) {
			t.Fatalf("notices %v, want 5s and 10s with 100 bytes", got)
		}
		sw.stop()
		time.Sleep(time.Minute)
		if len(got) != 2 {
			t.Errorf("notice after stop: %v", got)
		}
	})
}

// A server that keeps the request open without sending anything: Get
// tells, then the caller gives up.
func TestGetTellsOfStall(t *testing.T) {
	release := make(chan struct{})
	addr := startH3(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("first bytes"))
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer close(release)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stalled := make(chan int64, 16)
	done := make(chan error, 1)
	go func() {
		_, err := Get(ctx, []string{"https://" + addr + "/slow"}, ClientConfig{Insecure: true, Stdout: new(strings.Builder),
			StallAfter: 20 * time.Millisecond, OnStall: func(url string, n int64, idle time.Duration) {
				select {
				case stalled <- n:
				default:
				}
			}})
		done <- err
	}()
	// A notice may come before the first bytes arrive (n = 0); the one
	// that matters comes after them.
	for n := int64(-1); n != int64(len("first bytes")); {
		select {
		case n = <-stalled:
		case err := <-done:
			t.Fatalf("Get returned before a stall notice after the first bytes: %v", err)
		}
	}
	cancel()
	if err := <-done; err == nil {
		t.Error("a cancelled stalled download succeeded")
	}
}
