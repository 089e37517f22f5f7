package rpc

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/quiver-quic/quiver/peers"
)

// The RPC contract: every transport passes the same tests.

type echoReq struct {
	Msg  string `json:"msg"`
	Data []byte `json:"data,omitempty"`
	N    int    `json:"n,omitempty"`
}

type echoResp struct {
	Msg  string `json:"msg"`
	Data []byte `json:"data,omitempty"`
	I    int    `json:"i,omitempty"`
}

// testService records what its handlers saw, for the tests to check.
type testService struct {
	started  chan struct{}      // Wait handler began
	ended    chan error         // Wait handler's ctx error
	deadline chan time.Duration // Wait handler's remaining time at start
}

func newTestServer(t testing.TB) (*Server, *testService) {
	srv := NewServer()
	svc := &testService{started: make(chan struct{}, 16), ended: make(chan error, 16), deadline: make(chan time.Duration, 16)}
	Register(srv, "Echo.Echo", func(ctx context.Context, r *echoReq) (*echoResp, error) {
		return &echoResp{Msg: r.Msg, Data: r.Data}, nil
	})
	Register(srv, "Echo.Meta", func(ctx context.Context, r *echoReq) (*echoResp, error) {
		return &echoResp{Msg: MetadataFrom(ctx).Get(r.Msg)}, nil
	})
	Register(srv, "Echo.Fail", func(ctx context.Context, r *echoReq) (*echoResp, error) {
		if r.Msg == "plain" {
			return nil, errors.New("plain error")
		}
		return nil, Errorf(NotFound, "no %s here", r.Msg)
	})
	Register(srv, "Echo.Wait", func(ctx context.Context, r *echoReq) (*echoResp, error) {
		if d, ok := ctx.Deadline(); ok {
			svc.deadline <- time.Until(d)
		} else {
			svc.deadline <- 0
		}
		svc.started <- struct{}{}
		<-ctx.Done()
		svc.ended <- ctx.Err()
		return nil, ctx.Err()
	})
	// Echo.Sum reads messages until the client's end and answers with
	// their count and concatenation.
	RegisterClientStream(srv, "Echo.Sum", func(ctx context.Context, recv func() (*echoReq, error)) (*echoResp, error) {
		var out echoResp
		for {
			r, err := recv()
			if err == io.EOF {
				return &out, nil
			}
			if err != nil {
				return nil, err
			}
			out.I++
			out.Msg += r.Msg
		}
	})
	// Echo.Chat answers every message at once, numbered; "fail" ends
	// the call with Aborted, and "wait" waits for cancellation.
	RegisterBidiStream(srv, "Echo.Chat", func(ctx context.Context, recv func() (*echoReq, error), send func(*echoResp) error) error {
		for i := 0; ; i++ {
			r, err := recv()
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
			switch r.Msg {
			case "fail":
				return Errorf(Aborted, "failed after %d", i)
			case "wait":
				svc.started <- struct{}{}
				<-ctx.Done()
				svc.ended <- ctx.Err()
				return ctx.Err()
			}
			if err := send(&echoResp{Msg: r.Msg, I: i, Data: r.Data}); err != nil {
				return err
			}
		}
	})
	RegisterStream(srv, "Echo.Count", func(ctx context.Context, r *echoReq, send func(*echoResp) error) error {
		for i := range r.N {
			if err := send(&echoResp{Msg: r.Msg, I: i}); err != nil {
				return err
			}
		}
		if r.Msg == "fail" {
			return Errorf(Aborted, "stopped after %d", r.N)
		}
		return nil
	})
	return srv, svc
}

// kit is how the contract tests reach one transport.
type kit struct {
	name string
	// maxMessage is the largest message the transport carries (UDP's is
	// bounded); zero means DefaultMaxMessageSize.
	maxMessage int
	// listen starts a listener on addr ("" for a fresh one).
	listen func(t testing.TB, addr string) Listener
	dial   func(addr net.Addr) Transport
}

var (
	certOnce   sync.Once
	testCert   tls.Certificate
	testPool   *x509.CertPool
	testCertEr error
)

func serverTLS(t testing.TB) *tls.Config {
	certOnce.Do(func() { testCert, testPool, testCertEr = peers.SelfSigned() })
	if testCertEr != nil {
		t.Fatal(testCertEr)
	}
	return &tls.Config{Certificates: []tls.Certificate{testCert}}
}

