package quic

import (
	"encoding/binary"
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
