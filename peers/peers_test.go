package peers

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/quiver-quic/quiver/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// needPeer returns the implementation called name after checking that its
// binary for role is installed. A missing peer skips the test, or fails it
// when QUIVER_REQUIRE_PEERS=1 (as CI sets).
func needPeer(t *testing.T, name, role string) Impl {
	t.Helper()
	im, err := Find(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := im.Binary(role); err != nil {
		if os.Getenv("QUIVER_REQUIRE_PEERS") == "1" {
			t.Fatalf("%v (QUIVER_REQUIRE_PEERS=1)", err)
		}
		t.Skipf("%v; run %s", err, InstallCommand)
	}
	return im
}

// testCaseFor is the runner's test case for a plain download with alpn:
// the contract serves HTTP/3 only in its http3 test case.
func testCaseFor(alpn string) string {
	if alpn == ALPNH3 {
		return "http3"
	}
	return ""
}

// randomFile writes n random bytes to dir/name and returns them.
func randomFile(t *testing.T, dir, name string, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	rand.Read(b)
	if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return b
}

type pairCase struct {
	server, client string
	alpn           string
	retry          bool
	big            int // size of the big file; default 1 MiB
}

// TestPairs proves that the peers interoperate with each other: each
// client downloads generated random files from each server byte for byte.
func TestPairs(t *testing.T) {
	pairs := []pairCase{
		{server: "quic-go", client: "quic-go", alpn: ALPNHQ},
		{server: "quic-go", client: "quic-go", alpn: ALPNH3},
		{server: "quic-go", client: "quic-go", alpn: ALPNHQ, retry: true},
		{server: "go-x-net", client: "quic-go", alpn: ALPNHQ},
		{server: "quic-go", client: "go-x-net", alpn: ALPNHQ},
		{server: "go-x-net", client: "go-x-net", alpn: ALPNHQ, retry: true},
		{server: "ngtcp2", client: "quic-go", alpn: ALPNH3},
		{server: "ngtcp2", client: "quic-go", alpn: ALPNH3, retry: true},
		{server: "quic-go", client: "ngtcp2", alpn: ALPNH3},
		// Quiver's own `quiver serve` and `quiver get` as processes.
		{server: "quiver", client: "quiver", alpn: ALPNHQ, retry: true},
		{server: "quiver", client: "quiver", alpn: ALPNH3},
		{server: "quiver", client: "quic-go", alpn: ALPNHQ},
		{server: "quiver", client: "quic-go", alpn: ALPNH3},
		{server: "quiver", client: "go-x-net", alpn: ALPNHQ},
		{server: "quiver", client: "ngtcp2", alpn: ALPNH3},
		{server: "quic-go", client: "quiver", alpn: ALPNHQ},
		{server: "quic-go", client: "quiver", alpn: ALPNH3, retry: true},
		{server: "go-x-net", client: "quiver", alpn: ALPNHQ},
		{server: "ngtcp2", client: "quiver", alpn: ALPNH3},
		// 100 MB byte-exact between Quiver and quic-go, both ways.
		{server: "quiver", client: "quic-go", alpn: ALPNHQ, big: 100 << 20},
		{server: "quic-go", client: "quiver", alpn: ALPNH3, big: 100 << 20},
	}
	for _, pc := range pairs {
		name := fmt.Sprintf("%s<-%s/%s", pc.server, pc.client, pc.alpn)
		if pc.retry {
			name += "/retry"
		}
		if pc.big > 0 {
			name += fmt.Sprintf("/%dMB", pc.big>>20)
		}
		t.Run(name, func(t *testing.T) { testPair(t, pc) })
	}
}

func testPair(t *testing.T, pc pairCase) {
	server := needPeer(t, pc.server, "server")
	client := needPeer(t, pc.client, "client")
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()

	dir := t.TempDir()
	www, out, logs := filepath.Join(dir, "www"), filepath.Join(dir, "out"), filepath.Join(dir, "logs")
	for _, d := range []string{www, out, logs} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	certFile, keyFile, err := WriteSelfSignedCert(filepath.Join(dir, "certs"))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{
		"big":   randomFile(t, www, "big", cmp.Or(pc.big, 1<<20)),
		"small": randomFile(t, www, "small", 10<<10),
	}

	srv, err := server.StartServer(ctx, ServerOpts{
		CertFile: certFile, KeyFile: keyFile, Root: www, ALPN: pc.alpn, Retry: pc.retry,
		KeylogFile: filepath.Join(logs, "server.keys"), LogDir: logs, TestCase: testCaseFor(pc.alpn),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := srv.Stop(); err != nil {
			t.Errorf("server: %v\n%s", err, srv.Output())
		}
	}()

	var urls []string
	for _, name := range []string{"big", "small"} {
		urls = append(urls, "https://"+srv.Addr+"/"+name)
	}
	res, err := client.RunClient(ctx, ClientOpts{
		URLs: urls, OutDir: out, ALPN: pc.alpn, CAFile: certFile, TestCase: testCaseFor(pc.alpn),
		KeylogFile: filepath.Join(logs, "client.keys"), LogDir: logs,
	})
	if err != nil {
		t.Fatalf("client: %v\nserver output:\n%s", err, srv.Output())
	}
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: got %d bytes, want the %d bytes served", name, len(got), len(want))
		}
	}
	// Both ends wrote usable key logs; the interop checks depend on them.
	for _, f := range []string{"server.keys", "client.keys"} {
		b, err := os.ReadFile(filepath.Join(logs, f))
		if err != nil || !bytes.Contains(b, []byte("SERVER_HANDSHAKE_TRAFFIC_SECRET")) {
			t.Errorf("%s: no SERVER_HANDSHAKE_TRAFFIC_SECRET (err %v)", f, err)
		}
	}
	t.Logf("%s <- %s (%s): %d + %d bytes in %v", pc.server, pc.client, pc.alpn, len(files["big"]), len(files["small"]), res.Duration.Round(time.Millisecond))
}

