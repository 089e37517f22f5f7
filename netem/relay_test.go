package netem

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math"
	"net"
	"net/netip"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/quiver-quic/quiver/pcap"
)

// echoServer is a real UDP server on loopback that sends every datagram
// back to its source and remembers the sources in order of appearance.
type echoServer struct {
	conn *net.UDPConn
	addr netip.AddrPort

	mu      sync.Mutex
	sources []netip.AddrPort
}

func startEcho(t testing.TB) *echoServer {
	t.Helper()
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadBuffer(4 << 20)
	e := &echoServer{conn: c, addr: c.LocalAddr().(*net.UDPAddr).AddrPort()}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 65536)
		for {
			n, from, err := c.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			e.mu.Lock()
			if !slices.Contains(e.sources, from) {
				e.sources = append(e.sources, from)
			}
			e.mu.Unlock()
			c.WriteToUDPAddrPort(buf[:n], from)
		}
	}()
	t.Cleanup(func() { c.Close(); <-done })
	return e
}

func (e *echoServer) seen() []netip.AddrPort {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.sources)
}

func startRelay(t testing.TB, cfg RelayConfig) *Relay {
	t.Helper()
	r, err := NewRelay(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Stop() })
	return r
}

func dialRelay(t testing.TB, r *Relay) *net.UDPConn {
	t.Helper()
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadBuffer(4 << 20)
	t.Cleanup(func() { c.Close() })
	return c
}

// readN reads datagrams from c until it has n or the deadline passes.
func readN(t testing.TB, c *net.UDPConn, n int, deadline time.Duration) [][]byte {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(deadline))
	var out [][]byte
	buf := make([]byte, 65536)
	for len(out) < n {
		k, _, err := c.ReadFromUDPAddrPort(buf)
		if err != nil {
			t.Fatalf("after %d of %d datagrams: %v", len(out), n, err)
		}
		out = append(out, slices.Clone(buf[:k]))
	}
	return out
}

// sentCounter returns a CaptureFunc and a channel closed once n datagrams
// have been offered towards the server, so that a test knows when the
// relay has decided the fate of all of them.
func sentCounter(n int) (CaptureFunc, <-chan struct{}) {
	ch := make(chan struct{})
	count := 0
	return func(e Event) {
		if e.Kind == Sent && e.Dir == ToServer {
			if count++; count == n {
				close(ch)
			}
		}
	}, ch
}

func TestRelayLoss(t *testing.T) {
	const n = 2000
	echo := startEcho(t)
	capture, allSent := sentCounter(n)
	r := startRelay(t, RelayConfig{Server: echo.addr, Seed: 1, Capture: capture,
		ToServer: Link{Loss: 0.2, MaxRun: 3}, ToClient: Link{Delay: time.Millisecond}})
	c := dialRelay(t, r)
	for i := range n {
		if _, err := c.WriteToUDPAddrPort(datagram(i, 100), r.Addr()); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-allSent:
	case <-time.After(10 * time.Second):
		t.Fatal("the relay did not receive every datagram")
	}
	toServer, _ := r.Stats()
	want := int(toServer.Offered - toServer.Dropped())
	got := readN(t, c, want, 10*time.Second)
	ratio := float64(toServer.LostRandom) / n
	if exp := EffectiveLoss(0.2, 3); math.Abs(ratio-exp) > 0.04 {
		t.Errorf("loss %.3f, want %.3f ± 0.04", ratio, exp)
	}
	// The echoes come back in order, since nothing but loss was asked for.
	var last int = -1
	for _, p := range got {
		seq := int(binary.BigEndian.Uint32(p))
		if seq <= last {
			t.Fatalf("echo %d after %d", seq, last)
		}
		last = seq
	}
	toServer, toClient := r.Stats()
	if toServer.Delivered != uint64(want) || toClient.Offered != uint64(want) {
		t.Errorf("to server %+v, to client %+v; %d echoes", toServer, toClient, want)
	}
	if s := echo.seen(); len(s) != 1 || s[0] == c.LocalAddr().(*net.UDPAddr).AddrPort() {
		t.Errorf("server saw %v, want one relay socket", s)
	}
}

