package h3

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"testing/synctest"

	"github.com/quiver-quic/quiver/h3/qpack"
)

// h3Test is a Server and a ClientConn joined by an in-memory connection.
type h3Test struct {
	t          *testing.T
	client     *memConn
	server     *memConn
	cc         *ClientConn
	serveErr   chan error
	stopServer context.CancelFunc
}

func newH3Test(t *testing.T, h http.Handler) *h3Test {
	t.Helper()
	client, server := newMemPair(ALPNH3)
	ctx, cancel := context.WithCancel(t.Context())
	tt := &h3Test{t: t, client: client, server: server, serveErr: make(chan error, 1), stopServer: cancel}
	go func() { tt.serveErr <- (&Server{Handler: h}).ServeConn(ctx, server) }()
	cc, err := NewClientConn(t.Context(), client, nil)
	if err != nil {
		t.Fatal(err)
	}
	tt.cc = cc
	return tt
}

// get does a GET and returns status and body.
func (tt *h3Test) get(path string) (*http.Response, []byte, error) {
	req, _ := http.NewRequestWithContext(tt.t.Context(), "GET", "https://quiver.test"+path, nil)
	resp, err := tt.cc.RoundTrip(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp, body, err
}

// close ends the connection from the client and waits for the server.
func (tt *h3Test) close() {
	tt.cc.Close()
	<-tt.serveErr
}

func TestH3GetConcurrent(t *testing.T) {
	files := fstest.MapFS{}
	sizes := []int{0, 1, 1000, 16 << 10, 100_000, 1 << 20, 3<<20 + 7, 5 << 20}
	for i, n := range sizes {
		files[fmt.Sprintf("f%d", i)] = &fstest.MapFile{Data: randomBytes(n, uint64(i))}
	}
	synctest.Test(t, func(t *testing.T) {
		tt := newH3Test(t, FileHandler(files))
		var wg sync.WaitGroup
		for i := range sizes {
			wg.Go(func() {
				name := fmt.Sprintf("f%d", i)
				resp, body, err := tt.get("/" + name)
				if err != nil {
					t.Errorf("GET /%s: %v", name, err)
					return
				}
				if resp.StatusCode != 200 || !bytes.Equal(body, files[name].Data) {
					t.Errorf("GET /%s: status %d, %d bytes, want 200 and %d byte-exact", name, resp.StatusCode, len(body), len(files[name].Data))
				}
				if resp.ContentLength != int64(len(files[name].Data)) {
					t.Errorf("GET /%s: ContentLength %d", name, resp.ContentLength)
				}
			})
		}
		wg.Wait()
		resp, _, err := tt.get("/missing")
		if err != nil || resp.StatusCode != 404 {
			t.Errorf("GET /missing: %v, %v; want 404", resp, err)
		}
		st, err := tt.cc.PeerSettings(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if v, ok := st.Get(SettingMaxFieldSectionSize); !ok || v != DefaultMaxHeaderBytes {
			t.Errorf("server SETTINGS %v lacks MAX_FIELD_SECTION_SIZE", st)
		}
		tt.close()
	})
}

func TestH3RequestBodyAndTrailers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tt := newH3Test(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				t.Errorf("server read body: %v", err)
			}
			w.Header().Set("Trailer", "X-Sum")
			w.Header().Set("X-Method", r.Method)
			w.Write(body)
			w.Write(body)
			w.Header().Set("X-Sum", fmt.Sprint(len(body)))
		}))
		payload := randomBytes(200_000, 9)
		req, _ := http.NewRequestWithContext(t.Context(), "POST", "https://quiver.test/echo", bytes.NewReader(payload))
		resp, err := tt.cc.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		if err != nil || !bytes.Equal(body, append(payload, payload...)) {
			t.Fatalf("echo: %d bytes, %v", len(body), err)
		}
		if resp.Header.Get("X-Method") != "POST" || resp.Trailer.Get("X-Sum") != "200000" {
			t.Errorf("header %v trailer %v", resp.Header, resp.Trailer)
		}
		tt.close()
	})
}