// TestClientFailureDetected makes sure a failed download is reported even
// by clients whose exit status says nothing (gtlsclient).
func TestClientFailureDetected(t *testing.T) {
	for _, name := range []string{"quic-go", "ngtcp2", "go-x-net"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			client := needPeer(t, name, "client")
			// Nothing listens on this port; the client must give up or be
			// stopped by the context, and RunClient must say so.
			port, err := FreeUDPPort("127.0.0.1")
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
			defer cancel()
			out := t.TempDir()
			alpn := client.ALPNs[0]
			_, err = client.RunClient(ctx, ClientOpts{
				URLs: []string{fmt.Sprintf("https://127.0.0.1:%d/nothing", port)}, OutDir: out, ALPN: alpn,
			})
			if err == nil {
				t.Fatal("RunClient against a closed port succeeded")
			}
		})
	}
}

// TestUnsupportedExit127 checks the contract's exit status for an unknown
// test case, straight from the binaries.
func TestUnsupportedExit127(t *testing.T) {
	for _, name := range []string{"quic-go", "go-x-net"} {
		for _, role := range []string{"server", "client"} {
			t.Run(name+"/"+role, func(t *testing.T) {
				im := needPeer(t, name, role)
				bin, _ := im.Binary(role)
				ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
				defer cancel()
				cmd := exec.CommandContext(ctx, bin)
				if role == "server" {
					cmd.Args = append(cmd.Args, "-listen", "127.0.0.1:0")
				} else {
					cmd.Args = append(cmd.Args, "-output", t.TempDir(), "https://127.0.0.1:1/x")
				}
				cmd.Env = append(os.Environ(), "ROLE="+role, "TESTCASE=no-such-test-case")
				err := cmd.Run()
				var ee *exec.ExitError
				if !errors.As(err, &ee) || ee.ExitCode() != 127 {
					t.Fatalf("exit: %v, want status 127", err)
				}
			})
		}
	}
}

