package h3

import (
	"errors"
	"io"
	"net/http"
	"testing"
	"testing/synctest"
)

// rawServer drives a ClientConn with hand-made frames.
type rawServer struct {
	t  *testing.T
	c  *memConn // the server end
	cc *ClientConn
}

func newRawServer(t *testing.T) *rawServer {
	client, server := newMemPair(ALPNH3)
	cc, err := NewClientConn(t.Context(), client, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &rawServer{t: t, c: server, cc: cc}
}

func (rs *rawServer) uni(b []byte) Stream {
	st, err := rs.c.OpenUniStream(rs.t.Context())
	if err != nil {
		rs.t.Fatal(err)
	}
	st.Write(b)
	return st
}

func (rs *rawServer) controlStream(frames ...Frame) Stream {
	b := appendVarint(nil, StreamTypeControl)
	for _, f := range frames {
		b = f.Append(b)
	}
	return rs.uni(b)
}

// roundTrip starts a request in the background.
func (rs *rawServer) roundTrip(path string) chan error {
	errc := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(rs.t.Context(), "GET", "https://quiver.test"+path, nil)
		resp, err := rs.cc.RoundTrip(req)
		if err == nil {
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		errc <- err
	}()
	return errc
}

// respond accepts the next request stream, reads the request, and writes b.
func (rs *rawServer) respond(b []byte) Stream {
	st, err := rs.c.AcceptStream(rs.t.Context())
	if err != nil {
		rs.t.Fatal(err)
	}
	io.ReadAll(st)
	st.Write(b)
	st.CloseWrite()
	return st
}

func (rs *rawServer) wantConnError(code ErrCode) {
	rs.t.Helper()
	<-rs.cc.Done()
	e, ok := asH3Error(rs.cc.Err())
	if !ok || e.Code != code || e.Stream {
		rs.t.Errorf("client Err() = %v, want connection error %v", rs.cc.Err(), code)
	}
	if by, got, reason := rs.c.link.closedWith(); by != "client" || got != uint64(code) {
		rs.t.Errorf("closed by %s with %v (%s), want client %v", by, ErrCode(got), reason, code)
	}
}

func headersOf(kv ...string) []byte {
	return (&HeadersFrame{FieldSection: encodeRaw(fieldsOf(kv...))}).Append(nil)
}

func TestClientConnectionErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(*rawServer)
		code ErrCode
	}{
		{"missing SETTINGS", func(rs *rawServer) { rs.controlStream(&GoAwayFrame{}) }, ErrCodeMissingSettings},
		{"GOAWAY with a server-initiated stream ID", func(rs *rawServer) {
			rs.controlStream(&SettingsFrame{}, &GoAwayFrame{ID: 1})
		}, ErrCodeIDError},
		{"GOAWAY ID increasing", func(rs *rawServer) {
			// A request in flight keeps the client from closing the
			// connection after the first GOAWAY.
			ctrl := rs.controlStream(&SettingsFrame{})
			rs.roundTrip("/")
			synctest.Wait()
			ctrl.Write((&GoAwayFrame{ID: 8}).Append((&GoAwayFrame{ID: 4}).Append(nil)))
		}, ErrCodeIDError},
		{"MAX_PUSH_ID from server", func(rs *rawServer) {
			rs.controlStream(&SettingsFrame{}, &MaxPushIDFrame{PushID: 1})
		}, ErrCodeFrameUnexpected},
		{"push stream without MAX_PUSH_ID", func(rs *rawServer) { rs.uni([]byte{0x01, 0x00}) }, ErrCodeIDError},
		{"PUSH_PROMISE without MAX_PUSH_ID", func(rs *rawServer) {
			rs.controlStream(&SettingsFrame{})
			rs.roundTrip("/")
			rs.respond((&PushPromiseFrame{PushID: 0, FieldSection: encodeRaw(goodRequest)}).Append(nil))
		}, ErrCodeIDError},
		{"DATA before HEADERS in a response", func(rs *rawServer) {
			rs.controlStream(&SettingsFrame{})
			rs.roundTrip("/")
			rs.respond((&DataFrame{Data: []byte("x")}).Append(nil))
		}, ErrCodeFrameUnexpected},
		{"GOAWAY on a request stream", func(rs *rawServer) {
			rs.controlStream(&SettingsFrame{})
			rs.roundTrip("/")
			rs.respond((&GoAwayFrame{}).Append(headersOf(":status", "200")))
		}, ErrCodeFrameUnexpected},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rs := newRawServer(t)
				tc.run(rs)
				rs.wantConnError(tc.code)
			})
		})
	}
}

func TestClientMalformedResponses(t *testing.T) {
	for _, tc := range []struct {
		name string
		resp []byte
	}{
		{"no :status", headersOf("server", "x")},
		{"bad :status", headersOf(":status", "20")},
		{"request pseudo-header", headersOf(":status", "200", ":path", "/")},
		{"uppercase name", headersOf(":status", "200", "Server", "x")},
		{"connection header", headersOf(":status", "200", "connection", "close")},
		{"content-length mismatch", append(headersOf(":status", "200", "content-length", "4"), (&DataFrame{Data: []byte("abc")}).Append(nil)...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rs := newRawServer(t)
				rs.controlStream(&SettingsFrame{})
				errc := rs.roundTrip("/")
				st := rs.respond(tc.resp)
				err := <-errc
				if e, ok := asH3Error(err); !ok || e.Code != ErrCodeMessageError || !e.Stream {
					t.Errorf("RoundTrip = %v, want stream error H3_MESSAGE_ERROR", err)
				}
				// RFC 9114 §4.1.2: the client must not accept it and
				// aborts the stream with H3_MESSAGE_ERROR.
				synctest.Wait()
				if _, err := st.Write([]byte("x")); err == nil {
					t.Error("client did not STOP_SENDING the malformed response")
				}
				if rs.cc.Err() != nil {
					t.Errorf("connection ended: %v", rs.cc.Err())
				}
				rs.c.Close(0, "")
			})
		})
	}
}

// TestClientGoAwayCancelsLaterRequests checks that a request at or above
// the GOAWAY ID fails with ErrGoAway and earlier ones complete.
func TestClientGoAwayCancelsLaterRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rs := newRawServer(t)
		ctrl := rs.controlStream(&SettingsFrame{})
		first := rs.roundTrip("/a") // stream 0
		synctest.Wait()
		second := rs.roundTrip("/b") // stream 4
		synctest.Wait()
		st0, _ := rs.c.AcceptStream(t.Context())
		ctrl.Write((&GoAwayFrame{ID: 4}).Append(nil))
		if err := <-second; !errors.Is(err, ErrGoAway) {
			t.Errorf("request on stream 4: %v, want ErrGoAway", err)
		}
		if err := <-rs.roundTrip("/c"); !errors.Is(err, ErrGoAway) {
			t.Errorf("new request: %v, want ErrGoAway", err)
		}
		io.ReadAll(st0)
		st0.Write(append(headersOf(":status", "200"), (&DataFrame{Data: []byte("ok")}).Append(nil)...))
		st0.CloseWrite()
		if err := <-first; err != nil {
			t.Errorf("request on stream 0: %v", err)
		}
		// With nothing left in flight, the client closes the connection.
		<-rs.cc.Done()
		if _, code, _ := rs.c.link.closedWith(); code != uint64(ErrCodeNoError) {
			t.Errorf("closed with %v, want H3_NO_ERROR", ErrCode(code))
		}
	})
}