func TestH3Streaming(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		tt := newH3Test(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(http.StatusEarlyHints)
			io.WriteString(w, "first")
			w.(http.Flusher).Flush()
			<-release
			io.WriteString(w, "second")
		}))
		var interim []int
		trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
			interim = append(interim, code)
			return nil
		}}
		ctx := httptrace.WithClientTrace(t.Context(), trace)
		req, _ := http.NewRequestWithContext(ctx, "GET", "https://quiver.test/", nil)
		resp, err := tt.cc.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		if len(interim) != 1 || interim[0] != 103 {
			t.Errorf("interim responses %v, want [103]", interim)
		}
		if resp.ContentLength != -1 {
			t.Errorf("flushed response has ContentLength %d", resp.ContentLength)
		}
		buf := make([]byte, 5)
		if _, err := io.ReadFull(resp.Body, buf); err != nil || string(buf) != "first" {
			t.Fatalf("first chunk %q, %v", buf, err)
		}
		close(release)
		rest, err := io.ReadAll(resp.Body)
		if err != nil || string(rest) != "second" {
			t.Fatalf("rest %q, %v", rest, err)
		}
		tt.close()
	})
}

// TestH3Cancel checks that closing a response body early, and cancelling a
// request's context, leave the connection usable.
func TestH3Cancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		block := make(chan struct{})
		tt := newH3Test(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/block" {
				w.WriteHeader(200)
				w.(http.Flusher).Flush()
				select {
				case <-block:
				case <-r.Context().Done():
				}
				return
			}
			w.Write(make([]byte, 1<<20))
		}))
		req, _ := http.NewRequestWithContext(t.Context(), "GET", "https://quiver.test/big", nil)
		resp, err := tt.cc.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Read(make([]byte, 10))
		resp.Body.Close()

		ctx, cancel := context.WithCancel(t.Context())
		req, _ = http.NewRequestWithContext(ctx, "GET", "https://quiver.test/block", nil)
		resp, err = tt.cc.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		cancel()
		if _, err := io.ReadAll(resp.Body); err == nil {
			t.Error("body of a cancelled request read to EOF")
		}
		resp.Body.Close()
		close(block)
		if r, body, err := tt.get("/big"); err != nil || r.StatusCode != 200 || len(body) != 1<<20 {
			t.Errorf("connection unusable after cancellations: %v", err)
		}
		tt.close()
	})
}

func TestH3HeaderTooLarge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tt := newH3Test(t, http.NotFoundHandler())
		req, _ := http.NewRequestWithContext(t.Context(), "GET", "https://quiver.test/", nil)
		req.Header.Set("X-Big", strings.Repeat("a", DefaultMaxHeaderBytes))
		resp, err := tt.cc.RoundTrip(req)
		if err != nil || resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Fatalf("got %v, %v; want 431", resp, err)
		}
		tt.close()
	})
}

// TestH3GracefulShutdown checks GOAWAY (RFC 9114 §5.2): the server names
// the first request it will not process, finishes the accepted ones, and
// closes with H3_NO_ERROR; the client stops sending requests.
func TestH3GracefulShutdown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		started := make(chan struct{})
		tt := newH3Test(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			close(started)
			<-release
			io.WriteString(w, "done")
		}))
		type result struct {
			body []byte
			err  error
		}
		inflight := make(chan result, 1)
		go func() {
			_, body, err := tt.get("/slow") // stream 0
			inflight <- result{body, err}
		}()
		<-started
		tt.stopServer()
		synctest.Wait()
		gone, id := tt.cc.GoAway()
		if !gone || id != 4 {
			t.Fatalf("GoAway() = %v, %d; want true, 4", gone, id)
		}
		if _, _, err := tt.get("/new"); err != ErrGoAway {
			t.Errorf("request after GOAWAY: %v, want ErrGoAway", err)
		}
		close(release)
		if r := <-inflight; r.err != nil || string(r.body) != "done" {
			t.Errorf("in-flight request: %q, %v", r.body, r.err)
		}
		if err := <-tt.serveErr; err != nil {
			t.Errorf("ServeConn = %v, want nil", err)
		}
		if by, code, _ := tt.client.link.closedWith(); code != uint64(ErrCodeNoError) {
			t.Errorf("closed by %s with %#x, want H3_NO_ERROR", by, code)
		}
	})
}

