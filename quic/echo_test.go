package quic

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"testing"
	"time"
)

// TestEchoLargeUpload uploads 1 MB on a stream without closing it and
// reads the same back, five times, the way a request/response protocol
// does. It once stalled about one run in thirty: a lone-ACK Handshake
// packet coalesced before the first 1-RTT packets was too short to seal,
// and the 1-RTT packet after it never reached loss detection.
func TestEchoLargeUpload(t *testing.T) {
	cert, pool := testCertificate(t)
	ep, err := Listen("udp", "127.0.0.1:0", &Config{TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"x"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer ep.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	go func() {
		c, err := ep.Accept(ctx)
		if err != nil {
			return
		}
		for {
			s, err := c.AcceptStream(ctx)
			if err != nil {
				return
			}
			go func() {
				b := make([]byte, 1<<20)
				_, err := io.ReadFull(s, b)
				if err != nil {
					t.Errorf("server read: %v", err)
					return
				}
				s.Write(b)
				s.CloseWrite()
			}()
		}
	}()
	c, err := Dial(ctx, "udp", ep.Addr().String(), &Config{TLSConfig: &tls.Config{RootCAs: pool, ServerName: "localhost", NextProtos: []string{"x"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(0, "")
	for i := 0; i < 5; i++ {
		s, err := c.OpenStream(ctx)
		if err != nil {
			t.Fatal(err)
		}
		msg := bytes.Repeat([]byte{byte(i)}, 1<<20)
		if _, err := s.WriteContext(ctx, msg); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, 1<<20)
		_, err = io.ReadFull(s, got)
		if err != nil || !bytes.Equal(got, msg) {
			t.Fatalf("round %d: %d bytes, err %v", i, len(got), err)
		}
	}
}
