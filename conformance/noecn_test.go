package conformance

import (
	"context"
	"net"
	"testing"

	"github.com/quiver-quic/quiver/transfer"
)

// startQuiverNoECN runs Quiver's file server on a socket the engine
// cannot read ECN marks from (a plain net.PacketConn): a server that does
// not see ECN, which RFC 9000 allows.
func startQuiverNoECN(t *testing.T) string {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := transfer.Listen(transfer.ServerConfig{Root: writeRoot(t), PacketConn: struct{ net.PacketConn }{pc}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return srv.Addr().String()
}

// TestAFCEImmediateServerWithoutECN: af-ce-immediate is unsupported, not
// inconclusive or warn, on a server that reports no ECN counts and so
// cannot see a CE mark (found by the slow-server variant, whose socket
// does not carry ECN).
func TestAFCEImmediateServerWithoutECN(t *testing.T) {
	expectVerdicts(t, "quiver-no-ecn", startQuiverNoECN(t), map[string][]Verdict{
		"af-ce-immediate":  {Unsupported},
		"ack-ce-immediate": {Unsupported},
	})
}