func clientTLS(t testing.TB) *tls.Config {
	serverTLS(t)
	return &tls.Config{RootCAs: testPool, ServerName: "localhost"}
}

func addrOr(addr, def string) string {
	if addr == "" {
		return def
	}
	return addr
}

func kits(t testing.TB) []kit {
	dir := t.TempDir()
	return []kit{
		{name: "tcp",
			listen: func(t testing.TB, addr string) Listener {
				l, err := ListenTCP(addrOr(addr, "127.0.0.1:0"), serverTLS(t))
				if err != nil {
					t.Fatal(err)
				}
				return l
			},
			dial: func(a net.Addr) Transport { return DialTCP(a.String(), clientTLS(t)) }},
		{name: "unix",
			listen: func(t testing.TB, addr string) Listener {
				l, err := ListenUnix(addrOr(addr, filepath.Join(dir, fmt.Sprintf("s%d", time.Now().UnixNano()))))
				if err != nil {
					t.Fatal(err)
				}
				return l
			},
			dial: func(a net.Addr) Transport { return DialUnix(a.String()) }},
		{name: "http1", listen: listenHTTP, dial: func(a net.Addr) Transport { return DialHTTP1(a.String(), clientTLS(t)) }},
		{name: "http2", listen: listenHTTP, dial: func(a net.Addr) Transport { return DialHTTP2(a.String(), clientTLS(t)) }},
		{name: "quic", listen: listenQUIC, dial: func(a net.Addr) Transport { return DialQUIC(a.String(), clientTLS(t)) }},
		{name: "udp", maxMessage: UDPMaxMessage, listen: func(t testing.TB, addr string) Listener {
			l, err := ListenUDP(addrOr(addr, "127.0.0.1:0"), serverTLS(t))
			if err != nil {
				t.Fatal(err)
			}
			return l
		}, dial: func(a net.Addr) Transport { return DialUDP(a.String(), clientTLS(t)) }},
		{name: "http3", listen: listenQUIC, dial: func(a net.Addr) Transport { return DialHTTP3(a.String(), clientTLS(t)) }},
	}
}

