package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quiver-quic/quiver/h3"
	"github.com/quiver-quic/quiver/qlog"
	"github.com/quiver-quic/quiver/quic"
	"github.com/quiver-quic/quiver/quic/wire"
	"github.com/quiver-quic/quiver/transfer"
)

// The engine features `quiver serve` exposes, each reached by an
// in-process client over loopback: with the flag the client sees the
// feature, without it (or with the opposite value) it does not.

// startServe runs `quiver serve` with flags on a free loopback port and
// returns its address; the server stops when the test ends.
func startServe(t *testing.T, flags ...string) string {
	t.Helper()
	root := t.TempDir()
	os.WriteFile(filepath.Join(root, "index.html"), []byte("hello\n"), 0o644)
	os.WriteFile(filepath.Join(root, "big.bin"), bytes.Repeat([]byte("0123456789abcdef"), 1<<16), 0o644) // 1 MiB
	ctx, cancel := context.WithCancel(context.Background())
	stderr := &lineWriter{re: regexp.MustCompile(`on (127\.0\.0\.1:\d+)`), got: make(chan string, 1)}
	done := make(chan int, 1)
	args := append([]string{"serve", "--addr", "127.0.0.1:0", "--root", root}, flags...)
	go func() { done <- run(ctx, args, new(bytes.Buffer), stderr) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case addr := <-stderr.got:
		return addr
	case code := <-done:
		done <- code
		t.Fatalf("serve %v exited with %d: %s", flags, code, stderr.buf.String())
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not report its address")
	}
	return ""
}

// dialServe connects to addr with hq-interop; edit adjusts the client.
func dialServe(t *testing.T, addr string, early bool, edit func(*quic.Config)) *quic.Conn {
	t.Helper()
	cfg := &quic.Config{TLSConfig: &tls.Config{ServerName: "localhost", InsecureSkipVerify: true, NextProtos: []string{h3.ALPNHQInterop}}}
	if edit != nil {
		edit(cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	dial := quic.Dial
	if early {
		dial = quic.DialEarly
	}
	c, err := dial(ctx, "udp", addr, cfg)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close(0, "") })
	return c
}

// fetchHQ downloads path over hq-interop and returns the body's length.
func fetchHQ(t *testing.T, c *quic.Conn, path string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	n, err := h3.GetHQ(ctx, h3.FromQUIC(c), path, io.Discard)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return n
}

// ticketCache is a session cache that says when a ticket arrives and
// whether it allows early data.
type ticketCache struct {
	tls.ClientSessionCache
	got chan bool
}

func (c *ticketCache) Put(key string, cs *tls.ClientSessionState) {
	c.ClientSessionCache.Put(key, cs)
	early := false
	if _, st, err := cs.ResumptionState(); err == nil && st != nil {
		early = st.EarlyData
	}
	select {
	case c.got <- early:
	default:
	}
}

