package conformance

import (
	"context"
	"crypto/tls"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quiver-quic/quiver/h3"
	"github.com/quiver-quic/quiver/peers"
	"github.com/quiver-quic/quiver/quic"
)

// smallFile is the small resource every test server serves.
const smallFile = "small.txt"

func writeRoot(t *testing.T) string {
	root := t.TempDir()
	b := make([]byte, 4096)
	for i := range b {
		b[i] = byte('a' + i%26)
	}
	if err := os.WriteFile(filepath.Join(root, smallFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

// startQuiver runs Quiver's own server in process, serving hq-interop and
// h3 from a temporary folder, and returns its address.
func startQuiver(t *testing.T) string {
	cert, _, err := peers.SelfSigned()
	if err != nil {
		t.Fatal(err)
	}
	root := writeRoot(t)
	ep, err := quic.Listen("udp", "127.0.0.1:0", &quic.Config{TLSConfig: &tls.Config{
		Certificates: []tls.Certificate{cert}, NextProtos: []string{h3.ALPNHQInterop, h3.ALPNH3}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
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
			go func() {
				defer wg.Done()
				a := h3Adapter{c}
				if c.ALPN() == h3.ALPNH3 {
					srv := &h3.Server{Handler: h3.FileHandler(os.DirFS(root)), ShutdownGrace: 100 * time.Millisecond}
					srv.ServeConn(ctx, a)
				} else {
					h3.ServeHQ(ctx, a, os.DirFS(root))
				}
				c.Close(0, "")
			}()
		}
	}()
	t.Cleanup(func() {
		cancel()
		ep.Close()
		wg.Wait()
	})
	return ep.Addr().String()
}

func runSuite(t *testing.T, target Target, patterns []string) *Report {
	t.Helper()
	start := time.Now()
	rep, err := Run(context.Background(), target, Options{Scenarios: patterns, Parallel: 4, ArtifactsDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	var sb stringsBuilder
	WriteTable(&sb, rep)
	t.Logf("%s in %v\n%s", target.Name, time.Since(start).Round(time.Millisecond), sb.String())
	for _, r := range rep.Results {
		if r.Verdict == Errored {
			t.Errorf("%s: tester error: %s %s", r.Scenario, r.Sentence, r.Error)
		}
	}
	return rep
}

type stringsBuilder struct{ b []byte }

func (s *stringsBuilder) Write(p []byte) (int, error) { s.b = append(s.b, p...); return len(p), nil }
func (s *stringsBuilder) String() string              { return string(s.b) }

func verdictOf(rep *Report, id string) (Verdict, string) {
	for _, r := range rep.Results {
		if r.Scenario == id {
			return r.Verdict, r.Sentence
		}
	}
	return "", ""
}

func TestSuiteQuiver(t *testing.T) {
	addr := startQuiver(t)
	rep := runSuite(t, Target{Name: "quiver", Address: addr, SmallPath: "/" + smallFile}, suitePatterns())
	_ = rep
}

// suitePatterns lets a developer narrow the suite: QUIVER_SCENARIOS=C,vn-*.
func suitePatterns() []string {
	if s := os.Getenv("QUIVER_SCENARIOS"); s != "" {
		return strings.Split(s, ",")
	}
	return nil
}
