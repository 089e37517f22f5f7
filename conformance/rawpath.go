package conformance

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// rawPath is one of the raw client's UDP sockets towards the target. A
// reader goroutine per socket hands its datagrams, with their ECN
// codepoint, to the client's loop; it ends when the socket closes.
type rawPath struct {
	conn  *net.UDPConn
	local netip.AddrPort
	// peer is the address the socket sends to: the target's, or its
	// preferred address (newPathTo).
	peer netip.AddrPort
	v6   bool

	mu  sync.Mutex
	tos int // the ECN codepoint set on the socket, -1 before any
	// ECN, when set, chooses the ECN codepoint of each datagram sent on
	// this path (0 Not-ECT, 1 ECT(1), 2 ECT(0), 3 CE).
	ECN func() uint8
}

// rawIn is one received datagram.
type rawIn struct {
	path int
	at   time.Time
	b    []byte
	ecn  uint8
	// kernelAt is the kernel's receive timestamp (SO_TIMESTAMPNS), zero
	// when the socket gave none; the reader goroutine's clock lags it
	// on a busy tester.
	kernelAt time.Time
	// flow is the IPv6 flow label of the datagram (IPV6_FLOWINFO), when
	// hasFlow is set.
	flow    uint32
	hasFlow bool
}

// addPath adopts uc as a new path and starts its reader; it returns the
// path's index.
func (rc *rawClient) addPath(uc *net.UDPConn) int {
	p := &rawPath{conn: uc, local: uc.LocalAddr().(*net.UDPAddr).AddrPort(), tos: -1}
	if ra, ok := uc.RemoteAddr().(*net.UDPAddr); ok {
		// Unmapped, like rawClient.peer: a socket dialed from a
		// resolved address reports ::ffff:a.b.c.d, and the recorder's
		// peer must compare equal to the target's.
		p.peer = netip.AddrPortFrom(ra.AddrPort().Addr().Unmap(), ra.AddrPort().Port())
	}
	p.v6 = p.local.Addr().Is6() && !p.local.Addr().Is4In6()
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
	rc.paths = append(rc.paths, p)
	i := len(rc.paths) - 1
	rc.t.cleanup(func() { uc.Close() })
	go p.read(i, rc.in, rc.done)
	return i
}

// newPath opens another socket towards the target, from the local address
// ip (the zero Addr: any), and returns its index.
func (rc *rawClient) newPath(ip netip.Addr) (int, error) {
	return rc.newPathTo(ip, rc.peer)
}

// newPathTo opens a socket from the local address ip (the zero Addr: any)
// towards peer, such as the server's preferred address, and returns its
// index.
func (rc *rawClient) newPathTo(ip netip.Addr, peer netip.AddrPort) (int, error) {
	var laddr *net.UDPAddr
	if ip.IsValid() {
		laddr = net.UDPAddrFromAddrPort(netip.AddrPortFrom(ip, 0))
	}
	uc, err := net.DialUDP("udp", laddr, net.UDPAddrFromAddrPort(peer))
	if err != nil {
		return -1, fmt.Errorf("open a socket from %v towards %v: %w", ip, peer, err)
	}
	return rc.addPath(uc), nil
}

// migrate makes path i the one the client sends on.
func (rc *rawClient) migrate(i int) {
	rc.cur = i
	rc.conn, rc.local = rc.paths[i].conn, rc.paths[i].local
}

func (p *rawPath) read(i int, out chan<- rawIn, done <-chan struct{}) {
	buf := make([]byte, 65536)
	oob := make([]byte, 256)
	for {
		n, oobn, _, _, err := p.conn.ReadMsgUDPAddrPort(buf, oob)
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
		in := rawIn{path: i, at: time.Now(), b: append([]byte(nil), buf[:n]...), ecn: ecnFromOOB(oob[:oobn]), kernelAt: kernelTimeFromOOB(oob[:oobn])}
		in.flow, in.hasFlow = flowLabelFromOOB(oob[:oobn])
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

// ecnFromOOB reads the TOS or traffic class control message.
func ecnFromOOB(oob []byte) uint8 {
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

// write sends d, setting the socket's ECN codepoint first when the path
// chooses one.
func (p *rawPath) write(d []byte) {
	p.mu.Lock()
	if p.ECN != nil {
		cp := int(p.ECN() & 3)
		if cp != p.tos {
			if sc, err := p.conn.SyscallConn(); err == nil {
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
	p.conn.Write(d)
}

// ecnName names an ECN codepoint for the evidence.
func ecnName(cp uint8) string {
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

// secondLocalAddr returns a local address other than the one path 0 uses,
// from which the target can be reached: on loopback another 127/8 address
// (Linux routes the whole block to lo), elsewhere another configured
// address of the same family. ok is false when there is none (the `2addr`
// need of docs/conformance-model.md, Needs).
func (rc *rawClient) secondLocalAddr() (netip.Addr, bool) {
	cur := rc.paths[0].local.Addr().Unmap()
	if cur.IsLoopback() {
		if cur.Is4() {
			alt := netip.AddrFrom4([4]byte{127, 0, 0, 2})
			if alt == cur {
				alt = netip.AddrFrom4([4]byte{127, 0, 0, 3})
			}
			return alt, true
		}
		return netip.Addr{}, false
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return netip.Addr{}, false
	}
	for _, a := range addrs {
		pn, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		ip, ok := netip.AddrFromSlice(pn.IP)
		if !ok {
			continue
		}
		ip = ip.Unmap()
		if ip != cur && ip.Is4() == cur.Is4() && !ip.IsLoopback() && !ip.IsLinkLocalUnicast() {
			return ip, true
		}
	}
	return netip.Addr{}, false
}
