package netem

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"time"
)

// StreamRelay is a TCP relay that applies a Link's rate, delay and loss to
// each direction of every connection through it, so that TCP-based
// transports (TCP+TLS, HTTP/1.1, HTTP/2, gRPC) cross the same emulated
// path as the UDP ones cross a Relay.
//
// A user-space TCP relay sees bytes, not segments, and cannot drop them:
// the kernel's TCP on each side has already acknowledged them. So loss is
// modelled by its effect on a byte stream: every MSS-sized segment of a
// chunk is lost with probability Link.Loss, and a chunk with a lost
// segment is held back by LossPenalty (the time TCP needs to notice and
// repair the loss); every later byte of that direction waits behind it
// (head-of-line blocking), as it would behind a retransmission. This
// reproduces the latency cost of loss, not its effect on the sender's
// congestion window. Jitter, reordering, duplication and corruption have
// no meaning for a byte stream and are ignored.
type StreamRelay struct {
	l        net.Listener
	upstream string
	toServer Link
	toClient Link
	penalty  time.Duration
	seed     uint64

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
	n      uint64
}

// StreamRelayConfig configures a StreamRelay.
type StreamRelayConfig struct {
	// Listen is the client-facing address, e.g. "127.0.0.1:0".
	Listen string
	// Server is where connections are relayed to.
	Server string
	// ToServer and ToClient are the two directions; only Rate, Delay and
	// Loss apply.
	ToServer, ToClient Link
	// LossPenalty is how long a lost segment stalls its direction; 0
	// means two round trips (2 × the sum of both delays), about what a
	// tail loss costs TCP with RACK-TLP, at least 1 ms.
	LossPenalty time.Duration
	// Seed seeds the loss draws.
	Seed uint64
}

// segmentSize is the MSS the loss model counts segments with.
const segmentSize = 1448

// NewStreamRelay listens and relays connections to cfg.Server until Close.
func NewStreamRelay(cfg StreamRelayConfig) (*StreamRelay, error) {
	for _, l := range []Link{cfg.ToServer, cfg.ToClient} {
		if err := l.Validate(); err != nil {
			return nil, err
		}
	}
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:0"
	}
	l, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, err
	}
	p := cfg.LossPenalty
	if p == 0 {
		p = max(time.Millisecond, 2*(cfg.ToServer.Delay+cfg.ToClient.Delay))
	}
	r := &StreamRelay{l: l, upstream: cfg.Server, toServer: cfg.ToServer, toClient: cfg.ToClient,
		penalty: p, seed: cfg.Seed, conns: map[net.Conn]struct{}{}}
	r.wg.Add(1)
	go r.accept()
	return r, nil
}

// Addr is the address clients connect to.
func (r *StreamRelay) Addr() net.Addr { return r.l.Addr() }

// Close stops accepting and closes every relayed connection.
func (r *StreamRelay) Close() error {
	r.mu.Lock()
	r.closed = true
	for c := range r.conns {
		c.Close()
	}
	r.mu.Unlock()
	err := r.l.Close()
	r.wg.Wait()
	return err
}

func (r *StreamRelay) track(c net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		c.Close()
		return false
	}
	r.conns[c] = struct{}{}
	return true
}

func (r *StreamRelay) accept() {
	defer r.wg.Done()
	for {
		c, err := r.l.Accept()
		if err != nil {
			return
		}
		if !r.track(c) {
			return
		}
		r.mu.Lock()
		r.n++
		n := r.n
		r.mu.Unlock()
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			r.relay(c, n)
		}()
	}
}

func (r *StreamRelay) relay(client net.Conn, n uint64) {
	var d net.Dialer
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	server, err := d.DialContext(ctx, "tcp", r.upstream)
	cancel()
	if err != nil || !r.track(server) {
		client.Close()
		return
	}
	for _, c := range []net.Conn{client, server} {
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetNoDelay(true)
		}
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		newStreamLink(r.toServer, r.penalty, r.seed, 2*n).pump(server, client)
	}()
	go func() {
		defer wg.Done()
		newStreamLink(r.toClient, r.penalty, r.seed, 2*n+1).pump(client, server)
	}()
	wg.Wait()
	r.mu.Lock()
	delete(r.conns, client)
	delete(r.conns, server)
	r.mu.Unlock()
	client.Close()
	server.Close()
}

// streamLink is one direction of one relayed connection: it decides when
// each chunk read from the source is delivered. It reads no clock; now is
// passed in.
type streamLink struct {
	link    Link
	penalty time.Duration
	rng     *rand.Rand
	free    time.Time // when the serialiser is next idle
	last    time.Time // delivery time of the previous chunk (FIFO)
}

func newStreamLink(l Link, penalty time.Duration, seed, stream uint64) *streamLink {
	return &streamLink{link: l, penalty: penalty, rng: rand.New(rand.NewPCG(seed, stream))}
}

// deliverAt returns when a chunk of n bytes read at now is delivered.
func (s *streamLink) deliverAt(now time.Time, n int) time.Time {
	depart := now
	if s.link.Rate > 0 {
		if s.free.After(depart) {
			depart = s.free
		}
		depart = depart.Add(time.Duration(float64(n+s.link.Overhead) * 8 / float64(s.link.Rate) * float64(time.Second)))
		s.free = depart
	}
	at := depart.Add(s.link.Delay)
	if s.link.Loss > 0 {
		for seg := 0; seg < n; seg += segmentSize {
			if s.rng.Float64() < s.link.Loss {
				at = at.Add(s.penalty)
				break
			}
		}
	}
	if at.Before(s.last) {
		at = s.last
	}
	s.last = at
	return at
}

type streamChunk struct {
	b  []byte
	at time.Time
}

// pump copies src to dst, each chunk delivered when the link says.
func (s *streamLink) pump(dst, src net.Conn) {
	q := make(chan streamChunk, 4096)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTimer(0)
		<-t.C
		for c := range q {
			if d := time.Until(c.at); d > 0 {
				t.Reset(d)
				<-t.C
			}
			if _, err := dst.Write(c.b); err != nil {
				src.Close()
				for range q {
				}
				return
			}
		}
		// Half-close so the far side sees the end of the stream.
		if tc, ok := dst.(interface{ CloseWrite() error }); ok {
			tc.CloseWrite()
		}
	}()
	for {
		b := make([]byte, 32<<10)
		n, err := src.Read(b)
		if n > 0 {
			q <- streamChunk{b[:n], s.deliverAt(time.Now(), n)}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				dst.Close()
			}
			break
		}
	}
	close(q)
	<-done
}