func listenHTTP(t testing.TB, addr string) Listener {
	l, err := ListenHTTP(addrOr(addr, "127.0.0.1:0"), serverTLS(t))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func listenQUIC(t testing.TB, addr string) Listener {
	l, err := ListenQUIC(addrOr(addr, "127.0.0.1:0"), serverTLS(t))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// env is a running server and a client of it over one transport.
type env struct {
	t      *testing.T
	k      kit
	srv    *Server
	svc    *testService
	l      Listener
	client *Client
	served chan error
}

func startEnv(t *testing.T, k kit, opts ...ClientOption) *env {
	return startEnvServer(t, k, nil, opts...)
}

// startEnvServer is startEnv with conf applied to the server before it
// serves (its fields must not change while it serves).
func startEnvServer(t *testing.T, k kit, conf func(*Server), opts ...ClientOption) *env {
	e := &env{t: t, k: k}
	e.srv, e.svc = newTestServer(t)
	if conf != nil {
		conf(e.srv)
	}
	e.start("")
	e.client = NewClient(k.dial(e.l.Addr()), opts...)
	t.Cleanup(func() {
		e.client.Close()
		e.stop()
	})
	return e
}

func (e *env) start(addr string) {
	e.l = e.k.listen(e.t, addr)
	e.served = make(chan error, 1)
	srv, l := e.srv, e.l
	go func() { e.served <- srv.Serve(l) }()
}

func (e *env) stop() {
	if e.l == nil {
		return
	}
	e.l.Close()
	if err := <-e.served; err != nil {
		e.t.Errorf("Serve: %v", err)
	}
	e.l = nil
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestContract(t *testing.T) {
	for _, k := range kits(t) {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			t.Run("unary", func(t *testing.T) { contractUnary(t, k) })
			t.Run("errors", func(t *testing.T) { contractErrors(t, k) })
			t.Run("deadline", func(t *testing.T) { contractDeadline(t, k) })
			t.Run("cancel", func(t *testing.T) { contractCancel(t, k) })
			t.Run("large", func(t *testing.T) { contractLarge(t, k) })
			t.Run("concurrent", func(t *testing.T) { contractConcurrent(t, k) })
			t.Run("stream", func(t *testing.T) { contractStream(t, k) })
			t.Run("client-stream", func(t *testing.T) { contractClientStream(t, k) })
			t.Run("bidi-stream", func(t *testing.T) { contractBidiStream(t, k) })
			t.Run("auth", func(t *testing.T) { contractAuth(t, k) })
			t.Run("restart", func(t *testing.T) { contractRestart(t, k) })
		})
	}
}

func contractUnary(t *testing.T, k kit) {
	e := startEnv(t, k)
	ctx := testCtx(t)
	resp, err := Call[echoReq, echoResp](ctx, e.client, "Echo.Echo", &echoReq{Msg: "hello"})
	if err != nil || resp.Msg != "hello" {
		t.Fatalf("Echo = %+v, %v", resp, err)
	}
	mctx := WithMetadata(ctx, Pairs("X-Trace", "abc123"))
	resp, err = Call[echoReq, echoResp](mctx, e.client, "Echo.Meta", &echoReq{Msg: "x-trace"})
	if err != nil || resp.Msg != "abc123" {
		t.Fatalf("metadata echo = %+v, %v", resp, err)
	}
	if d, err := e.client.Ping(ctx); err != nil || d <= 0 {
		t.Fatalf("Ping = %v, %v", d, err)
	}
}

func contractErrors(t *testing.T, k kit) {
	e := startEnv(t, k)
	ctx := testCtx(t)
	_, err := Call[echoReq, echoResp](ctx, e.client, "Echo.Fail", &echoReq{Msg: "widget"})
	var st *Status
	if !errors.As(err, &st) || st.Code != NotFound || st.Message != "no widget here" {
		t.Errorf("Fail = %v, want NotFound with its message", err)
	}
	if _, err := Call[echoReq, echoResp](ctx, e.client, "Echo.Fail", &echoReq{Msg: "plain"}); CodeOf(err) != Unknown {
		t.Errorf("plain error = %v, want Unknown", err)
	}
	if _, err := Call[echoReq, echoResp](ctx, e.client, "Echo.Nope", &echoReq{}); CodeOf(err) != Unimplemented {
		t.Errorf("unknown method = %v, want Unimplemented", err)
	}
	// The connection stays usable after errors.
	if _, err := Call[echoReq, echoResp](ctx, e.client, "Echo.Echo", &echoReq{Msg: "still"}); err != nil {
		t.Errorf("call after errors: %v", err)
	}
}

func contractDeadline(t *testing.T, k kit) {
	e := startEnv(t, k)
	// Connect first: on a slow machine (-race under load) the handshake
	// alone could use up the 300 ms, and the handler would never run.
	if err := e.client.Transport().Connect(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	outer := testCtx(t)
	ctx, cancel := context.WithTimeout(outer, 300*time.Millisecond)
	defer cancel()
	_, err := Call[echoReq, echoResp](ctx, e.client, "Echo.Wait", &echoReq{})
	if CodeOf(err) != DeadlineExceeded {
		t.Fatalf("Wait = %v, want DeadlineExceeded", err)
	}
	// The call ended on its own 300 ms deadline, not on the test's.
	if outer.Err() != nil {
		t.Errorf("the call returned only when the test's context ended: %v", outer.Err())
	}
	select {
	case d := <-e.svc.deadline:
		// The handler reports 0 when it has no deadline; a late handler
		// may see one already past (negative), never one beyond 300 ms.
		if d == 0 || d > 300*time.Millisecond {
			t.Errorf("handler saw remaining time %v, want the client's deadline of at most 300ms", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the handler never ran")
	}
	select {
	case err := <-e.svc.ended:
		if err == nil {
			t.Error("handler context ended without error")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("handler context did not end after the deadline")
	}
}

func contractCancel(t *testing.T, k kit) {
	e := startEnv(t, k)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := Call[echoReq, echoResp](ctx, e.client, "Echo.Wait", &echoReq{})
		errc <- err
	}()
	<-e.svc.started
	if d := <-e.svc.deadline; d != 0 {
		t.Errorf("handler saw a deadline (%v) the client did not set", d)
	}
	cancel()
	if err := <-errc; CodeOf(err) != Canceled {
		t.Errorf("canceled call = %v, want Canceled", err)
	}
	select {
	case err := <-e.svc.ended:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("handler context ended with %v, want Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("cancellation did not reach the server")
	}
}

func contractLarge(t *testing.T, k kit) {
	max := k.maxMessage
	if max == 0 {
		max = 2 << 20
	}
	e := startEnvServer(t, k, func(s *Server) { s.MaxMessageSize = max }, WithMaxMessageSize(max+1024))
	ctx := testCtx(t)
	data := bytes.Repeat([]byte("0123456789abcdef"), (max-1024)/16/2) // JSON base64 grows it by 4/3
	resp, err := Call[echoReq, echoResp](ctx, e.client, "Echo.Echo", &echoReq{Data: data})
	if err != nil || !bytes.Equal(resp.Data, data) {
		t.Fatalf("large echo of %d bytes: %v", len(data), err)
	}
	big := make([]byte, max)
	if _, err := Call[echoReq, echoResp](ctx, e.client, "Echo.Echo", &echoReq{Data: big}); CodeOf(err) != ResourceExhausted {
		t.Errorf("oversized request = %v, want ResourceExhausted", err)
	}
	if _, err := Call[echoReq, echoResp](ctx, e.client, "Echo.Echo", &echoReq{Msg: "ok"}); err != nil {
		t.Errorf("call after oversized one: %v", err)
	}
}

func contractConcurrent(t *testing.T, k kit) {
	e := startEnv(t, k)
	ctx := testCtx(t)
	const n = 200
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			msg := fmt.Sprintf("call %d", i)
			resp, err := Call[echoReq, echoResp](ctx, e.client, "Echo.Echo", &echoReq{Msg: msg})
			if err == nil && resp.Msg != msg {
				err = fmt.Errorf("answer %q to %q", resp.Msg, msg)
			}
			if err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func contractStream(t *testing.T, k kit) {
	e := startEnv(t, k)
	ctx := testCtx(t)
	s, err := CallStream[echoReq, echoResp](ctx, e.client, "Echo.Count", &echoReq{Msg: "m", N: 100})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		r, err := s.Recv()
		if err == io.EOF {
			if i != 100 {
				t.Errorf("stream ended after %d answers, want 100", i)
			}
			break
		}
		if err != nil {
			t.Fatalf("Recv %d: %v", i, err)
		}
		if r.I != i {
			t.Fatalf("answer %d carries %d", i, r.I)
		}
	}
	s.Close()
	s, err = CallStream[echoReq, echoResp](ctx, e.client, "Echo.Count", &echoReq{Msg: "fail", N: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	n := 0
	for {
		_, err := s.Recv()
		if err != nil {
			if CodeOf(err) != Aborted || n != 3 {
				t.Errorf("failing stream: %d answers then %v, want 3 then Aborted", n, err)
			}
			break
		}
		n++
	}
}

func contractClientStream(t *testing.T, k kit) {
	e := startEnv(t, k)
	ctx := testCtx(t)
	s, err := OpenStream[echoReq, echoResp](ctx, e.client, "Echo.Sum")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	want := ""
	for i := range 50 {
		m := fmt.Sprint(i % 10)
		want += m
		if err := s.Send(&echoReq{Msg: m}); err != nil {
			t.Fatalf("Send %d: %v", i, err)
		}
	}
	r, err := s.CloseAndRecv()
	if err != nil || r.I != 50 || r.Msg != want {
		t.Fatalf("CloseAndRecv = %+v, %v; want 50 messages %q", r, err, want)
	}
	// A client-streaming method called as unary, and a unary one as a
	// stream, fail with Unimplemented.
	if _, err := Call[echoReq, echoResp](ctx, e.client, "Echo.Sum", &echoReq{}); CodeOf(err) != Unimplemented {
		t.Errorf("Echo.Sum as unary: %v, want Unimplemented", err)
	}
	s2, err := OpenStream[echoReq, echoResp](ctx, e.client, "Echo.Echo")
	if err == nil {
		defer s2.Close()
		_, err = s2.CloseAndRecv()
	}
	if CodeOf(err) != Unimplemented {
		t.Errorf("Echo.Echo as a stream: %v, want Unimplemented", err)
	}
}

func contractBidiStream(t *testing.T, k kit) {
	e := startEnv(t, k)
	ctx := testCtx(t)
	s, err := OpenStream[echoReq, echoResp](ctx, e.client, "Echo.Chat")
	if err != nil {
		t.Fatal(err)
	}
	// Ping-pong: each answer arrives before the next request is sent, so
	// requests and answers really interleave on the transport.
	big := bytes.Repeat([]byte{7}, 32<<10) // within UDPMaxMessage once base64-encoded
	for i := range 20 {
		m := &echoReq{Msg: fmt.Sprint("m", i)}
		if i%5 == 4 {
			m.Data = big
		}
		if err := s.Send(m); err != nil {
			t.Fatalf("Send %d: %v", i, err)
		}
		r, err := s.Recv()
		if err != nil || r.I != i || r.Msg != m.Msg || !bytes.Equal(r.Data, m.Data) {
			t.Fatalf("Recv %d = %+v, %v", i, r, err)
		}
	}
	if err := s.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if r, err := s.Recv(); err != io.EOF {
		t.Fatalf("after CloseSend: %+v, %v; want io.EOF", r, err)
	}
	s.Close()
	// An error from the handler ends the stream with its status.
	s, err = OpenStream[echoReq, echoResp](ctx, e.client, "Echo.Chat")
	if err != nil {
		t.Fatal(err)
	}
	s.Send(&echoReq{Msg: "a"})
	s.Send(&echoReq{Msg: "fail"})
	if _, err := s.Recv(); err != nil {
		t.Fatalf("first answer: %v", err)
	}
	if _, err := s.Recv(); CodeOf(err) != Aborted {
		t.Errorf("after fail: %v, want Aborted", err)
	}
	s.Close()
	// Closing a stream in the middle cancels the handler.
	s, err = OpenStream[echoReq, echoResp](ctx, e.client, "Echo.Chat")
	if err != nil {
		t.Fatal(err)
	}
	s.Send(&echoReq{Msg: "wait"})
	select {
	case <-e.svc.started:
	case <-ctx.Done():
		t.Fatal("handler never started")
	}
	s.Close()
	select {
	case err := <-e.svc.ended:
		if err == nil {
			t.Error("handler's context not canceled")
		}
	case <-ctx.Done():
		t.Fatal("closing the stream did not cancel the handler")
	}
}

func contractAuth(t *testing.T, k kit) {
	type userKey struct{}
	auth := func(ctx context.Context, info *CallInfo) (context.Context, error) {
		if info.Transport != k.name {
			return nil, Errorf(Internal, "auth saw transport %q, want %q", info.Transport, k.name)
		}
		if info.Metadata.Get("authorization") != "Bearer s3cret" {
			return nil, errors.New("bad token")
		}
		return context.WithValue(ctx, userKey{}, "alice"), nil
	}
	e := startEnvServer(t, k, func(s *Server) { s.Auth = auth })
	ctx := testCtx(t)
	if _, err := Call[echoReq, echoResp](ctx, e.client, "Echo.Echo", &echoReq{}); CodeOf(err) != Unauthenticated {
		t.Errorf("call without token = %v, want Unauthenticated", err)
	}
	ctx = WithMetadata(ctx, Pairs("authorization", "Bearer s3cret"))
	if _, err := Call[echoReq, echoResp](ctx, e.client, "Echo.Echo", &echoReq{}); err != nil {
		t.Errorf("call with token: %v", err)
	}
}

func contractRestart(t *testing.T, k kit) {
	e := startEnv(t, k)
	ctx := testCtx(t)
	if _, err := Call[echoReq, echoResp](ctx, e.client, "Echo.Echo", &echoReq{Msg: "before"}); err != nil {
		t.Fatal(err)
	}
	addr := e.l.Addr().String()
	e.stop()
	e.start(addr)
	// The client learns of the restart from its broken connection; an
	// idempotent call is retried on a fresh one.
	resp, err := Call[echoReq, echoResp](ctx, e.client, "Echo.Echo", &echoReq{Msg: "after"}, Idempotent())
	if err != nil || resp.Msg != "after" {
		t.Fatalf("call after restart = %+v, %v", resp, err)
	}
}