func TestServeFlag0RTT(t *testing.T) {
	for _, on := range []bool{true, false} {
		var flags []string
		if on {
			flags = []string{"--0rtt"}
		}
		addr := startServe(t, flags...)
		cache := &ticketCache{ClientSessionCache: tls.NewLRUClientSessionCache(4), got: make(chan bool, 1)}
		edit := func(cfg *quic.Config) { cfg.TLSConfig.ClientSessionCache = cache; cfg.Allow0RTT = true }
		c := dialServe(t, addr, false, edit)
		fetchHQ(t, c, "/index.html")
		select {
		case early := <-cache.got:
			// RFC 9001 §4.6.1: a server that accepts 0-RTT says so in
			// its ticket's early_data extension.
			if early != on {
				t.Errorf("--0rtt %v: the ticket allows early data: %v", on, early)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("no session ticket")
		}
		c.Close(0, "")
		c2 := dialServe(t, addr, true, edit)
		if n := fetchHQ(t, c2, "/index.html"); n != 6 {
			t.Errorf("resumed fetch: %d bytes", n)
		}
		// The response came in 1-RTT packets, which the client opens only
		// after the server's Finished: the handshake is complete. Whether
		// the request itself left in 0-RTT depends on timing (on loopback
		// the handshake may finish first); without --0rtt it never does.
		if info := c2.ConnectionInfo(); !info.Resumed || (!on && info.Used0RTT) {
			t.Errorf("--0rtt %v: resumed %v, 0-RTT used %v", on, info.Resumed, info.Used0RTT)
		}
	}
}

func TestServeFlagDatagrams(t *testing.T) {
	withDgram := func(cfg *quic.Config) { cfg.MaxDatagramFrameSize = 65535 }
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	c := dialServe(t, startServe(t, "--datagrams", "echo", "--max-datagram-frame-size", "300"), false, withDgram)
	if err := c.SendDatagram(make([]byte, 400)); err == nil {
		t.Error("a 400-byte datagram went to a server whose max_datagram_frame_size is 300")
	}
	if err := c.SendDatagram([]byte("quiver datagram")); err != nil {
		t.Fatal(err)
	}
	if b, err := c.ReceiveDatagram(ctx); err != nil || string(b) != "quiver datagram" {
		t.Errorf("echo: %q, %v", b, err)
	}

	c = dialServe(t, startServe(t, "--datagrams", "discard"), false, withDgram)
	for i := 0; i < 20; i++ {
		if err := c.SendDatagram(make([]byte, 1000)); err != nil {
			t.Fatal(err)
		}
	}
	fetchHQ(t, c, "/index.html")
	done, stop := context.WithCancel(ctx)
	stop()
	if b, err := c.ReceiveDatagram(done); err == nil {
		t.Errorf("discard mode sent back %d bytes", len(b))
	}

	c = dialServe(t, startServe(t), false, withDgram)
	if err := c.SendDatagram([]byte("x")); !errors.Is(err, quic.ErrDatagramsNotNegotiated) {
		t.Errorf("default (off): SendDatagram = %v", err)
	}
}

func TestServeFlagGreaseQUICBit(t *testing.T) {
	for _, on := range []bool{true, false} {
		addr := startServe(t, "--grease-quic-bit="+map[bool]string{true: "true", false: "false"}[on])
		var mu sync.Mutex
		cleared, short := 0, 0
		c := dialServe(t, addr, false, func(cfg *quic.Config) {
			cfg.Probe = &quic.Probe{OnSendDatagram: func(b []byte) [][]byte {
				if len(b) > 0 && b[0]&0x80 == 0 {
					mu.Lock()
					short++
					if b[0]&0x40 == 0 {
						cleared++
					}
					mu.Unlock()
				}
				return [][]byte{b}
			}}
		})
		fetchHQ(t, c, "/big.bin")
		mu.Lock()
		// The client greases (clears at random) the QUIC bit only when
		// the server advertised grease_quic_bit (RFC 9287 §3).
		if short < 20 || (cleared > 0) != on {
			t.Errorf("--grease-quic-bit=%v: the client cleared the QUIC bit on %d of %d short-header datagrams", on, cleared, short)
		}
		mu.Unlock()
	}
}

func TestServeFlagKeyUpdateInterval(t *testing.T) {
	for _, tc := range []struct {
		flags []string
		moved bool
	}{{[]string{"--key-update-interval", "100"}, true}, {nil, false}} {
		c := dialServe(t, startServe(t, tc.flags...), false, nil)
		fetchHQ(t, c, "/big.bin")
		if g := c.Stats().KeyGeneration; (g > 0) != tc.moved {
			t.Errorf("%v: key generation %d after 1 MiB", tc.flags, g)
		}
	}
}

func TestServeFlagAckFrequency(t *testing.T) {
	// --min-ack-delay 0 turns the extension off: the client may not send
	// ACK_FREQUENCY.
	c := dialServe(t, startServe(t, "--min-ack-delay", "0"), false, nil)
	if err := c.SetAckFrequency(4, 25*time.Millisecond, 1); !errors.Is(err, quic.ErrAckFrequencyNotNegotiated) {
		t.Errorf("--min-ack-delay 0: SetAckFrequency = %v", err)
	}
	c = dialServe(t, startServe(t), false, nil)
	if err := c.SetAckFrequency(4, 25*time.Millisecond, 1); err != nil {
		t.Errorf("default: SetAckFrequency = %v", err)
	}
	// --ack-ratio: the server, as the data sender, asks the client to
	// acknowledge less often.
	for _, tc := range []struct {
		flags []string
		want  bool
	}{{[]string{"--ack-ratio", "8"}, true}, {nil, false}} {
		var mu sync.Mutex
		got := 0
		c := dialServe(t, startServe(t, tc.flags...), false, func(cfg *quic.Config) {
			cfg.Probe = &quic.Probe{OnPacketReceived: func(pi quic.PacketInfo) {
				for b := pi.Payload; len(b) > 0; {
					f, n, err := wire.ParseFrame(b)
					if err != nil || n == 0 {
						return
					}
					if _, ok := f.(*wire.AckFrequencyFrame); ok {
						mu.Lock()
						got++
						mu.Unlock()
					}
					b = b[n:]
				}
			}}
		})
		fetchHQ(t, c, "/big.bin")
		mu.Lock()
		if (got > 0) != tc.want {
			t.Errorf("%v: %d ACK_FREQUENCY frames from the server during 1 MiB", tc.flags, got)
		}
		mu.Unlock()
	}
}

func TestServeFlagVersions(t *testing.T) {
	offer := func(cfg *quic.Config) { cfg.Versions = []uint32{quic.Version1, quic.Version2} }
	for _, tc := range []struct {
		versions string
		want     uint32
	}{{"2,1", quic.Version2}, {"1,2", quic.Version1}} {
		c := dialServe(t, startServe(t, "--versions", tc.versions), false, offer)
		if v := c.ConnectionInfo().Version; v != tc.want {
			t.Errorf("--versions %s with a v1 client offering v2: version 0x%08x, want 0x%08x", tc.versions, v, tc.want)
		}
	}
	// A server of v2 only answers a v1 Initial with Version Negotiation;
	// a client of v1 only then has no version to go on with.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cfg := &quic.Config{TLSConfig: &tls.Config{InsecureSkipVerify: true, NextProtos: []string{h3.ALPNHQInterop}}, Versions: []uint32{quic.Version1}}
	if c, err := quic.Dial(ctx, "udp", startServe(t, "--versions", "2"), cfg); err == nil {
		c.Close(0, "")
		t.Error("a v1-only client reached a --versions 2 server")
	}
}

// paramsRecorder keeps the peer's transport parameters from qlog.
type paramsRecorder struct {
	mu   sync.Mutex
	peer *qlog.ParametersSet
}

func (r *paramsRecorder) Enabled() bool { return true }
func (r *paramsRecorder) Record(_ time.Time, ev qlog.Event) {
	if p, ok := ev.(qlog.ParametersSet); ok && p.Owner == qlog.OwnerRemote {
		r.mu.Lock()
		r.peer = &p
		r.mu.Unlock()
	}
}

func TestServeFlagTransportParameters(t *testing.T) {
	addr := startServe(t, "--idle-timeout", "7s", "--max-ack-delay", "40ms", "--max-streams-bidi", "7", "--max-streams-uni", "0",
		"--max-data", "100000", "--max-stream-data", "50000", "--max-udp-payload-size", "1400", "--active-cid-limit", "6")
	rec := &paramsRecorder{}
	c := dialServe(t, addr, false, func(cfg *quic.Config) {
		cfg.Tracer = func([]byte, bool) qlog.Recorder { return rec }
	})
	rec.mu.Lock()
	p := rec.peer
	rec.mu.Unlock()
	if p == nil {
		t.Fatal("no transport parameters from the server")
	}
	want := qlog.ParametersSet{MaxIdleTimeout: 7 * time.Second, MaxAckDelay: 40 * time.Millisecond, InitialMaxStreamsBidi: 7,
		InitialMaxData: 100000, InitialMaxStreamDataBidiRemote: 50000, MaxUDPPayloadSize: 1400}
	if p.MaxIdleTimeout != want.MaxIdleTimeout || p.MaxAckDelay != want.MaxAckDelay || p.InitialMaxStreamsBidi != 7 || p.InitialMaxStreamsUni != 0 ||
		p.InitialMaxData != want.InitialMaxData || p.InitialMaxStreamDataBidiRemote != want.InitialMaxStreamDataBidiRemote ||
		p.MaxUDPPayloadSize != want.MaxUDPPayloadSize || p.ActiveConnectionIDLimit != 6 {
		t.Errorf("server's transport parameters: %+v", *p)
	}
	// The limits hold: 7 requests at once, not 8.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := 0; i < 7; i++ {
		if _, err := c.OpenStream(ctx); err != nil {
			t.Fatal(err)
		}
	}
	short, stop := context.WithCancel(ctx)
	stop()
	if _, err := c.OpenStream(short); err == nil {
		t.Error("an 8th stream opened with --max-streams-bidi 7")
	}
}

