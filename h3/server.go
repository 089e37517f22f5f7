package h3

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Server serves HTTP/3 requests on QUIC connections.
type Server struct {
	// Handler answers requests.
	Handler http.Handler
	// MaxHeaderBytes bounds a request's header section, counted as RFC 9114
	// §4.2.2 says, and is advertised as SETTINGS_MAX_FIELD_SECTION_SIZE.
	// Zero means DefaultMaxHeaderBytes. Larger requests get a 431.
	MaxHeaderBytes int
	// EnableDatagrams advertises SETTINGS_H3_DATAGRAM = 1 (RFC 9297).
	EnableDatagrams bool
	// QPACKMaxTableCapacity and QPACKBlockedStreams are the dynamic table
	// the client's encoder may use (RFC 9204 §5): zero means
	// DefaultQPACKMaxTableCapacity and DefaultQPACKBlockedStreams, a
	// negative value none.
	QPACKMaxTableCapacity int
	QPACKBlockedStreams   int
	// Logger receives handler panics; nil means slog.Default().
	Logger *slog.Logger
	// ShutdownGrace is how long a graceful shutdown waits, once the last
	// request is answered, for the client to close the connection before
	// the server closes it. Closing at once could discard response bytes
	// still in flight, since CONNECTION_CLOSE ends every stream. Zero means
	// one second.
	ShutdownGrace time.Duration
}

// serverConn is one connection being served.
type serverConn struct {
	srv     *Server
	s       *session
	reqBase context.Context

	mu           sync.Mutex
	active       int    // requests being served
	nextID       uint64 // one past the highest accepted stream: the GOAWAY ID
	shuttingDown bool
	wg           sync.WaitGroup
}

// ServeConn serves HTTP/3 on conn until the connection ends. When ctx is
// done it shuts down gracefully (RFC 9114 §5.2): it sends GOAWAY with the ID
// of the first request it will not process, rejects later requests, lets the
// accepted ones finish, then closes the connection with H3_NO_ERROR and
// returns nil. Otherwise it returns why the connection ended; an *Error if
// the peer violated the protocol.
func (srv *Server) ServeConn(ctx context.Context, conn Conn) error {
	s := newSession(conn, true, srv.MaxHeaderBytes, srv.EnableDatagrams, qpackLimits{srv.QPACKMaxTableCapacity, srv.QPACKBlockedStreams})
	if err := s.start(ctx); err != nil {
		conn.Close(uint64(ErrCodeInternalError), "")
		s.cancel()
		return err
	}
	sc := &serverConn{srv: srv, s: s}
	// Requests keep ctx's values but not its cancellation, which means
	// "shut down gracefully"; they are cancelled when the connection ends.
	var cancelReqs context.CancelFunc
	sc.reqBase, cancelReqs = context.WithCancel(context.WithoutCancel(ctx))
	defer cancelReqs()
	stopReqs := context.AfterFunc(s.ctx, cancelReqs)
	defer stopReqs()
	stopShutdown := context.AfterFunc(ctx, sc.shutdown)
	defer stopShutdown()

	for {
		st, err := conn.AcceptStream(s.ctx)
		if err != nil {
			s.end(fmt.Errorf("h3: connection ended: %w", err))
			break
		}
		if !sc.admit(st) {
			// RFC 9114 §5.2: "Requests or pushes with the indicated
			// identifier or greater are rejected ... by the sender of the
			// GOAWAY."
			st.StopSending(uint64(ErrCodeRequestRejected))
			st.Reset(uint64(ErrCodeRequestRejected))
			continue
		}
		go sc.serveStream(st)
	}
	sc.wg.Wait()
	err := s.Err()
	sc.mu.Lock()
	graceful := sc.shuttingDown && sc.active == 0
	sc.mu.Unlock()
	if err == errSessionClosed || graceful {
		if e, ok := asH3Error(err); !ok || e.Code == ErrCodeNoError {
			return nil
		}
	}
	return err
}

// admit records an accepted request stream, or refuses it after GOAWAY.
func (sc *serverConn) admit(st Stream) bool {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	id := uint64(st.ID())
	if sc.shuttingDown && id >= sc.nextID {
		return false
	}
	if id+4 > sc.nextID {
		sc.nextID = id + 4
	}
	sc.active++
	sc.wg.Add(1)
	return true
}

// release ends one request and finishes a graceful shutdown after the last.
func (sc *serverConn) release() {
	sc.mu.Lock()
	sc.active--
	last := sc.shuttingDown && sc.active == 0
	sc.mu.Unlock()
	sc.wg.Done()
	if last {
		sc.closeAfterGrace()
	}
}

// closeAfterGrace gives the client ShutdownGrace to read the last responses
// and close the connection itself, then closes it with H3_NO_ERROR.
func (sc *serverConn) closeAfterGrace() {
	grace := sc.srv.ShutdownGrace
	if grace <= 0 {
		grace = time.Second
	}
	t := time.AfterFunc(grace, sc.s.closeNoError)
	context.AfterFunc(sc.s.ctx, func() { t.Stop() })
}

// shutdown starts a graceful shutdown.
func (sc *serverConn) shutdown() {
	sc.mu.Lock()
	if sc.shuttingDown {
		sc.mu.Unlock()
		return
	}
	sc.shuttingDown = true
	id, idle := sc.nextID, sc.active == 0
	sc.mu.Unlock()
	// RFC 9114 §5.2: "The server sends a client-initiated bidirectional
	// stream ID"; every request below it was accepted and will be answered.
	sc.s.sendGoAway(id)
	if idle {
		sc.closeAfterGrace()
	}
}