func TestUnsupportedRefusedBeforeStart(t *testing.T) {
	ng, _ := Find("ngtcp2")
	_, err := ng.StartServer(t.Context(), ServerOpts{ALPN: ALPNHQ})
	if !errors.Is(err, ErrUnsupported) {
		t.Errorf("ngtcp2 server with hq-interop: %v, want ErrUnsupported", err)
	}
	xn, _ := Find("x/net")
	_, err = xn.RunClient(t.Context(), ClientOpts{URLs: []string{"https://127.0.0.1:1/x"}, OutDir: t.TempDir(), TestCase: "zerortt"})
	if !errors.Is(err, ErrUnsupported) {
		t.Errorf("x/net client with zerortt: %v, want ErrUnsupported", err)
	}
}

func TestFind(t *testing.T) {
	for _, name := range []string{"quiver", "quic-go", "QUICGO", "go-x-net", "x/net", "ngtcp2"} {
		if _, err := Find(name); err != nil {
			t.Errorf("Find(%q): %v", name, err)
		}
	}
	if _, err := Find("msquic"); err == nil {
		t.Error("Find(msquic) succeeded")
	}
	for _, im := range All() {
		if im.Server == nil || im.Client == nil || len(im.ALPNs) == 0 {
			t.Errorf("%s: incomplete manifest entry", im.Name)
		}
	}
}

// TestCommandBuild checks the argument templates against the facts the
// peers are picky about.
func TestCommandBuild(t *testing.T) {
	ng, _ := Find("ngtcp2")
	args, env := ng.Server.build(&vars{
		m:     map[string]string{"HOST": "127.0.0.1", "PORT": "4440", "KEY": "k.pem", "CERT": "c.pem", "ROOT": "/www", "KEYLOG": "/l/keys"},
		conds: map[string]bool{"retry": true},
	})
	want := []string{"-q", "-d", "/www", "--max-dyn-length=200M", "-V", "127.0.0.1", "4440", "k.pem", "c.pem"}
	if !slices.Equal(args, want) {
		t.Errorf("gtlsserver args = %q, want %q (key before certificate)", args, want)
	}
	if !slices.Contains(env, "SSLKEYLOGFILE=/l/keys") {
		t.Errorf("gtlsserver env lacks SSLKEYLOGFILE")
	}

	t.Setenv("SSLKEYLOGFILE", "/developer/own.keys")
	xn, _ := Find("go-x-net")
	args, env = xn.Server.build(&vars{
		m:     map[string]string{"ADDR": "127.0.0.1:1", "TESTCASE": "handshake"},
		conds: map[string]bool{"retry": true},
		extra: []string{"-x"},
	})
	if !slices.Contains(env, "TESTCASE=retry") || slices.Contains(env, "TESTCASE=handshake") {
		t.Errorf("x/net server with Retry: env %q lacks TESTCASE=retry", env)
	}
	if slices.ContainsFunc(env, func(s string) bool { return strings.HasPrefix(s, "SSLKEYLOGFILE=") }) {
		t.Errorf("the parent's SSLKEYLOGFILE leaked into the peer's environment")
	}
	if args[len(args)-1] != "-x" {
		t.Errorf("extra arguments missing: %q", args)
	}

	qg, _ := Find("quic-go")
	args, _ = qg.Client.build(&vars{
		m:     map[string]string{"OUT": "/out", "ALPN": "h3"},
		urls:  []string{"https://a/1", "https://a/2"},
		conds: map[string]bool{"alpn": true},
	})
	want = []string{"-output", "/out", "-alpn", "h3", "https://a/1", "https://a/2"}
	if !slices.Equal(args, want) {
		t.Errorf("quic-go client args = %q, want %q", args, want)
	}
}