// TestRelayDelay sends 20 datagrams through a 15 ms, 10 Mbit/s link each
// way: no round trip is shorter than the link makes it, and every one-way
// delay the capture records is at least 16 ms (15 ms + 1 ms on the wire).
// How late the timers are is measured by BenchmarkRelayDelay.
func TestRelayDelay(t *testing.T) {
	delays := relayDelays(t, func(rtt time.Duration) {
		// 2 × (15 ms + 1 ms on the wire), and no timer fires early.
		if rtt < 32*time.Millisecond {
			t.Errorf("round trip %v, shorter than the link's 32 ms", rtt)
		}
	})
	if len(delays) != 40 || delays[0] < 16*time.Millisecond {
		t.Fatalf("one-way delays %v, want 40 of at least 16 ms", delays)
	}
}

// BenchmarkRelayDelay reports the median one-way delay through a link of
// 16 ms (15 ms + 1 ms on the wire) beside that figure: timers are late by
// scheduling noise only.
func BenchmarkRelayDelay(b *testing.B) {
	var sum time.Duration
	for range b.N {
		d := relayDelays(b, func(time.Duration) {})
		sum += d[len(d)/2]
	}
	med := sum / time.Duration(b.N)
	b.ReportMetric(16, "configured-ms")
	b.ReportMetric(float64(med)/1e6, "median-ms")
}

// relayDelays ping-pongs 20 datagrams through a relay with a 15 ms, 10
// Mbit/s link each way, calls rtt with each round trip, and returns the
// 40 one-way delays the capture saw, sorted.
func relayDelays(t testing.TB, rtt func(time.Duration)) []time.Duration {
	echo := startEcho(t)
	var mu sync.Mutex
	sent := map[string]time.Time{}
	var delays []time.Duration
	l := Link{Rate: 10e6, Delay: 15 * time.Millisecond}
	r := startRelay(t, RelayConfig{Server: echo.addr, ToServer: l, ToClient: l, Capture: func(e Event) {
		mu.Lock()
		defer mu.Unlock()
		k := e.Dir.String() + string(e.Payload)
		switch e.Kind {
		case Sent:
			sent[k] = e.Time
		case Delivered:
			delays = append(delays, e.Time.Sub(sent[k]))
		}
	}})
	c := dialRelay(t, r)
	for i := range 20 {
		start := time.Now()
		c.WriteToUDPAddrPort(datagram(i, 1250), r.Addr())
		readN(t, c, 1, 5*time.Second)
		rtt(time.Since(start))
	}
	r.Stop() // waits for the last delivery's capture
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(delays)
	return delays
}

// TestRelayRebind ping-pongs through a relay that rebinds at 200 ms and
// 800 ms, until both rebindings have happened and an echo came back after
// the second: the server sees a new relay address each time, and only an
// echo caught in flight by a rebinding is lost. The pings end on that
// event, not on a clock; the rebindings are far enough apart that a stalled
// ping cannot let both pass without one in between.
func TestRelayRebind(t *testing.T) {
	for _, withAddr := range []bool{false, true} {
		echo := startEcho(t)
		l := Link{Delay: 5 * time.Millisecond}
		r := startRelay(t, RelayConfig{Server: echo.addr, ToServer: l, ToClient: l, Seed: 3,
			Rebind: Rebind{At: []time.Duration{200 * time.Millisecond, 800 * time.Millisecond}, Addr: withAddr}})
		c := dialRelay(t, r)
		buf := make([]byte, 100)
		lost := 0
		hang := time.Now().Add(30 * time.Second) // only stops a broken relay
		for i, echoed := 0, false; !echoed || len(r.Rebindings()) < 2; i++ {
			if time.Now().After(hang) {
				t.Fatalf("after %d pings: rebindings %v", i, r.Rebindings())
			}
			before := len(r.Rebindings())
			c.WriteToUDPAddrPort(datagram(i, 50), r.Addr())
			// A short deadline keeps the pings close enough together that
			// each scheduled rebinding shows as its own new address.
			c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
			for {
				n, _, err := c.ReadFromUDPAddrPort(buf)
				if errors.Is(err, os.ErrDeadlineExceeded) {
					lost++
					break
				} else if err != nil {
					t.Fatal(err)
				}
				if n >= 4 && binary.BigEndian.Uint32(buf) == uint32(i) {
					echoed = before >= 2 // through the second rebinding's mapping
					break
				}
			}
		}
		seen, rebinds := echo.seen(), r.Rebindings()
		if len(seen) != 3 || len(rebinds) != 2 {
			t.Fatalf("server saw %v; relay rebound %v", seen, rebinds)
		}
		for i, rb := range rebinds {
			if rb.Old != seen[i] || rb.New != seen[i+1] {
				t.Errorf("rebinding %d: %v -> %v, server saw %v", i, rb.Old, rb.New, seen)
			}
			if withAddr == (rb.New.Addr() == seen[0].Addr()) {
				t.Errorf("rebinding %d to %v: address change %v", i, rb.New, withAddr)
			}
		}
		// An echo in flight at a rebinding is dropped; a slow machine may
		// lose a few more to the short deadline, never fewer.
		if _, toClient := r.Stats(); toClient.LostNAT > 2 || toClient.LostNAT > uint64(lost) {
			t.Errorf("%d echoes lost, %d dropped for a stale mapping; want at most 2, and no more than lost", lost, toClient.LostNAT)
		}
	}
}

