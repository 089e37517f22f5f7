package netem

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"unsafe"

	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
	"golang.org/x/sys/unix"
)

// ECN codepoints of the IP header's two low TOS / traffic class bits
// (RFC 3168 §5).
const (
	NotECT uint8 = 0
	ECT1   uint8 = 1
	ECT0   uint8 = 2
	CE     uint8 = 3
)

// batchSize is how many datagrams one recvmmsg or sendmmsg call moves.
const batchSize = 32

// maxRelayDatagram is the largest UDP payload the relay reads whole.
const maxRelayDatagram = 65535

// oobSize holds one IP_TOS or IPV6_TCLASS control message.
var oobSize = unix.CmsgSpace(4)

// A batchConn is a UDP socket read and written a batch at a time
// (recvmmsg, sendmmsg through x/net's ipv4 and ipv6 PacketConns), with the
// IP ECN field of every datagram received (IP_RECVTOS, IPV6_RECVTCLASS)
// and set per datagram on send (an IP_TOS or IPV6_TCLASS control message).
type batchConn struct {
	c  *net.UDPConn
	v6 bool
	pc interface {
		ReadBatch([]ipv4.Message, int) (int, error)
		WriteBatch([]ipv4.Message, int) (int, error)
	}
	// tos holds a prebuilt control message per ECN codepoint.
	tos [4][]byte
}

// listenBatch opens a UDP socket on a for batched I/O with ECN, with
// send and receive buffers of bufSize. The family follows a's address, so
// that an IPv4 socket is never a dual-stack IPv6 one.
func listenBatch(listen func(string, *net.UDPAddr) (*net.UDPConn, error), a netip.AddrPort, bufSize int) (*batchConn, error) {
	network := "udp4"
	if a.Addr().Is6() && !a.Addr().Is4In6() {
		network = "udp6"
	}
	c, err := listen(network, net.UDPAddrFromAddrPort(a))
	if err != nil {
		return nil, fmt.Errorf("netem: relay: listen %s: %w", a, err)
	}
	bc, err := newBatchConn(c, network == "udp6", bufSize)
	if err != nil {
		c.Close()
		return nil, err
	}
	return bc, nil
}

func newBatchConn(c *net.UDPConn, v6 bool, bufSize int) (*batchConn, error) {
	b := &batchConn{c: c, v6: v6}
	level, recv, typ := unix.IPPROTO_IP, unix.IP_RECVTOS, unix.IP_TOS
	if v6 {
		level, recv, typ = unix.IPPROTO_IPV6, unix.IPV6_RECVTCLASS, unix.IPV6_TCLASS
		b.pc = ipv6.NewPacketConn(c)
	} else {
		b.pc = ipv4.NewPacketConn(c)
	}
	rc, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	var serr error
	err = rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), level, recv, 1)
		// Buffers beyond rmem_max and wmem_max need the FORCE options,
		// which only root may use; the plain ones are the fallback.
		if unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, bufSize) != nil {
			unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, bufSize)
		}
		if unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, bufSize) != nil {
			unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF, bufSize)
		}
	})
	if err == nil {
		err = serr
	}
	if err != nil {
		return nil, fmt.Errorf("netem: relay: receive ECN on %s: %w", c.LocalAddr(), err)
	}
	for ecn := range b.tos {
		b.tos[ecn] = tosMessage(level, typ, ecn)
	}
	return b, nil
}

// tosMessage builds a control message carrying an int value.
func tosMessage(level, typ, value int) []byte {
	b := make([]byte, unix.CmsgSpace(4))
	h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
	h.Level, h.Type = int32(level), int32(typ)
	h.SetLen(unix.CmsgLen(4))
	*(*int32)(unsafe.Pointer(&b[unix.CmsgLen(0)])) = int32(value)
	return b
}

// parseECN returns the ECN codepoint in a received datagram's control
// messages: IP_TOS carries one byte, IPV6_TCLASS an int.
func parseECN(oob []byte) uint8 {
	for len(oob) > 0 {
		h, data, rest, err := unix.ParseOneSocketControlMessage(oob)
		if err != nil {
			return NotECT
		}
		switch {
		case h.Level == unix.IPPROTO_IP && h.Type == unix.IP_TOS && len(data) >= 1:
			return data[0] & 3
		case h.Level == unix.IPPROTO_IPV6 && h.Type == unix.IPV6_TCLASS && len(data) >= 4:
			return uint8(*(*int32)(unsafe.Pointer(&data[0]))) & 3
		}
		oob = rest
	}
	return NotECT
}