// serveStream reads one request and runs the handler.
func (sc *serverConn) serveStream(st Stream) {
	defer sc.release()
	s := sc.s
	fr := newFrameReader(bufio.NewReaderSize(st, streamReadBuffer), s.maxFieldSection)
	fields, err := readHeaderSection(sc.reqBase, s, st, fr, true)
	if err != nil {
		sc.requestFailed(st, err)
		return
	}
	rh, err := parseRequestHead(fields)
	if err != nil {
		sc.requestFailed(st, err)
		return
	}
	req, err := sc.newRequest(rh)
	if err != nil {
		sc.requestFailed(st, malformed("%v", err))
		return
	}
	body := &bodyReader{s: s, st: st, fr: fr, contentLength: rh.contentLength, trailer: req.Trailer}
	req.Body = serverBody{body}
	ctx, cancel := context.WithCancel(sc.reqBase)
	defer cancel()
	req = req.WithContext(ctx)
	rw := newResponseWriter(s, st, req)
	if sc.runHandler(rw, req) {
		if rw.finish() != nil {
			return
		}
	} else {
		st.Reset(uint64(ErrCodeInternalError))
	}
	if err := body.getErr(); err == nil || err == http.ErrBodyReadAfterClose {
		// RFC 9114 §4.1: "A server can send a complete response prior to
		// the client sending an entire request ... the server MAY request
		// that the client abort sending a request without error by
		// triggering a QUIC STOP_SENDING frame with error code
		// H3_NO_ERROR".
		st.StopSending(uint64(ErrCodeNoError))
	}
}

// runHandler calls the handler and reports whether it returned normally.
func (sc *serverConn) runHandler(rw *responseWriter, req *http.Request) (ok bool) {
	defer func() {
		if v := recover(); v != nil {
			if v != http.ErrAbortHandler {
				logger := sc.srv.Logger
				if logger == nil {
					logger = slog.Default()
				}
				logger.Error("h3: handler panic", "path", req.URL.Path, "panic", v)
			}
			ok = false
		}
	}()
	sc.srv.Handler.ServeHTTP(rw, req)
	return true
}

// requestFailed aborts a request stream whose request could not be read.
func (sc *serverConn) requestFailed(st Stream, err error) {
	var tooLarge errFieldSectionTooLarge
	switch e, isH3 := asH3Error(err); {
	case err == io.EOF:
		// RFC 9114 §4.1.1: "If a client-initiated stream terminates
		// without enough of the HTTP message to provide a complete
		// response, the server SHOULD abort its response stream with the
		// error code H3_REQUEST_INCOMPLETE."
		st.Reset(uint64(ErrCodeRequestIncomplete))
	case errors.As(err, &tooLarge):
		// RFC 9114 §4.2.2: "A server that receives a larger header section
		// than it is willing to handle can send an HTTP 431 (Request Header
		// Fields Too Large) status code".
		st.Write(headersFrame(sc.s.encodeFieldSection(st.ID(), statusField(http.StatusRequestHeaderFieldsTooLarge), nil, nil)))
		st.CloseWrite()
		// The 431 is a complete response, so RFC 9114 §4.1.1 lets the
		// server stop the rest of the request "without error by triggering
		// a QUIC STOP_SENDING frame with error code H3_NO_ERROR".
		st.StopSending(uint64(ErrCodeNoError))
	case isH3 && e.Remote:
		st.Reset(uint64(ErrCodeRequestCancelled))
	case isH3 && e.Stream:
		st.StopSending(uint64(e.Code))
		st.Reset(uint64(e.Code))
	case isH3:
		sc.s.fail(e)
	default:
		st.Reset(uint64(ErrCodeRequestCancelled))
	}
}

// newRequest builds the *http.Request of a validated header section.
func (sc *serverConn) newRequest(rh *requestHead) (*http.Request, error) {
	req := &http.Request{
		Method:        rh.method,
		Proto:         "HTTP/3.0",
		ProtoMajor:    3,
		Header:        rh.header,
		Host:          rh.authority,
		RequestURI:    rh.path,
		ContentLength: rh.contentLength,
	}
	if rh.method == http.MethodConnect {
		req.URL = &url.URL{Host: rh.authority}
		req.RequestURI = rh.authority
	} else {
		u, err := url.ParseRequestURI(rh.path)
		if err != nil {
			return nil, fmt.Errorf("invalid :path %q: %v", rh.path, err)
		}
		u.Scheme, u.Host = rh.scheme, rh.authority
		req.URL = u
	}
	// RFC 9114 §4.2.1: "If a decompressed field section contains multiple
	// cookie field lines, these MUST be concatenated into a single byte
	// string using the two-byte delimiter of "; " (ASCII 0x3b, 0x20) before
	// being passed into ... a generic HTTP server application."
	if c := req.Header.Values("Cookie"); len(c) > 1 {
		req.Header.Set("Cookie", strings.Join(c, "; "))
	}
	// Trailers announced in the Trailer field appear with nil values until
	// the body has been read to EOF, as in net/http; unannounced trailers
	// are added too.
	req.Trailer = make(http.Header)
	if ts := req.Header.Values("Trailer"); len(ts) > 0 {
		for _, t := range ts {
			for _, k := range strings.Split(t, ",") {
				if k = http.CanonicalHeaderKey(strings.TrimSpace(k)); k != "" {
					req.Trailer[k] = nil
				}
			}
		}
	}
	return req, nil
}

// serverBody is a request body as handlers see it. Closing it does nothing
// on the wire: once the response is complete, ServeConn asks the client to
// stop sending any unread content.
type serverBody struct{ b *bodyReader }

func (sb serverBody) Read(p []byte) (int, error) { return sb.b.Read(p) }

func (sb serverBody) Close() error {
	sb.b.closeRead(http.ErrBodyReadAfterClose)
	return nil
}
