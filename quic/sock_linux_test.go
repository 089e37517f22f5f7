package quic

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/netip"
	"os"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// fastPathCases are the switch settings each fast-path test runs with.
var fastPathCases = []struct {
	name string
	set  func(*Config)
}{
	{"default", func(*Config) {}},
	{"no-gso", func(c *Config) { c.DisableGSO = true }},
	{"no-gro", func(c *Config) { c.DisableGRO = true }},
	{"no-batching", func(c *Config) { c.DisableBatching = true }},
	{"all-off", func(c *Config) {
		c.DisableGSO, c.DisableGRO, c.DisableBatching, c.SocketBuffer = true, true, true, -1
	}},
	{"kernel-buffers", func(c *Config) { c.SocketBuffer = -1 }},
	{"1MiB-buffers", func(c *Config) { c.SocketBuffer = 1 << 20 }},
}

// TestFastPathSwitches downloads over loopback with each switch off and
// on, and checks the bytes and the ECN marks.
func TestFastPathSwitches(t *testing.T) {
	const size = 4 << 20
	for _, tc := range fastPathCases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			scfg := testServerConfig(t, "hq-interop")
			tc.set(scfg)
			ep, err := Listen("udp", "127.0.0.1:0", scfg)
			if err != nil {
				t.Fatal(err)
			}
			defer ep.Close()
			if ep.sock == nil {
				t.Fatal("no fast path on a UDP socket")
			}
			if ep.sock != nil && (ep.sock.groAllow == scfg.DisableGRO || ep.sock.batch == scfg.DisableBatching || ep.sock.gso == scfg.DisableGSO) {
				t.Fatalf("switches not applied: %+v", ep.sock)
			}
			// A download, as in TestLoopbackTransfer. (Uploads of several
			// megabytes stall now and then, with the old socket path too:
			// an engine issue, not one of I/O.)
			go serveSized(ctx, ep)
			ccfg := testClientConfig(t, "hq-interop")
			tc.set(ccfg)
			c, err := Dial(ctx, "udp", ep.Addr().String(), ccfg)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close(0, "")
			s, err := c.OpenStream(ctx)
			if err != nil {
				t.Fatal(err)
			}
			want := pattern(size)
			fmt.Fprintf(s, "GET /%d\r\n", size)
			s.CloseWrite()
			got, err := io.ReadAll(s)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("got %d bytes, want %d (mismatch)", len(got), size)
			}
			var ecnSeen bool
			c.run(ctx, func(time.Time) {
				ecnSeen = c.ecn.codepoint() == ect0 && c.stats.recv > 0
			})
			if !ecnSeen {
				t.Error("ECN marking stopped: the marks did not survive the fast path")
			}
			// GRO waits for groAfter datagrams, which a 4 MB download
			// passes many times over.
			if sock := c.localEndpoint().sock; sock != nil && sock.gro.Load() != sock.groAllow {
				t.Errorf("client GRO on = %v after the download, want %v", sock.gro.Load(), sock.groAllow)
			}
		})
	}
}

// TestSocketBufferSize checks that SocketBuffer reaches the socket, past
// net.core.rmem_max when running as root.
func TestSocketBufferSize(t *testing.T) {
	const size = 3 << 20
	cfg := testServerConfig(t, "hq-interop")
	cfg.SocketBuffer = size
	ep, err := Listen("udp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ep.Close()
	var rcv, snd int
	rc, _ := ep.udp.SyscallConn()
	rc.Control(func(fd uintptr) {
		rcv, _ = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF)
		snd, _ = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF)
	})
	// The kernel doubles the value it is given, for its bookkeeping.
	t.Logf("SO_RCVBUF %d, SO_SNDBUF %d", rcv, snd)
	if os.Geteuid() == 0 && (rcv < size || snd < size) {
		t.Errorf("as root, got SO_RCVBUF %d and SO_SNDBUF %d, want at least %d", rcv, snd, size)
	}
}

