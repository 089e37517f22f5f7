package quic

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"syscall"
)

// UDP generic segmentation offload (Linux UDP_SEGMENT): one sendmsg
// carries a run of datagrams of equal size (the last may be shorter), and
// the kernel splits them. It divides the send syscalls by up to
// maxGSOSegments.
const (
	solUDP         = 17  // SOL_UDP
	udpSegment     = 103 // UDP_SEGMENT
	maxGSOSegments = 44  // 44 × 1452 bytes stay under 64 KiB
	cmsgSpaceU16   = 24  // CMSG_SPACE(sizeof(uint16)) on 64-bit Linux
	cmsgLenU16     = 18  // CMSG_LEN(sizeof(uint16))
)

// gsoBatch accumulates datagrams for one GSO send.
type gsoBatch struct {
	buf   []byte
	seg   int // segment size: the size of the first datagram
	count int
	short bool // the last datagram is shorter than seg: the batch is closed
	oob   [cmsgSpaceU16]byte
}

// add appends d to the batch if it fits the GSO rules; false means the
// caller must flush first.
func (g *gsoBatch) add(d []byte) bool {
	if g.count == 0 {
		g.buf = append(g.buf[:0], d...)
		g.seg = len(d)
		g.count = 1
		g.short = false
		return true
	}
	if g.short || len(d) > g.seg || g.count == maxGSOSegments {
		return false
	}
	g.buf = append(g.buf, d...)
	g.count++
	if len(d) < g.seg {
		g.short = true
	}
	return true
}

// flush sends the batch.
func (c *Conn) flushGSO() {
	g := &c.gso
	if g.count == 0 {
		return
	}
	defer func() { g.count = 0 }()
	if g.count == 1 {
		c.ep.writeTo(g.buf, c.peerAddr)
		return
	}
	if err := c.ep.writeSegments(g.buf, g.seg, c.peerAddr, &g.oob); err != nil {
		// The kernel or the socket does not do GSO: send one by one from
		// now on.
		c.ep.noGSO.Store(true)
		for b := g.buf; len(b) > 0; {
			n := min(g.seg, len(b))
			c.ep.writeTo(b[:n], c.peerAddr)
			b = b[n:]
		}
	}
}

// writeSegments sends b as datagrams of seg bytes with UDP_SEGMENT.
func (e *Endpoint) writeSegments(b []byte, seg int, addr netip.AddrPort, oob *[cmsgSpaceU16]byte) error {
	if e.udp == nil {
		return errors.New("quic: GSO needs a UDP socket")
	}
	binary.NativeEndian.PutUint64(oob[0:8], cmsgLenU16)
	binary.NativeEndian.PutUint32(oob[8:12], solUDP)
	binary.NativeEndian.PutUint32(oob[12:16], udpSegment)
	binary.NativeEndian.PutUint16(oob[16:18], uint16(seg))
	_, _, err := e.udp.WriteMsgUDPAddrPort(b, oob[:], addr)
	if errors.Is(err, syscall.EIO) || errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENOPROTOOPT) {
		return err
	}
	return nil
}