func TestServeFlagPathMTU(t *testing.T) {
	for _, tc := range []struct {
		flags    []string
		min, max int // of the largest datagram from the server
	}{{[]string{"--max-packet-size", "1400"}, 1201, 1400}, {[]string{"--pmtud=false"}, 1200, 1200}} {
		var mu sync.Mutex
		largest := 0
		c := dialServe(t, startServe(t, tc.flags...), false, func(cfg *quic.Config) {
			cfg.Probe = &quic.Probe{OnPacketReceived: func(pi quic.PacketInfo) {
				if pi.Type == wire.PacketType1RTT {
					mu.Lock()
					largest = max(largest, pi.DatagramSize)
					mu.Unlock()
				}
			}}
		})
		fetchHQ(t, c, "/big.bin")
		mu.Lock()
		if largest < tc.min || largest > tc.max {
			t.Errorf("%v: largest 1-RTT datagram %d bytes, want %d to %d", tc.flags, largest, tc.min, tc.max)
		}
		mu.Unlock()
	}
}

func TestServeFlagCIDLength(t *testing.T) {
	for _, n := range []int{4, 0, 20} {
		var mu sync.Mutex
		lens := map[int]bool{}
		c := dialServe(t, startServe(t, "--cid-len", strconv.Itoa(n)), false, func(cfg *quic.Config) {
			cfg.Probe = &quic.Probe{OnPacketReceived: func(pi quic.PacketInfo) {
				if pi.Type == wire.PacketTypeHandshake {
					mu.Lock()
					lens[len(pi.SCID)] = true
					mu.Unlock()
				}
			}}
		})
		fetchHQ(t, c, "/index.html")
		mu.Lock()
		if len(lens) != 1 || !lens[n] {
			t.Errorf("--cid-len %d: server connection ID lengths %v", n, lens)
		}
		mu.Unlock()
	}
}

