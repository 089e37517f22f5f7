package quic

import (
	"encoding/binary"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The fast path of the endpoint's socket on Linux: batched receive
// (recvmmsg) with UDP GRO, batched send (sendmmsg) of GSO runs, and socket
// buffer sizing. The system calls are made through the socket's RawConn,
// so that the Go poller still parks the reading goroutine, and on buffers
// that are reused: in steady state neither direction allocates.

// sockIO is the raw access to an endpoint's UDP socket.
type sockIO struct {
	rc       syscall.RawConn
	family   int  // AF_INET or AF_INET6: how to write the peer's address
	groAllow bool // Config.DisableGRO is off: the reader may turn UDP_GRO on
	batch    bool // recvmmsg / sendmmsg rather than recvmsg / sendmsg
	gso      bool // Config.DisableGSO is off
	// gro is set once UDP_GRO is on (see groAfter): reads may then return
	// several datagrams per message. Only the reader writes it.
	gro atomic.Bool
}

// groAfter is how many datagrams an endpoint receives before its reader
// turns UDP_GRO on. Turning it on is not free: the first socket of an
// address family with GRO (or any UDP encapsulation) on flips a static key
// in the kernel, and its close flips it back, each a patch of kernel text
// that costs hundreds of microseconds. A client that dials from a fresh
// socket for one short exchange (a handshake, a small request) paid that
// twice per connection, more than the handshake's cryptography, for
// nothing; a transfer large enough to gain from GRO passes this count in
// its first round trips.
const groAfter = 64

// newSockIO prepares c for the fast path as cfg asks. It returns nil if
// the socket gives no raw access.
func newSockIO(c *net.UDPConn, cfg *Config) *sockIO {
	rc, err := c.SyscallConn()
	if err != nil {
		return nil
	}
	// The environment can switch offloads off too, so that benchmarks
	// sweep them in processes they do not configure (quiver serve, get).
	s := &sockIO{rc: rc, batch: !cfg.DisableBatching && !envSwitch("QUIVER_DISABLE_BATCHING"),
		gso: !cfg.DisableGSO && !envSwitch("QUIVER_DISABLE_GSO")}
	s.groAllow = !cfg.DisableGRO && !envSwitch("QUIVER_DISABLE_GRO")
	ok := false
	rc.Control(func(fd uintptr) {
		sa, err := unix.Getsockname(int(fd))
		if err != nil {
			return
		}
		switch sa.(type) {
		case *unix.SockaddrInet4:
			s.family = unix.AF_INET
		case *unix.SockaddrInet6:
			s.family = unix.AF_INET6
		default:
			return
		}
		ok = true
	})
	if !ok {
		return nil
	}
	return s
}

// envSwitch reports whether the environment variable name is "true" or "1".
func envSwitch(name string) bool {
	v := os.Getenv(name)
	return v == "true" || v == "1"
}

// setSocketBuffers asks for size-byte send and receive buffers, with the
// FORCE options when allowed (root), else as far as net.core.[rw]mem_max
// lets us.
func setSocketBuffers(c *net.UDPConn, size int) {
	if size <= 0 {
		return
	}
	rc, err := c.SyscallConn()
	if err != nil {
		return
	}
	rc.Control(func(fd uintptr) {
		for _, o := range [][2]int{{unix.SO_RCVBUFFORCE, unix.SO_RCVBUF}, {unix.SO_SNDBUFFORCE, unix.SO_SNDBUF}} {
			if unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, o[0], size) != nil {
				unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, o[1], size)
			}
		}
	})
}

const (
	// recvBatchLen is how many messages one recvmmsg may return.
	recvBatchLen = 8
	// groBufSize holds the largest GRO batch the kernel builds (64 KiB).
	groBufSize = 1 << 16
	// recvOOBLen holds the ECN (IP_TOS or IPV6_TCLASS) and UDP_GRO
	// control messages with room to spare.
	recvOOBLen = 128
)

// mmsgReader is the reader's state for recvmmsg: headers, buffers, and
// the results of the last call.
type mmsgReader struct {
	hdrs  [recvBatchLen]unix.Mmsghdr
	iovs  [recvBatchLen]unix.Iovec
	names [recvBatchLen]unix.RawSockaddrInet6
	oobs  [recvBatchLen][recvOOBLen]byte
	bufs  [recvBatchLen][]byte
	// rx are the buffers of a GRO reader, which the datagrams of a large
	// message share (rxbuf.go); nil in a datagram-sized reader.
	rx [recvBatchLen]*rxBuf

	want  int // messages to ask for
	n     int // messages received by the last call
	errno syscall.Errno
	batch bool
	fn    func(fd uintptr) bool // the RawConn.Read callback, made once
}

