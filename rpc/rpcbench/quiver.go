package rpcbench

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/quiver-quic/quiver/peers"
	"github.com/quiver-quic/quiver/rpc"
)

// Transports lists the transports Server can measure, in the order the
// bench runs them by default.
var Transports = []string{"tcp", "unix", "http1", "http2", "quic", "http3", "udp"}

// Server serves the echo handler (Bench.Echo: protobuf BytesValue in,
// the same out) on every transport at once, and hands out dialers that
// reach it, through the emulated Path when one is set.
type Server struct {
	srv       *rpc.Server
	addrs     map[string]string // listener addresses by listener name
	ClientTLS *tls.Config
	// ServerTLS and Pool are the bench's certificate, for other servers
	// (gRPC) in the same run.
	ServerTLS *tls.Config
	Pool      *x509.CertPool
	path      *Path
	dir       string
	served    chan error
	nServed   int
}

// NewServer starts the echo server on every transport; path may be nil
// (plain loopback).
func NewServer(path *Path) (*Server, error) {
	cert, pool, err := peers.SelfSigned()
	if err != nil {
		return nil, err
	}
	stls := &tls.Config{Certificates: []tls.Certificate{cert}}
	dir, err := os.MkdirTemp("", "quiver-rpcbench")
	if err != nil {
		return nil, err
	}
	s := &Server{srv: rpc.NewServer(), addrs: map[string]string{}, served: make(chan error, 8), dir: dir,
		// The session cache lets repeated connections (the
		// switching experiment dials one per swap) resume.
		ClientTLS: &tls.Config{RootCAs: pool, ServerName: "localhost", ClientSessionCache: tls.NewLRUClientSessionCache(64)}, ServerTLS: stls, Pool: pool, path: path}
	rpc.Register(s.srv, "Bench.Echo", func(ctx context.Context, r *wrapperspb.BytesValue) (*wrapperspb.BytesValue, error) {
		return r, nil
	})
	listen := []struct {
		name, network string
		f             func() (rpc.Listener, error)
	}{
		{"tcp", "tcp", func() (rpc.Listener, error) { return rpc.ListenTCP("127.0.0.1:0", stls) }},
		{"unix", "unix", func() (rpc.Listener, error) { return rpc.ListenUnix(filepath.Join(dir, "rpc.sock")) }},
		{"http", "tcp", func() (rpc.Listener, error) { return rpc.ListenHTTP("127.0.0.1:0", stls) }},
		{"quic", "udp", func() (rpc.Listener, error) { return rpc.ListenQUIC("127.0.0.1:0", stls) }},
		{"udp", "udp", func() (rpc.Listener, error) { return rpc.ListenUDP("127.0.0.1:0", stls) }},
	}
	for _, x := range listen {
		l, err := x.f()
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("listen %s: %w", x.name, err)
		}
		s.nServed++
		go func() { s.served <- s.srv.Serve(l) }()
		addr := l.Addr().String()
		if x.network != "unix" {
			if addr, err = path.Wrap(x.network, addr); err != nil {
				s.Close()
				return nil, err
			}
		}
		s.addrs[x.name] = addr
	}
	return s, nil
}

// Dialer returns a function that makes a new transport of the named kind
// to the server.
func (s *Server) Dialer(name string) (func() rpc.Transport, error) {
	switch name {
	case "tcp":
		return func() rpc.Transport { return rpc.DialTCP(s.addrs["tcp"], s.ClientTLS) }, nil
	case "unix":
		return func() rpc.Transport { return rpc.DialUnix(s.addrs["unix"]) }, nil
	case "http1":
		return func() rpc.Transport { return rpc.DialHTTP1(s.addrs["http"], s.ClientTLS) }, nil
	case "http2":
		return func() rpc.Transport { return rpc.DialHTTP2(s.addrs["http"], s.ClientTLS) }, nil
	case "quic":
		return func() rpc.Transport { return rpc.DialQUIC(s.addrs["quic"], s.ClientTLS) }, nil
	case "http3":
		return func() rpc.Transport { return rpc.DialHTTP3(s.addrs["quic"], s.ClientTLS) }, nil
	case "udp":
		return func() rpc.Transport { return rpc.DialUDP(s.addrs["udp"], s.ClientTLS) }, nil
	}
	return nil, fmt.Errorf("unknown transport %q (tcp, unix, http1, http2, quic, http3, udp)", name)
}

// Close stops the server and its listeners.
func (s *Server) Close() {
	s.srv.Close()
	for range s.nServed {
		<-s.served
	}
	os.RemoveAll(s.dir)
}

// EchoCall returns a call function that sends size bytes through c and
// checks the answer.
func EchoCall(c *rpc.Client, size int) func(context.Context) error {
	payload := make([]byte, size)
	return func(ctx context.Context) error {
		resp, err := rpc.Call[wrapperspb.BytesValue, wrapperspb.BytesValue](ctx, c, "Bench.Echo", wrapperspb.Bytes(payload))
		if err == nil && len(resp.Value) != size {
			err = errors.New("short answer")
		}
		return err
	}
}

// Target is one system under measurement. Open makes a fresh client for
// a run with the given payload size; closing it ends the run's client.
type Target struct {
	Name string
	Open func(ctx context.Context, size int) (call func(context.Context) error, close func(), err error)
}

// QuiverTarget measures Quiver's rpc over one transport, a new client
// (and connection) for every run.
func (s *Server) QuiverTarget(name string) (Target, error) {
	dial, err := s.Dialer(name)
	if err != nil {
		return Target{}, err
	}
	return Target{Name: "quiver/" + name, Open: func(ctx context.Context, size int) (func(context.Context) error, func(), error) {
		c := rpc.NewClient(dial(), rpc.WithCodec(rpc.Proto))
		if err := c.Transport().Connect(ctx); err != nil {
			c.Close()
			return nil, nil, err
		}
		return EchoCall(c, size), func() { c.Close() }, nil
	}}, nil
}
