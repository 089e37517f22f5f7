package netem

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
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
	// gro says that the kernel may hand this socket several datagrams
	// from one sender, coalesced, with their segment size (UDP_GRO).
	gro bool
	// noGSO is set once the kernel refused a segmented send (UDP_SEGMENT),
	// e.g. on a device without checksum offload; only the writer of the
	// socket's batches touches it.
	noGSO bool
	// io counts the socket's system calls and datagrams.
	io ioCounters
}

// ioCounters count a socket's batched system calls and the datagrams
// they moved, to show what relaying a datagram costs.
type ioCounters struct {
	reads, readDatagrams   atomic.Uint64
	writes, writeDatagrams atomic.Uint64
}

// IOStats are the system calls a relay made and the datagrams they moved.
type IOStats struct {
	// Reads are recvmmsg calls that returned datagrams, ReadDatagrams the
	// datagrams they carried (a coalesced read counts each of its
	// segments).
	Reads, ReadDatagrams uint64
	// Writes are sendmmsg calls, WriteDatagrams the datagrams they sent
	// (a segmented send counts each segment).
	Writes, WriteDatagrams uint64
}

// segmentCount is the number of datagrams in a read of n bytes cut into
// segments of size bytes.
func segmentCount(n, size int) uint64 {
	if n == 0 || size <= 0 {
		return 1
	}
	return uint64((n + size - 1) / size)
}

func (s *IOStats) addReads(c *ioCounters) {
	s.Reads += c.reads.Load()
	s.ReadDatagrams += c.readDatagrams.Load()
}

func (s *IOStats) addWrites(c *ioCounters) {
	s.Writes += c.writes.Load()
	s.WriteDatagrams += c.writeDatagrams.Load()
}

// Add adds o's counts to s.
func (s *IOStats) Add(o IOStats) {
	s.Reads, s.ReadDatagrams = s.Reads+o.Reads, s.ReadDatagrams+o.ReadDatagrams
	s.Writes, s.WriteDatagrams = s.Writes+o.Writes, s.WriteDatagrams+o.WriteDatagrams
}

// String says how many datagrams each system call moved.
func (s IOStats) String() string {
	per := func(d, c uint64) float64 { return float64(d) / float64(max(c, 1)) }
	return fmt.Sprintf("%d recvmmsg for %d datagrams (%.1f per call), %d sendmmsg for %d (%.1f per call)",
		s.Reads, s.ReadDatagrams, per(s.ReadDatagrams, s.Reads), s.Writes, s.WriteDatagrams, per(s.WriteDatagrams, s.Writes))
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
	bc.enableGRO()
	return bc, nil
}

