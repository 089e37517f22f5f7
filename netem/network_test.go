package netem

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"os"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

var (
	addrA = netip.MustParseAddrPort("10.0.0.1:4433")
	addrB = netip.MustParseAddrPort("10.0.1.1:443")
)

func newNetwork(t *testing.T, cfg NetworkConfig) *Network {
	t.Helper()
	n, err := NewNetwork(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

func listen(t *testing.T, n *Network, a netip.AddrPort) *Conn {
	t.Helper()
	c, err := n.Listen(a)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// arrival is one datagram as a reader saw it.
type arrival struct {
	seq  uint32
	from netip.AddrPort
	at   time.Duration // since the start of the test
	data []byte
}

// collect reads from c until it is closed or idle for idle (on the
// bubble's clock), and returns what arrived.
func collect(c *Conn, start time.Time, idle time.Duration) <-chan []arrival {
	out := make(chan []arrival, 1)
	go func() {
		var got []arrival
		buf := make([]byte, 65536)
		for {
			c.SetReadDeadline(time.Now().Add(idle))
			n, from, err := c.ReadFromUDPAddrPort(buf)
			if err != nil {
				out <- got
				return
			}
			got = append(got, arrival{binary.BigEndian.Uint32(buf), from, time.Since(start), slices.Clone(buf[:n])})
		}
	}()
	return out
}

func datagram(seq, size int) []byte {
	p := make([]byte, size)
	binary.BigEndian.PutUint32(p, uint32(seq))
	return p
}

func TestNetworkRateAndDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newNetwork(t, NetworkConfig{})
		n.SetLink(addrA, addrB, Link{Rate: 10e6, Delay: 10 * time.Millisecond})
		a, b := listen(t, n, addrA), listen(t, n, addrB)
		start := time.Now()
		got := collect(b, start, time.Second)
		for i := range 1000 {
			if _, err := a.WriteTo(datagram(i, 1250), net.UDPAddrFromAddrPort(addrB)); err != nil {
				t.Fatal(err)
			}
		}
		arr := <-got
		if len(arr) != 1000 {
			t.Fatalf("%d datagrams arrived, want 1000", len(arr))
		}
		for i, r := range arr {
			// 1250 B at 10 Mbit/s is 1 ms on the wire, then 10 ms of delay.
			want := time.Duration(i+1)*time.Millisecond + 10*time.Millisecond
			if int(r.seq) != i || r.at != want || r.from != addrA {
				t.Fatalf("arrival %d: seq %d from %v at %v, want seq %d from %v at %v", i, r.seq, r.from, r.at, i, addrA, want)
			}
		}
		if s := n.Stats(addrA, addrB); s.Offered != 1000 || s.Delivered != 1000 || s.Dropped() != 0 {
			t.Errorf("stats %+v", s)
		}
	})
}

// lossyRun sends 5000 datagrams at 1 ms intervals over link and returns the
// sequence numbers that arrived, in arrival order, and the stats.
func lossyRun(t *testing.T, seed uint64, l Link) ([]arrival, Stats) {
	var arr []arrival
	var st Stats
	synctest.Test(t, func(t *testing.T) {
		n := newNetwork(t, NetworkConfig{Seed: seed, Link: l})
		a, b := listen(t, n, addrA), listen(t, n, addrB)
		got := collect(b, time.Now(), 3*time.Second)
		for i := range 5000 {
			a.WriteTo(datagram(i, 200), net.UDPAddrFromAddrPort(addrB))
			time.Sleep(time.Millisecond)
		}
		arr = <-got
		st = n.Stats(addrA, addrB)
	})
	return arr, st
}

func seqs(arr []arrival) []uint32 {
	var s []uint32
	for _, a := range arr {
		s = append(s, a.seq)
	}
	return s
}

func TestNetworkLoss(t *testing.T) {
	l := Link{Delay: 5 * time.Millisecond, Loss: 0.1, MaxRun: 3}
	arr, st := lossyRun(t, 1, l)
	lost := 5000 - len(arr)
	if want := EffectiveLoss(0.1, 3) * 5000; float64(lost) < want*0.8 || float64(lost) > want*1.2 {
		t.Errorf("%d lost, want about %.0f", lost, want)
	}
	if st.LostRandom != uint64(lost) || st.Delivered != uint64(len(arr)) {
		t.Errorf("stats %+v, counted %d lost", st, lost)
	}
	if !slices.IsSorted(seqs(arr)) {
		t.Error("loss alone reordered datagrams")
	}
	// The same seed replays the same losses; another seed does not.
	again, _ := lossyRun(t, 1, l)
	other, _ := lossyRun(t, 2, l)
	if !slices.Equal(seqs(arr), seqs(again)) {
		t.Error("same seed, different losses")
	}
	if slices.Equal(seqs(arr), seqs(other)) {
		t.Error("different seed, same losses")
	}
}

