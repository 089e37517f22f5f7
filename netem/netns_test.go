package netem

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// setupNamespaces builds a topology or skips the test without root; with
// QUIVER_REQUIRE_PEERS=1 a failure to build it as root fails the test.
func setupNamespaces(t testing.TB, cfg NamespaceConfig) *Namespaces {
	t.Helper()
	if err := NamespacesAvailable(); err != nil {
		t.Skipf("namespace backend: %v", err)
	}
	n, err := SetupNamespaces(context.Background(), cfg)
	if err != nil {
		if os.Getenv("QUIVER_REQUIRE_PEERS") == "1" {
			t.Fatalf("namespace backend as root: %v", err)
		}
		t.Skipf("namespace backend unavailable here: %v", err)
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Error(err)
		}
		out, _ := exec.Command("ip", "netns", "list").Output()
		for _, ns := range []string{n.Client, n.Router, n.Server} {
			if strings.Contains(string(out), ns) {
				t.Errorf("namespace %s left behind", ns)
			}
		}
	})
	return n
}

func listenIn(t testing.TB, n *Namespaces, ns string, a netip.AddrPort) *net.UDPConn {
	t.Helper()
	c, err := n.ListenUDP(ns)("udp4", net.UDPAddrFromAddrPort(a))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestNamespacesRelay runs a datagram exchange client ns → relay in the
// router ns (5 ms each way, in user space) → server ns, from both client
// addresses, and checks the path: the delay, the router's address as seen
// by the server, and the ECN mark carried across.
func TestNamespacesRelay(t *testing.T) {
	n := setupNamespaces(t, NamespaceConfig{})
	srv := listenIn(t, n, n.Server, netip.AddrPortFrom(NSServerAddr, 443))
	sconn, err := newBatchConn(srv, false, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	l := Link{Delay: 5 * time.Millisecond}
	r, err := NewRelay(RelayConfig{Listen: netip.AddrPortFrom(NSRouterC, 443), Server: netip.AddrPortFrom(NSServerAddr, 443),
		UpstreamAddr: NSRouterS, ToServer: l, ToClient: l, ListenUDP: n.ListenUDP(n.Router)})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer r.Stop()
	go func() { // echo, keeping the ECN mark
		rb := newReadBatch()
		for {
			k, err := sconn.read(rb)
			if err != nil {
				return
			}
			var w writeBatch
			for i := range k {
				p, from, ecn := rb.datagram(i)
				w.out = append(w.out, outgoing{conn: sconn, dst: net.UDPAddrFromAddrPort(from), payload: append([]byte(from.Addr().String()+"|"), p...), ecn: ecn})
			}
			w.flush(&bufPool{})
		}
	}()
	for _, local := range []netip.Addr{NSClientAddr, NSClientAddr2} {
		c := listenIn(t, n, n.Client, netip.AddrPortFrom(local, 0))
		bc, err := newBatchConn(c, false, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		var w writeBatch
		w.out = append(w.out, outgoing{conn: bc, dst: net.UDPAddrFromAddrPort(r.Addr()), payload: []byte("ping"), ecn: ECT0})
		w.flush(&bufPool{})
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		rb := newReadBatch()
		if k, err := bc.read(rb); err != nil || k != 1 {
			t.Fatalf("from %s: %d, %v", local, k, err)
		}
		p, from, ecn := rb.datagram(0)
		rtt := time.Since(start)
		if string(p) != NSRouterS.String()+"|ping" || from != r.Addr() || ecn != ECT0 {
			t.Errorf("from %s: got %q from %s with ECN %d", local, p, from, ecn)
		}
		if rtt < 10*time.Millisecond {
			t.Errorf("from %s: round trip %v, below the relay's 2 × 5 ms", local, rtt)
		}
	}
}

// TestNamespacesTbf checks the kernel bottleneck by behaviour: the router
// carries a tbf qdisc at the configured rate towards the client, datagrams
// cross it, and a burst cannot cross faster than the rate allows (a lower
// bound on the time, which load can only lengthen). The rate it delivers
// is measured by BenchmarkNamespacesTbf.
func TestNamespacesTbf(t *testing.T) {
	const rate = 20e6
	n := setupNamespaces(t, NamespaceConfig{RateToClient: rate, QueueBytes: 4 << 20, Forward: true})
	out, err := exec.Command("tc", "-n", n.Router, "qdisc", "show").Output()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "tbf") || !strings.Contains(string(out), "rate 20Mbit") {
		t.Errorf("router qdiscs %q, want a tbf at 20Mbit", out)
	}
	const count, size = 500, 1200 // about 0.25 s at 20 Mbit/s
	s := sendThroughTbf(t, n, count, size)
	t.Logf("%d of %d datagrams in %v", s.got, count, s.span)
	if s.got < count/2 {
		t.Fatalf("%d of %d datagrams crossed the router", s.got, count)
	}
	// tbf releases at most its burst (3000 bytes) at once, then paces at
	// the rate; IP, UDP and Ethernet headers (42 bytes) count.
	least := time.Duration(float64((s.got*(size+42)-3000)*8) / rate * float64(time.Second))
	if s.span < least*9/10 {
		t.Errorf("%d datagrams crossed a %.0f Mbit/s tbf in %v, faster than its rate allows (%v)", s.got, rate/1e6, s.span, least)
	}
}

// tbfRun is what sendThroughTbf saw: datagrams received, the time from the
// first send to the last arrival, and the delivered rate after the first
// tenth (kernel receive timestamps).
type tbfRun struct {
	got  int
	span time.Duration
	bps  float64
}

// sendThroughTbf sends count datagrams of size bytes from the server
// namespace to the client namespace through the router as fast as the
// sender can.
func sendThroughTbf(t testing.TB, n *Namespaces, count, size int) tbfRun {
	sink := listenIn(t, n, n.Client, netip.AddrPortFrom(NSCrossClient, 5001))
	rc, _ := sink.SyscallConn()
	rc.Control(func(fd uintptr) {
		unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1)
		// Room for the whole train (root, as the namespaces are), so that
		// a reader held up by other work does not drop what tbf let through.
		unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 8<<20)
	})
	src := listenIn(t, n, n.Server, netip.AddrPortFrom(NSCrossServer, 0))
	defer sink.Close() // also closed at cleanup; a benchmark calls this in a loop
	defer src.Close()
	buf, oob := make([]byte, 2048), make([]byte, 128)
	// One datagram first, so that the burst does not wait on neighbour
	// resolution (whose queue would drop most of it).
	if _, err := src.WriteToUDPAddrPort([]byte("warm"), netip.AddrPortFrom(NSCrossClient, 5001)); err != nil {
		t.Fatal(err)
	}
	sink.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, _, _, _, err := sink.ReadMsgUDPAddrPort(buf, oob); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	start := time.Now()
	go func() {
		p := make([]byte, size)
		for range count {
			if _, err := src.WriteToUDPAddrPort(p, netip.AddrPortFrom(NSCrossClient, 5001)); err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}()
	var first, last time.Time
	got := 0
	// The deadline only stops a broken path; tbf may also drop some.
	sink.SetReadDeadline(time.Now().Add(10 * time.Second))
	for got < count {
		_, oobn, _, _, err := sink.ReadMsgUDPAddrPort(buf, oob)
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				break
			}
			t.Fatal(err)
		}
		at, _ := kernelTimestamp(oob[:oobn])
		if got == count/10 {
			first = at
		}
		last = at
		got++
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	r := tbfRun{got: got, span: last.Sub(start)}
	if got > count/10+1 {
		r.bps = float64((got-1-count/10)*(size+42)*8) / last.Sub(first).Seconds()
	}
	return r
}

