package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"regexp"
	"testing"

	"github.com/quiver-quic/quiver/certs"
	"github.com/quiver-quic/quiver/h3"
	"github.com/quiver-quic/quiver/quic"
)

// Issue 19: `quiver get --alpn h3 https://…/index.html` against `quiver
// serve` failed with "HTTP status 301" (the file server redirects
// /index.html to ./); it follows the redirect now.
func TestGetIndexHTMLOverH3(t *testing.T) {
	addr := startServe(t)
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"get", "--insecure", "--alpn", "h3", "https://" + addr + "/index.html"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if out.String() != "hello\n" {
		t.Errorf("got %q", out.String())
	}
}

// A server that takes the request and sends nothing: get says so on
// stderr after --stall, long before the idle timeout.
func TestGetStallNotice(t *testing.T) {
	cert, _, err := certs.SelfSigned()
	if err != nil {
		t.Fatal(err)
	}
	tlsConf := &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{h3.ALPNHQInterop}}
	ep, err := quic.Listen("udp", "127.0.0.1:0", &quic.Config{TLSConfig: tlsConf})
	if err != nil {
		t.Fatal(err)
	}
	defer ep.Close()
	sctx, stop := context.WithCancel(context.Background())
	defer stop()
	served := make(chan struct{})
	go func() {
		defer close(served)
		c, err := ep.Accept(sctx)
		if err != nil {
			return
		}
		c.AcceptStream(sctx) // the request, never answered
		<-sctx.Done()
		c.Close(0, "")
	}()
	ctx, cancel := context.WithCancel(context.Background())
	stderr := &lineWriter{re: regexp.MustCompile(`(/silent: no data for \S+ \(0 bytes so far\))`), got: make(chan string, 1)}
	done := make(chan int, 1)
	go func() {
		args := []string{"get", "--insecure", "--alpn", "hq-interop", "--stall", "20ms", "https://" + ep.Addr().String() + "/silent"}
		done <- run(ctx, args, new(bytes.Buffer), stderr)
	}()
	select {
	case <-stderr.got:
	case code := <-done:
		t.Fatalf("get exited %d without a stall notice: %s", code, stderr.buf.String())
	}
	cancel()
	if code := <-done; code == 0 {
		t.Error("an interrupted get exited 0")
	}
	stop()
	<-served
}

func TestGetBadStall(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"get", "--stall", "-1s", "https://127.0.0.1:1/"}, &out, &errb); code != 2 {
		t.Errorf("--stall -1s: exit %d", code)
	}
}
