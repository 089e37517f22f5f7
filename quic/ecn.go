package quic

import (
	"encoding/binary"
	"net"
	"syscall"
)

// ECN (RFC 9000 §13.4): the engine reads the ECN codepoint of every
// received datagram from the IP header (IP_RECVTOS / IPV6_RECVTCLASS) and
// reports the counts in ACK_ECN frames; it marks its own datagrams ECT(0)
// until validation (§13.4.2) fails.

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

const ect0 = 0b10

// ecnState is the sending side of ECN for one connection.
type ecnState struct {
	failed   bool // validation failed or marking is off: send Not-ECT
	disabled bool // Config.DisableECN
}

// codepoint is the ECN codepoint for the next datagram.
func (s *ecnState) codepoint() uint8 {
	if s.failed || s.disabled {
		return 0
	}
	return ect0
}

// onAck validates ECN with an ACK frame that newly acknowledged packets
// sent with ECT(0). RFC 9000 §13.4.2.1: "If an ACK frame newly
// acknowledges a packet that the endpoint sent with either the ECT(0) or
// ECT(1) codepoint set, ECN validation fails if the corresponding ECN
// counts are not present in the ACK frame" — and when the counts say that
// no marked packet arrived marked, the path bleaches the marks.
func (s *ecnState) onAck(hasCounts bool, ect0, ect1, ce uint64) {
	if s.failed || s.disabled {
		return
	}
	if !hasCounts || ect0+ect1+ce == 0 {
		s.failed = true
	}
}
