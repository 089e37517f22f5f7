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
	cmsgSpaceInt   = 24  // CMSG_SPACE(sizeof(int))
	cmsgLenInt     = 20  // CMSG_LEN(sizeof(int))
	// sendOOBLen holds UDP_SEGMENT, IP_TOS and IPV6_TCLASS messages.
	sendOOBLen = cmsgSpaceU16 + 2*cmsgSpaceInt
)

// appendCmsg appends one control message with an integer value.
func appendCmsg(oob []byte, level, typ int32, v uint32, size int) []byte {
	var m [cmsgSpaceInt]byte
	if size == 2 {
		binary.NativeEndian.PutUint64(m[0:8], cmsgLenU16)
		binary.NativeEndian.PutUint16(m[16:18], uint16(v))
	} else {
		binary.NativeEndian.PutUint64(m[0:8], cmsgLenInt)
		binary.NativeEndian.PutUint32(m[16:20], v)
	}
	binary.NativeEndian.PutUint32(m[8:12], uint32(level))
	binary.NativeEndian.PutUint32(m[12:16], uint32(typ))
	return append(oob, m[:]...)
}

// appendECNCmsgs appends the messages that mark a datagram with the ECN
// codepoint ecn, for IPv4 and IPv6 alike; the kernel uses the one that
// matches the path and skips the other.
func appendECNCmsgs(oob []byte, ecn uint8) []byte {
	oob = appendCmsg(oob, syscall.IPPROTO_IP, ipTOS, uint32(ecn), 4)
	return appendCmsg(oob, syscall.IPPROTO_IPV6, ipv6TClass, uint32(ecn), 4)
}

// gsoBatch accumulates datagrams for one GSO send.
type gsoBatch struct {
	buf   []byte
	seg   int // segment size: the size of the first datagram
	count int
	short bool // the last datagram is shorter than seg: the batch is closed
	oob   [sendOOBLen]byte
	ecn   uint8 // ECN codepoint of every datagram in the batch
}

// add appends d to the batch if it fits the GSO rules; false means the
// caller must flush first.
func (g *gsoBatch) add(d []byte, ecn uint8) bool {
	if g.count > 0 && ecn != g.ecn {
		return false
	}
	g.ecn = ecn
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
		c.ep.writeECN(g.buf, c.peerAddr, g.ecn, g.oob[:0])
		return
	}
	if err := c.ep.writeSegments(g.buf, g.seg, c.peerAddr, g.ecn, g.oob[:0]); err != nil {
		// The kernel or the socket does not do GSO: send one by one from
		// now on.
		c.ep.noGSO.Store(true)
		for b := g.buf; len(b) > 0; {
			n := min(g.seg, len(b))
			c.ep.writeECN(b[:n], c.peerAddr, g.ecn, g.oob[:0])
			b = b[n:]
		}
	}
}

// writeSegments sends b as datagrams of seg bytes with UDP_SEGMENT.
func (e *Endpoint) writeSegments(b []byte, seg int, addr netip.AddrPort, ecn uint8, oob []byte) error {
	if e.udp == nil {
		return errors.New("quic: GSO needs a UDP socket")
	}
	oob = appendCmsg(oob, solUDP, udpSegment, uint32(seg), 2)
	if ecn != 0 {
		oob = appendECNCmsgs(oob, ecn)
	}
	_, _, err := e.udp.WriteMsgUDPAddrPort(b, oob, addr)
	if errors.Is(err, syscall.EIO) || errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENOPROTOOPT) {
		return err
	}
	return nil
}