// TestNamespacesTCPFlow runs the cross-traffic flow through the router's
// 20 Mbit/s tbf until a second's worth of data has arrived, with Cubic set
// on the sender, and checks that it stops cleanly. Its rate is measured by
// BenchmarkNamespacesTCPFlow.
func TestNamespacesTCPFlow(t *testing.T) {
	const rate = 20e6
	n := setupNamespaces(t, NamespaceConfig{RateToClient: rate, Forward: true})
	f, err := n.StartTCPFlow(t.Context(), n.Server, NSCrossServer, n.Client, netip.AddrPortFrom(NSCrossClient, 5201), "cubic")
	if err != nil {
		t.Fatal(err)
	}
	// The deadline only stops a broken flow.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if got, err := f.WaitReceived(ctx, rate/8); err != nil {
		t.Errorf("the flow carried %d bytes: %v", got, err)
	}
	got, bps, err := f.Stop()
	if err != nil {
		t.Fatal(err)
	}
	if got < rate/8 || f.CC != "cubic" {
		t.Errorf("TCP %s carried %d bytes, want at least %d", f.CC, got, int64(rate/8))
	}
	t.Logf("TCP %s through tbf %.0f Mbit/s: %d bytes, %.2f Mbit/s", f.CC, rate/1e6, got, bps/1e6)
}

// TestNamespacesRebindAddr rebinds the client's address through the relay
// in the router: the server sees a new address from the rebind pool, and
// answers to it come back.
func TestNamespacesRebindAddr(t *testing.T) {
	n := setupNamespaces(t, NamespaceConfig{})
	srv := listenIn(t, n, n.Server, netip.AddrPortFrom(NSServerAddr, 443))
	r, err := NewRelay(RelayConfig{Listen: netip.AddrPortFrom(NSRouterC, 443), Server: netip.AddrPortFrom(NSServerAddr, 443),
		UpstreamAddr: NSRouterS, RebindPool: NSRebindPool, Rebind: Rebind{At: []time.Duration{0}, Addr: true},
		ListenUDP: n.ListenUDP(n.Router)})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer r.Stop()
	go func() { // echo
		buf := make([]byte, 2048)
		for {
			k, from, err := srv.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			srv.WriteToUDPAddrPort(append([]byte(from.Addr().String()+"|"), buf[:k]...), from)
		}
	}()
	c := listenIn(t, n, n.Client, netip.AddrPortFrom(NSClientAddr, 0))
	if _, err := c.WriteToUDPAddrPort([]byte("ping"), r.Addr()); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 2048)
	k, _, err := c.ReadFromUDPAddrPort(buf)
	if err != nil {
		t.Fatal(err)
	}
	seen, _, _ := strings.Cut(string(buf[:k]), "|")
	a, err := netip.ParseAddr(seen)
	if err != nil || !NSRebindPool.Contains(a) {
		t.Errorf("server saw the client as %q, want an address of %s", seen, NSRebindPool)
	}
}

