package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// lineWriter collects output and hands the first line matching re to a
// channel, so a test can wait for a server to say where it listens.
type lineWriter struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	re   *regexp.Regexp
	once sync.Once
	got  chan string
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if m := w.re.FindStringSubmatch(w.buf.String()); m != nil {
		w.once.Do(func() { w.got <- m[1] })
	}
	return len(p), nil
}

// TestServeAndGet runs `quiver serve` and `quiver get` against each other
// in-process, over both application protocols.
func TestServeAndGet(t *testing.T) {
	root := t.TempDir()
	body := bytes.Repeat([]byte("quiver "), 200000)
	if err := os.WriteFile(filepath.Join(root, "big.txt"), body, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stderr := &lineWriter{re: regexp.MustCompile(`on (127\.0\.0\.1:\d+)`), got: make(chan string, 1)}
	done := make(chan int, 1)
	keys := filepath.Join(t.TempDir(), "keys.log")
	go func() {
		done <- run(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--root", root, "--keylog", keys}, new(bytes.Buffer), stderr)
	}()
	var addr string
	select {
	case addr = <-stderr.got:
	case code := <-done:
		t.Fatalf("serve exited with %d: %s", code, stderr.buf.String())
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not report its address")
	}
	for _, alpn := range []string{"h3", "hq-interop"} {
		out := t.TempDir()
		var so, se bytes.Buffer
		if code := run(context.Background(), []string{"get", "--insecure", "--alpn", alpn, "--out", out, "https://" + addr + "/big.txt"}, &so, &se); code != 0 {
			t.Fatalf("get %s exited %d: %s", alpn, code, se.String())
		}
		got, _ := os.ReadFile(filepath.Join(out, "big.txt"))
		if !bytes.Equal(got, body) {
			t.Errorf("%s: downloaded %d bytes, want %d exact", alpn, len(got), len(body))
		}
		var stdout bytes.Buffer
		if code := run(context.Background(), []string{"get", "--insecure", "--alpn", alpn, "https://" + addr + "/big.txt"}, &stdout, &se); code != 0 || !bytes.Equal(stdout.Bytes(), body) {
			t.Errorf("%s to stdout: exit %d, %d bytes", alpn, code, stdout.Len())
		}
		if code := run(context.Background(), []string{"get", "--insecure", "--alpn", alpn, "https://" + addr + "/missing"}, &stdout, &se); code != 1 {
			t.Errorf("%s: a missing file exited %d, want 1", alpn, code)
		}
	}
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("serve exited %d: %s", code, stderr.buf.String())
	}
	if k, _ := os.ReadFile(keys); !strings.Contains(string(k), "SERVER_TRAFFIC_SECRET_0") {
		t.Errorf("server key log lacks the 1-RTT secret")
	}
}

func TestServeBadFlags(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"serve", "--cert", "x.pem"}, &out, &errb); code != 2 {
		t.Errorf("--cert without --key: exit %d", code)
	}
	if code := run(context.Background(), []string{"serve", "--root", "/nonexistent/dir"}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "nonexistent") {
		t.Errorf("missing root: exit %d, %s", code, errb.String())
	}
	for _, cmd := range []string{"serve", "get"} {
		errb.Reset()
		args := []string{cmd, "--cipher", "aes128,rc4"}
		if cmd == "get" {
			args = append(args, "https://127.0.0.1:1/")
		}
		if code := run(context.Background(), args, &out, &errb); code != 2 || !strings.Contains(errb.String(), `unknown cipher "rc4"`) {
			t.Errorf("%s --cipher rc4: exit %d, %s", cmd, code, errb.String())
		}
	}
}

func TestParsePreferredAddress(t *testing.T) {
	pa, err := parsePreferredAddress("127.0.0.2:4434, [::1]:4435")
	if err != nil || pa.IPv4.String() != "127.0.0.2:4434" || pa.IPv6.String() != "[::1]:4435" {
		t.Errorf("got %+v, %v", pa, err)
	}
	for _, bad := range []string{"", "localhost:4434", "127.0.0.2", "127.0.0.2:1,127.0.0.3:2"} {
		if _, err := parsePreferredAddress(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
