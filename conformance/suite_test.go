package conformance

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
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

// smallFile and largeFile are the small and large resources every test
// server serves.
const (
	smallFile = "small.txt"
	largeFile = "large.bin"
)

func writeRoot(t *testing.T) string { return writeRootSize(t, 1<<20) }

// writeRootSize is writeRoot with a large resource of size bytes.
func writeRootSize(t *testing.T, size int) string {
	root := t.TempDir()
	b := make([]byte, 4096)
	for i := range b {
		b[i] = byte('a' + i%26)
	}
	if err := os.WriteFile(filepath.Join(root, smallFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
	large := make([]byte, size)
	for i := range large {
		large[i] = byte(i * 7)
	}
	if err := os.WriteFile(filepath.Join(root, largeFile), large, 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

// startQuiver runs Quiver's own server in process, serving hq-interop and
// h3 from a temporary folder, and returns its address.
func startQuiver(t *testing.T) string {
	s := newQuiverServer(t, "127.0.0.1:0")
	t.Cleanup(s.stop)
	return s.addr
}

// quiverServer is Quiver's server in process; stop and a new one on the
// same address stand in for a crash and a restart.
type quiverServer struct {
	addr   string
	ep     *quic.Endpoint
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newQuiverServer(t *testing.T, addr string) *quiverServer {
	return newQuiverServerConfig(t, addr, nil)
}

// newQuiverServerConfig is newQuiverServer with the engine configuration
// edited by edit: a Retry-always server, or one misbehaving through probe
// hooks so that scenarios can be seen to fail.
func newQuiverServerConfig(t *testing.T, addr string, edit func(*quic.Config)) *quiverServer {
	return newQuiverServerRoot(t, addr, writeRoot(t), edit)
}

// newQuiverServerRoot is newQuiverServerConfig serving the folder root.
func newQuiverServerRoot(t *testing.T, addr, root string, edit func(*quic.Config)) *quiverServer {
	cert, _, err := peers.SelfSigned()
	if err != nil {
		t.Fatal(err)
	}
	cfg := &quic.Config{TLSConfig: &tls.Config{
		Certificates: []tls.Certificate{cert}, NextProtos: []string{h3.ALPNHQInterop, h3.ALPNH3}},
		MaxDatagramFrameSize: quiverDatagramLimit, Allow0RTT: true}
	if edit != nil {
		edit(cfg)
	}
	ep, err := quic.Listen("udp", addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &quiverServer{addr: ep.Addr().String(), ep: ep, cancel: cancel}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ep.Accept(ctx)
			if err != nil {
				return
			}
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				s.wg.Add(1)
				go func() { defer s.wg.Done(); echoDatagrams(ctx, c) }()
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
	return s
}

// quiverDatagramLimit is the max_datagram_frame_size of the in-process
// Quiver server: small enough that one packet can exceed it
// (dgram-too-large).
const quiverDatagramLimit = 1000

// echoDatagrams returns every DATAGRAM payload to its sender (the profile's
// DATAGRAM echo, docs/conformance-model.md, Target profile).
func echoDatagrams(ctx context.Context, c *quic.Conn) {
	for {
		b, err := c.ReceiveDatagram(ctx)
		if err != nil {
			return
		}
		c.SendDatagram(b)
	}
}

func (s *quiverServer) stop() {
	s.cancel()
	s.ep.Close()
	s.wg.Wait()
}

func runSuite(t *testing.T, target Target, patterns []string, revive func(context.Context) error) *Report {
	t.Helper()
	start := time.Now()
	// Six scenarios at once, four against ngtcp2, whose h3 server starves
	// parallel downloads of the large resource beyond four.
	par := 6
	if target.Name == "ngtcp2" {
		par = 4
	}
	rep, err := Run(context.Background(), target, Options{Scenarios: patterns, Parallel: par, ArtifactsDir: t.TempDir(), Revive: revive})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s in %v\n%s", target.Name, time.Since(start).Round(time.Millisecond), verdictLines(rep))
	logJudgements(t, rep)
	saveReport(t, rep)
	return rep
}

// saveReport writes the report as JSON into QUIVER_REPORT_DIR, when set,
// named after the test: the input of docs/conformance-results.md.
func saveReport(t *testing.T, rep *Report) {
	dir := os.Getenv("QUIVER_REPORT_DIR")
	if dir == "" {
		return
	}
	f, err := os.Create(filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "_")+".json"))
	if err != nil {
		t.Errorf("report: %v", err)
		return
	}
	defer f.Close()
	// The encoding of conformance/report's WriteJSON.
	enc := json.NewEncoder(f)
	enc.SetIndent("", "  ")
	if err := enc.Encode(rep); err != nil {
		t.Errorf("report: %v", err)
	}
}

// logJudgements logs the full sentence of every check that is not a pass,
// and fails the test on tester errors.
func logJudgements(t *testing.T, rep *Report) {
	t.Helper()
	for _, r := range rep.Results {
		if r.Verdict != Pass {
			for _, c := range r.Checks {
				if c.Verdict == Fail || c.Verdict == Warn || c.Verdict == Inconclusive || c.Verdict == Errored {
					t.Logf("%s/%s: %s: %s", r.Scenario, c.Name, c.Verdict, c.Sentence)
				}
			}
		}
		if r.Verdict == Errored {
			t.Errorf("%s: tester error: %s %s", r.Scenario, r.Sentence, r.Error)
		}
	}
}

// verdictLines lists each scenario's verdict and sentence, one a line, for
// the test log (the table of conformance/report cannot be imported here:
// it imports this package).
func verdictLines(rep *Report) string {
	var b strings.Builder
	for _, r := range rep.Results {
		fmt.Fprintf(&b, "  %s %s: %s\n", r.Scenario, strings.ToUpper(string(r.Verdict)), r.Sentence)
	}
	fmt.Fprintf(&b, "%d scenarios: %v\n", len(rep.Results), rep.Counts())
	return b.String()
}

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
	rep := runSuite(t, Target{Name: "quiver", Address: addr, SmallPath: "/" + smallFile, LargePath: "/" + largeFile}, suitePatterns(), nil)
	_ = rep
}

// suitePatterns lets a developer narrow the suite: QUIVER_SCENARIOS=C,vn-*.
func suitePatterns() []string {
	if s := os.Getenv("QUIVER_SCENARIOS"); s != "" {
		return strings.Split(s, ",")
	}
	return nil
}

// startPeer starts another implementation's server through the peers
// manifest. It skips when the binary is missing, unless
// QUIVER_REQUIRE_PEERS=1. revive restarts the server on the same address,
// for Options.Revive.
func startPeer(t *testing.T, name, alpn, testCase string) (addr string, revive func(context.Context) error) {
	im, err := peers.Find(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := im.Binary("server"); err != nil {
		if os.Getenv("QUIVER_REQUIRE_PEERS") == "1" {
			t.Fatalf("%s server: %v", name, err)
		}
		t.Skipf("%s server not installed (%v); run %s", name, err, peers.InstallCommand)
	}
	dir := t.TempDir()
	certFile, keyFile, err := peers.WriteSelfSignedCert(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	o := peers.ServerOpts{CertFile: certFile, KeyFile: keyFile, Root: writeRoot(t), ALPN: alpn, TestCase: testCase}
	p, err := im.StartServer(ctx, o)
	if err != nil {
		cancel()
		t.Fatalf("start %s: %v", name, err)
	}
	var mu sync.Mutex
	t.Cleanup(func() {
		mu.Lock()
		p.Stop()
		mu.Unlock()
		cancel()
	})
	o.Addr = p.Addr
	revive = func(context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		p.Stop()
		np, err := im.StartServer(ctx, o)
		if err != nil {
			return err
		}
		t.Logf("%s restarted on %s after it stopped answering; its output before: %s", name, o.Addr, lastLine(p.Output()))
		p = np
		return nil
	}
	return p.Addr, revive
}

func TestSuitePeers(t *testing.T) {
	for _, tc := range []struct {
		name, alpn, testCase string
		check                func(t *testing.T, rep *Report)
	}{
		{"quic-go", "", "v2", func(t *testing.T, rep *Report) {
			if v, s := verdictOf(rep, "v2-handshake"); v != Pass {
				t.Errorf("quic-go speaks v2, but v2-handshake is %s: %s", v, s)
			}
		}},
		{"go-x-net", "hq-interop", "handshake", func(t *testing.T, rep *Report) {
			if v, s := verdictOf(rep, "v2-handshake"); v != Unsupported {
				t.Errorf("x/net is v1 only, but v2-handshake is %s: %s", v, s)
			}
		}},
		{"ngtcp2", "h3", "http3", func(t *testing.T, rep *Report) {
			if !slicesEqual(rep.Target.ALPN, []string{"h3"}) {
				t.Errorf("ngtcp2 serves h3 only, but discovery found %v", rep.Target.ALPN)
			}
			// ngtcp2 0.12.1 aborts on a TLS KeyUpdate message (an
			// assertion in ngtcp2_conn_install_rx_key); the runner must
			// name that scenario and restart the server, so the rest of
			// the suite still gets answers.
			if !hasFact(rep, "tls-keyupdate-message", "target.stopped-answering") {
				t.Errorf("tls-keyupdate-message does not record that ngtcp2 stopped answering")
			}
			// GnuTLS accepts early data on some resumed connections and
			// rejects it on others, which leaves the 0-RTT scenarios
			// inconclusive now and then; they say nothing about the crash.
			n := 0
			for _, r := range rep.Results {
				if r.Verdict == Inconclusive && !strings.Contains(r.Scenario, "0rtt") {
					n++
				}
			}
			if n > 8 {
				t.Errorf("%d scenarios inconclusive against ngtcp2 (0-RTT ones aside); the crash must not spread", n)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if testing.Short() {
				t.Skip("full suite against peers skipped in -short mode")
			}
			addr, revive := startPeer(t, tc.name, tc.alpn, tc.testCase)
			rep := runSuite(t, Target{Name: tc.name, Address: addr, SmallPath: "/" + smallFile, LargePath: "/" + largeFile}, suitePatterns(), revive)
			tc.check(t, rep)
		})
	}
}

func hasFact(rep *Report, id, key string) bool {
	for _, r := range rep.Results {
		if r.Scenario != id {
			continue
		}
		for _, f := range r.Facts {
			if f.Key == key {
				return true
			}
		}
	}
	return false
}

func slicesEqual(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
