package quic

import (
	"context"
	"io"
	"testing"
	"time"
)

// TestZeroLengthCIDRoutesByAddress: a server that issues zero-length
// connection IDs serves two clients at once; each client's 1-RTT packets,
// whose Destination Connection ID is empty, reach that client's
// connection and not the one that registered last. RFC 9000 §5.2: "If the
// Destination Connection ID is zero length and the addressing information
// in the packet matches the addressing information the endpoint uses to
// identify a connection with a zero-length connection ID, QUIC processes
// the packet as part of that connection."
func TestZeroLengthCIDRoutesByAddress(t *testing.T) {
	scfg := testServerConfig(t, "x")
	scfg.ConnectionIDLength = -1
	ep, err := Listen("udp", "127.0.0.1:0", scfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ep.Close()
	// The deadline only stops a broken run; the assertions are on bytes.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go func() {
		for {
			c, err := ep.Accept(ctx)
			if err != nil {
				return
			}
			go func() {
				for {
					s, err := c.AcceptStream(ctx)
					if err != nil {
						return
					}
					go func() {
						b, err := io.ReadAll(s)
						if err != nil {
							return
						}
						s.Write(b)
						s.CloseWrite()
					}()
				}
			}()
		}
	}()
	var clients []*Conn
	for range 2 {
		ccfg := testClientConfig(t, "x")
		ccfg.MaxIdleTimeout = 3 * time.Second // a stolen route ends in an idle timeout
		c, err := Dial(ctx, "udp", ep.Addr().String(), ccfg)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(0, "")
		clients = append(clients, c)
	}
	// The first client talks after the second connected: its packets
	// must not follow the second connection's (empty) route.
	for i, c := range []*Conn{clients[0], clients[1], clients[0]} {
		s, err := c.OpenStream(ctx)
		if err != nil {
			t.Fatal(err)
		}
		msg := []byte{'a' + byte(i), 'b', 'c'}
		if _, err := s.WriteContext(ctx, msg); err != nil {
			t.Fatal(err)
		}
		s.CloseWrite()
		got, err := io.ReadAll(s)
		if err != nil || string(got) != string(msg) {
			t.Fatalf("exchange %d: got %q, %v", i, got, err)
		}
	}
}