// TestServeConfigMapping checks what the client cannot see from outside
// (the congestion controller, ECN marking) and the defaults: the flags'
// defaults are the engine's.
func TestServeConfigMapping(t *testing.T) {
	o, err := parseServeFlags([]string{"--cc", "reno", "--ecn=false", "--datagrams", "echo"})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := o.serverConfig()
	if err != nil {
		t.Fatal(err)
	}
	var q quic.Config
	cfg.EditQUIC(&q)
	if q.Congestion != quic.NewReno || !q.DisableECN || cfg.Datagrams != transfer.DatagramsEcho || cfg.MaxDatagramFrameSize != 65535 {
		t.Errorf("mapped to %+v / %+v", q, cfg)
	}
	o, _ = parseServeFlags(nil)
	cfg, _ = o.serverConfig()
	q = quic.Config{}
	cfg.EditQUIC(&q)
	if q.MinAckDelay != time.Millisecond || q.MaxIdleTimeout != 30*time.Second || q.MaxBidiStreams != 100 || q.ConnectionIDLength != 8 ||
		q.DisableGreaseQUICBit || q.DisablePathMTUDiscovery || q.DisableECN || q.KeyUpdateInterval != 0 || cfg.Allow0RTT || cfg.Datagrams != transfer.DatagramsOff {
		t.Errorf("defaults differ from the engine's: %+v", q)
	}
}

