//go:build linux

package conformance

import (
	"encoding/binary"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
)

// dfObserver reads copies of the IPv4 UDP datagrams the target sends to
// one local port from a raw socket (Linux hands every received UDP
// datagram to raw sockets of protocol 17 as well), to see the Don't
// Fragment bit a UDP socket hides.
type dfObserver struct {
	fd     int
	target netip.AddrPort
	port   atomic.Uint32
	stop   atomic.Bool
	wg     sync.WaitGroup

	mu            sync.Mutex
	withDF, total int
}

func newDFObserver(target netip.AddrPort) (*dfObserver, error) {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_RAW, syscall.IPPROTO_UDP)
	if err != nil {
		return nil, err
	}
	tv := syscall.Timeval{Usec: 50_000}
	if err := syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_RCVTIMEO, &tv); err != nil {
		syscall.Close(fd)
		return nil, err
	}
	o := &dfObserver{fd: fd, target: netip.AddrPortFrom(target.Addr().Unmap(), target.Port())}
	o.wg.Add(1)
	go o.read()
	return o, nil
}

// watchPort selects the tester's local port whose datagrams count.
func (o *dfObserver) watchPort(p uint16) { o.port.Store(uint32(p)) }

func (o *dfObserver) read() {
	defer o.wg.Done()
	buf := make([]byte, 65536)
	for !o.stop.Load() {
		n, _, err := syscall.Recvfrom(o.fd, buf, 0)
		if err != nil {
			continue // the receive timeout, or EINTR
		}
		withDF, ok := o.parse(buf[:n])
		if !ok {
			continue
		}
		o.mu.Lock()
		o.total++
		if withDF {
			o.withDF++
		}
		o.mu.Unlock()
	}
}

// parse reports whether b is an IPv4 UDP datagram from the target to the
// watched port, and whether its DF bit is set.
func (o *dfObserver) parse(b []byte) (df, ok bool) {
	if len(b) < 20 || b[0]>>4 != 4 || b[9] != syscall.IPPROTO_UDP {
		return false, false
	}
	ihl := int(b[0]&0x0f) * 4
	if ihl < 20 || len(b) < ihl+8 {
		return false, false
	}
	src := netip.AddrFrom4([4]byte(b[12:16]))
	sport := binary.BigEndian.Uint16(b[ihl:])
	dport := binary.BigEndian.Uint16(b[ihl+2:])
	port := o.port.Load()
	if port == 0 || uint32(dport) != port || sport != o.target.Port() || src != o.target.Addr() {
		return false, false
	}
	return b[6]&0x40 != 0, true
}

func (o *dfObserver) counts() (withDF, total int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.withDF, o.total
}

func (o *dfObserver) close() {
	o.stop.Store(true)
	o.wg.Wait()
	syscall.Close(o.fd)
}
