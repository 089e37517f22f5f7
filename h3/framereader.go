package h3

import (
	"bufio"
	"errors"
	"io"
)

// frameReader reads HTTP/3 frames from a stream. DATA payloads are streamed
// to the caller instead of being buffered, and unknown frames are skipped
// without buffering, so a peer cannot make it hold more than maxPayload
// bytes.
// streamReadBuffer is the bufio buffer of a request stream's frame reader,
// on either side. Reads as large as it bypass it, so bulk bodies lose
// nothing by its being small; a request of a few hundred bytes (an RPC)
// allocated and zeroed 16 KiB at each end when it was 16 KiB, and 4 KiB
// was still a fifth of an HTTP/3 RPC's bytes (docs/highway.md). 1 KiB holds
// an RPC's HEADERS and DATA frames.
const streamReadBuffer = 1 << 10

type frameReader struct {
	r *bufio.Reader
	// maxPayload bounds the payload of buffered frames (HEADERS, SETTINGS,
	// PUSH_PROMISE, ...).
	maxPayload uint64
	buf        []byte
}

func newFrameReader(r *bufio.Reader, maxPayload uint64) *frameReader {
	return &frameReader{r: r, maxPayload: maxPayload}
}

// ruleTruncated quotes RFC 9114 §7.1 for frames cut short by FIN.
const ruleTruncated = `RFC 9114 §7.1: "When a stream terminates cleanly, if the last frame on the stream was truncated, this MUST be treated as a connection error of type H3_FRAME_ERROR"`

// truncated turns a clean end of stream inside a frame into H3_FRAME_ERROR
// and leaves other read errors (resets, connection loss) alone.
func truncated(err error, what string) error {
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return connError(ErrCodeFrameError, "stream ended inside %s; %s", what, ruleTruncated)
	}
	return peerReset(err)
}

// readHeader reads the next frame's type and length. It returns io.EOF when
// the stream ends cleanly on a frame boundary.
func (fr *frameReader) readHeader() (FrameType, uint64, error) {
	t, err := readVarint(fr.r)
	if err != nil {
		if err == io.EOF {
			return 0, 0, io.EOF
		}
		return 0, 0, truncated(err, "a frame type")
	}
	length, err := readVarint(fr.r)
	if err != nil {
		return 0, 0, truncated(err, "a frame length")
	}
	return FrameType(t), length, nil
}

// readPayload reads a whole frame payload of the given length. The returned
// slice is valid until the next call.
func (fr *frameReader) readPayload(t FrameType, length uint64) ([]byte, error) {
	if length > fr.maxPayload {
		if t == FrameHeaders || t == FramePushPromise {
			return nil, errFieldSectionTooLarge{length, fr.maxPayload}
		}
		return nil, connError(ErrCodeExcessiveLoad, "%v frame of %d bytes exceeds this endpoint's limit of %d bytes", t, length, fr.maxPayload)
	}
	if uint64(cap(fr.buf)) < length {
		fr.buf = make([]byte, length)
	}
	p := fr.buf[:length]
	if _, err := io.ReadFull(fr.r, p); err != nil {
		return nil, truncated(err, "a "+t.String()+" frame")
	}
	return p, nil
}

// skip discards n payload bytes of a frame the reader is ignoring.
func (fr *frameReader) skip(t FrameType, n uint64) error {
	for n > 0 {
		chunk := n
		if chunk > 1<<30 {
			chunk = 1 << 30
		}
		m, err := fr.r.Discard(int(chunk))
		n -= uint64(m)
		if err != nil {
			return truncated(err, "a "+t.String()+" frame")
		}
	}
	return nil
}

// readFrame reads the next frame that is not DATA and not unknown; unknown
// and reserved frame types are skipped as RFC 9114 §9 requires
// ("Implementations MUST ignore unknown or unsupported values in all
// extensible protocol elements"). A DATA frame is returned as its length in
// dataLen with f == nil; the caller must then consume exactly dataLen bytes
// with fr.r.
func (fr *frameReader) readFrame() (f Frame, dataLen uint64, err error) {
	for {
		t, length, err := fr.readHeader()
		if err != nil {
			return nil, 0, err
		}
		if t == FrameData {
			return nil, length, nil
		}
		if !knownFrame(t) {
			if isHTTP2Frame(t) {
				_, err := parseFramePayload(t, nil)
				return nil, 0, err
			}
			if err := fr.skip(t, length); err != nil {
				return nil, 0, err
			}
			continue
		}
		if (t == FrameCancelPush || t == FrameGoAway || t == FrameMaxPushID) && length > 8 {
			return nil, 0, connError(ErrCodeFrameError, "%v payload of %d bytes is longer than one varint; %s", t, length, ruleExactPayload)
		}
		p, err := fr.readPayload(t, length)
		if err != nil {
			return nil, 0, err
		}
		f, err := parseFramePayload(t, p)
		return f, 0, err
	}
}

func knownFrame(t FrameType) bool {
	switch t {
	case FrameData, FrameHeaders, FrameCancelPush, FrameSettings, FramePushPromise, FrameGoAway, FrameMaxPushID:
		return true
	}
	return false
}

// isEOF reports a clean end of stream.
func isEOF(err error) bool { return errors.Is(err, io.EOF) }
