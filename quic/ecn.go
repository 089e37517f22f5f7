package quic

import (
	"encoding/binary"
	"net"
	"syscall"
)

// ECN (RFC 9000 §13.4): the engine reads the ECN codepoint of every
// received datagram from the IP header (IP_RECVTOS / IPV6_RECVTCLASS) and
// reports the counts in ACK_ECN frames. It does not mark its own packets
// yet (that needs the validation of §13.4.2).

const (
	ipRecvTOS       = 13 // IP_RECVTOS
	ipTOS           = 1  // IP_TOS control message
	ipv6RecvTClass  = 66 // IPV6_RECVTCLASS
	ipv6TClass      = 67 // IPV6_TCLASS control message
	ecnOOBBufferLen = 64
)

// enableECNReceive asks the kernel for the TOS / traffic class of
// received datagrams.
func enableECNReceive(c *net.UDPConn) {
	rc, err := c.SyscallConn()
	if err != nil {
		return
	}
	rc.Control(func(fd uintptr) {
		syscall.SetsockoptInt(int(fd), syscall.IPPROTO_IP, ipRecvTOS, 1)
		syscall.SetsockoptInt(int(fd), syscall.IPPROTO_IPV6, ipv6RecvTClass, 1)
	})
}

// parseECN returns the ECN bits from the control messages of a received
// datagram, or 0.
func parseECN(oob []byte) uint8 {
	for len(oob) >= 16 {
		l := int(binary.NativeEndian.Uint64(oob[0:8]))
		level := int32(binary.NativeEndian.Uint32(oob[8:12]))
		typ := int32(binary.NativeEndian.Uint32(oob[12:16]))
		if l < 16 || l > len(oob) {
			return 0
		}
		data := oob[16:l]
		switch {
		case level == syscall.IPPROTO_IP && typ == ipTOS && len(data) >= 1:
			return data[0] & 3
		case level == syscall.IPPROTO_IPV6 && typ == ipv6TClass && len(data) >= 4:
			return uint8(binary.NativeEndian.Uint32(data)) & 3
		}
		next := (l + 7) &^ 7
		if next > len(oob) {
			return 0
		}
		oob = oob[next:]
	}
	return 0
}