func TestRelayArmCorruptAndTraces(t *testing.T) {
	echo := startEcho(t)
	var client, server, all recorder
	ct, st := NewTraceWriter(&client, ClientTrace), NewTraceWriter(&server, ServerTrace)
	r := startRelay(t, RelayConfig{Server: echo.addr, Unarmed: true, ToServer: Link{Corrupt: 1},
		Capture: Tee(ct.Capture, st.Capture, all.capture)})
	c := dialRelay(t, r)

	// Before arming: forwarded untouched, not captured, no t0.
	probe := bytes.Repeat([]byte{0x40}, 60)
	c.WriteToUDPAddrPort(probe, r.Addr())
	if got := readN(t, c, 1, 5*time.Second)[0]; !bytes.Equal(got, probe) {
		t.Error("unarmed relay changed a datagram")
	}
	if _, ok := r.Epoch(); ok || len(all.events) != 0 {
		t.Fatalf("unarmed relay has t0 or captured %d events", len(all.events))
	}

	r.Arm()
	for range 10 {
		c.WriteToUDPAddrPort(probe, r.Addr())
		got := readN(t, c, 1, 5*time.Second)[0]
		diff := 0
		for i := range got {
			if got[i] != probe[i] {
				diff++
			}
		}
		if diff != 1 {
			t.Errorf("echo differs in %d bytes, want the one the link corrupted", diff)
		}
	}
	if _, ok := r.Epoch(); !ok {
		t.Error("no t0 after arming and sending")
	}
	r.Stop()
	client.mu.Lock()
	server.mu.Lock()
	defer client.mu.Unlock()
	defer server.mu.Unlock()
	if client.writes != 20 || server.writes != 20 {
		t.Errorf("client trace %d datagrams, server trace %d; want 20 each", client.writes, server.writes)
	}
	if toServer, _ := r.Stats(); toServer.Corrupted != 10 {
		t.Errorf("corrupted %d, want 10", toServer.Corrupted)
	}
}

