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
func setupNamespaces(t *testing.T, cfg NamespaceConfig) *Namespaces {
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

func listenIn(t *testing.T, n *Namespaces, ns string, a netip.AddrPort) *net.UDPConn {
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

// TestNamespacesTbf checks the kernel bottleneck: datagrams forwarded by
// the router towards the client leave at the tbf rate, within 5 %.
func TestNamespacesTbf(t *testing.T) {
	const rate = 20e6
	n := setupNamespaces(t, NamespaceConfig{RateToClient: rate, QueueBytes: 4 << 20, Forward: true})
	sink := listenIn(t, n, n.Client, netip.AddrPortFrom(NSCrossClient, 5001))
	rc, _ := sink.SyscallConn()
	rc.Control(func(fd uintptr) { unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1) })
	src := listenIn(t, n, n.Server, netip.AddrPortFrom(NSCrossServer, 0))
	const count, size = 2000, 1200 // about 1 s at 20 Mbit/s
	errc := make(chan error, 1)
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
	buf, oob := make([]byte, 2048), make([]byte, 128)
	var first, last time.Time
	got := 0
	sink.SetReadDeadline(time.Now().Add(10 * time.Second))
	for got < count {
		_, oobn, _, _, err := sink.ReadMsgUDPAddrPort(buf, oob)
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				break // tbf may have dropped some; judge what came
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
	if got < count/2 {
		t.Fatalf("%d of %d datagrams crossed the router", got, count)
	}
	// IP and UDP headers (28 bytes) and Ethernet (14) count for tbf.
	measured := float64((got-1-count/10)*(size+28+14)*8) / last.Sub(first).Seconds()
	dev := (measured - rate) / rate
	t.Logf("tbf at %.0f Mbit/s delivered %.2f Mbit/s (%+.1f %%), %d of %d datagrams", rate/1e6, measured/1e6, 100*dev, got, count)
	if dev < -0.05 || dev > 0.05 {
		t.Errorf("tbf rate off by %+.1f %%", 100*dev)
	}
}

// TestNamespacesTCPFlow runs the cross-traffic flow through the router's
// 20 Mbit/s tbf for a second: it must fill most of the bottleneck and no
// more, with Cubic set on the sender.
func TestNamespacesTCPFlow(t *testing.T) {
	const rate = 20e6
	n := setupNamespaces(t, NamespaceConfig{RateToClient: rate, Forward: true})
	f, err := n.StartTCPFlow(t.Context(), n.Server, NSCrossServer, n.Client, netip.AddrPortFrom(NSCrossClient, 5201), "cubic")
	if err != nil {
		t.Fatal(err)
	}
	// Wait on the flow's own progress, not a sleep: a second of data at
	// the bottleneck's rate, with a generous deadline.
	deadline := time.Now().Add(10 * time.Second)
	for f.Received() < rate/8 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	got, bps, err := f.Stop()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("TCP %s through tbf %.0f Mbit/s: %d bytes, %.2f Mbit/s", f.CC, rate/1e6, got, bps/1e6)
	if bps < 0.5*rate || bps > 1.1*rate {
		t.Errorf("cross traffic at %.2f Mbit/s through a %.0f Mbit/s bottleneck", bps/1e6, rate/1e6)
	}
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
// open, and a bulk flow still fills the bottleneck.
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
	deadline := time.Now().Add(10 * time.Second)
	for f.Received() < 2*rate/8 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	got, bps, err := f.Stop()
	if err != nil {
		t.Fatal(err)
	}
	carried, lost := l.Packets()
	t.Logf("connect %v; TCP %s with %v each way: %d bytes, %.2f Mbit/s; the line carried %d packets, lost %d", took, f.CC, delay, got, bps/1e6, carried, lost)
	if bps < 0.5*rate || bps > 1.1*rate {
		t.Errorf("delayed cross traffic at %.2f Mbit/s through a %.0f Mbit/s bottleneck", bps/1e6, rate/1e6)
	}
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
