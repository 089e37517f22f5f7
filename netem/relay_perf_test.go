package netem

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/quiver-quic/quiver/quic"
	"golang.org/x/sys/unix"
)

// measureRate sends n datagrams of size bytes through a relay whose
// to-server link has rate (and an unlimited queue), as fast as the sender
// can, and returns the steady rate the receiver saw: the bits of the
// datagrams after the first tenth over the span from the end of that
// tenth to the last arrival, with the link's 28 bytes of overhead counted
// as the link counts them. The start is left out because a sender's burst
// on a busy two-core host can hold the relay's first timer back a few
// milliseconds, after which the link catches up: that shifts when the
// train starts, not the rate it runs at.
func measureRate(t testing.TB, rate int64, n, size int) float64 {
	sink, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	sink.SetReadBuffer(8 << 20)
	l := Link{Rate: rate, Overhead: 28}
	r, err := NewRelay(RelayConfig{Server: sink.LocalAddr().(*net.UDPAddr).AddrPort(), ToServer: l})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer r.Stop()
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p := make([]byte, size)
	// The link's clock starts when the first datagram enters the relay:
	// measuring from then to the last arrival, a relay whose timer was
	// starved by other work and then caught up cannot look faster than
	// its rate (measuring between arrivals, the catch-up burst did).
	start := time.Now()
	for range n {
		if _, err := c.WriteToUDPAddrPort(p, r.Addr()); err != nil {
			t.Fatal(err)
		}
	}
	// Arrival times are the kernel's receive timestamps (SO_TIMESTAMPNS),
	// so that the reader's own scheduling on a busy host does not count.
	rc, err := sink.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	rc.Control(func(fd uintptr) { err = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1) })
	if err != nil {
		t.Fatal(err)
	}
	buf, oob := make([]byte, 2048), make([]byte, 128)
	var last time.Time
	// The link needs n*size*8/rate; the deadline only stops a broken relay.
	sink.SetReadDeadline(time.Now().Add(time.Duration(float64(n*(size+28)*8)/float64(rate)*float64(time.Second)) + 10*time.Second))
	for i := range n {
		_, oobn, _, _, err := sink.ReadMsgUDPAddrPort(buf, oob)
		if err != nil {
			ts, _ := r.Stats()
			t.Fatalf("after %d of %d datagrams: %v (relay %+v)", i, n, err, ts)
		}
		at, ok := kernelTimestamp(oob[:oobn])
		if !ok {
			t.Fatal("no SO_TIMESTAMPNS control message")
		}
		last = at
	}
	return float64(n*(size+28)*8) / last.Sub(start).Seconds()
}

func kernelTimestamp(oob []byte) (time.Time, bool) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return time.Time{}, false
	}
	for _, m := range msgs {
		if m.Header.Level == unix.SOL_SOCKET && m.Header.Type == unix.SCM_TIMESTAMPNS && len(m.Data) >= 16 {
			ts := (*unix.Timespec)(unsafe.Pointer(&m.Data[0]))
			return time.Unix(ts.Unix()), true
		}
	}
	return time.Time{}, false
}

// bulkServer serves every stream of every connection with size bytes and
// a FIN, whatever the request.
func bulkServer(ctx context.Context, ep *quic.Endpoint, size int) {
	payload := make([]byte, 64<<10)
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
					io.ReadAll(s)
					for left := size; left > 0; {
						k, err := s.Write(payload[:min(left, len(payload))])
						if err != nil {
							return
						}
						left -= k
					}
					s.CloseWrite()
				}()
			}
		}()
	}
}

// quiverGoodput downloads size bytes from a Quiver server over one
// connection, directly or through a relay with a perfect link, and
// returns the goodput in Mbit/s (wall clock from the request to the FIN).
func quiverGoodput(t testing.TB, size int, viaRelay bool) float64 {
	g, _, _ := quiverGoodputCPU(t, size, viaRelay)
	return g
}