// enableGRO asks the kernel for coalesced reads (UDP_GRO). A sender's GSO
// burst then arrives as one buffer instead of being cut into datagrams on
// the way in, which is most of what a relay costs on loopback; kernels
// without UDP_GRO keep delivering datagrams one by one.
func (b *batchConn) enableGRO() {
	rc, err := b.c.SyscallConn()
	if err != nil {
		return
	}
	rc.Control(func(fd uintptr) {
		b.gro = unix.SetsockoptInt(int(fd), unix.IPPROTO_UDP, unix.UDP_GRO, 1) == nil
	})
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

// parseControl returns the ECN codepoint and the GRO segment size (0: a
// single datagram) in a received datagram's control messages: IP_TOS
// carries one byte, IPV6_TCLASS and UDP_GRO an int.
func parseControl(oob []byte) (ecn uint8, segSize int) {
	for len(oob) > 0 {
		h, data, rest, err := unix.ParseOneSocketControlMessage(oob)
		if err != nil {
			return ecn, segSize
		}
		switch {
		case h.Level == unix.IPPROTO_IP && h.Type == unix.IP_TOS && len(data) >= 1:
			ecn = data[0] & 3
		case h.Level == unix.IPPROTO_IPV6 && h.Type == unix.IPV6_TCLASS && len(data) >= 4:
			ecn = uint8(*(*int32)(unsafe.Pointer(&data[0]))) & 3
		case h.Level == unix.IPPROTO_UDP && h.Type == unix.UDP_GRO && len(data) >= 4:
			segSize = int(*(*int32)(unsafe.Pointer(&data[0])))
		}
		oob = rest
	}
	return ecn, segSize
}

// segmentMessage builds a UDP_SEGMENT control message: the kernel cuts
// the message into datagrams of size bytes (the last may be shorter).
func segmentMessage(b []byte, size int) []byte {
	n := len(b)
	b = append(b, make([]byte, unix.CmsgSpace(2))...)
	h := (*unix.Cmsghdr)(unsafe.Pointer(&b[n]))
	h.Level, h.Type = unix.IPPROTO_UDP, unix.UDP_SEGMENT
	h.SetLen(unix.CmsgLen(2))
	*(*uint16)(unsafe.Pointer(&b[n+unix.CmsgLen(0)])) = uint16(size)
	return b
}

// A readBatch is the reusable state of one reader: a message and a full
// sized buffer per slot.
type readBatch struct {
	msgs []ipv4.Message
}

// readBatches keeps the readers' batches (2 MiB each, for coalesced
// reads) between relays, so that a run of short cells does not allocate
// and clear them every time.
var readBatches = sync.Pool{New: func() any { return newReadBatch() }}

func newReadBatch() *readBatch {
	rb := &readBatch{msgs: make([]ipv4.Message, batchSize)}
	for i := range rb.msgs {
		rb.msgs[i].Buffers = [][]byte{make([]byte, maxRelayDatagram)}
		rb.msgs[i].OOB = make([]byte, 4*oobSize)
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

// datagram returns the i-th datagram read: payload, source and ECN. A
// coalesced read (UDP_GRO) is several datagrams: see segments.
func (rb *readBatch) datagram(i int) ([]byte, netip.AddrPort, uint8) {
	p, from, ecn, _ := rb.segments(i)
	return p, from, ecn
}

// segments returns the i-th message read, which holds datagrams of
// segSize bytes one after the other (the last may be shorter); segSize is
// the payload's length when it holds one.
func (rb *readBatch) segments(i int) (p []byte, from netip.AddrPort, ecn uint8, segSize int) {
	m := &rb.msgs[i]
	if ua, ok := m.Addr.(*net.UDPAddr); ok {
		from = canon(ua.AddrPort())
	}
	ecn, segSize = parseControl(m.OOB[:m.NN])
	p = m.Buffers[0][:m.N]
	if segSize <= 0 || segSize > len(p) {
		segSize = len(p)
	}
	return p, from, ecn, segSize
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
// per destination socket. Neighbouring datagrams to the same destination
// that lie one after the other in one read buffer, as the datagrams of a
// coalesced read do, leave as one segmented send (UDP_SEGMENT), so that a
// GSO burst crosses the relay as a burst.
type writeBatch struct {
	out   []outgoing
	rest  []outgoing
	msgs  []ipv4.Message
	bufs  [][1][]byte // one Buffers backing array per message, reused
	oobs  [][]byte    // one control message buffer per message, reused
	segs  []int       // datagrams per message
	sizes []int       // segment size per message
	// flushHook, if set, sees the datagrams per message of each
	// socket's send (tests).
	flushHook func(segs []int)
}

// Limits of one segmented send: the kernel takes at most 64 segments
// (UDP_MAX_SEGMENTS on older kernels) and one IP packet's worth of
// payload.
const (
	maxSegments   = 64
	maxGSOPayload = 65507 - 40 // room for an IPv6 header too
)

// joinable reports whether next directly follows cur in memory, within
// cur's capacity, so that cur[:len(cur)+len(next)] covers both.
func joinable(cur, next []byte) bool {
	if len(cur) == 0 || len(next) == 0 || cap(cur) < len(cur)+len(next) {
		return false
	}
	return unsafe.Pointer(unsafe.SliceData(cur[len(cur):len(cur)+1])) == unsafe.Pointer(unsafe.SliceData(next))
}

// flush writes every gathered datagram in order per socket, gives pooled
// buffers back and reports how many could not be written.
func (w *writeBatch) flush(pool *bufPool) (failed int) {
	for len(w.out) > 0 {
		conn := w.out[0].conn
		w.msgs, w.rest = w.msgs[:0], w.rest[:0]
		w.segs, w.sizes = w.segs[:0], w.sizes[:0]
		var prev *outgoing // the previous datagram to this socket
		open := false      // whether the last message may take more
		for i := range w.out {
			o := &w.out[i]
			if o.conn != conn {
				w.rest = append(w.rest, *o)
				continue
			}
			if k := len(w.msgs) - 1; open && !conn.noGSO && o.buf == nil && prev.buf == nil &&
				o.ecn == prev.ecn && o.dst == prev.dst && w.segs[k] < maxSegments {
				// A segmented send is datagrams of one size and
				// possibly a shorter last one.
				b := &w.bufs[k]
				if len(o.payload) <= w.sizes[k] && len(b[0])+len(o.payload) <= maxGSOPayload && joinable(b[0], o.payload) {
					b[0] = b[0][:len(b[0])+len(o.payload)]
					w.segs[k]++
					open = len(o.payload) == w.sizes[k]
					prev = o
					continue
				}
			}
			if len(w.bufs) <= len(w.msgs) {
				w.bufs = append(w.bufs, [1][]byte{})
				w.oobs = append(w.oobs, nil)
			}
			b := &w.bufs[len(w.msgs)]
			b[0] = o.payload
			m := ipv4.Message{Buffers: b[:], Addr: o.dst}
			if o.ecn != NotECT {
				m.OOB = conn.tos[o.ecn]
			}
			w.msgs = append(w.msgs, m)
			w.segs = append(w.segs, 1)
			w.sizes = append(w.sizes, len(o.payload))
			prev, open = o, true
		}
		for i := range w.msgs {
			if w.segs[i] > 1 {
				w.oobs[i] = segmentMessage(append(w.oobs[i][:0], w.msgs[i].OOB...), w.sizes[i])
				w.msgs[i].OOB = w.oobs[i]
			}
		}
		if w.flushHook != nil {
			w.flushHook(w.segs)
		}
		failed += conn.writeAll(w.msgs, w.segs, w.sizes)
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

// writeAll writes msgs, of segs[i] datagrams each, with sendmmsg,
// resuming after a partial write; a message that fails is skipped and its
// datagrams counted. If the kernel refuses a segmented send, the socket
// stops using them and the message goes out a datagram at a time.
func (b *batchConn) writeAll(msgs []ipv4.Message, segs, sizes []int) (failed int) {
	for len(msgs) > 0 {
		n, err := b.pc.WriteBatch(msgs, 0)
		b.io.writes.Add(1)
		for _, k := range segs[:max(n, 0)] {
			b.io.writeDatagrams.Add(uint64(k))
		}
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				for _, k := range segs {
					failed += k
				}
				return failed
			}
			if segs[0] > 1 && (errors.Is(err, unix.EIO) || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EOPNOTSUPP)) {
				b.noGSO = true
				failed += b.writeSplit(msgs[0], sizes[0])
			} else {
				// The first message failed (e.g. ECONNREFUSED from an
				// earlier ICMP error): skip it, as a receiver would
				// lose it.
				failed += segs[0]
			}
			n = 1
		}
		msgs, segs, sizes = msgs[n:], segs[n:], sizes[n:]
	}
	return failed
}

// writeSplit writes a segmented message's datagrams one by one.
func (b *batchConn) writeSplit(m ipv4.Message, size int) (failed int) {
	p := m.Buffers[0]
	var tos []byte
	if ecn, _ := parseControl(m.OOB); ecn != NotECT {
		tos = b.tos[ecn]
	}
	for off := 0; off < len(p); off += size {
		one := []ipv4.Message{{Buffers: [][]byte{p[off:min(off+size, len(p))]}, Addr: m.Addr, OOB: tos}}
		if _, err := b.pc.WriteBatch(one, 0); err != nil {
			failed++
		}
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
