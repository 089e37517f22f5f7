package rawquic

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Path is one of the raw client's UDP sockets towards the target. A
// reader goroutine per socket hands its datagrams, with their ECN
// codepoint, to the client's loop; it ends when the socket closes.
type Path struct {
	Conn  *net.UDPConn
	Local netip.AddrPort
	// Peer is the address the socket sends to: the target's, or its
	// preferred address (the raw client's newPathTo).
	Peer netip.AddrPort
	v6   bool

	mu  sync.Mutex
	tos int // the ECN codepoint set on the socket, -1 before any
	// ECN, when set, chooses the ECN codepoint of each datagram sent on
	// this path (0 Not-ECT, 1 ECT(1), 2 ECT(0), 3 CE).
	ECN func() uint8
}

// In is one received datagram.
type In struct {
	Path int       // the index the raw client gave the path it came on
	At   time.Time // when the reader goroutine read it
	Data []byte
	ECN  uint8 // the ECN codepoint (0 Not-ECT, 1 ECT(1), 2 ECT(0), 3 CE)
	// KernelAt is the kernel's receive timestamp (SO_TIMESTAMPNS), zero
	// when the socket gave none; the reader goroutine's clock lags it
	// on a busy tester.
	KernelAt time.Time
	// Flow is the IPv6 flow label of the datagram (IPV6_FLOWINFO), when
	// HasFlow is set.
	Flow    uint32
	HasFlow bool
}

// NewPath adopts uc, a socket towards the target, and asks the kernel
// for each datagram's ECN codepoint, receive time and IPv6 flow label.
func NewPath(uc *net.UDPConn) *Path {
	p := &Path{Conn: uc, Local: uc.LocalAddr().(*net.UDPAddr).AddrPort(), tos: -1}
	if ra, ok := uc.RemoteAddr().(*net.UDPAddr); ok {
		// Unmapped, like the raw client's peer: a socket dialed from a
		// resolved address reports ::ffff:a.b.c.d, and the recorder's
		// peer must compare equal to the target's.
		p.Peer = netip.AddrPortFrom(ra.AddrPort().Addr().Unmap(), ra.AddrPort().Port())
	}
	p.v6 = p.Local.Addr().Is6() && !p.Local.Addr().Is4In6()
	if rc2, err := uc.SyscallConn(); err == nil {
		rc2.Control(func(fd uintptr) {
			if p.v6 {
				unix.SetsockoptInt(int(fd), unix.IPPROTO_IPV6, unix.IPV6_RECVTCLASS, 1)
				unix.SetsockoptInt(int(fd), unix.IPPROTO_IPV6, ipv6FlowInfo, 1)
			} else {
				unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_RECVTOS, 1)
			}
			unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1)
		})
	}
	return p
}

// Read hands each datagram the socket receives to out as path i's, until
// the socket closes or done is closed: the raw client runs it as the
// path's reader goroutine.
func (p *Path) Read(i int, out chan<- In, done <-chan struct{}) {
	buf := make([]byte, 65536)
	oob := make([]byte, 256)
	for {
		n, oobn, _, _, err := p.Conn.ReadMsgUDPAddrPort(buf, oob)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// ICMP errors (port unreachable) surface as read errors on
			// a connected socket; each is reported once, so go on.
			select {
			case <-done:
				return
			default:
			}
			continue
		}
		in := In{Path: i, At: time.Now(), Data: append([]byte(nil), buf[:n]...), ECN: ECNFromOOB(oob[:oobn]), KernelAt: kernelTimeFromOOB(oob[:oobn])}
		in.Flow, in.HasFlow = flowLabelFromOOB(oob[:oobn])
		select {
		case out <- in:
		case <-done:
			return
		}
	}
}

// ipv6FlowInfo is Linux's IPV6_FLOWINFO (include/uapi/linux/in6.h), which
// golang.org/x/sys/unix does not define: as a socket option it asks for
// the flow information of each received datagram, as a control message
// type it carries it.
const ipv6FlowInfo = 11

// flowLabelFromOOB reads the IPV6_FLOWINFO control message: the 20-bit
// flow label of the received IPv6 packet (RFC 6437), in network order
// with the traffic class above it.
func flowLabelFromOOB(oob []byte) (uint32, bool) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return 0, false
	}
	for _, m := range msgs {
		if m.Header.Level == unix.IPPROTO_IPV6 && m.Header.Type == ipv6FlowInfo && len(m.Data) >= 4 {
			return binary.BigEndian.Uint32(m.Data) & 0xfffff, true
		}
	}
	return 0, false
}

// ECNFromOOB reads the TOS or traffic class control message.
func ECNFromOOB(oob []byte) uint8 {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return 0
	}
	for _, m := range msgs {
		switch {
		case m.Header.Level == unix.IPPROTO_IP && (m.Header.Type == unix.IP_TOS || m.Header.Type == unix.IP_RECVTOS) && len(m.Data) >= 1:
			return m.Data[0] & 3
		case m.Header.Level == unix.IPPROTO_IPV6 && m.Header.Type == unix.IPV6_TCLASS && len(m.Data) >= 4:
			return uint8(m.Data[0]) & 3 // host byte order int; the low byte on little-endian
		}
	}
	return 0
}

// kernelTimeFromOOB reads the SO_TIMESTAMPNS control message.
func kernelTimeFromOOB(oob []byte) time.Time {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return time.Time{}
	}
	for _, m := range msgs {
		if m.Header.Level == unix.SOL_SOCKET && m.Header.Type == unix.SCM_TIMESTAMPNS && len(m.Data) >= 16 {
			// struct timespec on 64-bit Linux: two native-endian int64.
			sec := int64(binary.NativeEndian.Uint64(m.Data[0:8]))
			nsec := int64(binary.NativeEndian.Uint64(m.Data[8:16]))
			return time.Unix(sec, nsec)
		}
	}
	return time.Time{}
}

// Write sends d, setting the socket's ECN codepoint first when the path
// chooses one.
func (p *Path) Write(d []byte) {
	p.mu.Lock()
	if p.ECN != nil {
		cp := int(p.ECN() & 3)
		if cp != p.tos {
			if sc, err := p.Conn.SyscallConn(); err == nil {
				sc.Control(func(fd uintptr) {
					if p.v6 {
						unix.SetsockoptInt(int(fd), unix.IPPROTO_IPV6, unix.IPV6_TCLASS, cp)
					} else {
						unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_TOS, cp)
					}
				})
			}
			p.tos = cp
		}
	}
	p.mu.Unlock()
	p.Conn.Write(d)
}

// ECNName names an ECN codepoint for the evidence.
func ECNName(cp uint8) string {
	switch cp & 3 {
	case 1:
		return "ECT(1)"
	case 2:
		return "ECT(0)"
	case 3:
		return "CE"
	}
	return ""
}
