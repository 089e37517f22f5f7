package rpc

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"net"
	"os"
	"sync"
	"time"
)

// The UDP transport runs the framed protocol of TCP+TLS (TLS 1.3 included)
// over a reliable datagram session of its own:
//
//   - fragmentation: each write is cut into datagrams of at most
//     udpChunk bytes, each with a sequence number;
//   - retransmission: every datagram is acknowledged (cumulative ACK plus
//     the sequence number that arrived), and one that stays unacknowledged
//     for the retransmission timeout (derived from the measured RTT) is
//     sent again, up to a give-up time;
//   - duplicate suppression: the receiver drops sequence numbers it has
//     already delivered or buffered, and delivers in order.
//
// Calls are limited to UDPMaxMessage bytes each way, which keeps a call's
// datagrams within a small window. A server demultiplexes sessions by the
// client's address; a datagram for an unknown session (after a server
// restart) is answered with a close, so the client redials at once.
//
// Datagrams are
//
//	data:  1 | seq (8) | bytes
//	ack:   2 | cumulative next expected seq (8) | seq received (8)
//	close: 3
const (
	udpData  byte = 1
	udpAck   byte = 2
	udpClose byte = 3

	udpChunk = 1200
	// udpWindow is the most datagrams in flight per direction.
	udpWindow = 512
	// udpGiveUp ends a session whose oldest datagram stayed
	// unacknowledged this long.
	udpGiveUp = 5 * time.Second
)

// UDPMaxMessage is the largest request or answer the UDP transport carries.
const UDPMaxMessage = 64 << 10

var errSessionClosed = errors.New("udp session closed")

// udpSession is a reliable, ordered byte stream over datagrams; it
// implements net.Conn so that TLS and muxConn run on it unchanged.
type udpSession struct {
	write  func([]byte) error
	local  net.Addr
	remote net.Addr

	mu       sync.Mutex
	cond     *sync.Cond
	nextSeq  uint64
	unacked  map[uint64]*udpOut
	recvNext uint64
	ooo      map[uint64][]byte // out of order arrivals
	rbuf     []byte            // in-order bytes not yet read
	err      error
	srtt     time.Duration
	closed   chan struct{}
	rdl      time.Time
}

type udpOut struct {
	b    []byte // the whole datagram
	sent time.Time
	// first is when the datagram was first sent; it bounds retrying.
	first time.Time
	tries int
}

func newUDPSession(local, remote net.Addr, write func([]byte) error) *udpSession {
	s := &udpSession{write: write, local: local, remote: remote, unacked: map[uint64]*udpOut{},
		ooo: map[uint64][]byte{}, closed: make(chan struct{}), srtt: 10 * time.Millisecond}
	s.cond = sync.NewCond(&s.mu)
	go s.retransmitLoop()
	return s
}

// input handles one datagram addressed to the session.
func (s *udpSession) input(b []byte) {
	if len(b) == 0 {
		return
	}
	switch b[0] {
	case udpData:
		if len(b) < 9 {
			return
		}
		seq := binary.BigEndian.Uint64(b[1:])
		s.mu.Lock()
		if seq >= s.recvNext && seq < s.recvNext+4*udpWindow {
			if _, dup := s.ooo[seq]; !dup {
				s.ooo[seq] = append([]byte(nil), b[9:]...)
			}
			for {
				p, ok := s.ooo[s.recvNext]
				if !ok {
					break
				}
				delete(s.ooo, s.recvNext)
				s.rbuf = append(s.rbuf, p...)
				s.recvNext++
			}
			s.cond.Broadcast()
		}
		cum := s.recvNext
		s.mu.Unlock()
		var ack [17]byte
		ack[0] = udpAck
		binary.BigEndian.PutUint64(ack[1:], cum)
		binary.BigEndian.PutUint64(ack[9:], seq)
		s.write(ack[:])
	case udpAck:
		if len(b) < 17 {
			return
		}
		cum := binary.BigEndian.Uint64(b[1:])
		seq := binary.BigEndian.Uint64(b[9:])
		now := time.Now()
		s.mu.Lock()
		if o, ok := s.unacked[seq]; ok && o.tries == 1 {
			// Karn's rule: only first transmissions give RTT samples.
			s.srtt = (7*s.srtt + now.Sub(o.sent)) / 8
		}
		delete(s.unacked, seq)
		for q, o := range s.unacked {
			if q < cum {
				_ = o
				delete(s.unacked, q)
			}
		}
		s.cond.Broadcast()
		s.mu.Unlock()
	case udpClose:
		s.fail(errSessionClosed, false)
	}
}

