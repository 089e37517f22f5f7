package rpc

import (
	"context"
	"testing"

	"github.com/quiver-quic/quiver/h3"
	"github.com/quiver-quic/quiver/quic"
)

// TestHTTP3NoDynamicTable checks that RPC over HTTP/3 leaves the QPACK
// dynamic table unused both ways (rpcH3Config and the listener's
// h3.Server), so that no call costs Section Acknowledgments (RFC 9204
// §4.4.1), and logs the datagrams per call of both QUIC transports (a
// figure for the closing notes, not asserted: how writes share packets
// depends on scheduling).
func TestHTTP3NoDynamicTable(t *testing.T) {
	srv := NewServer()
	Register(srv, "Echo.Echo", func(ctx context.Context, r *echoReq) (*echoResp, error) {
		return &echoResp{Msg: r.Msg, Data: r.Data}, nil
	})
	l := listenQUIC(t, "")
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	defer func() {
		srv.Close()
		<-served
	}()
	ctx := testCtx(t)
	const calls = 200
	for _, name := range []string{"quic", "http3"} {
		var tr Transport
		var conn func() *quic.Conn
		var h3c func() *h3.ClientConn
		if name == "quic" {
			qt := DialQUIC(l.Addr().String(), clientTLS(t)).(*quicTransport)
			tr, conn = qt, func() *quic.Conn { return qt.conn }
		} else {
			ht := DialHTTP3(l.Addr().String(), clientTLS(t)).(*httpTransport)
			rt := ht.rt.(*h3RoundTripper)
			tr, conn, h3c = ht, func() *quic.Conn { return rt.qc }, func() *h3.ClientConn { return rt.cc }
		}
		c := NewClient(tr)
		call := func() {
			t.Helper()
			if _, err := Call[echoReq, echoResp](ctx, c, "Echo.Echo", &echoReq{Msg: "x", Data: make([]byte, 581)}); err != nil {
				t.Fatal(err)
			}
		}
		call()
		s0 := conn().Stats()
		for range calls {
			call()
		}
		s1 := conn().Stats()
		t.Logf("%s: %.2f datagrams per call (client sent %d, received %d for %d calls)", name,
			float64(s1.DatagramsSent-s0.DatagramsSent+s1.DatagramsReceived-s0.DatagramsReceived)/calls,
			s1.DatagramsSent-s0.DatagramsSent, s1.DatagramsReceived-s0.DatagramsReceived, calls)
		if h3c != nil {
			if st := h3c().QPACKStats(); st.Inserts != 0 || st.DynamicSections != 0 {
				t.Errorf("QPACK dynamic table used: %+v", st)
			}
		}
		c.Close()
	}
}
