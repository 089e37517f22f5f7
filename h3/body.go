package h3

import (
	"context"
	"io"
	"net/http"
	"sync"

	"github.com/quiver-quic/quiver/h3/qpack"
)

// Reading HTTP messages from request streams (RFC 9114 §4.1): a HEADERS
// frame, DATA frames, then optionally a trailing HEADERS frame, with unknown
// frame types allowed anywhere.

const ruleFrameSequence = `RFC 9114 §4.1: "Receipt of an invalid sequence of frames MUST be treated as a connection error of type H3_FRAME_UNEXPECTED"`

// unexpectedOnRequestStream returns the connection error for a known frame
// that is not allowed on a request stream.
func unexpectedOnRequestStream(f Frame, isServer bool) *Error {
	switch f := f.(type) {
	case *SettingsFrame:
		return connError(ErrCodeFrameUnexpected, `SETTINGS on a request stream; RFC 9114 §7.2.4: "If an endpoint receives a SETTINGS frame on a different stream, the endpoint MUST respond with a connection error of type H3_FRAME_UNEXPECTED"`)
	case *GoAwayFrame:
		return connError(ErrCodeFrameUnexpected, `GOAWAY on a request stream; RFC 9114 §7.2.6: "A client MUST treat a GOAWAY frame on a stream other than the control stream as a connection error of type H3_FRAME_UNEXPECTED"`)
	case *MaxPushIDFrame:
		return connError(ErrCodeFrameUnexpected, `MAX_PUSH_ID on a request stream; RFC 9114 §7.2.7: "Receipt of a MAX_PUSH_ID frame on any other stream MUST be treated as a connection error of type H3_FRAME_UNEXPECTED"`)
	case *CancelPushFrame:
		return connError(ErrCodeFrameUnexpected, `CANCEL_PUSH on a request stream; RFC 9114 §7.2.3: "Receiving a CANCEL_PUSH frame on a stream other than the control stream MUST be treated as a connection error of type H3_FRAME_UNEXPECTED"`)
	case *PushPromiseFrame:
		if isServer {
			return connError(ErrCodeFrameUnexpected, `PUSH_PROMISE from a client; RFC 9114 §7.2.5: "A server MUST treat the receipt of a PUSH_PROMISE frame as a connection error of type H3_FRAME_UNEXPECTED"`)
		}
		return connError(ErrCodeIDError, `PUSH_PROMISE with push ID %d but no MAX_PUSH_ID was sent; RFC 9114 §7.2.5: "A client MUST treat receipt of a PUSH_PROMISE frame that contains a larger push ID than the client has advertised as a connection error of H3_ID_ERROR"`, f.PushID)
	case *HeadersFrame:
		return connError(ErrCodeFrameUnexpected, "HEADERS after the trailer section; %s", ruleFrameSequence)
	case nil:
		return connError(ErrCodeFrameUnexpected, "DATA where no content is allowed; %s", ruleFrameSequence)
	}
	return connError(ErrCodeFrameUnexpected, "%v frame on a request stream; %s", f.Type(), ruleFrameSequence)
}

// readHeaderSection reads frames up to the first HEADERS frame and decodes
// it. It returns io.EOF if the stream ends cleanly before any HEADERS.
func readHeaderSection(ctx context.Context, s *session, st Stream, fr *frameReader, isServer bool) ([]qpack.HeaderField, error) {
	for {
		f, _, err := fr.readFrame()
		if err != nil {
			return nil, err
		}
		if f == nil {
			return nil, connError(ErrCodeFrameUnexpected, `DATA before HEADERS; RFC 9114 §4.1: "In particular, a DATA frame before any HEADERS frame ... is considered invalid"`)
		}
		h, ok := f.(*HeadersFrame)
		if !ok {
			return nil, unexpectedOnRequestStream(f, isServer)
		}
		return s.decodeFields(ctx, st.ID(), h.FieldSection, s.maxFieldSection)
	}
}

// bodyReader reads message content from DATA frames, then the trailer
// section, and checks the content against Content-Length.
type bodyReader struct {
	s             *session
	st            Stream
	fr            *frameReader
	remain        uint64 // unread bytes of the current DATA frame
	contentLength int64  // declared, or -1
	n             int64  // content bytes read so far
	trailer       http.Header
	// err is sticky; io.EOF after a complete message. mu guards it: a
	// handler may leave a goroutine reading the body after it returned
	// (the RPC's cancel watch), while ServeConn checks err to finish the
	// stream.
	mu  sync.Mutex
	err error
}