// TestH3GoAwayRejectsLaterStreams checks that a request stream at or above
// the GOAWAY ID is refused with H3_REQUEST_REJECTED.
func TestH3GoAwayRejectsLaterStreams(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		rc := newRawClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-release }))
		rc.controlStream(&SettingsFrame{})
		first := rc.request(fieldsOf(":method", "GET", ":scheme", "https", ":authority", "a", ":path", "/"))
		synctest.Wait()
		rc.stop()
		synctest.Wait()
		late := rc.request(fieldsOf(":method", "GET", ":scheme", "https", ":authority", "a", ":path", "/"))
		if _, err := io.ReadAll(late); !isReset(err, ErrCodeRequestRejected) {
			t.Errorf("late request: %v, want reset H3_REQUEST_REJECTED", err)
		}
		close(release)
		io.ReadAll(first)
		if err := <-rc.serveErr; err != nil {
			t.Errorf("ServeConn = %v", err)
		}
	})
}

// rawClient drives a Server with hand-made frames.
type rawClient struct {
	t        *testing.T
	c        *memConn
	serveErr chan error
	stop     context.CancelFunc
}

func newRawClient(t *testing.T, h http.Handler) *rawClient {
	client, server := newMemPair(ALPNH3)
	ctx, cancel := context.WithCancel(t.Context())
	rc := &rawClient{t: t, c: client, serveErr: make(chan error, 1), stop: cancel}
	if h == nil {
		// Read the whole request, so that violations in the body are seen.
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			http.NotFound(w, r)
		})
	}
	go func() { rc.serveErr <- (&Server{Handler: h}).ServeConn(ctx, server) }()
	return rc
}

// uni opens a unidirectional stream and writes b on it.
func (rc *rawClient) uni(b []byte) Stream {
	st, err := rc.c.OpenUniStream(rc.t.Context())
	if err != nil {
		rc.t.Fatal(err)
	}
	st.Write(b)
	return st
}

// controlStream opens a control stream carrying frames.
func (rc *rawClient) controlStream(frames ...Frame) Stream {
	b := appendVarint(nil, StreamTypeControl)
	for _, f := range frames {
		b = f.Append(b)
	}
	return rc.uni(b)
}

// request opens a request stream with a HEADERS frame of fields and FIN.
func (rc *rawClient) request(fields []qpack.HeaderField, more ...Frame) Stream {
	b := (&HeadersFrame{FieldSection: encodeRaw(fields)}).Append(nil)
	for _, f := range more {
		b = f.Append(b)
	}
	return rc.rawRequest(b)
}

func (rc *rawClient) rawRequest(b []byte) Stream {
	st, err := rc.c.OpenStream(rc.t.Context())
	if err != nil {
		rc.t.Fatal(err)
	}
	st.Write(b)
	st.CloseWrite()
	return st
}

// wantConnError waits for the server to close the connection with code.
func (rc *rawClient) wantConnError(code ErrCode) {
	rc.t.Helper()
	err := <-rc.serveErr
	e, ok := asH3Error(err)
	if !ok || e.Code != code || e.Stream {
		rc.t.Errorf("ServeConn = %v, want connection error %v", err, code)
	}
	if by, got, reason := rc.c.link.closedWith(); by != "server" || got != uint64(code) {
		rc.t.Errorf("connection closed by %s with %v (%s), want server %v", by, ErrCode(got), reason, code)
	}
}

// encodeRaw encodes fields with the static table and literals only (an
// encoder that never learned the peer's table capacity).
func encodeRaw(fields []qpack.HeaderField) []byte {
	return qpack.NewEncoder(0, func([]byte) {}).Encode(0, fields)
}