// Reader buffers are pooled across endpoints: a client that dials many
// short connections, each on its own socket, reuses them.
var (
	mmsgReaderPool    = sync.Pool{New: func() any { return newMmsgReader(groBufSize) }}
	mmsgReaderPoolDgm = sync.Pool{New: func() any { return newMmsgReader(recvBufSize) }}
)

func newMmsgReader(size int) *mmsgReader {
	r := &mmsgReader{}
	for i := range r.bufs {
		if size == groBufSize {
			r.rx[i] = rxFreeGRO.get()
			r.bufs[i] = r.rx[i].b
		} else {
			r.bufs[i] = make([]byte, size)
		}
	}
	r.fn = r.call
	return r
}

// enableGRO turns UDP_GRO on and reports whether the kernel accepted it.
// Kernels before 5.0 refuse the option: reads then keep returning single
// datagrams, which the reader handles alike.
func (s *sockIO) enableGRO() bool {
	var err error
	if cerr := s.rc.Control(func(fd uintptr) {
		err = unix.SetsockoptInt(int(fd), unix.SOL_UDP, unix.UDP_GRO, 1)
	}); cerr != nil || err != nil {
		return false
	}
	s.gro.Store(true)
	return true
}

func (s *sockIO) getReader() *mmsgReader {
	var r *mmsgReader
	if s.gro.Load() {
		r = mmsgReaderPool.Get().(*mmsgReader)
	} else {
		r = mmsgReaderPoolDgm.Get().(*mmsgReader)
	}
	r.batch = s.batch
	r.want = 1
	if s.batch {
		r.want = recvBatchLen
	}
	return r
}

func (s *sockIO) putReader(r *mmsgReader) {
	if len(r.bufs[0]) == groBufSize {
		mmsgReaderPool.Put(r)
	} else {
		mmsgReaderPoolDgm.Put(r)
	}
}

// call is the RawConn.Read callback: one recvmmsg (or recvmsg). It
// returns false to wait for the socket to become readable.
func (r *mmsgReader) call(fd uintptr) bool {
	for {
		var n uintptr
		var errno syscall.Errno
		if r.batch {
			n, _, errno = unix.Syscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&r.hdrs[0])), uintptr(r.want), 0, 0, 0)
		} else {
			n, _, errno = unix.Syscall(unix.SYS_RECVMSG, fd, uintptr(unsafe.Pointer(&r.hdrs[0].Hdr)), 0)
			if errno == 0 {
				r.hdrs[0].Len = uint32(n)
				n = 1
			}
		}
		switch errno {
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		}
		r.n, r.errno = int(n), errno
		return true
	}
}

// read fills the batch with up to r.want messages, waiting for at least
// one. It returns a RawConn error (the socket is closed) or the errno of
// the system call.
func (r *mmsgReader) read(rc syscall.RawConn) error {
	for i := 0; i < r.want; i++ {
		r.iovs[i] = unix.Iovec{Base: &r.bufs[i][0]}
		r.iovs[i].SetLen(len(r.bufs[i]))
		h := &r.hdrs[i].Hdr
		*h = unix.Msghdr{
			Name:    (*byte)(unsafe.Pointer(&r.names[i])),
			Namelen: uint32(unsafe.Sizeof(r.names[i])),
			Iov:     &r.iovs[i],
			Control: &r.oobs[i][0],
		}
		h.Iovlen = 1
		h.SetControllen(recvOOBLen)
		r.hdrs[i].Len = 0
	}
	r.n, r.errno = 0, 0
	if err := rc.Read(r.fn); err != nil {
		return err
	}
	if r.errno != 0 {
		return r.errno
	}
	return nil
}

// message returns the i-th received message: its bytes, sender, ECN
// codepoint and GRO segment size (0: one datagram).
func (r *mmsgReader) message(i int) (b []byte, from netip.AddrPort, ecn uint8, seg int) {
	h := &r.hdrs[i]
	b = r.bufs[i][:h.Len]
	from = sockaddrToAddrPort(&r.names[i])
	oob := r.oobs[i][:h.Hdr.Controllen]
	return b, from, parseECN(oob), parseGROSize(oob)
}