func TestNetworkReorder(t *testing.T) {
	arr, st := lossyRun(t, 3, Link{Delay: 5 * time.Millisecond, Reorder: 0.05, ReorderDelay: 3 * time.Millisecond})
	if len(arr) != 5000 {
		t.Fatalf("%d arrived, want all 5000", len(arr))
	}
	late := 0
	var highest uint32
	for _, a := range arr {
		if a.seq < highest {
			late++
		}
		highest = max(highest, a.seq)
	}
	// Each reordered datagram is overtaken by those sent in its extra 3 ms,
	// unless it is one of the last.
	if late == 0 || uint64(late) > st.Reordered || uint64(late) < st.Reordered-3 {
		t.Errorf("%d datagrams arrived after a later one; %d reordered by the link", late, st.Reordered)
	}
}

func TestNetworkDuplicate(t *testing.T) {
	arr, st := lossyRun(t, 4, Link{Delay: time.Millisecond, Duplicate: 0.1})
	seen := map[uint32]int{}
	for _, a := range arr {
		seen[a.seq]++
	}
	dups := 0
	for _, c := range seen {
		if c == 2 {
			dups++
		} else if c != 1 {
			t.Fatalf("a datagram arrived %d times", c)
		}
	}
	if len(seen) != 5000 || dups < 400 || dups > 600 || uint64(dups) != st.Duplicated {
		t.Errorf("%d distinct, %d duplicated (link says %d), want 5000 and about 500", len(seen), dups, st.Duplicated)
	}
}

func TestNetworkCorrupt(t *testing.T) {
	arr, st := lossyRun(t, 5, Link{Corrupt: 0.05})
	corrupted := 0
	for i, a := range arr {
		if !slices.Equal(a.data[4:], make([]byte, 196)) || a.seq != uint32(i) {
			corrupted++
		}
	}
	if corrupted == 0 || uint64(corrupted) != st.Corrupted {
		t.Errorf("%d arrived corrupted, link says %d", corrupted, st.Corrupted)
	}
}

func TestNetworkBlackhole(t *testing.T) {
	arr, st := lossyRun(t, 6, Link{Blackholes: []Window{{time.Second, 2 * time.Second}}})
	for _, a := range arr {
		if a.seq >= 1000 && a.seq < 2000 {
			t.Fatalf("datagram %d crossed the blackhole", a.seq)
		}
	}
	if len(arr) != 4000 || st.LostBlackhole != 1000 {
		t.Errorf("%d arrived, %d blackholed; want 4000 and 1000", len(arr), st.LostBlackhole)
	}
}

func TestNetworkQueueDrop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newNetwork(t, NetworkConfig{Link: Link{Rate: 1e6, QueuePackets: 10}})
		a, b := listen(t, n, addrA), listen(t, n, addrB)
		got := collect(b, time.Now(), time.Second)
		for i := range 50 {
			a.WriteTo(datagram(i, 1000), net.UDPAddrFromAddrPort(addrB))
		}
		if arr := <-got; len(arr) != 11 {
			t.Errorf("%d arrived, want 11 (1 serialising + 10 queued)", len(arr))
		}
		if s := n.Stats(addrA, addrB); s.LostQueue != 39 {
			t.Errorf("queue drops %d, want 39", s.LostQueue)
		}
	})
}

// TestNetworkRebind puts the client behind a NAT that rebinds at 1 s and
// then every 5 s. The server echoes to whatever source it sees, and the
// client must get every echo, because the NAT maps the new address back.
func TestNetworkRebind(t *testing.T) {
	for _, withAddr := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			n := newNetwork(t, NetworkConfig{Seed: 9, Link: Link{Delay: 10 * time.Millisecond}})
			n.SetRebind(addrA, Rebind{First: time.Second, Every: 5 * time.Second, Addr: withAddr})
			client, server := listen(t, n, addrA), listen(t, n, addrB)
			start := time.Now()

			var mu sync.Mutex
			var sources []arrival // first datagram from each new source
			go func() {
				buf := make([]byte, 1500)
				for {
					k, from, err := server.ReadFromUDPAddrPort(buf)
					if err != nil {
						return
					}
					mu.Lock()
					if len(sources) == 0 || sources[len(sources)-1].from != from {
						sources = append(sources, arrival{from: from, at: time.Since(start)})
					}
					mu.Unlock()
					server.WriteToUDPAddrPort(buf[:k], from)
				}
			}()
			echoes := collect(client, start, time.Second)
			for i := range 120 { // 12 s at 100 ms
				client.WriteToUDPAddrPort(datagram(i, 100), addrB)
				time.Sleep(100 * time.Millisecond)
			}
			if got := len(<-echoes); got != 120 {
				t.Errorf("client got %d echoes, want 120", got)
			}
			server.Close()

			mu.Lock()
			defer mu.Unlock()
			// Rebindings at 1, 6 and 11 s; each shows in the first datagram
			// sent after it, and arrives 10 ms later.
			wantAt := []time.Duration{10 * time.Millisecond, 1010 * time.Millisecond, 6010 * time.Millisecond, 11010 * time.Millisecond}
			if len(sources) != len(wantAt) {
				t.Fatalf("server saw sources %v, want %d", sources, len(wantAt))
			}
			for i, s := range sources {
				if s.at != wantAt[i] {
					t.Errorf("source %d (%v) first seen at %v, want %v", i, s.from, s.at, wantAt[i])
				}
				if i == 0 {
					if s.from != addrA {
						t.Errorf("before any rebinding the server saw %v, want %v", s.from, addrA)
					}
					continue
				}
				if sameAddr := s.from.Addr() == addrA.Addr(); sameAddr == withAddr {
					t.Errorf("rebinding %d: %v, address change %v", i, s.from, withAddr)
				}
			}
			if ext := n.ExternalAddr(addrA); ext != sources[len(sources)-1].from {
				t.Errorf("ExternalAddr %v, server saw %v", ext, sources[len(sources)-1].from)
			}
		})
	}
}