func fieldsOf(kv ...string) []qpack.HeaderField {
	var fs []qpack.HeaderField
	for i := 0; i+1 < len(kv); i += 2 {
		fs = append(fs, qpack.HeaderField{Name: kv[i], Value: kv[i+1]})
	}
	return fs
}

func isReset(err error, code ErrCode) bool {
	re, ok := err.(*memResetError)
	return ok && re.code == uint64(code)
}

var goodRequest = fieldsOf(":method", "GET", ":scheme", "https", ":authority", "quiver.test", ":path", "/")

// TestServerConnectionErrors sends one protocol violation per case and
// checks the connection error the server closes with.
func TestServerConnectionErrors(t *testing.T) {
	ctrl := func(fs ...Frame) func(*rawClient) {
		return func(rc *rawClient) { rc.controlStream(fs...) }
	}
	for _, tc := range []struct {
		name string
		run  func(*rawClient)
		code ErrCode
	}{
		{"first control frame is GOAWAY", ctrl(&GoAwayFrame{}), ErrCodeMissingSettings},
		{"first control frame is grease", ctrl(&UnknownFrame{FrameType: 0x21}, &SettingsFrame{}), ErrCodeMissingSettings},
		{"first control frame is DATA", ctrl(&DataFrame{Data: []byte("x")}), ErrCodeMissingSettings},
		{"DATA on control stream", ctrl(&SettingsFrame{}, &DataFrame{Data: []byte("x")}), ErrCodeFrameUnexpected},
		{"HEADERS on control stream", ctrl(&SettingsFrame{}, &HeadersFrame{}), ErrCodeFrameUnexpected},
		{"second SETTINGS", ctrl(&SettingsFrame{}, &SettingsFrame{}), ErrCodeFrameUnexpected},
		{"PUSH_PROMISE on control stream", ctrl(&SettingsFrame{}, &PushPromiseFrame{}), ErrCodeFrameUnexpected},
		{"HTTP/2 frame on control stream", ctrl(&SettingsFrame{}, &UnknownFrame{FrameType: 0x6}), ErrCodeFrameUnexpected},
		{"HTTP/2 setting", ctrl(&SettingsFrame{Settings: []Setting{{0x2, 0}}}), ErrCodeSettingsError},
		{"duplicate setting", ctrl(&SettingsFrame{Settings: []Setting{{0x6, 1}, {0x6, 1}}}), ErrCodeSettingsError},
		{"GOAWAY with two varints", ctrl(&SettingsFrame{}, &UnknownFrame{FrameType: FrameGoAway, Payload: []byte{0, 0}}), ErrCodeFrameError},
		{"MAX_PUSH_ID decreasing", ctrl(&SettingsFrame{}, &MaxPushIDFrame{PushID: 5}, &MaxPushIDFrame{PushID: 4}), ErrCodeIDError},
		{"CANCEL_PUSH never promised", ctrl(&SettingsFrame{}, &MaxPushIDFrame{PushID: 5}, &CancelPushFrame{PushID: 1}), ErrCodeIDError},
		{"client GOAWAY increasing", ctrl(&SettingsFrame{}, &GoAwayFrame{ID: 1}, &GoAwayFrame{ID: 2}), ErrCodeIDError},
		{"control stream FIN", func(rc *rawClient) { rc.controlStream(&SettingsFrame{}).CloseWrite() }, ErrCodeClosedCriticalStream},
		{"control stream reset", func(rc *rawClient) {
			st := rc.controlStream(&SettingsFrame{})
			synctest.Wait() // let the server read the stream type first
			st.Reset(0x100)
		}, ErrCodeClosedCriticalStream},
		{"truncated control frame", func(rc *rawClient) {
			b := (&SettingsFrame{Settings: []Setting{{6, 100}}}).Append(appendVarint(nil, StreamTypeControl))
			rc.uni(b[:len(b)-1]).CloseWrite()
		}, ErrCodeFrameError},
		{"second control stream", func(rc *rawClient) {
			rc.controlStream(&SettingsFrame{})
			rc.controlStream(&SettingsFrame{})
		}, ErrCodeStreamCreationError},
		{"push stream from client", func(rc *rawClient) { rc.uni([]byte{0x01, 0x00}) }, ErrCodeStreamCreationError},
		{"second QPACK encoder stream", func(rc *rawClient) {
			rc.uni([]byte{0x02})
			rc.uni([]byte{0x02})
		}, ErrCodeStreamCreationError},
		// Set Dynamic Table Capacity 4097, above the 4096 advertised (RFC
		// 9204 §4.3.1).
		{"QPACK capacity above SETTINGS_QPACK_MAX_TABLE_CAPACITY", func(rc *rawClient) { rc.uni([]byte{0x02, 0x3f, 0xe2, 0x1f}) }, ErrCodeQPACKEncoderStream},
		{"QPACK decoder stream closed", func(rc *rawClient) { rc.uni([]byte{0x03}).CloseWrite() }, ErrCodeClosedCriticalStream},
		// RFC 9204 §4.4.3: an Increment of zero, or one beyond what the
		// encoder sent (this one has inserted nothing yet).
		{"QPACK Insert Count Increment 0", func(rc *rawClient) { rc.uni([]byte{0x03, 0x00}) }, ErrCodeQPACKDecoderStream},
		{"QPACK Insert Count Increment 1", func(rc *rawClient) { rc.uni([]byte{0x03, 0x01}) }, ErrCodeQPACKDecoderStream},
		{"QPACK Insert Count Increment after other instructions", func(rc *rawClient) {
			// Section Acknowledgment of stream 200 (multi-byte integer),
			// Stream Cancellation of stream 4, then an Increment of 0.
			rc.uni([]byte{0x03, 0xff, 0x49, 0x44, 0x00})
		}, ErrCodeQPACKDecoderStream},
		{"DATA before HEADERS", func(rc *rawClient) {
			rc.rawRequest((&DataFrame{Data: []byte("x")}).Append(nil))
		}, ErrCodeFrameUnexpected},
		{"SETTINGS on request stream", func(rc *rawClient) { rc.request(goodRequest, &SettingsFrame{}) }, ErrCodeFrameUnexpected},
		{"PUSH_PROMISE from client", func(rc *rawClient) { rc.rawRequest((&PushPromiseFrame{}).Append(nil)) }, ErrCodeFrameUnexpected},
		{"MAX_PUSH_ID on request stream", func(rc *rawClient) { rc.request(goodRequest, &MaxPushIDFrame{}) }, ErrCodeFrameUnexpected},
		{"DATA after trailers", func(rc *rawClient) {
			rc.request(goodRequest, &HeadersFrame{FieldSection: encodeRaw(fieldsOf("x-t", "1"))}, &DataFrame{Data: []byte("x")})
		}, ErrCodeFrameUnexpected},
		// Encoded Required Insert Count 257, above 2 × (4096 / 32): no
		// conformant encoder produces it (RFC 9204 §4.5.1.1).
		{"QPACK impossible Required Insert Count", func(rc *rawClient) {
			rc.rawRequest((&HeadersFrame{FieldSection: []byte{0xff, 0x02, 0x00, 0x80}}).Append(nil))
		}, ErrCodeQPACKDecompression},
		{"truncated HEADERS", func(rc *rawClient) {
			b := (&HeadersFrame{FieldSection: encodeRaw(goodRequest)}).Append(nil)
			rc.rawRequest(b[:len(b)-2])
		}, ErrCodeFrameError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rc := newRawClient(t, nil)
				tc.run(rc)
				rc.wantConnError(tc.code)
			})
		})
	}
}

