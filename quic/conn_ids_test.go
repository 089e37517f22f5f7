package quic

import (
	"bytes"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quiver-quic/quiver/quic/wire"
)

// startPeerTestConn is startPeerTest that also returns the server's Conn.
func startPeerTestConn(t *testing.T, cfg *Config) (*testPeer, *Conn) {
	n := newMemNet(5 * time.Millisecond)
	ep, err := NewEndpoint(n.listen(testServerAddr), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ep.Close() })
	accepted := make(chan *Conn, 1)
	go func() {
		c, err := ep.Accept(t.Context())
		if err == nil {
			accepted <- c
		}
	}()
	p := newTestPeer(t, n, testServerAddr)
	p.handshake("hq-interop")
	return p, <-accepted
}

// TestIssueConnectionIDSequence: connection IDs issued through
// Conn.IssueConnectionID and the engine's own share one sequence: "The
// sequence number on each newly issued connection ID MUST increase by 1"
// (RFC 9000 §5.1.1), so no number names two IDs, and the peer may retire
// an ID issued either way (§19.16: only a number "greater than any
// previously sent to the peer" is a PROTOCOL_VIOLATION).
func TestIssueConnectionIDSequence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, sc := startPeerTestConn(t, testServerConfig(t, "hq-interop"))
		bySeq := map[uint64][]byte{}
		record := func(space spaceID, f wire.Frame) {
			nc, ok := f.(*wire.NewConnectionIDFrame)
			if !ok {
				return
			}
			if old, ok := bySeq[nc.SequenceNumber]; ok && !bytes.Equal(old, nc.ConnectionID) {
				t.Errorf("sequence number %d names two connection IDs: %x and %x", nc.SequenceNumber, old, nc.ConnectionID)
			}
			bySeq[nc.SequenceNumber] = append([]byte(nil), nc.ConnectionID...)
		}
		p.readFor(time.Second, record)
		next := uint64(0)
		for s := range bySeq {
			next = max(next, s+1)
		}
		if next == 0 {
			t.Fatal("the server issued no connection ID")
		}
		if _, err := sc.IssueConnectionID(next, 0); err != nil {
			t.Fatal(err)
		}
		p.readFor(time.Second, record)
		if bySeq[next] == nil {
			t.Fatalf("the NEW_CONNECTION_ID of sequence %d did not arrive", next)
		}
		// Retire the engine's ID 1. The client's active_connection_id_limit
		// (2) is met by IDs 0 and next, so no replacement is due; an
		// engine that lost count would issue next a second time.
		p.writeFrames(appSpace, &wire.RetireConnectionIDFrame{SequenceNumber: 1})
		p.readFor(time.Second, record)
		// Retire the ID issued through the API: a valid retirement, after
		// which the engine issues a replacement under a new number.
		p.writeFrames(appSpace, &wire.RetireConnectionIDFrame{SequenceNumber: next})
		p.readFor(time.Second, record)
		if err := sc.Err(); err != nil {
			t.Fatalf("retiring the ID issued with sequence %d closed the connection: %v", next, err)
		}
		if bySeq[next+1] == nil {
			t.Errorf("no replacement with sequence %d after retiring 1 and %d; issued: %v", next+1, next, bySeq)
		}
	})
}

// TestStatelessResetTokensChecked: only the token of the peer's connection
// ID in use makes a datagram a stateless reset; unused spares and retired
// IDs do not (RFC 9000 §10.3.1: "An endpoint MUST NOT check for any
// stateless reset tokens associated with connection IDs it has not used
// or for connection IDs that have been retired").
func TestStatelessResetTokensChecked(t *testing.T) {
	c := &Conn{}
	c.cids.c = c
	tok := func(b byte) [16]byte { return [16]byte{b, 0xaa, b} }
	reset := func(k [16]byte) []byte { return append([]byte{0x40, 1, 2, 3, 4, 5, 6, 7, 8}, k[:]...) }
	c.cids.peer = []peerCIDEntry{{seq: 1, cid: []byte{1}, token: tok(1)}, {seq: 2, cid: []byte{2}, token: tok(2)}}
	for _, tc := range []struct {
		step   string
		tokens map[byte]bool
	}{
		{"sequence 0 in use, without a token", map[byte]bool{1: false, 2: false}},
		{"sequence 1 in use", map[byte]bool{1: true, 2: false}},
		{"sequence 2 in use, 1 retired", map[byte]bool{1: false, 2: true}},
	} {
		for b, want := range tc.tokens {
			if got := c.isStatelessReset(reset(tok(b))); got != want {
				t.Errorf("%s: a datagram ending in the token of sequence %d is a reset: %v, want %v", tc.step, b, got, want)
			}
		}
		c.cids.usePeerCID()
	}
}

// TestRetiredConnectionIDStillRoutes: a packet the peer sent under a
// connection ID it has since retired, arriving after the retirement (two
// paths during a migration reorder packets, RFC 9000 §9.4), still reaches
// the connection instead of drawing a stateless reset; beyond
// maxRetiredRoutes retirements the oldest route goes.
func TestRetiredConnectionIDStillRoutes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, sc := startPeerTestConn(t, testServerConfig(t, "hq-interop"))
		cids := map[uint64][]byte{}
		p.readFor(time.Second, func(_ spaceID, f wire.Frame) {
			if nc, ok := f.(*wire.NewConnectionIDFrame); ok {
				cids[nc.SequenceNumber] = append([]byte(nil), nc.ConnectionID...)
			}
		})
		if cids[1] == nil {
			t.Fatal("the server issued no connection ID of sequence 1")
		}
		first := p.dcid
		// Move to sequence 1 and retire sequence 0.
		p.dcid = cids[1]
		p.writeFrames(appSpace, &wire.RetireConnectionIDFrame{SequenceNumber: 0})
		p.readFor(time.Second, func(spaceID, wire.Frame) {})
		// A late packet under the retired ID.
		p.dcid = first
		p.writeFrames(appSpace, &wire.PingFrame{})
		p.wantFrame("an ACK of the packet sent under the retired connection ID", func(_ spaceID, f wire.Frame) bool {
			_, ok := f.(*wire.AckFrame)
			return ok
		})
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
		if n := len(sc.cids.retiredRoutes); n != 1 {
			t.Errorf("%d retired routes kept, want 1", n)
		}
	})
}