// A readBatch is the reusable state of one reader: a message and a full
// sized buffer per slot.
type readBatch struct {
	msgs []ipv4.Message
}

func newReadBatch() *readBatch {
	rb := &readBatch{msgs: make([]ipv4.Message, batchSize)}
	for i := range rb.msgs {
		rb.msgs[i].Buffers = [][]byte{make([]byte, maxRelayDatagram)}
		rb.msgs[i].OOB = make([]byte, 2*oobSize)
	}
	return rb
}

// read fills the batch; it returns the number of datagrams read.
func (b *batchConn) read(rb *readBatch) (int, error) {
	for i := range rb.msgs {
		m := &rb.msgs[i]
		m.OOB = m.OOB[:cap(m.OOB)]
		m.N, m.NN, m.Flags, m.Addr = 0, 0, 0, nil
	}
	return b.pc.ReadBatch(rb.msgs, 0)
}

// datagram returns the i-th datagram read: payload, source and ECN.
func (rb *readBatch) datagram(i int) ([]byte, netip.AddrPort, uint8) {
	m := &rb.msgs[i]
	var from netip.AddrPort
	if ua, ok := m.Addr.(*net.UDPAddr); ok {
		from = canon(ua.AddrPort())
	}
	return m.Buffers[0][:m.N], from, parseECN(m.OOB[:m.NN])
}

// An outgoing datagram waiting for its sendmmsg.
type outgoing struct {
	conn    *batchConn
	dst     *net.UDPAddr
	payload []byte
	ecn     uint8
	// buf, when set, is a pooled buffer to give back once written.
	buf *[]byte
}

// A writeBatch gathers datagrams and writes them with one sendmmsg call
// per destination socket.
type writeBatch struct {
	out  []outgoing
	rest []outgoing
	msgs []ipv4.Message
	bufs [][1][]byte // one Buffers backing array per message, reused
}

// flush writes every gathered datagram in order per socket, gives pooled
// buffers back and reports how many could not be written.
func (w *writeBatch) flush(pool *bufPool) (failed int) {
	for len(w.out) > 0 {
		conn := w.out[0].conn
		w.msgs, w.rest = w.msgs[:0], w.rest[:0]
		for _, o := range w.out {
			if o.conn != conn {
				w.rest = append(w.rest, o)
				continue
			}
			if len(w.bufs) <= len(w.msgs) {
				w.bufs = append(w.bufs, [1][]byte{})
			}
			b := &w.bufs[len(w.msgs)]
			b[0] = o.payload
			m := ipv4.Message{Buffers: b[:], Addr: o.dst}
			if o.ecn != NotECT {
				m.OOB = conn.tos[o.ecn]
			}
			w.msgs = append(w.msgs, m)
		}
		failed += conn.writeAll(w.msgs)
		for _, o := range w.out {
			if o.conn == conn && o.buf != nil {
				pool.put(o.buf)
			}
		}
		clear(w.bufs)
		clear(w.msgs)
		clear(w.out)
		w.out, w.rest = w.rest, w.out[:0]
	}
	return failed
}

// writeAll writes msgs with sendmmsg, resuming after a partial write; a
// datagram that fails is skipped and counted.
func (b *batchConn) writeAll(msgs []ipv4.Message) (failed int) {
	for len(msgs) > 0 {
		n, err := b.pc.WriteBatch(msgs, 0)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return failed + len(msgs)
			}
			// The first datagram failed (e.g. ECONNREFUSED from an
			// earlier ICMP error): skip it, as a receiver would lose it.
			n = 1
			failed++
		}
		msgs = msgs[n:]
	}
	return failed
}

// A bufPool recycles the copies of datagrams that wait for a timer.
type bufPool struct {
	mu   sync.Mutex
	free []*[]byte
}

const pooledSize = 2048

func (p *bufPool) get(n int) *[]byte {
	if n <= pooledSize {
		p.mu.Lock()
		if k := len(p.free); k > 0 {
			b := p.free[k-1]
			p.free = p.free[:k-1]
			p.mu.Unlock()
			*b = (*b)[:n]
			return b
		}
		p.mu.Unlock()
		b := make([]byte, n, pooledSize)
		return &b
	}
	b := make([]byte, n)
	return &b
}

func (p *bufPool) put(b *[]byte) {
	if cap(*b) != pooledSize {
		return
	}
	p.mu.Lock()
	if len(p.free) < 8192 {
		p.free = append(p.free, b)
	}
	p.mu.Unlock()
}