// TestServerMalformedRequests checks that malformed requests are stream
// errors of type H3_MESSAGE_ERROR (RFC 9114 §4.1.2) and that the connection
// survives them.
func TestServerMalformedRequests(t *testing.T) {
	for _, tc := range []struct {
		name   string
		fields []qpack.HeaderField
		more   []Frame
	}{
		{"no :method", fieldsOf(":scheme", "https", ":authority", "a", ":path", "/"), nil},
		{"no :path", fieldsOf(":method", "GET", ":scheme", "https", ":authority", "a"), nil},
		{"no :scheme", fieldsOf(":method", "GET", ":authority", "a", ":path", "/"), nil},
		{"empty :path", fieldsOf(":method", "GET", ":scheme", "https", ":authority", "a", ":path", ""), nil},
		{"relative :path", fieldsOf(":method", "GET", ":scheme", "https", ":authority", "a", ":path", "x"), nil},
		{"two :path", fieldsOf(":method", "GET", ":scheme", "https", ":authority", "a", ":path", "/", ":path", "/"), nil},
		{"unknown pseudo-header", fieldsOf(":method", "GET", ":scheme", "https", ":authority", "a", ":path", "/", ":foo", "x"), nil},
		{":status in request", fieldsOf(":status", "200", ":method", "GET", ":scheme", "https", ":authority", "a", ":path", "/"), nil},
		{"pseudo after regular", fieldsOf(":method", "GET", ":scheme", "https", "accept", "*/*", ":authority", "a", ":path", "/"), nil},
		{"no authority nor host", fieldsOf(":method", "GET", ":scheme", "https", ":path", "/"), nil},
		{"empty authority", fieldsOf(":method", "GET", ":scheme", "https", ":authority", "", ":path", "/"), nil},
		{"authority and host differ", append(fieldsOf(":method", "GET", ":scheme", "https", ":authority", "a", ":path", "/"), fieldsOf("host", "b")...), nil},
		{"userinfo", fieldsOf(":method", "GET", ":scheme", "https", ":authority", "u@a", ":path", "/"), nil},
		{"uppercase field name", append(goodRequest[:4:4], fieldsOf("Accept", "*/*")...), nil},
		{"connection header", append(goodRequest[:4:4], fieldsOf("connection", "close")...), nil},
		{"transfer-encoding", append(goodRequest[:4:4], fieldsOf("transfer-encoding", "chunked")...), nil},
		{"te gzip", append(goodRequest[:4:4], fieldsOf("te", "gzip")...), nil},
		{"LF in value", append(goodRequest[:4:4], fieldsOf("x-a", "a\nb")...), nil},
		{"CONNECT with :path", fieldsOf(":method", "CONNECT", ":authority", "a:443", ":path", "/"), nil},
		{"bad content-length", append(goodRequest[:4:4], fieldsOf("content-length", "1x")...), nil},
		{"content-length mismatch", append(goodRequest[:4:4], fieldsOf("content-length", "5")...), []Frame{&DataFrame{Data: []byte("abc")}}},
		{"content-length exceeded", append(goodRequest[:4:4], fieldsOf("content-length", "2")...), []Frame{&DataFrame{Data: []byte("abc")}}},
		{"pseudo-header in trailers", goodRequest, []Frame{&HeadersFrame{FieldSection: encodeRaw(fieldsOf(":path", "/"))}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rc := newRawClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if _, err := io.ReadAll(r.Body); err != nil {
						return
					}
					io.WriteString(w, "ok")
				}))
				rc.controlStream(&SettingsFrame{})
				st := rc.request(tc.fields, tc.more...)
				if _, err := io.ReadAll(st); !isReset(err, ErrCodeMessageError) {
					t.Errorf("read = %v, want reset with H3_MESSAGE_ERROR", err)
				}
				// The connection is still usable.
				ok := rc.request(goodRequest)
				if body, err := io.ReadAll(ok); err != nil || !bytes.HasSuffix(body, []byte("ok")) {
					t.Errorf("next request: %q, %v", body, err)
				}
				rc.c.Close(0, "")
				<-rc.serveErr
			})
		})
	}
}