func TestServeFlagErrors(t *testing.T) {
	badKey := filepath.Join(t.TempDir(), "short.key")
	os.WriteFile(badKey, []byte("abcd\n"), 0o600)
	for _, args := range [][]string{
		{"--datagrams", "mirror"}, {"--max-datagram-frame-size", "0"}, {"--versions", "3"}, {"--versions", "1,1"}, {"--versions", ""},
		{"--ack-ratio", "fast"}, {"--ack-ratio", "4", "--min-ack-delay", "0"}, {"--idle-timeout", "-1s"}, {"--max-ack-delay", "20s"},
		{"--min-ack-delay", "30ms"}, {"--max-streams-bidi", "-1"}, {"--max-data", "0"}, {"--max-udp-payload-size", "1000"},
		{"--max-packet-size", "9000"}, {"--cid-len", "21"}, {"--cc", "bbr"}, {"--active-cid-limit", "1"},
		{"--stateless-reset-key", badKey},
	} {
		var out, errb bytes.Buffer
		if code := run(context.Background(), append([]string{"serve", "--root", t.TempDir()}, args...), &out, &errb); code != 2 {
			t.Errorf("%v: exit %d (%s), want a usage error", args, code, errb.String())
		}
	}
}

// TestServeFlagStatelessResetKey: two servers with one key answer an
// unknown connection ID with the same stateless reset token, the one the
// first gave for that ID in its transport parameters (RFC 9000 §10.3.2),
// so a restarted server can reset the connections it forgot; a server
// with its own random key cannot.
func TestServeFlagStatelessResetKey(t *testing.T) {
	key := filepath.Join(t.TempDir(), "reset.key")
	os.WriteFile(key, []byte(strings.Repeat("5a", 32)+"\n"), 0o600)
	first := startServe(t, "--stateless-reset-key", key)
	rec := &paramsRecorder{}
	var mu sync.Mutex
	var serverCID []byte
	dialServe(t, first, false, func(cfg *quic.Config) {
		cfg.Tracer = func([]byte, bool) qlog.Recorder { return rec }
		cfg.Probe = &quic.Probe{OnPacketReceived: func(pi quic.PacketInfo) {
			if pi.Type == wire.PacketTypeHandshake {
				mu.Lock()
				serverCID = append([]byte(nil), pi.SCID...)
				mu.Unlock()
			}
		}}
	})
	rec.mu.Lock()
	token := []byte(rec.peer.StatelessResetToken)
	rec.mu.Unlock()
	mu.Lock()
	cid := serverCID
	mu.Unlock()
	if len(token) != 16 || len(cid) == 0 {
		t.Fatalf("token %x, server connection ID %x", token, cid)
	}
	resetFrom := func(addr string) []byte {
		t.Helper()
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer pc.Close()
		ua, _ := net.ResolveUDPAddr("udp", addr)
		// A short-header packet for the first server's connection ID.
		pkt := append([]byte{0x41}, cid...)
		pkt = append(pkt, bytes.Repeat([]byte{0xa7}, 1200-len(pkt))...)
		if _, err := pc.WriteTo(pkt, ua); err != nil {
			t.Fatal(err)
		}
		pc.SetReadDeadline(time.Now().Add(20 * time.Second))
		buf := make([]byte, 2048)
		n, _, err := pc.ReadFrom(buf)
		if err != nil || n < 21 {
			t.Fatalf("no stateless reset from %s: %d bytes, %v", addr, n, err)
		}
		return buf[n-16 : n]
	}
	if got := resetFrom(startServe(t, "--stateless-reset-key", key)); !bytes.Equal(got, token) {
		t.Errorf("same key: reset token %x, want %x", got, token)
	}
	if got := resetFrom(startServe(t)); bytes.Equal(got, token) {
		t.Errorf("a random key gave the same token %x", got)
	}
}