func TestSelfSigned(t *testing.T) {
	cert, pool, err := SelfSigned()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"localhost", "127.0.0.1", "::1", "server4"} {
		if _, err := cert.Leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: pool}); err != nil {
			t.Errorf("verify for %s: %v", name, err)
		}
	}
	dir := t.TempDir()
	certFile, keyFile, err := WriteSelfSignedCert(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tls.LoadX509KeyPair(certFile, keyFile); err != nil {
		t.Fatal(err)
	}
}

func TestUDPBoundBy(t *testing.T) {
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := c.LocalAddr().(*net.UDPAddr).Port
	if !udpBoundBy(os.Getpid(), port) {
		t.Errorf("port %d bound by this process not seen", port)
	}
	if udpBoundBy(os.Getppid(), port) {
		t.Errorf("port %d seen as bound by the parent process", port)
	}
	c.Close()
	if udpBoundBy(os.Getpid(), port) {
		t.Errorf("port %d still seen after close", port)
	}
}

func TestBinDir(t *testing.T) {
	t.Setenv("QUIVER_BIN", "")
	dir, err := BinDir()
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(dir) != "bin" || moduleName(filepath.Join(filepath.Dir(dir), "go.mod")) != mainModule {
		t.Errorf("BinDir = %s, want bin/ beside Quiver's go.mod", dir)
	}
}

// TestQuicGoTestCases runs quic-go against itself for the interop test
// cases whose behaviour lives in the adapter (connections per request,
// resumption, 0-RTT, Retry, version, ALPN), through the TESTCASE contract.
func TestQuicGoTestCases(t *testing.T) {
	for _, tc := range []string{"handshake", "transfer", "retry", "resumption", "zerortt", "multiconnect", "http3", "v2", "keyupdate"} {
		t.Run(tc, func(t *testing.T) {
			server := needPeer(t, "quic-go", "server")
			client := needPeer(t, "quic-go", "client")
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			dir := t.TempDir()
			www, out := filepath.Join(dir, "www"), filepath.Join(dir, "out")
			if err := os.MkdirAll(www, 0o755); err != nil {
				t.Fatal(err)
			}
			certFile, keyFile, err := WriteSelfSignedCert(dir)
			if err != nil {
				t.Fatal(err)
			}
			srv, err := server.StartServer(ctx, ServerOpts{CertFile: certFile, KeyFile: keyFile, Root: www, TestCase: tc})
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Stop()
			want := map[string][]byte{}
			var urls []string
			for i := range 4 {
				name := fmt.Sprintf("f%d", i)
				want[name] = randomFile(t, www, name, 32<<10)
				urls = append(urls, "https://"+srv.Addr+"/"+name)
			}
			res, err := client.RunClient(ctx, ClientOpts{URLs: urls, OutDir: out, TestCase: tc, CAFile: certFile})
			if err != nil {
				t.Fatalf("client: %v\nserver:\n%s", err, srv.Output())
			}
			// The adapter says so when a server turns 0-RTT down.
			if strings.Contains(res.Output, "did not accept 0-RTT") {
				t.Errorf("0-RTT was not used: %s", res.Output)
			}
			for name, b := range want {
				got, err := os.ReadFile(filepath.Join(out, name))
				if err != nil || !bytes.Equal(got, b) {
					t.Errorf("%s: %d bytes (err %v), want %d served", name, len(got), err, len(b))
				}
			}
		})
	}
}

// TestServerFailureDetected: a server that cannot start is an error with
// its output, not a wait for a port that never comes.
func TestServerFailureDetected(t *testing.T) {
	server := needPeer(t, "quic-go", "server")
	dir := t.TempDir()
	_, err := server.StartServer(t.Context(), ServerOpts{
		CertFile: filepath.Join(dir, "missing.pem"), KeyFile: filepath.Join(dir, "missing.key"), Root: dir, LogDir: dir,
	})
	if err == nil || !strings.Contains(err.Error(), "missing.pem") {
		t.Fatalf("StartServer with a missing certificate: %v, want an error naming it", err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "quic-go-server.log"))
	if !strings.Contains(string(b), "load certificate") {
		t.Errorf("server log does not hold the server's error:\n%s", b)
	}
}
