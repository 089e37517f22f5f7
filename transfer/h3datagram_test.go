package transfer

import (
	"context"
	"crypto/tls"
	"testing"
	"time"

	"github.com/quiver-quic/quiver/h3"
	"github.com/quiver-quic/quiver/quic"
)

// TestH3DatagramSetting: the server's HTTP/3 SETTINGS carry
// SETTINGS_H3_DATAGRAM = 1 (RFC 9297 §2.1.1) exactly when its QUIC
// connection offers max_datagram_frame_size (RFC 9221 §3), that is when
// DATAGRAM frames are on.
func TestH3DatagramSetting(t *testing.T) {
	for _, tc := range []struct {
		mode DatagramMode
		want bool
	}{{DatagramsOff, false}, {DatagramsEcho, true}, {DatagramsDiscard, true}} {
		t.Run(tc.mode.String(), func(t *testing.T) {
			addr := startServer(t, ServerConfig{Datagrams: tc.mode})
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			conn, err := quic.Dial(ctx, "udp", addr, &quic.Config{
				TLSConfig:            &tls.Config{InsecureSkipVerify: true, NextProtos: []string{h3.ALPNH3}},
				MaxDatagramFrameSize: 1200,
			})
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(0, "")
			cc, err := h3.NewClientConn(ctx, h3.FromQUIC(conn), &h3.ClientConfig{})
			if err != nil {
				t.Fatal(err)
			}
			defer cc.Close()
			sf, err := cc.PeerSettings(ctx)
			if err != nil {
				t.Fatal(err)
			}
			v, ok := sf.Get(h3.SettingH3Datagram)
			if got := ok && v == 1; got != tc.want {
				t.Fatalf("SETTINGS_H3_DATAGRAM sent %v (value %d); want sent = %v", ok, v, tc.want)
			}
		})
	}
}
