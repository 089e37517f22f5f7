package rawquic

import (
	"fmt"
	"net"
	"net/netip"
)

// addPath adopts uc as a new path and starts its reader; it returns the
// path's index.
func (rc *Client[P]) addPath(uc *net.UDPConn) int {
	p := NewPath(uc)
	rc.Paths = append(rc.Paths, p)
	i := len(rc.Paths) - 1
	rc.host.Cleanup(func() { uc.Close() })
	go p.Read(i, rc.in, rc.done)
	return i
}

// newPath opens another socket towards the target, from the local address
// ip (the zero Addr: any), and returns its index.
func (rc *Client[P]) NewPath(ip netip.Addr) (int, error) {
	return rc.NewPathTo(ip, rc.Peer)
}

// newPathTo opens a socket from the local address ip (the zero Addr: any)
// towards peer, such as the server's preferred address, and returns its
// index.
func (rc *Client[P]) NewPathTo(ip netip.Addr, peer netip.AddrPort) (int, error) {
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
func (rc *Client[P]) Migrate(i int) {
	rc.cur = i
	rc.conn, rc.Local = rc.Paths[i].Conn, rc.Paths[i].Local
}

// secondLocalAddr returns a local address other than the one path 0 uses,
// from which the target can be reached: on loopback another 127/8 address
// (Linux routes the whole block to lo), elsewhere another configured
// address of the same family. ok is false when there is none (the `2addr`
// need of docs/conformance-model.md, Needs).
func (rc *Client[P]) SecondLocalAddr() (netip.Addr, bool) {
	cur := rc.Paths[0].Local.Addr().Unmap()
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