// sockaddrToAddrPort reads the address the kernel wrote into sa, which
// may hold a sockaddr_in or a sockaddr_in6.
func sockaddrToAddrPort(sa *unix.RawSockaddrInet6) netip.AddrPort {
	port := binary.BigEndian.Uint16((*[2]byte)(unsafe.Pointer(&sa.Port))[:])
	switch sa.Family {
	case unix.AF_INET:
		sa4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		return netip.AddrPortFrom(netip.AddrFrom4(sa4.Addr), port)
	case unix.AF_INET6:
		return netip.AddrPortFrom(netip.AddrFrom16(sa.Addr).Unmap(), port)
	}
	return netip.AddrPort{}
}

// parseGROSize returns the segment size from a UDP_GRO control message,
// or 0.
func parseGROSize(oob []byte) int {
	for len(oob) >= unix.SizeofCmsghdr {
		h := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
		l := int(h.Len)
		if l < unix.SizeofCmsghdr || l > len(oob) {
			return 0
		}
		if h.Level == unix.SOL_UDP && h.Type == unix.UDP_GRO && l >= unix.SizeofCmsghdr+4 {
			return int(binary.NativeEndian.Uint32(oob[unix.SizeofCmsghdr:]))
		}
		next := (l + 7) &^ 7
		if next > len(oob) {
			return 0
		}
		oob = oob[next:]
	}
	return 0
}

// readLoopRaw is the endpoint's reader on the fast path: it receives
// batches and splits GRO messages into their datagrams and routes them:
// those of a large message in place (rxbuf.go), the others each copied
// into a pooled datagram.
func (e *Endpoint) readLoopRaw() {
	defer close(e.readDone)
	r := e.sock.getReader()
	defer func() { e.sock.putReader(r) }()
	// received counts datagrams until GRO is turned on; -1 once it is, or
	// when it may not be.
	received := 0
	if !e.sock.groAllow {
		received = -1
	}
	for {
		if received >= groAfter {
			received = -1
			if e.sock.enableGRO() {
				e.sock.putReader(r)
				r = e.sock.getReader()
			}
		}
		if err := r.read(e.sock.rc); err != nil {
			if _, ok := err.(syscall.Errno); ok && !e.isClosed() {
				// An ICMP error reported on the socket: read on.
				continue
			}
			return
		}
		if received >= 0 {
			received += r.n
		}
		for i := 0; i < r.n; i++ {
			b, from, ecn, seg := r.message(i)
			if seg <= 0 || seg > len(b) {
				seg = len(b)
			}
			// A large GRO message's datagrams stay where they lie and are
			// opened there; the reader reads on into a fresh buffer.
			x := r.rx[i]
			shared := x != nil && len(b) >= minShared
			if shared {
				x.hold()
			}
			for len(b) > 0 {
				n := min(seg, len(b))
				if n <= recvBufSize {
					var d *datagram
					if shared {
						d = newSharedDatagram(x, b[:n])
					} else {
						d = newDatagram()
						d.b = d.buf[:copy(d.buf, b[:n])]
					}
					d.addr, d.ecn = from, ecn
					e.route(d)
				}
				b = b[n:]
			}
			if shared {
				r.rx[i] = rxFreeGRO.get()
				r.bufs[i] = r.rx[i].b
				x.unref()
			}
		}
	}
}