// processCPU is the CPU time this process has used so far.
func processCPU() time.Duration {
	var ru unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// quiverGoodputCPU is quiverGoodput that also returns the process's CPU
// seconds per GB moved (client, server and relay together), which
// depends far less on what else the host runs than the goodput, and the
// relay's system calls (zero without it).
func quiverGoodputCPU(t testing.TB, size int, viaRelay bool) (mbps, cpuPerGB float64, rio [2]IOStats) {
	scfg, ccfg := engineConfigs(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sep, err := quic.Listen("udp", "127.0.0.1:0", scfg)
	if err != nil {
		t.Fatal(err)
	}
	defer sep.Close()
	go bulkServer(ctx, sep, size)
	addr := sep.Addr().String()
	var relay *Relay
	if viaRelay {
		r, err := NewRelay(RelayConfig{Server: sep.Addr().(*net.UDPAddr).AddrPort()})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Start(ctx); err != nil {
			t.Fatal(err)
		}
		defer r.Stop()
		addr, relay = r.Addr().String(), r
	}
	c, err := quic.Dial(ctx, "udp", addr, ccfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(0, "")
	s, err := c.OpenStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	start, cpu0 := time.Now(), processCPU()
	s.Write([]byte("GET /bulk\r\n"))
	s.CloseWrite()
	n, err := io.Copy(io.Discard, s)
	el, cpu := time.Since(start), processCPU()-cpu0
	if err != nil || n != int64(size) {
		t.Fatalf("downloaded %d of %d bytes: %v", n, size, err)
	}
	if relay != nil {
		rio[0], rio[1] = relay.IOStats()
	}
	return float64(size) * 8 / el.Seconds() / 1e6, cpu.Seconds() / (float64(size) / 1e9), rio
}

// TestRelayRate checks the rate-limited link by behaviour: every datagram
// of a burst crosses it, and the burst cannot cross faster than the rate
// allows (a lower bound, which load can only lengthen). The delivered rate
// and the relay's speed are measured by BenchmarkRelayAccuracyAndSpeed.
func TestRelayRate(t *testing.T) {
	const rate, n, size = 10e6, 250, 1200
	start := time.Now()
	got := measureRate(t, rate, n, size) // fails unless all n arrive
	least := time.Duration(float64(n*(size+28)*8) / rate * float64(time.Second))
	// measureRate divides the bits by the time from the first send.
	if span := time.Duration(float64(n*(size+28)*8) / got * float64(time.Second)); span < least*9/10 {
		t.Errorf("%d datagrams crossed a %.0f Mbit/s link in %v, faster than its rate allows (%v)", n, rate/1e6, span, least)
	}
	t.Logf("%d datagrams through %.0f Mbit/s: %.2f Mbit/s (%v in all)", n, rate/1e6, got/1e6, time.Since(start))
}

// BenchmarkRelayAccuracyAndSpeed shows, side by side in one run, the two
// claims about the user-space link (docs/interop-results.md): a rate-limited
// link delivers close to its configured rate, and at unlimited rate the
// relay passes close to the goodput of a direct loopback transfer, Quiver
// to Quiver (each side the median of alternating runs, with the CPU cost
// per GB beside it).
//
//	go test ./netem -run '^$' -bench RelayAccuracyAndSpeed -benchtime 1x -v
//
// QUIVER_BENCH=1 makes the downloads longer (128 MiB, 7 pairs).
func BenchmarkRelayAccuracyAndSpeed(b *testing.B) {
	for range b.N {
		relayAccuracyAndSpeed(b)
	}
}

func relayAccuracyAndSpeed(b *testing.B) {
	type row struct {
		what           string
		want, got, dev float64
	}
	var rows []row
	for _, rate := range []int64{10e6, 50e6} {
		n := int(rate / 12_000) // about 1 s of traffic
		g := measureRate(b, rate, n, 1200)
		dev := (g - float64(rate)) / float64(rate)
		rows = append(rows, row{fmt.Sprintf("rate %d Mbit/s", rate/1e6), float64(rate) / 1e6, g / 1e6, dev})
		b.ReportMetric(g/float64(rate), fmt.Sprintf("delivered/configured@%dMbps", rate/1e6))
	}
	size, reps := 32<<20, 5
	if os.Getenv("QUIVER_BENCH") == "1" {
		size, reps = 128<<20, 7
	}
	// Alternate the two, and which goes first, so that a neighbour's
	// burst of work falls on both alike; the medians are compared.
	var direct, relayed, cpuDirect, cpuRelayed []float64
	var io [2]IOStats
	run := func(via bool) {
		g, c, s := quiverGoodputCPU(b, size, via)
		if via {
			relayed, cpuRelayed = append(relayed, g), append(cpuRelayed, c)
			io[0].Add(s[0])
			io[1].Add(s[1])
		} else {
			direct, cpuDirect = append(direct, g), append(cpuDirect, c)
		}
	}
	for i := range reps {
		run(i%2 == 1)
		run(i%2 == 0)
	}
	bd, br := median(direct), median(relayed)
	b.Logf("%-22s %12s %12s %9s", "", "configured", "measured", "off")
	for _, r := range rows {
		b.Logf("%-22s %9.2f Mb %9.2f Mb %+8.2f%%", r.what, r.want, r.got, 100*r.dev)
	}
	b.Logf("Quiver→Quiver %d MiB, median of %d alternating runs: direct loopback %.0f Mbit/s %v, through the relay %.0f Mbit/s %v: ratio %.2f",
		size>>20, reps, bd, round(direct), br, round(relayed), br/bd)
	b.Logf("CPU seconds per GB (client, server and relay in this process), median: direct %.2f, through the relay %.2f: %.2f×",
		median(cpuDirect), median(cpuRelayed), median(cpuRelayed)/median(cpuDirect))
	b.Logf("relay system calls towards the server (ACKs): %v", io[0])
	b.Logf("relay system calls towards the client (data): %v", io[1])
	b.ReportMetric(br/bd, "relay/direct-goodput")
	b.ReportMetric(median(cpuRelayed)/median(cpuDirect), "relay/direct-CPU")
}

func median(v []float64) float64 {
	s := slices.Sorted(slices.Values(v))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func abs(x float64) float64 { return max(x, -x) }

func round(v []float64) []int {
	out := make([]int, len(v))
	for i, x := range v {
		out[i] = int(x + 0.5)
	}
	return out
}

// BenchmarkQuiverGoodput reports Quiver-to-Quiver goodput directly over
// loopback and through the relay, as goodput-Mbps, for benchstat.
func BenchmarkQuiverGoodput(b *testing.B) {
	for _, via := range []bool{false, true} {
		name := "direct"
		if via {
			name = "relay"
		}
		b.Run(name, func(b *testing.B) {
			var sum float64
			for range b.N {
				sum += quiverGoodput(b, 32<<20, via)
			}
			b.ReportMetric(sum/float64(b.N), "goodput-Mbps")
		})
	}
}

// TestRelayECN sends a datagram with each ECN codepoint through the relay,
// both ways, and checks that the mark arrives, is counted and is captured.
func TestRelayECN(t *testing.T) {
	srv, err := listenBatch(net.ListenUDP, netip.MustParseAddrPort("127.0.0.1:0"), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.c.Close()
	// Events carry the reader's buffer, so keep what the check needs
	// during the call.
	type seen struct {
		kind     EventKind
		dir      Direction
		ecn, pay uint8
	}
	var events []seen
	r := startRelay(t, RelayConfig{Server: canon(srv.c.LocalAddr().(*net.UDPAddr).AddrPort()),
		Capture: func(e Event) { events = append(events, seen{e.Kind, e.Dir, e.ECN, e.Payload[0]}) }})
	cl, err := listenBatch(net.ListenUDP, netip.MustParseAddrPort("127.0.0.1:0"), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.c.Close()
	rb := newReadBatch()
	for _, ecn := range []uint8{NotECT, ECT1, ECT0, CE} {
		var w writeBatch
		w.out = append(w.out, outgoing{conn: cl, dst: net.UDPAddrFromAddrPort(r.Addr()), payload: []byte{ecn}, ecn: ecn})
		if w.flush(&bufPool{}) != 0 {
			t.Fatal("client write failed")
		}
		srv.c.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, err := srv.read(rb)
		if err != nil || n != 1 {
			t.Fatalf("server read: %d, %v", n, err)
		}
		p, from, got := rb.datagram(0)
		if got != ecn || p[0] != ecn {
			t.Errorf("to server: sent ECN %d, got %d", ecn, got)
		}
		// And back, with the same mark.
		w.out = append(w.out, outgoing{conn: srv, dst: net.UDPAddrFromAddrPort(from), payload: []byte{ecn}, ecn: ecn})
		w.flush(&bufPool{})
		cl.c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if n, err := cl.read(rb); err != nil || n != 1 {
			t.Fatalf("client read: %d, %v", n, err)
		}
		if _, _, got := rb.datagram(0); got != ecn {
			t.Errorf("to client: sent ECN %d, got %d", ecn, got)
		}
	}
	toServer, toClient := r.Stats()
	if toServer.ECN != [4]uint64{1, 1, 1, 1} || toClient.ECN != [4]uint64{1, 1, 1, 1} {
		t.Errorf("ECN counters %v %v, want one of each", toServer.ECN, toClient.ECN)
	}
	r.Stop()
	if len(events) != 16 {
		t.Errorf("%d events, want 16", len(events))
	}
	for _, e := range events {
		if e.ecn != e.pay {
			t.Errorf("%v %v event: ECN %d for a datagram sent with %d", e.kind, e.dir, e.ecn, e.pay)
		}
	}
}

// TestRelayTraceTimeOrder relays traffic both ways through a delayed link
// and checks that every event reaches the capture in time order, which
// tshark needs to follow a connection.
func TestRelayTraceTimeOrder(t *testing.T) {
	echo := startEcho(t)
	var last time.Time
	var events, disorder int
	l := Link{Delay: time.Millisecond, Jitter: 500 * time.Microsecond}
	r := startRelay(t, RelayConfig{Server: echo.addr, ToServer: l, ToClient: l, Seed: 3, Capture: func(e Event) {
		events++
		if e.Time.Before(last) {
			disorder++
		}
		last = e.Time
	}})
	c := dialRelay(t, r)
	const n = 2000
	done := make(chan struct{})
	go func() {
		defer close(done)
		readN(t, c, n, 20*time.Second)
	}()
	p := make([]byte, 100)
	for range n {
		c.WriteToUDPAddrPort(p, r.Addr())
	}
	<-done
	r.Stop()
	if events < 4*n {
		t.Errorf("%d events for %d echoed datagrams, want %d", events, n, 4*n)
	}
	if disorder > 0 {
		t.Errorf("%d of %d events stamped before the event captured ahead of them", disorder, events)
	}
}
