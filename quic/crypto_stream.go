package quic

import "sort"

// maxCryptoBuffer bounds how far ahead of the delivered offset CRYPTO data
// may arrive. RFC 9000 §7.5: "Implementations MUST support buffering at
// least 4096 bytes of data received in out-of-order CRYPTO frames" and may
// close with CRYPTO_BUFFER_EXCEEDED beyond their limit.
const maxCryptoBuffer = 64 << 10

// cryptoStream is the CRYPTO data of one packet number space, both ways.
// Handshake messages are small, so the send side keeps every byte until
// the space is discarded, and retransmits ranges declared lost.
type cryptoStream struct {
	// Send side: out holds every byte TLS gave us; sent marks how far we
	// have sent; lost lists ranges to send again.
	out  []byte
	sent uint64
	lost []byteRange

	// Receive side: in holds out-of-order segments; delivered is the
	// offset up to which TLS has the data.
	delivered uint64
	segs      []cryptoSeg
}

type byteRange struct{ start, end uint64 }

type cryptoSeg struct {
	off  uint64
	data []byte
}

func (s *cryptoStream) write(b []byte) { s.out = append(s.out, b...) }

// hasData reports whether there is CRYPTO data to send.
func (s *cryptoStream) hasData() bool {
	return len(s.lost) > 0 || s.sent < uint64(len(s.out))
}

// next returns the next range to send, at most max bytes.
func (s *cryptoStream) next(max int) (off uint64, data []byte) {
	if max <= 0 {
		return 0, nil
	}
	if len(s.lost) > 0 {
		r := &s.lost[0]
		end := r.end
		if end-r.start > uint64(max) {
			end = r.start + uint64(max)
		}
		off, data = r.start, s.out[r.start:end]
		r.start = end
		if r.start >= r.end {
			s.lost = s.lost[1:]
		}
		return off, data
	}
	end := uint64(len(s.out))
	if end-s.sent > uint64(max) {
		end = s.sent + uint64(max)
	}
	off, data = s.sent, s.out[s.sent:end]
	s.sent = end
	return off, data
}

// onLost queues a range for retransmission.
func (s *cryptoStream) onLost(off, length uint64) {
	s.lost = append(s.lost, byteRange{off, off + length})
}

// receivedEnd returns the end of the data received so far: the delivered
// offset or the end of the furthest buffered segment.
func (s *cryptoStream) receivedEnd() uint64 {
	end := s.delivered
	for _, sg := range s.segs {
		end = max(end, sg.off+uint64(len(sg.data)))
	}
	return end
}

// receive adds a CRYPTO frame and returns the data now contiguous at the
// delivered offset (to hand to TLS), or an error code if the frame reaches
// too far ahead.
func (s *cryptoStream) receive(off uint64, data []byte) (ready [][]byte, exceeded bool) {
	end := off + uint64(len(data))
	if end <= s.delivered {
		return nil, false // duplicate
	}
	if end > s.delivered+maxCryptoBuffer {
		return nil, true
	}
	if off < s.delivered {
		data = data[s.delivered-off:]
		off = s.delivered
	}
	if off > s.delivered {
		s.segs = append(s.segs, cryptoSeg{off, append([]byte(nil), data...)})
		sort.Slice(s.segs, func(i, j int) bool { return s.segs[i].off < s.segs[j].off })
		return nil, false
	}
	ready = append(ready, data)
	s.delivered = end
	for len(s.segs) > 0 && s.segs[0].off <= s.delivered {
		sg := s.segs[0]
		s.segs = s.segs[1:]
		if e := sg.off + uint64(len(sg.data)); e > s.delivered {
			ready = append(ready, sg.data[s.delivered-sg.off:])
			s.delivered = e
		}
	}
	return ready, false
}