// isClosed reports whether the endpoint's socket is closed or closing,
// which ends its reader.
func (e *Endpoint) isClosed() bool {
	select {
	case <-e.done:
		return true
	default:
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.closed
}

const (
	// maxSendMsgs is how many messages one sendmmsg carries: a turn's
	// datagrams (maxDatagramsPerTurn) each in its own message when GSO is
	// off.
	maxSendMsgs = maxDatagramsPerTurn
	// sendQueueBytes is the room for a turn's datagrams.
	sendQueueBytes = maxDatagramsPerTurn * maxDatagramSize
)

// sendMsg is one message of a sendQueue: a datagram or a GSO run of
// equal-size datagrams (the last may be shorter), all with one ECN mark.
type sendMsg struct {
	off, end int // the bytes in sendQueue.buf
	seg      int // segment size: the size of the first datagram
	count    int
	short    bool // the last datagram is shorter than seg: the run is closed
	ecn      uint8
}

// sendQueue collects the datagrams of one loop turn and sends them in as
// few system calls as the switches allow. Queues are pooled, so that an
// idle connection holds none.
type sendQueue struct {
	buf  []byte
	msgs []sendMsg
	gso  bool // may coalesce runs

	hdrs    [maxSendMsgs]unix.Mmsghdr
	iovs    [maxSendMsgs]unix.Iovec
	oobs    [maxSendMsgs][sendOOBLen]byte
	name    unix.RawSockaddrInet6
	nameLen uint32

	// State of the RawConn.Write callback.
	first, count int
	single       bool
	n            int
	errno        syscall.Errno
	fn           func(fd uintptr) bool
}

var sendQueuePool = sync.Pool{New: func() any {
	q := &sendQueue{buf: make([]byte, 0, sendQueueBytes), msgs: make([]sendMsg, 0, maxSendMsgs)}
	q.fn = q.call
	return q
}}

func getSendQueue(gso bool) *sendQueue {
	q := sendQueuePool.Get().(*sendQueue)
	q.gso = gso
	return q
}

func (q *sendQueue) release() {
	q.buf, q.msgs = q.buf[:0], q.msgs[:0]
	sendQueuePool.Put(q)
}

// add appends a copy of datagram d. It returns false when the queue is
// full and must be flushed first.
func (q *sendQueue) add(d []byte, ecn uint8) bool {
	if !q.fits(len(d), ecn) {
		return false
	}
	q.buf = append(q.buf, d...)
	q.record(len(d), ecn)
	return true
}

// tail returns the free room after the queued datagrams, for the next
// datagram to be built in place (commit then queues it without a copy).
// It flushes first when less than need bytes or no message is left.
func (q *sendQueue) tail(e *Endpoint, addr netip.AddrPort, need int) []byte {
	if cap(q.buf)-len(q.buf) < need || len(q.msgs) == maxSendMsgs {
		q.flush(e, addr)
	}
	return q.buf[len(q.buf):len(q.buf)]
}

// commit queues the datagram d that was built in the room tail returned.
// A datagram that outgrew the room (append moved it elsewhere) is copied.
func (q *sendQueue) commit(d []byte, ecn uint8) {
	if len(d) == 0 {
		return
	}
	if cap(q.buf)-len(q.buf) < len(d) || unsafe.SliceData(d) != unsafe.SliceData(q.buf[len(q.buf):len(q.buf)+1]) {
		q.add(d, ecn) // tail left a message free: add does not fail
		return
	}
	q.buf = q.buf[:len(q.buf)+len(d)]
	q.record(len(d), ecn)
}

// fits reports whether a datagram of n bytes marked ecn can be queued:
// it joins the last GSO run or a message is free.
func (q *sendQueue) fits(n int, ecn uint8) bool {
	return q.joinsRun(n, ecn) || len(q.msgs) < maxSendMsgs
}

// joinsRun reports whether a datagram of n bytes marked ecn extends the
// last message as one more GSO segment.
func (q *sendQueue) joinsRun(n int, ecn uint8) bool {
	k := len(q.msgs)
	if k == 0 || !q.gso {
		return false
	}
	m := &q.msgs[k-1]
	return m.ecn == ecn && !m.short && n <= m.seg && m.count < maxGSOSegments
}

// record accounts for the n bytes at the end of q.buf as a datagram: one
// more segment of the last run, or a new message.
func (q *sendQueue) record(n int, ecn uint8) {
	end := len(q.buf)
	if q.joinsRun(n, ecn) {
		m := &q.msgs[len(q.msgs)-1]
		m.end = end
		m.count++
		m.short = n < m.seg
		return
	}
	q.msgs = append(q.msgs, sendMsg{off: end - n, end: end, seg: n, count: 1, ecn: ecn})
}

// setAddr writes the destination into q.name in the socket's family.
func (q *sendQueue) setAddr(family int, addr netip.AddrPort) {
	q.name = unix.RawSockaddrInet6{}
	port := (*[2]byte)(unsafe.Pointer(&q.name.Port))
	binary.BigEndian.PutUint16(port[:], addr.Port())
	if family == unix.AF_INET && addr.Addr().Is4() {
		sa4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(&q.name))
		sa4.Family = unix.AF_INET
		sa4.Addr = addr.Addr().As4()
		q.nameLen = unix.SizeofSockaddrInet4
		return
	}
	q.name.Family = unix.AF_INET6
	q.name.Addr = addr.Addr().As16()
	q.nameLen = unix.SizeofSockaddrInet6
}

