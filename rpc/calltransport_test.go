package rpc

import (
	"context"
	"testing"
)

// TestCallWithTransport sends calls of one client through transports
// chosen per call: each reaches the server on the transport it named, the
// client's own transport stays current for calls without the option, and
// closing the client leaves the caller's transports open.
func TestCallWithTransport(t *testing.T) {
	srv := NewServer()
	type transportKey struct{}
	srv.Auth = func(ctx context.Context, info *CallInfo) (context.Context, error) {
		return context.WithValue(ctx, transportKey{}, info.Transport), nil
	}
	Register(srv, "Who.Transport", func(ctx context.Context, r *echoReq) (*echoResp, error) {
		return &echoResp{Msg: ctx.Value(transportKey{}).(string)}, nil
	})
	RegisterStream(srv, "Who.Stream", func(ctx context.Context, r *echoReq, send func(*echoResp) error) error {
		return send(&echoResp{Msg: ctx.Value(transportKey{}).(string)})
	})
	names := []string{"tcp", "quic", "http3", "unix"}
	dial := map[string]Transport{}
	served := make(chan error, len(names))
	for _, k := range kits(t) {
		for _, n := range names {
			if k.name == n {
				l := k.listen(t, "")
				go func() { served <- srv.Serve(l) }()
				dial[n] = k.dial(l.Addr())
			}
		}
	}
	defer func() {
		for _, tr := range dial {
			tr.Close()
		}
		srv.Close()
		for range names {
			if err := <-served; err != nil {
				t.Errorf("Serve: %v", err)
			}
		}
	}()
	ctx := testCtx(t)
	c := NewClient(dial["tcp"])
	who := func(opts ...CallOption) string {
		t.Helper()
		resp, err := Call[echoReq, echoResp](ctx, c, "Who.Transport", &echoReq{}, opts...)
		if err != nil {
			t.Fatalf("call: %v", err)
		}
		return resp.Msg
	}
	for _, n := range []string{"quic", "http3", "unix", "tcp"} {
		if got := who(WithTransport(dial[n])); got != n {
			t.Errorf("call with WithTransport(%s) reached the server on %s", n, got)
		}
		if got := who(); got != "tcp" {
			t.Errorf("call without the option after a %s call reached the server on %s, want the client's tcp", n, got)
		}
	}
	s, err := CallStream[echoReq, echoResp](ctx, c, "Who.Stream", &echoReq{}, WithTransport(dial["quic"]))
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	if r, err := s.Recv(); err != nil || r.Msg != "quic" {
		t.Errorf("stream with WithTransport(quic): %v, %v", r, err)
	}
	s.Close()
	if c.Transport().Name() != "tcp" {
		t.Errorf("the client's transport became %s", c.Transport().Name())
	}
	// Closing a client closes its own transport, never a call's.
	quic := dial["quic"]
	delete(dial, "tcp") // closed with c
	c.Close()
	c2 := NewClient(dial["unix"])
	defer c2.Close()
	delete(dial, "unix")
	if resp, err := Call[echoReq, echoResp](ctx, c2, "Who.Transport", &echoReq{}, WithTransport(quic)); err != nil || resp.Msg != "quic" {
		t.Errorf("call through a transport of a closed client: %v, %v", resp, err)
	}
}
