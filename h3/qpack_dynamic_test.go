package h3

import (
	"io"
	"net/http"
	"testing"
	"testing/synctest"
)

// TestQPACKDynamicTableBothWays runs Quiver's client against Quiver's
// server: after the first exchange, requests and responses refer to the
// dynamic table each side built for the other, and each side acknowledged
// the other's field sections (RFC 9204 §4.4.1).
func TestQPACKDynamicTableBothWays(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client, server := newMemPair(ALPNH3)
		srv := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("X-Client") != "quiver-dynamic-test" || r.Header.Get("User-Agent") != "quiver-test/1" {
				w.WriteHeader(http.StatusBadRequest)
				return
			}
			w.Header().Set("X-Server", "quiver-dynamic-test")
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			io.WriteString(w, "ok")
		})}
		go srv.ServeConn(t.Context(), server)
		cc, err := NewClientConn(t.Context(), client, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		for i := 0; i < 4; i++ {
			req, _ := http.NewRequestWithContext(t.Context(), "GET", "https://quiver.test/x", nil)
			req.Header.Set("X-Client", "quiver-dynamic-test")
			req.Header.Set("User-Agent", "quiver-test/1")
			resp, err := cc.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || string(body) != "ok" || resp.Header.Get("X-Server") != "quiver-dynamic-test" {
				t.Fatalf("request %d: %d %q %v", i, resp.StatusCode, body, resp.Header)
			}
			synctest.Wait() // instructions and acknowledgments settle
		}
		// Client → server: the client inserted, the server acknowledged
		// its inserts and the requests that referred to them.
		if n, k := cc.s.enc.InsertCount(), cc.s.enc.KnownReceivedCount(); n == 0 || k != n {
			t.Errorf("client encoder: %d inserts, %d known received", n, k)
		}
		if a := cc.s.enc.AckedSections(); a < 2 {
			t.Errorf("client encoder: %d field sections acknowledged by the server, want the requests after the first", a)
		}
		// Server → client: the client decoded responses that referred to
		// the server's dynamic table.
		if d := cc.s.dec.DynamicSections(); d < 2 {
			t.Errorf("client decoder: %d responses referred to the dynamic table", d)
		}
	})
}

// TestQPACKStaticWhenPeerAllowsNone: a client that allows no dynamic
// table gets none (RFC 9204 §3.2.3), and one the server allows none of
// inserts nothing.
func TestQPACKStaticWhenPeerAllowsNone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client, server := newMemPair(ALPNH3)
		srv := &Server{QPACKMaxTableCapacity: -1, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Server", "quiver")
			io.WriteString(w, "ok")
		})}
		go srv.ServeConn(t.Context(), server)
		cc, err := NewClientConn(t.Context(), client, &ClientConfig{QPACKMaxTableCapacity: -1})
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		for i := 0; i < 3; i++ {
			req, _ := http.NewRequestWithContext(t.Context(), "GET", "https://quiver.test/x", nil)
			req.Header.Set("X-Client", "quiver")
			resp, err := cc.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			io.ReadAll(resp.Body)
			resp.Body.Close()
			synctest.Wait()
		}
		if n := cc.s.enc.InsertCount(); n != 0 {
			t.Errorf("the client inserted %d entries into a table the server allows none of", n)
		}
		if d := cc.s.dec.DynamicSections(); d != 0 {
			t.Errorf("the server referred to a dynamic table in %d responses", d)
		}
	})
}