// TestNamespacesDelayTCP checks the delay line on forwarded TCP: a
// connection through the router takes at least the two one-way delays to
// open, and a bulk flow crosses it (its rate: BenchmarkNamespacesTCPFlow).
func TestNamespacesDelayTCP(t *testing.T) {
	const rate, delay = 20e6, 15 * time.Millisecond
	n := setupNamespaces(t, NamespaceConfig{RateToClient: rate, QueueBytes: 50 * 1500, Forward: true})
	l, err := n.DelayTCP(t.Context(), delay)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var ln net.Listener
	if err := n.Do(n.Client, func() (err error) {
		ln, err = net.Listen("tcp4", netip.AddrPortFrom(NSCrossClient, 5202).String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	var took time.Duration
	if err := n.Do(n.Server, func() error {
		start := time.Now()
		c, err := net.DialTimeout("tcp4", netip.AddrPortFrom(NSCrossClient, 5202).String(), 5*time.Second)
		took = time.Since(start)
		if err == nil {
			c.Close()
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if took < 2*delay {
		t.Errorf("TCP connect through the delay line took %v, want at least %v", took, 2*delay)
	}
	f, err := n.StartTCPFlow(t.Context(), n.Server, NSCrossServer, n.Client, netip.AddrPortFrom(NSCrossClient, 5201), "cubic")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if got, err := f.WaitReceived(ctx, 2*rate/8); err != nil {
		t.Errorf("the delayed flow carried %d bytes: %v", got, err)
	}
	got, bps, err := f.Stop()
	if err != nil {
		t.Fatal(err)
	}
	carried, lost := l.Packets()
	t.Logf("connect %v; TCP %s with %v each way: %d bytes, %.2f Mbit/s; the line carried %d packets, lost %d", took, f.CC, delay, got, bps/1e6, carried, lost)
	if carried == 0 {
		t.Error("the delay line carried nothing")
	}
}

// TestNamespacesIntercept has the client send to the server's own address
// on a second port, as it does to a preferred address: the router takes
// the datagram in, a transparent relay socket answers for that address,
// and the relay still reaches the server there.
func TestNamespacesIntercept(t *testing.T) {
	n := setupNamespaces(t, NamespaceConfig{})
	pref := netip.AddrPortFrom(NSServerAddr, 444)
	for _, p := range []uint16{443, pref.Port()} {
		srv := listenIn(t, n, n.Server, netip.AddrPortFrom(NSServerAddr, p))
		go func() { // echo, naming the port it answers on
			buf := make([]byte, 2048)
			for {
				k, from, err := srv.ReadFromUDPAddrPort(buf)
				if err != nil {
					return
				}
				srv.WriteToUDPAddrPort(append([]byte(strconv.Itoa(int(p))+"|"), buf[:k]...), from)
			}
		}()
	}
	if err := n.Intercept(t.Context(), pref.Addr()); err != nil {
		t.Fatal(err)
	}
	r, err := NewRelay(RelayConfig{Listen: netip.AddrPortFrom(NSRouterC, 443), Server: netip.AddrPortFrom(NSServerAddr, 443),
		UpstreamAddr: NSRouterS, ListenUDP: n.ListenUDP(n.Router),
		Alternates: []RelayAlternate{{Listen: pref, Server: pref, ListenUDP: n.ListenUDPTransparent(n.Router)}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer r.Stop()
	c := listenIn(t, n, n.Client, netip.AddrPortFrom(NSClientAddr, 0))
	buf := make([]byte, 2048)
	for _, to := range []netip.AddrPort{r.Addr(), pref} {
		if _, err := c.WriteToUDPAddrPort([]byte("ping"), to); err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		k, from, err := c.ReadFromUDPAddrPort(buf)
		if err != nil {
			t.Fatalf("to %v: %v", to, err)
		}
		if want := strconv.Itoa(int(to.Port())) + "|ping"; string(buf[:k]) != want || from != to {
			t.Errorf("to %v: got %q from %v, want %q", to, buf[:k], from, want)
		}
	}
	ts, _ := r.Stats()
	if ts.Delivered != 2 {
		t.Errorf("relay delivered %d datagrams to the server, want 2 (both through the link)", ts.Delivered)
	}
}