// TestServerTolerates checks what RFC 9114 §9 requires be ignored: unknown
// and grease frames, settings and stream types.
func TestServerTolerates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := newRawClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			w.Write(b)
		}))
		rc.controlStream(&SettingsFrame{Settings: []Setting{{0x21 + 0x1f*7, 99}, {0x1234, 5}, {SettingH3Datagram, 1}}},
			&UnknownFrame{FrameType: 0x21 + 0x1f, Payload: []byte("grease")}, &MaxPushIDFrame{PushID: 3})
		rc.uni([]byte{0x02})
		rc.uni([]byte{0x03})
		grease := rc.uni(appendVarint(nil, 0x21+0x1f*3))
		rc.uni(nil).CloseWrite() // closed before its type: tolerated
		st := rc.request(goodRequest, &UnknownFrame{FrameType: 0x21}, &DataFrame{Data: []byte("a")},
			&UnknownFrame{FrameType: 0x40}, &DataFrame{}, &DataFrame{Data: []byte("b")})
		body, err := io.ReadAll(st)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := ParseFrame(body); err != nil {
			t.Fatalf("response: %v", err)
		}
		if !bytes.HasSuffix(body, []byte("ab")) {
			t.Errorf("response %x does not end with the echoed body", body)
		}
		// The grease stream was refused with STOP_SENDING.
		synctest.Wait()
		if _, err := grease.Write([]byte("x")); err == nil || !strings.Contains(err.Error(), "0x103") {
			t.Errorf("write on grease stream: %v, want STOP_SENDING H3_STREAM_CREATION_ERROR", err)
		}
		// An empty request stream is H3_REQUEST_INCOMPLETE.
		if _, err := io.ReadAll(rc.rawRequest(nil)); !isReset(err, ErrCodeRequestIncomplete) {
			t.Errorf("empty request: %v, want reset H3_REQUEST_INCOMPLETE", err)
		}
		rc.c.Close(0, "")
		<-rc.serveErr
	})
}

