package quic_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"strings"
	"sync"
	"time"

	"github.com/quiver-quic/quiver/certs"
	"github.com/quiver-quic/quiver/quic"
	"github.com/quiver-quic/quiver/quic/wire"
)

// tlsConfigs returns a server configuration with a fresh self-signed
// certificate and a client configuration that trusts it.
func tlsConfigs(alpn string) (server, client *tls.Config) {
	cert, pool, err := certs.SelfSigned()
	if err != nil {
		log.Fatal(err)
	}
	server = &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{alpn}}
	client = &tls.Config{RootCAs: pool, ServerName: "localhost", NextProtos: []string{alpn}}
	return server, client
}

// serveUpper accepts connections on ep and answers each stream with what
// it read, in upper case, until ep is closed. The returned function waits
// for every goroutine it started.
func serveUpper(ctx context.Context, ep *quic.Endpoint) (wait func()) {
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ep.Accept(ctx)
			if err != nil {
				return
			}
			wg.Go(func() {
				for {
					s, err := c.AcceptStream(ctx)
					if err != nil {
						return
					}
					wg.Go(func() {
						req, _ := io.ReadAll(s)
						s.Write([]byte(strings.ToUpper(string(req))))
						s.CloseWrite()
					})
				}
			})
		}
	})
	return wg.Wait
}

// A server and a client on loopback exchange one stream: the client writes
// a request and closes its side, the server answers and closes its side.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	serverTLS, clientTLS := tlsConfigs("example")

	ep, err := quic.Listen("udp", "127.0.0.1:0", &quic.Config{TLSConfig: serverTLS})
	if err != nil {
		log.Fatal(err)
	}
	wait := serveUpper(ctx, ep)
	defer wait()
	defer ep.Close()

	c, err := quic.Dial(ctx, "udp", ep.Addr().String(), &quic.Config{TLSConfig: clientTLS})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close(0, "")
	s, err := c.OpenStream(ctx)
	if err != nil {
		log.Fatal(err)
	}
	s.Write([]byte("hello, quic"))
	s.CloseWrite()
	answer, err := io.ReadAll(s)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("ALPN %s, version %#x: %s\n", c.ALPN(), c.ConnectionInfo().Version, answer)
	// Output: ALPN example, version 0x1: HELLO, QUIC
}

// DATAGRAM frames (RFC 9221) carry unreliable messages beside the
// streams. Both ends enable them with MaxDatagramFrameSize; here the
// server echoes every datagram it receives.
func ExampleConn_SendDatagram() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	serverTLS, clientTLS := tlsConfigs("example")

	ep, err := quic.Listen("udp", "127.0.0.1:0", &quic.Config{TLSConfig: serverTLS, MaxDatagramFrameSize: 1200})
	if err != nil {
		log.Fatal(err)
	}
	defer ep.Close()
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		c, err := ep.Accept(ctx)
		if err != nil {
			return
		}
		for {
			d, err := c.ReceiveDatagram(ctx)
			if err != nil {
				return
			}
			c.SendDatagram(append([]byte("echo: "), d...))
		}
	})

	c, err := quic.Dial(ctx, "udp", ep.Addr().String(), &quic.Config{TLSConfig: clientTLS, MaxDatagramFrameSize: 1200})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close(0, "")
	if err := c.SendDatagram([]byte("ping")); err != nil {
		log.Fatal(err)
	}
	d, err := c.ReceiveDatagram(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(d))
	// Output: echo: ping
}

// ticketCache is a client session cache that signals when the server's
// session ticket has arrived, so that the second connection can resume.
type ticketCache struct {
	tls.ClientSessionCache
	got  chan struct{}
	once sync.Once
}

func (c *ticketCache) Put(key string, cs *tls.ClientSessionState) {
	c.ClientSessionCache.Put(key, cs)
	if cs != nil {
		c.once.Do(func() { close(c.got) })
	}
}