func TestNetworkRebindStaleMappingDropped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newNetwork(t, NetworkConfig{Link: Link{Delay: 10 * time.Millisecond}})
		client, server := listen(t, n, addrA), listen(t, n, addrB)
		got := collect(client, time.Now(), time.Second)
		client.WriteToUDPAddrPort([]byte("hello"), addrB)
		time.Sleep(20 * time.Millisecond)
		server.WriteToUDPAddrPort([]byte("to the old mapping, in flight"), addrA)
		time.Sleep(5 * time.Millisecond)
		newExt := n.Rebind(addrA)
		if newExt == addrA {
			t.Fatal("Rebind kept the address")
		}
		server.WriteToUDPAddrPort([]byte("to the old mapping"), addrA)
		server.WriteToUDPAddrPort([]byte("to the new mapping"), newExt)
		arr := <-got
		if len(arr) != 1 || string(arr[0].data) != "to the new mapping" || arr[0].from != addrB {
			t.Errorf("client got %v, want only the datagram to the new mapping", arr)
		}
		if s := n.Stats(addrB, addrA); s.LostNAT != 2 {
			t.Errorf("stale-mapping drops %d, want 2", s.LostNAT)
		}
	})
}

func TestConnDeadlineAndClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newNetwork(t, NetworkConfig{})
		c := listen(t, n, addrA)
		start := time.Now()
		c.SetReadDeadline(start.Add(3 * time.Second))
		_, _, err := c.ReadFrom(make([]byte, 10))
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() || !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("read past deadline: %v, want a timeout", err)
		}
		if d := time.Since(start); d != 3*time.Second {
			t.Errorf("timed out after %v, want 3s", d)
		}

		// Moving the deadline wakes a blocked reader.
		c.SetReadDeadline(time.Time{})
		errc := make(chan error)
		go func() {
			_, _, err := c.ReadFrom(make([]byte, 10))
			errc <- err
		}()
		synctest.Wait()
		c.SetReadDeadline(time.Now().Add(time.Second))
		if err := <-errc; !errors.Is(err, os.ErrDeadlineExceeded) || time.Since(start) != 4*time.Second {
			t.Errorf("after moving the deadline: %v at %v", err, time.Since(start))
		}

		// Close wakes a blocked reader with net.ErrClosed.
		c.SetReadDeadline(time.Time{})
		go func() {
			_, _, err := c.ReadFrom(make([]byte, 10))
			errc <- err
		}()
		synctest.Wait()
		c.Close()
		if err := <-errc; !errors.Is(err, net.ErrClosed) {
			t.Errorf("read after Close: %v, want net.ErrClosed", err)
		}
		if _, err := c.WriteTo([]byte{1}, c.LocalAddr()); !errors.Is(err, net.ErrClosed) {
			t.Errorf("write after Close: %v", err)
		}
		// The address is free again.
		listen(t, n, addrA).Close()
	})
}

