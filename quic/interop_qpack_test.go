package quic_test

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/quiver-quic/quiver/h3"
	"github.com/quiver-quic/quiver/peers"
	"github.com/quiver-quic/quiver/quic"
)

// TestInteropQPACKDynamicTable: Quiver's HTTP/3 client against the
// peers' servers, several requests on one connection with the same
// fields. ngtcp2's server (nghttp3) uses a QPACK dynamic table both ways:
// it refers to its own table in responses and acknowledges ours; quic-go
// (qpack v0.6: "no dynamic table") allows none, so Quiver inserts nothing
// and the exchange stays static.
func TestInteropQPACKDynamicTable(t *testing.T) {
	for _, tc := range []struct {
		name    string
		dynamic bool
	}{{"ngtcp2", true}, {"quic-go", false}} {
		t.Run(tc.name, func(t *testing.T) {
			im := needPeer(t, tc.name, "server")
			e := newInteropEnv(t, 1000)
			p, pool := e.peerServer(im, peers.ServerOpts{ALPN: h3.ALPNH3, TestCase: "http3"})
			cfg := &quic.Config{TLSConfig: &tls.Config{RootCAs: pool, ServerName: "localhost", NextProtos: []string{h3.ALPNH3}}}
			c, err := quic.Dial(e.ctx, "udp", p.Addr, cfg)
			if err != nil {
				t.Fatalf("dial %s: %v\n%s", p.Addr, err, p.Output())
			}
			defer c.Close(0, "")
			cc, err := h3.NewClientConn(e.ctx, h3Conn{c}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer cc.Close()
			for i := 0; i < 6; i++ {
				req, _ := http.NewRequestWithContext(e.ctx, "GET", fmt.Sprintf("https://%s/%s", p.Addr, fileName(1000)), nil)
				req.Header.Set("User-Agent", "quiver-interop/1")
				req.Header.Set("X-Quiver", "qpack-dynamic-table")
				resp, err := cc.RoundTrip(req)
				if err != nil {
					t.Fatalf("request %d: %v\n%s", i, err, p.Output())
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || len(body) != 1000 {
					t.Fatalf("request %d: status %d, %d bytes", i, resp.StatusCode, len(body))
				}
			}
			st := cc.QPACKStats()
			t.Logf("%s: %+v", tc.name, st)
			if !tc.dynamic {
				if st.Inserts != 0 || st.DynamicSections != 0 {
					t.Errorf("dynamic table used with a peer that allows none: %+v", st)
				}
				return
			}
			if st.Inserts == 0 || st.KnownReceived == 0 || st.AckedSections == 0 {
				t.Errorf("the peer did not acknowledge Quiver's inserts and field sections: %+v", st)
			}
			if st.DynamicSections == 0 {
				t.Errorf("no response referred to the peer's dynamic table: %+v", st)
			}
		})
	}
}