func (b *bodyReader) getErr() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

func (b *bodyReader) setErr(err error) {
	b.mu.Lock()
	b.err = err
	b.mu.Unlock()
}

// closeRead makes later Reads fail with err unless the body already ended.
func (b *bodyReader) closeRead(err error) {
	b.mu.Lock()
	if b.err == nil {
		b.err = err
	}
	b.mu.Unlock()
}

// Read implements io.Reader.
func (b *bodyReader) Read(p []byte) (int, error) {
	if err := b.getErr(); err != nil {
		return 0, err
	}
	if len(p) == 0 {
		return 0, nil
	}
	for b.remain == 0 {
		f, dataLen, err := b.fr.readFrame()
		if err == io.EOF {
			return 0, b.finish()
		}
		if err != nil {
			return 0, b.fail(err)
		}
		if f == nil {
			b.remain = dataLen
			if b.contentLength >= 0 && b.n+int64(dataLen) > b.contentLength {
				return 0, b.fail(b.lengthMismatch(b.n + int64(dataLen)))
			}
			continue
		}
		h, ok := f.(*HeadersFrame)
		if !ok {
			return 0, b.fail(unexpectedOnRequestStream(f, b.s.isServer))
		}
		if err := b.readTrailers(h); err != nil {
			return 0, b.fail(err)
		}
		return 0, b.finish()
	}
	if uint64(len(p)) > b.remain {
		p = p[:b.remain]
	}
	n, err := b.fr.r.Read(p)
	b.remain -= uint64(n)
	b.n += int64(n)
	if err != nil && !(err == io.EOF && n > 0) {
		// An EOF that comes with data is reported by the next Read: as
		// the clean end of the message if the frame is complete, as a
		// truncated frame otherwise.
		return n, b.fail(truncated(err, "a DATA frame"))
	}
	return n, nil
}

// readTrailers decodes the trailer section and requires that nothing but
// unknown frames follows it.
func (b *bodyReader) readTrailers(h *HeadersFrame) error {
	fields, err := b.s.decodeFields(b.s.ctx, b.st.ID(), h.FieldSection, b.s.maxFieldSection)
	if err != nil {
		if _, ok := err.(errFieldSectionTooLarge); ok {
			return streamError(ErrCodeExcessiveLoad, "%v", err)
		}
		return err
	}
	if b.trailer == nil {
		b.trailer = make(http.Header)
	}
	if err := parseTrailers(fields, b.trailer); err != nil {
		return err
	}
	f, _, err := b.fr.readFrame()
	if err == io.EOF {
		return nil
	}
	if err != nil {
		return err
	}
	// RFC 9114 §4.1: "a HEADERS or DATA frame after the trailing HEADERS
	// frame, is considered invalid."
	return unexpectedOnRequestStream(f, b.s.isServer)
}

// finish ends the body at a clean end of stream.
func (b *bodyReader) finish() error {
	if b.contentLength >= 0 && b.n != b.contentLength {
		return b.fail(b.lengthMismatch(b.n))
	}
	b.setErr(io.EOF)
	return io.EOF
}

func (b *bodyReader) lengthMismatch(n int64) *Error {
	return malformed(`Content-Length is %d but the DATA frames carry %d bytes; RFC 9114 §4.1.2: a message "is malformed if the value of the Content-Length header field does not equal the sum of the DATA frame lengths received"`, b.contentLength, n)
}

// fail records err and applies it: a connection error closes the
// connection, a stream error aborts the stream in both directions.
func (b *bodyReader) fail(err error) error {
	if e, ok := asH3Error(err); ok && !e.Remote {
		if e.Stream {
			b.st.StopSending(uint64(e.Code))
			b.st.Reset(uint64(e.Code))
		} else {
			b.s.fail(e)
		}
	} else if serr := b.s.Err(); serr != nil {
		err = serr
	}
	b.setErr(err)
	return err
}

// done reports whether the whole body was read.
func (b *bodyReader) done() bool { return b.getErr() == io.EOF }