// A client that keeps the session ticket of a first connection resumes
// the session on a second one and sends its request in 0-RTT packets,
// before the handshake completes (RFC 9001 §4.6). The server opts in with
// Allow0RTT; the client with Allow0RTT, a ClientSessionCache and
// DialEarly, which returns at once.
func ExampleDialEarly() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	serverTLS, clientTLS := tlsConfigs("example")
	ep, err := quic.Listen("udp", "127.0.0.1:0", &quic.Config{TLSConfig: serverTLS, Allow0RTT: true})
	if err != nil {
		log.Fatal(err)
	}
	wait := serveUpper(ctx, ep)
	defer wait()
	defer ep.Close()

	cache := &ticketCache{ClientSessionCache: tls.NewLRUClientSessionCache(1), got: make(chan struct{})}
	clientTLS.ClientSessionCache = cache
	cfg := &quic.Config{TLSConfig: clientTLS, Allow0RTT: true}
	fetch := func(c *quic.Conn, req string) string {
		s, err := c.OpenStream(ctx)
		if err != nil {
			log.Fatal(err)
		}
		s.Write([]byte(req))
		s.CloseWrite()
		b, err := io.ReadAll(s)
		if err != nil {
			log.Fatal(err)
		}
		return string(b)
	}

	first, err := quic.Dial(ctx, "udp", ep.Addr().String(), cfg)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(fetch(first, "first"))
	<-cache.got // the ticket comes after the handshake
	first.Close(0, "")

	// The request goes in 0-RTT only if it is written before the client
	// reads the server's first flight; on a busy machine the handshake can
	// win that race and the request then goes in 1-RTT packets, which is
	// just as correct. To show 0-RTT on every run, the client holds its
	// first datagram (the ClientHello) until a 0-RTT packet is ready, and
	// sends both together. Both hooks run on the connection's goroutine.
	var early int
	var hello []byte
	held := false
	cfg.Probe = &quic.Probe{
		OnPacketSent: func(p quic.PacketInfo) {
			if p.Type == wire.PacketType0RTT {
				early++
			}
		},
		OnSendDatagram: func(b []byte) [][]byte {
			switch {
			case early == 0 && !held:
				held, hello = true, append([]byte(nil), b...)
				return nil
			case early > 0 && hello != nil:
				out := [][]byte{hello, b}
				hello = nil
				return out
			}
			return [][]byte{b}
		},
	}
	second, err := quic.DialEarly(ctx, "udp", ep.Addr().String(), cfg)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(fetch(second, "second"))
	info := second.ConnectionInfo()
	second.Close(0, "")
	<-second.Done()
	fmt.Printf("resumed %v, 0-RTT accepted %v, 0-RTT packets sent %v\n", info.Resumed, info.Used0RTT, early > 0)
	// Output:
	// FIRST
	// SECOND
	// resumed true, 0-RTT accepted true, 0-RTT packets sent true
}

// Probe hooks let a test misbehave on purpose. Here the client drops the
// datagram that carries its request (the first 1-RTT packet with a STREAM
// frame): the engine declares the packet lost and sends the data again,
// and the exchange completes all the same.
func ExampleProbe() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	serverTLS, clientTLS := tlsConfigs("example")
	ep, err := quic.Listen("udp", "127.0.0.1:0", &quic.Config{TLSConfig: serverTLS})
	if err != nil {
		log.Fatal(err)
	}
	wait := serveUpper(ctx, ep)
	defer wait()
	defer ep.Close()

	// Both hooks run on the connection's goroutine: OnPacketSent for each
	// packet before it is sealed, then OnSendDatagram for the datagram
	// that holds them, which it may replace (nil drops it).
	var mu sync.Mutex
	carriesStream, dropped := false, 0
	probe := &quic.Probe{
		OnPacketSent: func(p quic.PacketInfo) {
			for b := p.Payload; len(b) > 0 && p.Type == wire.PacketType1RTT; {
				f, n, err := wire.ParseFrame(b)
				if err != nil {
					return
				}
				if _, ok := f.(*wire.StreamFrame); ok {
					carriesStream = true
				}
				b = b[n:]
			}
		},
		OnSendDatagram: func(b []byte) [][]byte {
			mu.Lock()
			defer mu.Unlock()
			drop := carriesStream && dropped == 0
			carriesStream = false
			if drop {
				dropped++
				return nil
			}
			return [][]byte{b}
		},
	}
	c, err := quic.Dial(ctx, "udp", ep.Addr().String(), &quic.Config{TLSConfig: clientTLS, Probe: probe})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close(0, "")
	s, err := c.OpenStream(ctx)
	if err != nil {
		log.Fatal(err)
	}
	s.Write([]byte("sent twice"))
	s.CloseWrite()
	answer, err := io.ReadAll(s)
	if err != nil {
		log.Fatal(err)
	}
	mu.Lock()
	fmt.Printf("dropped %d datagram; answer %s; lost packets counted: %v\n", dropped, answer, c.Stats().PacketsLost > 0)
	mu.Unlock()
	// Output: dropped 1 datagram; answer SENT TWICE; lost packets counted: true
}