func (s *udpSession) rto() time.Duration {
	return max(4*s.srtt, 20*time.Millisecond)
}

func (s *udpSession) retransmitLoop() {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-s.closed:
			return
		case now := <-t.C:
			var resend [][]byte
			s.mu.Lock()
			rto := s.rto()
			giveUp := false
			for _, o := range s.unacked {
				if now.Sub(o.first) > udpGiveUp {
					giveUp = true
					break
				}
				if now.Sub(o.sent) > rto<<min(o.tries-1, 6) {
					o.sent = now
					o.tries++
					resend = append(resend, o.b)
				}
			}
			s.mu.Unlock()
			if giveUp {
				s.fail(errors.New("udp peer stopped acknowledging"), true)
				return
			}
			for _, b := range resend {
				s.write(b)
			}
		}
	}
}

func (s *udpSession) fail(err error, tell bool) {
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		return
	}
	s.err = err
	close(s.closed)
	s.cond.Broadcast()
	s.mu.Unlock()
	if tell {
		s.write([]byte{udpClose})
	}
}

func (s *udpSession) Read(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.rbuf) == 0 {
		if s.err != nil {
			return 0, s.err
		}
		if !s.rdl.IsZero() && time.Now().After(s.rdl) {
			return 0, os.ErrDeadlineExceeded
		}
		s.cond.Wait()
	}
	n := copy(p, s.rbuf)
	s.rbuf = s.rbuf[n:]
	if len(s.rbuf) == 0 {
		s.rbuf = nil
	}
	return n, nil
}

func (s *udpSession) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		n := min(len(p), udpChunk)
		s.mu.Lock()
		for len(s.unacked) >= udpWindow && s.err == nil {
			s.cond.Wait()
		}
		if s.err != nil {
			s.mu.Unlock()
			return written, s.err
		}
		b := make([]byte, 9+n)
		b[0] = udpData
		binary.BigEndian.PutUint64(b[1:], s.nextSeq)
		copy(b[9:], p[:n])
		now := time.Now()
		s.unacked[s.nextSeq] = &udpOut{b: b, sent: now, first: now, tries: 1}
		s.nextSeq++
		s.mu.Unlock()
		s.write(b)
		p = p[n:]
		written += n
	}
	return written, nil
}

func (s *udpSession) Close() error {
	s.fail(errSessionClosed, true)
	return nil
}

func (s *udpSession) LocalAddr() net.Addr  { return s.local }
func (s *udpSession) RemoteAddr() net.Addr { return s.remote }

// SetDeadline and friends exist for net.Conn; only the TLS handshake's
// read deadline matters here, and the handshake context bounds it anyway.
func (s *udpSession) SetDeadline(t time.Time) error      { return s.SetReadDeadline(t) }
func (s *udpSession) SetWriteDeadline(t time.Time) error { return nil }
func (s *udpSession) SetReadDeadline(t time.Time) error {
	s.mu.Lock()
	s.rdl = t
	s.mu.Unlock()
	if !t.IsZero() {
		time.AfterFunc(time.Until(t), func() {
			s.mu.Lock()
			s.cond.Broadcast()
			s.mu.Unlock()
		})
	}
	return nil
}

