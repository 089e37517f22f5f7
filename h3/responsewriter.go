package h3

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/quiver-quic/quiver/h3/qpack"
)

// responseBuffer is how much small-write content a response buffers before
// it frames it; writes at least this large go out as their own DATA frame.
const responseBuffer = 16 << 10

// responseWriter is the http.ResponseWriter of one HTTP/3 request. It
// withholds the HEADERS frame until the first flush, so a handler that
// writes less than responseBuffer bytes and returns gets a Content-Length.
type responseWriter struct {
	s      *session
	st     Stream
	req    *http.Request
	header http.Header

	status      int
	final       http.Header // header snapshot taken at WriteHeader
	wroteHeader bool        // final status chosen
	headerSent  bool        // HEADERS frame written
	bodyAllowed bool
	declaredLen int64 // Content-Length set by the handler, or -1
	written     int64 // content bytes accepted from the handler
	buf         []byte
	hdr         [16]byte // DATA frame header of a large write
	err         error    // sticky write error
}

var (
	_ http.ResponseWriter = (*responseWriter)(nil)
	_ http.Flusher        = (*responseWriter)(nil)
)

func newResponseWriter(s *session, st Stream, req *http.Request) *responseWriter {
	return &responseWriter{s: s, st: st, req: req, header: make(http.Header), declaredLen: -1}
}

// Header implements http.ResponseWriter.
func (w *responseWriter) Header() http.Header { return w.header }

func statusField(code int) []qpack.HeaderField {
	return []qpack.HeaderField{{Name: ":status", Value: strconv.Itoa(code)}}
}

// WriteHeader implements http.ResponseWriter. Informational codes (1xx
// other than 101) are sent at once as interim responses.
func (w *responseWriter) WriteHeader(code int) {
	if code < 100 || code > 999 {
		panic(fmt.Sprintf("h3: invalid WriteHeader code %v", code))
	}
	if w.wroteHeader {
		return
	}
	if code < 200 && code != http.StatusSwitchingProtocols {
		// RFC 9114 §4.1: "A server sends zero or more interim HTTP
		// responses on the same stream as the request, followed by a
		// single final HTTP response".
		w.writeStream(headersFrame(w.s.encodeFieldSection(w.st.ID(), statusField(code), w.header, nil)))
		return
	}
	w.wroteHeader = true
	w.status = code
	w.final = w.header.Clone()
	w.bodyAllowed = code != http.StatusNoContent && code != http.StatusNotModified && code >= 200
	if cl := w.final.Get("Content-Length"); cl != "" {
		if n, err := strconv.ParseInt(cl, 10, 64); err == nil && n >= 0 {
			w.declaredLen = n
		} else {
			w.final.Del("Content-Length")
		}
	}
}