func TestRelayStopByContext(t *testing.T) {
	echo := startEcho(t)
	r, err := NewRelay(RelayConfig{Server: echo.addr, ToClient: Link{Delay: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	c := dialRelay(t, r)
	c.WriteToUDPAddrPort([]byte("held for an hour"), r.Addr())
	cancel()
	select {
	case <-r.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("relay still running after its context ended")
	}
	if err := r.Stop(); err != nil {
		t.Error(err)
	}
	if err := r.Start(context.Background()); err == nil {
		t.Error("restarted a stopped relay")
	}
}

func TestRelayConfigErrors(t *testing.T) {
	if _, err := NewRelay(RelayConfig{}); err == nil {
		t.Error("relay without a server accepted")
	}
	if _, err := NewRelay(RelayConfig{Server: netip.MustParseAddrPort("[::1]:443"), Rebind: Rebind{Every: time.Second, Addr: true}}); err == nil {
		t.Error("address rebinding towards IPv6 accepted")
	}
	if _, err := NewRelay(RelayConfig{Server: netip.MustParseAddrPort("127.0.0.1:443"), ToServer: Link{Loss: 2}}); err == nil {
		t.Error("invalid link accepted")
	}
}

// BenchmarkRelay measures the relay's forwarding rate for 1200-byte
// datagrams over a perfect link, from a client that keeps at most 256
// datagrams in flight so that socket buffers (4 MiB) never overflow.
func BenchmarkRelay(b *testing.B) {
	sink, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		b.Fatal(err)
	}
	defer sink.Close()
	sink.SetReadBuffer(4 << 20)
	r, err := NewRelay(RelayConfig{Server: sink.LocalAddr().(*net.UDPAddr).AddrPort()})
	if err != nil {
		b.Fatal(err)
	}
	if err := r.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	defer r.Stop()
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	credit := make(chan struct{}, 256)
	done := make(chan int)
	go func() {
		buf := make([]byte, 2048)
		n := 0
		sink.SetReadDeadline(time.Now().Add(time.Minute))
		for n < b.N {
			if _, _, err := sink.ReadFromUDPAddrPort(buf); err != nil {
				break
			}
			n++
			<-credit
		}
		done <- n
	}()
	p := make([]byte, 1200)
	b.SetBytes(int64(len(p)))
	b.ResetTimer()
	for range b.N {
		credit <- struct{}{}
		c.WriteToUDPAddrPort(p, r.Addr())
	}
	if got := <-done; got != b.N {
		toServer, _ := r.Stats()
		b.Fatalf("%d of %d datagrams arrived; relay stats %+v", got, b.N, toServer)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "datagrams/s")
	b.ReportMetric(float64(b.N)*1200*8/b.Elapsed().Seconds()/1e6, "goodput-Mbps")
}

var _ DatagramWriter = (*pcap.Writer)(nil)

// TestRelayPcapTraces writes the client and server traces of a relayed
// exchange as pcapng and reads them back.
func TestRelayPcapTraces(t *testing.T) {
	echo := startEcho(t)
	var cbuf, sbuf bytes.Buffer
	ct, err := NewPcapTrace(&cbuf, ClientTrace)
	if err != nil {
		t.Fatal(err)
	}
	st, err := NewPcapTrace(&sbuf, ServerTrace)
	if err != nil {
		t.Fatal(err)
	}
	l := Link{Delay: 3 * time.Millisecond}
	r := startRelay(t, RelayConfig{Server: echo.addr, ToServer: l, ToClient: l, Capture: Tee(ct.Capture, st.Capture)})
	c := dialRelay(t, r)
	client := c.LocalAddr().(*net.UDPAddr).AddrPort()
	for i := range 5 {
		c.WriteToUDPAddrPort(datagram(i, 80), r.Addr())
		readN(t, c, 1, 5*time.Second)
	}
	r.Stop()
	if err := errors.Join(ct.Close(), st.Close()); err != nil {
		t.Fatal(err)
	}
	upstream := echo.seen()[0]
	for _, tc := range []struct {
		name   string
		buf    *bytes.Buffer
		a, b   netip.AddrPort // the two ends seen on that side
		offset time.Duration  // from a's datagram to b's reply, at least
	}{
		{"client", &cbuf, client, r.Addr(), 6 * time.Millisecond},
		{"server", &sbuf, upstream, echo.addr, 0},
	} {
		capt, err := pcap.ReadAll(tc.buf)
		if err != nil {
			t.Fatalf("%s trace: %v", tc.name, err)
		}
		if len(capt.Packets) != 10 {
			t.Fatalf("%s trace: %d packets, want 10", tc.name, len(capt.Packets))
		}
		for i := 0; i < 10; i += 2 {
			req, resp := capt.Packets[i], capt.Packets[i+1]
			if req.Src != tc.a || req.Dst != tc.b || resp.Src != tc.b || resp.Dst != tc.a {
				t.Errorf("%s trace, exchange %d: %v->%v then %v->%v", tc.name, i/2, req.Src, req.Dst, resp.Src, resp.Dst)
			}
			if d := resp.Time.Sub(req.Time); d < tc.offset {
				t.Errorf("%s trace, exchange %d: reply %v after the request, want at least %v", tc.name, i/2, d, tc.offset)
			}
		}
	}
}

// TestRelayDrain checks that Drain returns only once the datagrams in
// flight towards the server have been delivered, and that it gives up when
// its context ends.
func TestRelayDrain(t *testing.T) {
	echo := startEcho(t)
	const n = 5
	sent := make(chan struct{}, 4*n)
	r := startRelay(t, RelayConfig{Server: echo.addr, ToServer: Link{Delay: 150 * time.Millisecond}, Capture: func(e Event) {
		if e.Kind == Sent && e.Dir == ToServer {
			select {
			case sent <- struct{}{}:
			default: // never block the relay
			}
		}
	}})
	c := dialRelay(t, r)
	for i := range n {
		c.WriteToUDPAddrPort(datagram(i, 100), r.Addr())
	}
	for range n {
		<-sent
	}
	if ts, _ := r.Stats(); ts.Delivered != 0 {
		t.Fatalf("%d delivered before the link's delay", ts.Delivered)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.Drain(ctx, ToServer); err != nil {
		t.Fatal(err)
	}
	if ts, _ := r.Stats(); ts.Delivered != n {
		t.Errorf("Drain returned with %d of %d datagrams delivered", ts.Delivered, n)
	}
	readN(t, c, n, 5*time.Second) // the echoes

	// A link that holds a datagram for a minute: Drain ends with ctx.
	r2 := startRelay(t, RelayConfig{Server: echo.addr, ToServer: Link{Delay: time.Minute}, Capture: func(e Event) {
		if e.Kind == Sent && e.Dir == ToServer {
			select {
			case sent <- struct{}{}:
			default: // never block the relay
			}
		}
	}})
	c2 := dialRelay(t, r2)
	c2.WriteToUDPAddrPort(datagram(0, 100), r2.Addr())
	<-sent
	short, cancel2 := context.WithCancel(context.Background())
	cancel2()
	if err := r2.Drain(short, ToServer); !errors.Is(err, context.Canceled) {
		t.Errorf("Drain of a held datagram with a cancelled context: %v", err)
	}
	if err := r2.Drain(context.Background(), 0); err == nil {
		t.Error("Drain accepts direction 0")
	}
}

// TestRelayAlternate relays to two server addresses: what the client sends
// to the alternate's address reaches the second server, from the same
// server-facing socket as its datagrams to the first (the client has one
// address), and the answers come back from the address it sent to; the
// capture names the alternate's addresses on both sides.
func TestRelayAlternate(t *testing.T) {
	main, alt := startEcho(t), startEcho(t)
	var mu sync.Mutex
	var events []Event
	r := startRelay(t, RelayConfig{Server: main.addr, Alternates: []RelayAlternate{{Listen: netip.MustParseAddrPort("127.0.0.1:0"), Server: alt.addr}},
		Capture: func(e Event) {
			mu.Lock()
			e.Payload = nil
			events = append(events, e)
			mu.Unlock()
		}})
	alts := r.AlternateAddrs()
	if len(alts) != 1 || alts[0] == r.Addr() {
		t.Fatalf("alternate addresses %v (main %v)", alts, r.Addr())
	}
	c := dialRelay(t, r)
	buf := make([]byte, 100)
	for _, to := range []netip.AddrPort{r.Addr(), alts[0], r.Addr()} {
		if _, err := c.WriteToUDPAddrPort([]byte("x"), to); err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, from, err := c.ReadFromUDPAddrPort(buf)
		if err != nil {
			t.Fatalf("to %v: %v", to, err)
		}
		if from != to {
			t.Errorf("sent to %v, answered from %v", to, from)
		}
	}
	ms, as := main.seen(), alt.seen()
	if len(ms) != 1 || len(as) != 1 || ms[0] != as[0] {
		t.Errorf("the servers saw the client as %v and %v, want one and the same address", ms, as)
	}
	r.Stop()
	// Three datagrams each way, one read and one write each, counted
	// whichever of the sockets carried them.
	for i, s := range func() [2]IOStats { a, b := r.IOStats(); return [2]IOStats{a, b} }() {
		if s != (IOStats{Reads: 3, ReadDatagrams: 3, Writes: 3, WriteDatagrams: 3}) {
			t.Errorf("%v: %v, want 3 calls for 3 datagrams each way", Direction(i+1), s)
		}
	}
	client := c.LocalAddr().(*net.UDPAddr).AddrPort()
	want := []Event{
		{Kind: Sent, Dir: ToServer, Src: client, Dst: alts[0]},
		{Kind: Delivered, Dir: ToServer, Src: as[0], Dst: alt.addr},
		{Kind: Sent, Dir: ToClient, Src: alt.addr, Dst: as[0]},
		{Kind: Delivered, Dir: ToClient, Src: alts[0], Dst: client},
	}
	got := 0
	for _, e := range events {
		for _, w := range want {
			if e.Kind == w.Kind && e.Dir == w.Dir && e.Src == w.Src && e.Dst == w.Dst {
				got++
			}
		}
	}
	if got != len(want) {
		t.Errorf("%d of the alternate's %d events captured with its addresses: %+v", got, len(want), events)
	}
}