// DialUDP returns a transport to a UDP listener at addr. tlsConf must be
// set: the session runs TLS 1.3 over its reliable datagram layer.
func DialUDP(addr string, tlsConf *tls.Config) Transport {
	conf := withALPN(tlsConf, alpnRPC)
	t := &streamTransport{name: "udp", max: UDPMaxMessage}
	t.dial = func(ctx context.Context) (net.Conn, error) {
		raddr, err := net.ResolveUDPAddr("udp", addr)
		if err != nil {
			return nil, err
		}
		uc, err := net.DialUDP("udp", nil, raddr)
		if err != nil {
			return nil, err
		}
		s := newUDPSession(uc.LocalAddr(), raddr, func(b []byte) error { _, err := uc.Write(b); return err })
		go func() {
			buf := make([]byte, 2048)
			for {
				n, err := uc.Read(buf)
				if err != nil {
					s.fail(err, false)
					return
				}
				s.input(buf[:n])
			}
		}()
		go func() {
			<-s.closed
			uc.Close()
		}()
		tc := tls.Client(s, conf)
		if err := tc.HandshakeContext(ctx); err != nil {
			s.Close()
			return nil, err
		}
		return tc, nil
	}
	return t
}

// udpListener is the server side of the UDP transport.
type udpListener struct {
	pc      *net.UDPConn
	tlsConf *tls.Config
	stream  *streamListener // serves the TLS sessions like TCP+TLS
	mu      sync.Mutex
	sess    map[string]*udpSession
	accept  chan net.Conn
	done    chan struct{}
	once    sync.Once
}

// ListenUDP listens on the UDP address addr. tlsConf must carry a
// certificate.
func ListenUDP(addr string, tlsConf *tls.Config) (Listener, error) {
	if tlsConf == nil || (len(tlsConf.Certificates) == 0 && tlsConf.GetCertificate == nil) {
		return nil, errors.New("rpc: ListenUDP needs a TLS configuration with a certificate")
	}
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, err
	}
	pc, err := net.ListenUDP("udp", ua)
	if err != nil {
		return nil, err
	}
	l := &udpListener{pc: pc, sess: map[string]*udpSession{}, accept: make(chan net.Conn), done: make(chan struct{})}
	l.stream = &streamListener{name: "udp", l: l, tlsConf: withALPN(tlsConf, alpnRPC), max: UDPMaxMessage, conns: map[*muxConn]struct{}{}}
	go l.readLoop()
	return l.stream, nil
}

func (l *udpListener) readLoop() {
	buf := make([]byte, 2048)
	for {
		n, ra, err := l.pc.ReadFromUDP(buf)
		if err != nil {
			l.Close()
			return
		}
		b := buf[:n]
		key := ra.String()
		l.mu.Lock()
		s := l.sess[key]
		l.mu.Unlock()
		if s == nil {
			if n < 9 || b[0] != udpData || binary.BigEndian.Uint64(b[1:]) != 0 {
				if b[0] != udpClose {
					l.pc.WriteToUDP([]byte{udpClose}, ra)
				}
				continue
			}
			raddr := ra
			s = newUDPSession(l.pc.LocalAddr(), raddr, func(b []byte) error { _, err := l.pc.WriteToUDP(b, raddr); return err })
			l.mu.Lock()
			l.sess[key] = s
			l.mu.Unlock()
			go func() {
				<-s.closed
				l.mu.Lock()
				if l.sess[key] == s {
					delete(l.sess, key)
				}
				l.mu.Unlock()
			}()
			select {
			case l.accept <- s:
			case <-l.done:
				s.Close()
				return
			}
		}
		s.input(b)
	}
}

// Accept, Close and Addr make udpListener a net.Listener for streamListener.
func (l *udpListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.accept:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *udpListener) Close() error {
	l.once.Do(func() {
		close(l.done)
		l.mu.Lock()
		ss := l.sess
		l.sess = map[string]*udpSession{}
		l.mu.Unlock()
		for _, s := range ss {
			s.Close()
		}
		l.pc.Close()
	})
	return nil
}

func (l *udpListener) Addr() net.Addr { return l.pc.LocalAddr() }