// TestH3ResponseHeaders checks Content-Length, HEAD and bodiless statuses.
func TestH3ResponseHeaders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tt := newH3Test(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case "/small":
				io.WriteString(w, "<html>hello</html>")
			case "/nocontent":
				w.WriteHeader(http.StatusNoContent)
				if _, err := w.Write([]byte("x")); err != http.ErrBodyNotAllowed {
					t.Errorf("Write after 204: %v", err)
				}
			case "/short":
				w.Header().Set("Content-Length", "10")
				io.WriteString(w, "abc")
			}
		}))
		resp, body, err := tt.get("/small")
		if err != nil || resp.ContentLength != 18 || string(body) != "<html>hello</html>" {
			t.Errorf("/small: %v, %d, %q", err, resp.ContentLength, body)
		}
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
			t.Errorf("sniffed Content-Type %q", ct)
		}
		req, _ := http.NewRequestWithContext(t.Context(), "HEAD", "https://quiver.test/small", nil)
		resp, err = tt.cc.RoundTrip(req)
		if err != nil || resp.ContentLength != 18 || resp.Body != http.NoBody {
			t.Errorf("HEAD: %v, %+v", err, resp)
		}
		resp, body, err = tt.get("/nocontent")
		if err != nil || resp.StatusCode != 204 || len(body) != 0 {
			t.Errorf("/nocontent: %v, %v, %q", err, resp, body)
		}
		// A handler that writes less than its Content-Length gets its
		// stream reset rather than a malformed response.
		if _, _, err := tt.get("/short"); err == nil {
			t.Error("/short: no error")
		}
		tt.close()
	})
}

func TestH3RequestTrailers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		got := make(chan string, 1)
		rc := newRawClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.ReadAll(r.Body)
			got <- r.Trailer.Get("X-Checksum")
		}))
		rc.controlStream(&SettingsFrame{})
		st := rc.request(append(goodRequest[:4:4], fieldsOf("trailer", "x-checksum")...),
			&DataFrame{Data: []byte("body")}, &HeadersFrame{FieldSection: encodeRaw(fieldsOf("x-checksum", "42"))})
		io.ReadAll(st)
		if v := <-got; v != "42" {
			t.Errorf("trailer X-Checksum = %q", v)
		}
		rc.c.Close(0, "")
		<-rc.serveErr
	})
}
