package rpc_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/quiver-quic/quiver/certs"
	"github.com/quiver-quic/quiver/rpc"
)

// The messages of the examples' service, encoded with the default JSON
// codec (rpc.Proto takes protobuf messages instead).
type EchoRequest struct {
	Text  string
	Count int
}

type EchoReply struct {
	Text string
	// Transport is the transport that carried the call, as the server saw it.
	Transport string
}

type transportKey struct{}

// exampleServer serves Echo.Echo (unary) and Echo.Count (server
// streaming) on a TCP+TLS and a QUIC listener on loopback. It returns the
// listeners' addresses, a client TLS configuration, and stop, which closes
// the server and waits for its Serve calls. next, when not nil, paces the
// stream: Echo.Count waits for a value on it before each message after
// the first.
func exampleServer(next <-chan struct{}) (tcpAddr, quicAddr string, clientTLS *tls.Config, stop func()) {
	cert, pool, err := certs.SelfSigned()
	if err != nil {
		log.Fatal(err)
	}
	serverTLS := &tls.Config{Certificates: []tls.Certificate{cert}}
	clientTLS = &tls.Config{RootCAs: pool, ServerName: "localhost"}

	srv := rpc.NewServer()
	// Auth runs before every call; here it only tells the handlers which
	// transport the call came on.
	srv.Auth = func(ctx context.Context, info *rpc.CallInfo) (context.Context, error) {
		return context.WithValue(ctx, transportKey{}, info.Transport), nil
	}
	rpc.Register(srv, "Echo.Echo", func(ctx context.Context, req *EchoRequest) (*EchoReply, error) {
		return &EchoReply{Text: strings.ToUpper(req.Text), Transport: ctx.Value(transportKey{}).(string)}, nil
	})
	rpc.RegisterStream(srv, "Echo.Count", func(ctx context.Context, req *EchoRequest, send func(*EchoReply) error) error {
		for i := 1; i <= req.Count; i++ {
			if i > 1 && next != nil {
				select {
				case <-next:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			if err := send(&EchoReply{Text: fmt.Sprint(req.Text, " ", i), Transport: ctx.Value(transportKey{}).(string)}); err != nil {
				return err
			}
		}
		return nil
	})

	tl, err := rpc.ListenTCP("127.0.0.1:0", serverTLS)
	if err != nil {
		log.Fatal(err)
	}
	ql, err := rpc.ListenQUIC("127.0.0.1:0", serverTLS) // QUIC and HTTP/3 on one UDP port
	if err != nil {
		log.Fatal(err)
	}
	var wg sync.WaitGroup
	for _, l := range []rpc.Listener{tl, ql} {
		wg.Go(func() { srv.Serve(l) })
	}
	return tl.Addr().String(), ql.Addr().String(), clientTLS, func() {
		srv.Close()
		wg.Wait()
	}
}

// A unary and a server-streaming call, over TCP+TLS and over QUIC: the
// same handlers serve both, and the client only changes its transport.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tcpAddr, quicAddr, clientTLS, stop := exampleServer(nil)
	defer stop()

	for _, t := range []rpc.Transport{rpc.DialTCP(tcpAddr, clientTLS), rpc.DialQUIC(quicAddr, clientTLS)} {
		c := rpc.NewClient(t)
		r, err := rpc.Call[EchoRequest, EchoReply](ctx, c, "Echo.Echo", &EchoRequest{Text: "hi"})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s: unary %s;", r.Transport, r.Text)

		s, err := rpc.CallStream[EchoRequest, EchoReply](ctx, c, "Echo.Count", &EchoRequest{Text: "n", Count: 3})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Print(" stream")
		for {
			m, err := s.Recv()
			if err == io.EOF {
				break
			}
			if err != nil {
				log.Fatal(err)
			}
			fmt.Printf(" %q", m.Text)
		}
		s.Close()
		fmt.Println()
		c.Close()
	}
	// Output:
	// tcp: unary HI; stream "n 1" "n 2" "n 3"
	// quic: unary HI; stream "n 1" "n 2" "n 3"
}

// Switching transport while a call is in flight: SwitchAsync connects the
// new transport (QUIC) and makes it carry every new call at once; the
// stream opened before the switch finishes on TCP, and the old transport
// closes once it has no call left. No call fails. (Switch does the same
// and waits for the old transport's calls.)
func ExampleClient_Switch() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	next := make(chan struct{})
	tcpAddr, quicAddr, clientTLS, stop := exampleServer(next)
	defer stop()

	c := rpc.NewClient(rpc.DialTCP(tcpAddr, clientTLS))
	defer c.Close()
	s, err := rpc.CallStream[EchoRequest, EchoReply](ctx, c, "Echo.Count", &EchoRequest{Text: "tick", Count: 2})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	m, err := s.Recv()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("stream:", m.Text, "over", m.Transport)

	if err := c.SwitchAsync(rpc.DialQUIC(quicAddr, clientTLS), time.Minute); err != nil {
		log.Fatal(err)
	}
	fmt.Println("client transport now", c.Transport().Name())
	r, err := rpc.Call[EchoRequest, EchoReply](ctx, c, "Echo.Echo", &EchoRequest{Text: "new call"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("unary:", r.Text, "over", r.Transport)

	next <- struct{}{} // let the stream send its second message
	if m, err = s.Recv(); err != nil {
		log.Fatal(err)
	}
	fmt.Println("stream:", m.Text, "over", m.Transport)
	if _, err := s.Recv(); err != io.EOF {
		log.Fatal(err)
	}
	// Output:
	// stream: tick 1 over tcp
	// client transport now quic
	// unary: NEW CALL over quic
	// stream: tick 2 over tcp
}

// The adaptive client races its candidates, the first (QUIC) with a head
// start of FallbackAfter. Here UDP is blocked: the QUIC candidate points
// at a socket that swallows every datagram, so the client falls back to
// TCP+TLS and the first call goes through without waiting for QUIC's
// handshake to time out.
func ExampleNewAdaptive() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tcpAddr, _, clientTLS, stop := exampleServer(nil)
	defer stop()
	blackHole, err := net.ListenPacket("udp", "127.0.0.1:0") // never answers
	if err != nil {
		log.Fatal(err)
	}
	defer blackHole.Close()

	a, err := rpc.NewAdaptive(ctx, rpc.AdaptiveConfig{
		Candidates: []rpc.Candidate{
			{Name: "quic", Dial: func() rpc.Transport { return rpc.DialQUIC(blackHole.LocalAddr().String(), clientTLS) }},
			{Name: "tcp", Dial: func() rpc.Transport { return rpc.DialTCP(tcpAddr, clientTLS) }},
		},
		FallbackAfter: 100 * time.Millisecond,
		ProbeInterval: time.Hour, // no probing in this example
	})
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close()
	r, err := rpc.Call[EchoRequest, EchoReply](ctx, a.Client(), "Echo.Echo", &EchoRequest{Text: "udp is blocked"})
	if err != nil {
		log.Fatal(err)
	}
	e := <-a.Events()
	fmt.Printf("chosen %s (event: %s to %s), fallbacks %d\n", a.Current(), e.Kind, e.To, a.Fallbacks.Load())
	fmt.Println(r.Text, "- answered over", r.Transport)
	// Output:
	// chosen tcp (event: connected to tcp), fallbacks 1
	// UDP IS BLOCKED - answered over tcp
}