func TestNetworkListen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newNetwork(t, NetworkConfig{})
		if _, err := n.Listen(netip.MustParseAddrPort("0.0.0.0:1")); err == nil {
			t.Error("listen on the unspecified address accepted")
		}
		a := listen(t, n, netip.MustParseAddrPort("10.0.0.9:0"))
		b := listen(t, n, netip.MustParseAddrPort("10.0.0.9:0"))
		if a.AddrPort().Port() == 0 || a.AddrPort() == b.AddrPort() {
			t.Errorf("ephemeral ports %v and %v", a.AddrPort(), b.AddrPort())
		}
		if _, err := n.Listen(a.AddrPort()); err == nil {
			t.Error("listen on a used address accepted")
		}
		if ua, ok := a.LocalAddr().(*net.UDPAddr); !ok || ua.AddrPort() != a.AddrPort() {
			t.Errorf("LocalAddr %v", a.LocalAddr())
		}
		// A datagram to nobody is dropped, and reported.
		a.WriteToUDPAddrPort([]byte{1}, netip.MustParseAddrPort("10.9.9.9:9"))
		synctest.Wait()
		if s := n.Stats(a.AddrPort(), netip.MustParseAddrPort("10.9.9.9:9")); s.LostNoRoute != 1 {
			t.Errorf("no-route drops %d", s.LostNoRoute)
		}
	})
}

// recorder is a DatagramWriter and event log for capture tests.
type recorder struct {
	mu     sync.Mutex
	events []Event
	writes int
}

func (r *recorder) capture(e Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e.Payload = slices.Clone(e.Payload)
	r.events = append(r.events, e)
}

func (r *recorder) WriteDatagram(t time.Time, src, dst netip.AddrPort, p []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writes++
	return nil
}

func TestNetworkCapture(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var rec, traceA recorder
		tw := NewTraceWriter(&traceA, EndpointTrace(addrA))
		n := newNetwork(t, NetworkConfig{Seed: 1, Link: Link{Delay: 7 * time.Millisecond, Loss: 0.2},
			Capture: Tee(rec.capture, tw.Capture)})
		a, b := listen(t, n, addrA), listen(t, n, addrB)
		gotA, gotB := collect(a, time.Now(), time.Second), collect(b, time.Now(), time.Second)
		for i := range 100 {
			a.WriteToUDPAddrPort(datagram(i, 50), addrB)
			b.WriteToUDPAddrPort(datagram(i, 60), addrA)
		}
		arrA, arrB := <-gotA, <-gotB
		rec.mu.Lock()
		defer rec.mu.Unlock()
		traceA.mu.Lock()
		defer traceA.mu.Unlock()
		count := map[EventKind]int{}
		for _, e := range rec.events {
			count[e.Kind]++
			if e.Kind == Delivered && e.Time.Sub(rec.events[0].Time) != 7*time.Millisecond {
				t.Errorf("delivered at %v, want 7ms", e.Time.Sub(rec.events[0].Time))
			}
		}
		if count[Sent] != 200 || count[Delivered] != len(arrA)+len(arrB) || count[Dropped] != 200-len(arrA)-len(arrB) {
			t.Errorf("events %v; delivered %d+%d", count, len(arrA), len(arrB))
		}
		if traceA.writes != 100+len(arrA) || tw.Err() != nil {
			t.Errorf("A's trace has %d datagrams, want 100 sent + %d received", traceA.writes, len(arrA))
		}
	})
}

// TestNetworkRandomConfigs is a property test: random links, endpoints
// and traffic never panic or deadlock, and every datagram is accounted
// for.
func TestNetworkRandomConfigs(t *testing.T) {
	r := newTestRand(77)
	for iter := range 30 {
		synctest.Test(t, func(t *testing.T) {
			n := newNetwork(t, NetworkConfig{Seed: uint64(iter), Link: randomLink(r)})
			var conns []*Conn
			var outs []<-chan []arrival
			for i := range 2 + r.IntN(3) {
				c := listen(t, n, netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 1)}), 1000))
				conns = append(conns, c)
				outs = append(outs, collect(c, time.Now(), 5*time.Second))
				if r.IntN(2) == 0 {
					n.SetLink(c.AddrPort(), conns[0].AddrPort(), randomLink(r))
				}
			}
			if r.IntN(2) == 0 {
				n.SetRebind(conns[1].AddrPort(), Rebind{First: 100 * time.Millisecond, Every: 300 * time.Millisecond, Addr: r.IntN(2) == 0})
			}
			sent := 0
			for range 300 {
				from, to := conns[r.IntN(len(conns))], conns[r.IntN(len(conns))]
				from.WriteToUDPAddrPort(datagram(sent, 4+r.IntN(1400)), n.ExternalAddr(to.AddrPort()))
				sent++
				time.Sleep(time.Duration(r.IntN(3000)) * time.Microsecond)
			}
			received := 0
			for _, o := range outs {
				received += len(<-o)
			}
			var offered, lost, dup uint64
			for _, f := range conns {
				for _, to := range conns {
					s := n.Stats(f.AddrPort(), to.AddrPort())
					offered += s.Offered
					lost += s.Dropped()
					dup += s.Duplicated
				}
			}
			if offered != uint64(sent) || uint64(received) != offered-lost+dup {
				t.Errorf("sent %d, offered %d, lost %d, duplicated %d, received %d", sent, offered, lost, dup, received)
			}
		})
	}
}