// prepare fills the header of message i.
func (q *sendQueue) prepare(i int) {
	m := &q.msgs[i]
	q.iovs[i] = unix.Iovec{Base: &q.buf[m.off]}
	q.iovs[i].SetLen(m.end - m.off)
	oob := q.oobs[i][:0]
	if m.count > 1 {
		oob = appendCmsg(oob, solUDP, udpSegment, uint32(m.seg), 2)
	}
	if m.ecn != 0 {
		oob = appendECNCmsgs(oob, m.ecn)
	}
	h := &q.hdrs[i].Hdr
	*h = unix.Msghdr{
		Name:    (*byte)(unsafe.Pointer(&q.name)),
		Namelen: q.nameLen,
		Iov:     &q.iovs[i],
	}
	h.Iovlen = 1
	if len(oob) > 0 {
		h.Control = &q.oobs[i][0]
		h.SetControllen(len(oob))
	}
	q.hdrs[i].Len = 0
}

// call is the RawConn.Write callback: one sendmmsg over count messages
// from first (or one sendmsg).
func (q *sendQueue) call(fd uintptr) bool {
	for {
		var n uintptr
		var errno syscall.Errno
		if q.single {
			_, _, errno = unix.Syscall(unix.SYS_SENDMSG, fd, uintptr(unsafe.Pointer(&q.hdrs[q.first].Hdr)), 0)
			n = 1
		} else {
			n, _, errno = unix.Syscall6(unix.SYS_SENDMMSG, fd, uintptr(unsafe.Pointer(&q.hdrs[q.first])), uintptr(q.count), 0, 0, 0)
		}
		switch errno {
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		}
		if errno != 0 {
			n = 0
		}
		q.n, q.errno = int(n), errno
		return true
	}
}

// isGSOError reports whether errno says the kernel or the device cannot
// segment: the sender then turns GSO off for the endpoint.
func isGSOError(errno syscall.Errno) bool {
	return errno == syscall.EIO || errno == syscall.EINVAL || errno == syscall.ENOPROTOOPT
}

// flush sends the queued messages to addr on s and empties the queue.
// With batching, one sendmmsg carries them all; without, one sendmsg each.
// A GSO run the kernel refuses is sent again datagram by datagram, and the
// endpoint stops using GSO.
func (q *sendQueue) flush(e *Endpoint, addr netip.AddrPort) {
	defer func() { q.buf, q.msgs = q.buf[:0], q.msgs[:0] }()
	if len(q.msgs) == 0 {
		return
	}
	s := e.sock
	q.setAddr(s.family, addr)
	for i := range q.msgs {
		q.prepare(i)
	}
	for i := 0; i < len(q.msgs); {
		q.first, q.count = i, len(q.msgs)-i
		q.single = !s.batch || q.count == 1
		if q.single {
			q.count = 1
		}
		if err := s.rc.Write(q.fn); err != nil {
			return // the socket is closed
		}
		if q.errno == 0 {
			i += q.n
			continue
		}
		// Message i failed.
		if m := q.msgs[i]; m.count > 1 && isGSOError(q.errno) {
			e.noGSO.Store(true)
			q.sendSplit(e, i)
		}
		// Other errors (an ICMP error reported on this send, a full
		// buffer) lose the message, as a network would.
		i++
	}
}

// sendSplit sends message i of the queue one datagram per sendmsg.
func (q *sendQueue) sendSplit(e *Endpoint, i int) {
	m := q.msgs[i]
	for off := m.off; off < m.end; off += m.seg {
		q.msgs[i] = sendMsg{off: off, end: min(off+m.seg, m.end), seg: m.seg, count: 1, ecn: m.ecn}
		q.prepare(i)
		q.first, q.count, q.single = i, 1, true
		if e.sock.rc.Write(q.fn) != nil {
			return
		}
	}
}

// recvQueueLen is how many received datagrams wait for a connection's
// loop before the reader drops more. It holds more than one full read
// (recvBatchLen GRO messages of up to maxGSOSegments datagrams each); the
// slots are allocated as bursts need them (recvqueue.go).
const recvQueueLen = 512
