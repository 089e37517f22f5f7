// Command grpcbench runs the workload of 'quiver bench rpc' against gRPC-go
// over TCP+TLS (HTTP/2), so the two are compared alike. It is a separate
// module so that Quiver's own module never depends on gRPC.
package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/quiver-quic/quiver/peers"
	"github.com/quiver-quic/quiver/rpc/rpcbench"
)

// echoService is registered by hand (no generated code): one unary method
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

func ints(s string) []int {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(f)
		if err != nil {
			log.Fatalf("bad number %q", f)
		}
		out = append(out, n)
	}
	return out
}

func main() {
	conc := flag.String("conc", "1,64,512", "concurrency levels")
	sizes := flag.String("sizes", "581,1024", "payload sizes")
	d := flag.Duration("duration", 2*time.Second, "time per configuration")
	flag.Parse()
	cert, pool, err := peers.SelfSigned()
	if err != nil {
		log.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}})))
	srv.RegisterService(&echoDesc, nil)
	go srv.Serve(l)
	defer srv.Stop()
	ctx := context.Background()
	for _, size := range ints(*sizes) {
		for _, c := range ints(*conc) {
			cc, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool, ServerName: "localhost"})))
			if err != nil {
				log.Fatal(err)
			}
			payload := make([]byte, size)
			r := rpcbench.Run(ctx, "grpc/tcp", c, size, *d, func(ctx context.Context) error {
				out := new(wrapperspb.BytesValue)
				return cc.Invoke(ctx, "/Bench/Echo", wrapperspb.Bytes(payload), out)
			})
			fmt.Fprintln(os.Stdout, r.BenchLine())
			cc.Close()
		}
	}
}
