package pcap

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
)

const (
	ipv4HeaderLen = 20
	ipv6HeaderLen = 40
	udpHeaderLen  = 8
	protoUDP      = 17
	defaultTTL    = 64
)

// appendIPUDP appends a synthetic IPv4 or IPv6 packet carrying payload in a
// UDP datagram from src to dst. The lengths and checksums are correct, so
// Wireshark dissects the packet without complaint and hands the payload to
// its QUIC dissector (which it picks by heuristics, not by port).
func appendIPUDP(b []byte, src, dst netip.AddrPort, payload []byte) ([]byte, error) {
	sa, da := src.Addr().Unmap(), dst.Addr().Unmap()
	if !sa.IsValid() || !da.IsValid() {
		return b, errors.New("pcap: datagram without a valid source and destination address")
	}
	if sa.Is4() != da.Is4() {
		return b, fmt.Errorf("pcap: source %v and destination %v are of different IP versions", sa, da)
	}
	udpLen := udpHeaderLen + len(payload)
	if sa.Is4() {
		if ipv4HeaderLen+udpLen > 0xffff {
			return b, fmt.Errorf("pcap: %d-byte payload does not fit an IPv4 packet", len(payload))
		}
		b = append(b,
			0x45, 0, // version 4, IHL 5; DSCP/ECN 0
			0, 0, // total length, set below
			0, 0, // identification
			0x40, 0, // don't fragment
			defaultTTL, protoUDP,
			0, 0, // header checksum, set below
		)
		h := len(b) - 12
		binary.BigEndian.PutUint16(b[h+2:], uint16(ipv4HeaderLen+udpLen))
		s4, d4 := sa.As4(), da.As4()
		b = append(b, s4[:]...)
		b = append(b, d4[:]...)
		binary.BigEndian.PutUint16(b[h+10:], ^checksum(0, b[h:h+ipv4HeaderLen]))
	} else {
		if udpLen > 0xffff {
			return b, fmt.Errorf("pcap: %d-byte payload does not fit an IPv6 packet", len(payload))
		}
		b = append(b, 0x60, 0, 0, 0, byte(udpLen>>8), byte(udpLen), protoUDP, defaultTTL)
		s16, d16 := sa.As16(), da.As16()
		b = append(b, s16[:]...)
		b = append(b, d16[:]...)
	}
	u := len(b)
	b = append(b, 0, 0, 0, 0, byte(udpLen>>8), byte(udpLen), 0, 0)
	binary.BigEndian.PutUint16(b[u:], src.Port())
	binary.BigEndian.PutUint16(b[u+2:], dst.Port())
	b = append(b, payload...)
	// The UDP checksum is mandatory over IPv6 (RFC 8200 section 8.1) and
	// we compute it over IPv4 too, so that a checksum-validating dissector
	// finds nothing to flag.
	sum := pseudoHeaderSum(sa, da, udpLen)
	c := ^checksum(sum, b[u:])
	if c == 0 {
		c = 0xffff // zero means "no checksum" (RFC 768)
	}
	binary.BigEndian.PutUint16(b[u+6:], c)
	return b, nil
}

func pseudoHeaderSum(src, dst netip.Addr, udpLen int) uint32 {
	var sum uint32
	add := func(p []byte) {
		for i := 0; i+1 < len(p); i += 2 {
			sum += uint32(p[i])<<8 | uint32(p[i+1])
		}
	}
	if src.Is4() {
		s, d := src.As4(), dst.As4()
		add(s[:])
		add(d[:])
	} else {
		s, d := src.As16(), dst.As16()
		add(s[:])
		add(d[:])
	}
	return sum + protoUDP + uint32(udpLen)
}

// checksum folds the Internet checksum (RFC 1071) of p onto sum and
// returns it, not yet complemented.
func checksum(sum uint32, p []byte) uint16 {
	for len(p) >= 2 {
		sum += uint32(p[0])<<8 | uint32(p[1])
		p = p[2:]
	}
	if len(p) == 1 {
		sum += uint32(p[0]) << 8
	}
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	return uint16(sum)
}

// parseIPUDP extracts a UDP datagram from an IP packet. It reports false
// for anything else: other protocols, fragments, truncated headers. The
// payload is cut to the IP length, so link-layer padding is not taken for
// data, and may be shorter than udpLen when the capture was truncated.
func parseIPUDP(p []byte) (src, dst netip.AddrPort, payload []byte, origLen int, ok bool) {
	if len(p) < 1 {
		return
	}
	var sa, da netip.Addr
	switch p[0] >> 4 {
	case 4:
		if len(p) < ipv4HeaderLen {
			return
		}
		ihl := int(p[0]&0xf) * 4
		total := int(binary.BigEndian.Uint16(p[2:]))
		if ihl < ipv4HeaderLen || total < ihl || len(p) < ihl {
			return
		}
		if frag := binary.BigEndian.Uint16(p[6:]); frag&0x3fff != 0 {
			return // a fragment: the UDP datagram is not here whole
		}
		if p[9] != protoUDP {
			return
		}
		sa = netip.AddrFrom4([4]byte(p[12:16]))
		da = netip.AddrFrom4([4]byte(p[16:20]))
		if total < len(p) {
			p = p[:total]
		}
		p = p[ihl:]
	case 6:
		if len(p) < ipv6HeaderLen {
			return
		}
		plen := int(binary.BigEndian.Uint16(p[4:]))
		next := p[6]
		sa = netip.AddrFrom16([16]byte(p[8:24]))
		da = netip.AddrFrom16([16]byte(p[24:40]))
		p = p[ipv6HeaderLen:]
		if plen < len(p) {
			p = p[:plen]
		}
		for next != protoUDP {
			switch next {
			case 0, 43, 60: // hop-by-hop, routing, destination options
				if len(p) < 8 {
					return
				}
				n := (int(p[1]) + 1) * 8
				if len(p) < n {
					return
				}
				next = p[0]
				p = p[n:]
			default: // fragments, ESP, other protocols
				return
			}
		}
	default:
		return
	}
	if len(p) < udpHeaderLen {
		return
	}
	udpLen := int(binary.BigEndian.Uint16(p[4:]))
	if udpLen < udpHeaderLen {
		return
	}
	src = netip.AddrPortFrom(sa, binary.BigEndian.Uint16(p[0:]))
	dst = netip.AddrPortFrom(da, binary.BigEndian.Uint16(p[2:]))
	payload = p[udpHeaderLen:]
	origLen = udpLen - udpHeaderLen
	if len(payload) > origLen {
		payload = payload[:origLen]
	}
	return src, dst, payload, origLen, true
}
