// Command grpcbench runs 'quiver bench rpc' with gRPC-go added as one more
// system, in the same process: gRPC-go over TCP+TLS (HTTP/2) and Quiver's
// transports take turns in every cell, so their ratios come from one run.
// It is a separate module so that Quiver's own module never depends on
// gRPC; 'quiver bench rpc --grpc rpc/grpcbench' runs it with 'go run'.
// It takes the same flags as 'quiver bench rpc'.
package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"net"
	"os"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/quiver-quic/quiver/rpc/rpcbench"
)

// echoDesc is registered by hand (no generated code): one unary method
// that answers with its request, like Quiver's Bench.Echo.
var echoDesc = grpc.ServiceDesc{
	ServiceName: "Bench",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Echo",
		Handler: func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			in := new(wrapperspb.BytesValue)
			if err := dec(in); err != nil {
				return nil, err
			}
			return in, nil
		},
	}},
}

// grpcTarget starts a gRPC-go server with the bench's certificate, behind
// the bench's emulated path, and measures a new gRPC client per run.
func grpcTarget(s *rpcbench.Server, p *rpcbench.Path) ([]rpcbench.Target, func(), error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(s.ServerTLS)))
	srv.RegisterService(&echoDesc, nil)
	go srv.Serve(l)
	addr, err := p.Wrap("tcp", l.Addr().String())
	if err != nil {
		srv.Stop()
		return nil, nil, err
	}
	ctls := &tls.Config{RootCAs: s.Pool, ServerName: "localhost"}
	t := rpcbench.Target{Name: "grpc/tcp", Open: func(ctx context.Context, size int) (func(context.Context) error, func(), error) {
		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(ctls)))
		if err != nil {
			return nil, nil, err
		}
		cc.Connect()
		payload := make([]byte, size)
		call := func(ctx context.Context) error {
			out := new(wrapperspb.BytesValue)
			if err := cc.Invoke(ctx, "/Bench/Echo", wrapperspb.Bytes(payload), out); err != nil {
				return err
			}
			if len(out.Value) != size {
				return fmt.Errorf("short answer")
			}
			return nil
		}
		// Warm the connection (handshake) as Quiver's targets do.
		if err := call(ctx); err != nil {
			cc.Close()
			return nil, nil, err
		}
		return call, func() { cc.Close() }, nil
	}}
	return []rpcbench.Target{t}, srv.Stop, nil
}

func main() {
	c := rpcbench.DefaultConfig()
	c.Transports = "tcp,quic"
	c.Register(flag.CommandLine)
	flag.Parse()
	if err := rpcbench.Main(context.Background(), c, os.Stdout, grpcTarget); err != nil {
		fmt.Fprintln(os.Stderr, "grpcbench:", err)
		os.Exit(1)
	}
}