func TestParseGROSize(t *testing.T) {
	var oob []byte
	oob = appendCmsg(oob, unix.IPPROTO_IP, ipTOS, 2, 4)
	oob = appendCmsg(oob, unix.SOL_UDP, unix.UDP_GRO, 1452, 4)
	if got := parseGROSize(oob); got != 1452 {
		t.Errorf("parseGROSize = %d, want 1452", got)
	}
	if got := parseECN(oob); got != 2 {
		t.Errorf("parseECN = %d, want 2", got)
	}
	if got := parseGROSize(oob[:24]); got != 0 {
		t.Errorf("parseGROSize without UDP_GRO = %d, want 0", got)
	}
}

func TestSockaddrRoundTrip(t *testing.T) {
	for _, a := range []string{"127.0.0.1:4433", "[::1]:443", "[2001:db8::7]:65535"} {
		ap := netip.MustParseAddrPort(a)
		for _, fam := range []int{unix.AF_INET, unix.AF_INET6} {
			var q sendQueue
			q.setAddr(fam, ap)
			if got := sockaddrToAddrPort(&q.name); got != ap {
				t.Errorf("family %d: %v round-trips to %v", fam, ap, got)
			}
			if fam == unix.AF_INET && ap.Addr().Is4() && q.nameLen != unix.SizeofSockaddrInet4 {
				t.Errorf("IPv4 socket: name length %d", q.nameLen)
			}
		}
	}
	var sa unix.RawSockaddrInet6
	if unsafe.Sizeof(sa) < unix.SizeofSockaddrInet4 {
		t.Fatal("sockaddr buffer too small")
	}
}

func TestSendQueueCoalesces(t *testing.T) {
	q := getSendQueue(true)
	defer q.release()
	full := make([]byte, 1452)
	for i := 0; i < maxGSOSegments+2; i++ {
		if !q.add(full, ect0) {
			t.Fatal("queue full too early")
		}
	}
	q.add(full[:100], ect0) // closes the second run
	q.add(full, ect0)       // starts a third
	q.add(full, 0)          // another mark: a fourth
	want := []int{maxGSOSegments, 3, 1, 1}
	if len(q.msgs) != len(want) {
		t.Fatalf("%d messages, want %d", len(q.msgs), len(want))
	}
	for i, m := range q.msgs {
		if m.count != want[i] {
			t.Errorf("message %d carries %d datagrams, want %d", i, m.count, want[i])
		}
	}
	q2 := getSendQueue(false)
	defer q2.release()
	for i := 0; i < maxSendMsgs; i++ {
		if !q2.add(full, ect0) {
			t.Fatalf("queue without GSO full after %d", i)
		}
	}
	if q2.add(full, ect0) {
		t.Error("queue without GSO took more than maxSendMsgs messages")
	}
}

// TestSendQueueInPlace checks datagrams built in the queue's tail: they
// are queued without a copy, coalesce as added ones do, a datagram that
// outgrew the tail is copied, and tail keeps a message free.
func TestSendQueueInPlace(t *testing.T) {
	q := getSendQueue(true)
	defer q.release()
	build := func(n int, fill byte) []byte {
		b := q.tail(nil, netip.AddrPort{}, 2048)
		for range n {
			b = append(b, fill)
		}
		return b
	}
	for i := range 3 {
		d := build(1452, byte(i))
		q.commit(d, ect0)
		if &q.buf[len(q.buf)-1452] != &d[0] {
			t.Fatalf("datagram %d was copied, not queued in place", i)
		}
	}
	short := build(100, 9)
	q.commit(short, ect0) // closes the run
	if len(q.msgs) != 1 || q.msgs[0].count != 4 || !q.msgs[0].short {
		t.Fatalf("messages %+v, want one run of 4 closed by the short one", q.msgs)
	}
	for i := range 3 {
		if q.buf[i*1452] != byte(i) || q.buf[i*1452+1451] != byte(i) {
			t.Fatalf("segment %d holds the wrong bytes", i)
		}
	}
	if q.buf[3*1452] != 9 || len(q.buf) != 3*1452+100 {
		t.Fatalf("short datagram: first byte %d, queue %d bytes", q.buf[3*1452], len(q.buf))
	}
	// A datagram built elsewhere (as when append had to move it) is copied.
	other := make([]byte, 1452)
	other[0] = 7
	q.commit(other, 0)
	if len(q.msgs) != 2 || q.buf[len(q.buf)-1452] != 7 {
		t.Fatalf("moved datagram not copied in: %d messages", len(q.msgs))
	}
}

