package conformance

import (
	"context"
	"crypto/rand"
	"net"
	"sync"
	"testing"
	"time"
)

// hostileServer runs a UDP server with the given behaviour until the test
// ends: answer is called for every datagram received.
func hostileServer(t *testing.T, answer func(pc net.PacketConn, from net.Addr, b []byte)) string {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		buf := make([]byte, 65536)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			answer(pc, from, buf[:n])
		}
	}()
	t.Cleanup(func() { pc.Close(); wg.Wait() })
	return pc.LocalAddr().String()
}

func TestHostileTargets(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer func(pc net.PacketConn, from net.Addr, b []byte)
	}{
		{"silent", func(net.PacketConn, net.Addr, []byte) {}},
		{"garbage", func(pc net.PacketConn, from net.Addr, b []byte) {
			g := make([]byte, len(b))
			rand.Read(g)
			pc.WriteTo(g, from)
		}},
		{"flood", func(pc net.PacketConn, from net.Addr, b []byte) {
			// Twenty datagrams for every one received, some shaped like
			// long headers of QUIC v1 with random contents.
			for i := 0; i < 20; i++ {
				g := make([]byte, 1200)
				rand.Read(g)
				if i%2 == 0 {
					g[0], g[1], g[2], g[3], g[4] = 0xc0, 0, 0, 0, 1
				}
				pc.WriteTo(g, from)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			addr := hostileServer(t, tc.answer)
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			start := time.Now()
			rep, err := Run(ctx, Target{Name: tc.name, Address: addr}, Options{Parallel: 16, Timeout: 6 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if ctx.Err() != nil {
				t.Fatalf("the run outlived its context (%v)", time.Since(start))
			}
			server, _ := Select(ServerRole, nil)
			if len(rep.Results) != len(server) {
				t.Errorf("%d results for %d server-facing scenarios", len(rep.Results), len(server))
			}
			for _, r := range rep.Results {
				switch r.Verdict {
				case Pass, Fail, Warn, Errored:
					t.Errorf("%s: verdict %s against a %s target: %s %s", r.Scenario, r.Verdict, tc.name, r.Sentence, r.Error)
				}
			}
			t.Logf("%s target: %d scenarios in %v: %v", tc.name, len(rep.Results), time.Since(start).Round(time.Millisecond), rep.Counts())
		})
	}
}