// Write implements http.ResponseWriter.
func (w *responseWriter) Write(p []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if !w.bodyAllowed {
		return 0, http.ErrBodyNotAllowed
	}
	if w.err != nil {
		return 0, w.err
	}
	if w.declaredLen >= 0 && w.written+int64(len(p)) > w.declaredLen {
		return 0, http.ErrContentLength
	}
	w.written += int64(len(p))
	if w.req.Method == http.MethodHead {
		return len(p), nil
	}
	if len(w.buf)+len(p) <= responseBuffer {
		// The buffer grows with what is written: a response of a few
		// hundred bytes (an RPC's answer) allocated and zeroed all 16
		// KiB when the buffer was made at its full size, 35 % of the
		// bytes an HTTP/3 RPC allocated (docs/highway.md).
		w.buf = append(w.buf, p...)
		return len(p), nil
	}
	if err := w.flush(false); err != nil {
		return 0, err
	}
	if len(p) < responseBuffer {
		w.buf = append(w.buf, p...)
		return len(p), nil
	}
	// A large write goes out as one DATA frame without being copied.
	if err := w.writeStream(appendFrameHeader(w.hdr[:0], FrameData, uint64(len(p)))); err != nil {
		return 0, err
	}
	if err := w.writeStream(p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush implements http.Flusher.
func (w *responseWriter) Flush() { w.FlushError() }

// FlushError sends the header and buffered content; http.ResponseController
// uses it.
func (w *responseWriter) FlushError() error {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	return w.flush(false)
}

// flush writes the HEADERS frame if not yet sent, then the buffered content
// as a DATA frame, in one stream write. last is true when the handler has
// returned, which lets the header carry the exact Content-Length.
func (w *responseWriter) flush(last bool) error {
	if w.err != nil {
		return w.err
	}
	var out []byte
	if !w.headerSent {
		w.headerSent = true
		h := w.final
		if _, set := h["Content-Type"]; w.bodyAllowed && !set && len(w.buf) > 0 {
			h.Set("Content-Type", http.DetectContentType(w.buf))
		}
		if last && w.declaredLen < 0 && w.bodyAllowed {
			h.Set("Content-Length", strconv.FormatInt(w.written, 10))
		}
		section := w.s.encodeFieldSection(w.st.ID(), statusField(w.status), h, isTrailerName)
		out = make([]byte, 0, len(section)+16+len(w.buf)+16)
		out = (&HeadersFrame{FieldSection: section}).Append(out)
	}
	if len(w.buf) > 0 {
		if out == nil {
			out = make([]byte, 0, 16+len(w.buf))
		}
		out = append(appendFrameHeader(out, FrameData, uint64(len(w.buf))), w.buf...)
		w.buf = w.buf[:0]
	}
	if len(out) == 0 {
		return nil
	}
	return w.writeStream(out)
}

// isTrailerName leaves trailer declarations made with http.TrailerPrefix out
// of the header section.
func isTrailerName(name string) bool {
	return strings.HasPrefix(name, strings.ToLower(http.TrailerPrefix))
}

func (w *responseWriter) writeStream(b []byte) error {
	if w.err != nil {
		return w.err
	}
	if _, err := w.st.Write(b); err != nil {
		w.err = fmt.Errorf("h3: write response: %w", peerReset(err))
		return w.err
	}
	return nil
}

// finish completes the response after the handler returned: header, last
// content, trailers, FIN.
func (w *responseWriter) finish() error {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if err := w.flush(true); err != nil {
		w.st.Reset(uint64(ErrCodeInternalError))
		return err
	}
	if w.declaredLen >= 0 && w.written != w.declaredLen && w.req.Method != http.MethodHead {
		// The response would be malformed (RFC 9114 §4.1.2), so abort it.
		w.st.Reset(uint64(ErrCodeInternalError))
		return http.ErrContentLength
	}
	if t := w.trailers(); len(t) > 0 {
		if err := w.writeStream(headersFrame(w.s.encodeFieldSection(w.st.ID(), nil, t, nil))); err != nil {
			w.st.Reset(uint64(ErrCodeInternalError))
			return err
		}
	}
	// RFC 9114 §4.1: "After sending a final response, the server MUST close
	// the stream for sending."
	return w.st.CloseWrite()
}

// trailers collects the trailer fields: those announced in the Trailer
// header at WriteHeader time, and those set with http.TrailerPrefix.
func (w *responseWriter) trailers() http.Header {
	var t http.Header
	add := func(k string, v []string) {
		if len(v) == 0 {
			return
		}
		if t == nil {
			t = make(http.Header)
		}
		t[http.CanonicalHeaderKey(k)] = v
	}
	for _, decl := range w.final.Values("Trailer") {
		for _, k := range strings.Split(decl, ",") {
			if k = strings.TrimSpace(k); k != "" {
				add(k, w.header.Values(k))
			}
		}
	}
	for k, v := range w.header {
		if strings.HasPrefix(k, http.TrailerPrefix) {
			add(strings.TrimPrefix(k, http.TrailerPrefix), v)
		}
	}
	return t
}