// BenchmarkLoopbackDownload transfers 16 MB per operation from a server
// to a client over loopback with each fast-path setting, and reports
// goodput and heap allocations per datagram (sent and received, both ends
// in this process).
func BenchmarkLoopbackDownload(b *testing.B) {
	const size = 16 << 20
	for _, tc := range fastPathCases[:5] {
		b.Run(tc.name, func(b *testing.B) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			scfg := testServerConfig(b, "hq-interop")
			tc.set(scfg)
			ep, err := Listen("udp", "127.0.0.1:0", scfg)
			if err != nil {
				b.Fatal(err)
			}
			defer ep.Close()
			chunk := pattern(1 << 20)
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
					io.ReadAll(s)
					for sent := 0; sent < size; sent += len(chunk) {
						if _, err := s.Write(chunk); err != nil {
							return
						}
					}
					s.CloseWrite()
				}
			}()
			ccfg := testClientConfig(b, "hq-interop")
			tc.set(ccfg)
			c, err := Dial(ctx, "udp", ep.Addr().String(), ccfg)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close(0, "")
			packets := func() uint64 {
				var n uint64
				c.run(ctx, func(time.Time) { n = c.stats.recv + c.stats.sent })
				return n
			}
			fetch := func() {
				s, _ := c.OpenStream(ctx)
				fmt.Fprintf(s, "GET /\r\n")
				s.CloseWrite()
				if n, err := io.Copy(io.Discard, s); err != nil || n != size {
					b.Fatalf("got %d bytes, err %v", n, err)
				}
			}
			fetch() // warm up: handshake done, pools and windows grown
			var ms0, ms1 runtime.MemStats
			runtime.ReadMemStats(&ms0)
			p0 := packets()
			b.SetBytes(size)
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				fetch()
			}
			el := time.Since(start)
			b.StopTimer()
			p1 := packets()
			runtime.ReadMemStats(&ms1)
			// The client's datagrams received and sent, doubled for the
			// server's sends and receives of the same datagrams.
			dgrams := 2 * float64(p1-p0)
			b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/dgrams, "allocs/datagram")
			b.ReportMetric(float64(size)*8*float64(b.N)/el.Seconds()/1e6, "goodput-Mbps")
		})
	}
}

// TestFastPathEnvironment checks the environment switches that benchmarks
// use for processes they do not configure.
func TestFastPathEnvironment(t *testing.T) {
	t.Setenv("QUIVER_DISABLE_GSO", "true")
	t.Setenv("QUIVER_DISABLE_GRO", "1")
	t.Setenv("QUIVER_DISABLE_BATCHING", "true")
	ep, err := Listen("udp", "127.0.0.1:0", testServerConfig(t, "hq-interop"))
	if err != nil {
		t.Fatal(err)
	}
	defer ep.Close()
	if ep.sock == nil || ep.sock.gso || ep.sock.groAllow || ep.sock.batch {
		t.Fatalf("environment switches not applied: %+v", ep.sock)
	}
}

// TestGROWaitsForTraffic checks that a connection that only handshakes
// leaves UDP_GRO off on its own socket: turning it on and off again costs
// the kernel more than the handshake's cryptography.
func TestGROWaitsForTraffic(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ep, err := Listen("udp", "127.0.0.1:0", testServerConfig(t, "hq-interop"))
	if err != nil {
		t.Fatal(err)
	}
	defer ep.Close()
	go serveSized(ctx, ep)
	c, err := Dial(ctx, "udp", ep.Addr().String(), testClientConfig(t, "hq-interop"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(0, "")
	sock := c.localEndpoint().sock
	if sock == nil || !sock.groAllow {
		t.Fatal("no fast path with GRO allowed")
	}
	if sock.gro.Load() {
		t.Fatal("GRO on after a handshake alone")
	}
	var on int
	rc, _ := c.localEndpoint().udp.SyscallConn()
	rc.Control(func(fd uintptr) { on, _ = unix.GetsockoptInt(int(fd), unix.SOL_UDP, unix.UDP_GRO) })
	if on != 0 {
		t.Fatalf("UDP_GRO = %d on the socket after a handshake alone", on)
	}
}
