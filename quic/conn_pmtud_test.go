package quic

import (
	"net/netip"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quiver-quic/quiver/qlog"
)

var pmtudEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// runSearch drives a search over a path that carries datagrams of at
// most mtu bytes and returns the size it settles at and the probes sent.
func runSearch(t *testing.T, s *pmtudState, now time.Time, mtu int) (int, int) {
	t.Helper()
	pn := uint64(100)
	for i := 0; i < 100; i++ {
		size, ok := s.probeDue(now)
		if !ok {
			return s.cur, s.probesSent
		}
		pn++
		s.onProbeSent(pn, size)
		if size <= mtu {
			s.onProbeAcked(now, pn, size)
		} else {
			s.onProbeLost(now, pn, size)
		}
	}
	t.Fatalf("search did not end: %+v", s)
	return 0, 0
}

// TestPMTUDSearch: the search finds the largest size the path carries,
// exactly, trying the largest allowed size first.
func TestPMTUDSearch(t *testing.T) {
	for _, tc := range []struct{ mtu, want, maxProbes int }{
		{1452, 1452, 1},  // the common case: one probe
		{1500, 1452, 1},  // the path carries more than we send
		{1300, 1300, 30}, // binary search, 3 losses per failing size
		{1201, 1201, 30},
		{1200, 1200, 30},
		{1451, 1451, 30},
	} {
		var s pmtudState
		s.init(true, 1200, 1452)
		s.start(pmtudEpoch, 1452)
		got, probes := runSearch(t, &s, pmtudEpoch, tc.mtu)
		if got != tc.want || probes > tc.maxProbes {
			t.Errorf("path MTU %d: settled at %d after %d probes, want %d within %d probes", tc.mtu, got, probes, tc.want, tc.maxProbes)
		}
		if got < 1452 && s.raiseAt != pmtudEpoch.Add(pmtudRaiseInterval) {
			t.Errorf("path MTU %d: raise timer %v", tc.mtu, s.raiseAt)
		}
	}
}

// TestPMTUDPeerLimitAndDisabled: the search stays within the peer's
// max_udp_payload_size, and a disabled search never probes.
func TestPMTUDPeerLimitAndDisabled(t *testing.T) {
	var s pmtudState
	s.init(true, 1200, 1452)
	s.start(pmtudEpoch, 1350)
	if got, _ := runSearch(t, &s, pmtudEpoch, 9000); got != 1350 {
		t.Errorf("settled at %d, want the peer's limit 1350", got)
	}
	var d pmtudState
	d.init(false, 1280, 1452)
	d.start(pmtudEpoch, 1452)
	if _, ok := d.probeDue(pmtudEpoch.Add(time.Hour)); ok || d.cur != 1280 {
		t.Errorf("disabled: probe due %v, size %d", ok, d.cur)
	}
}

// TestPMTUDRaiseTimer: after settling below the maximum the sender probes
// again when PMTU_RAISE_TIMER expires, and finds a path that grew.
func TestPMTUDRaiseTimer(t *testing.T) {
	var s pmtudState
	s.init(true, 1200, 1452)
	s.start(pmtudEpoch, 1452)
	runSearch(t, &s, pmtudEpoch, 1300)
	if _, ok := s.probeDue(pmtudEpoch.Add(pmtudRaiseInterval - time.Second)); ok {
		t.Fatal("probe before the raise timer")
	}
	if d := s.deadline(); d != pmtudEpoch.Add(pmtudRaiseInterval) {
		t.Fatalf("deadline %v", d)
	}
	later := pmtudEpoch.Add(pmtudRaiseInterval)
	if got, _ := runSearch(t, &s, later, 1400); got != 1400 {
		t.Errorf("after the raise timer settled at %d, want 1400", got)
	}
}

// TestPMTUDBlackHole: losses of large packets after the last large one
// acknowledged bring the size back to the base; congestion losses of
// packets older than an acknowledged large packet do not.
func TestPMTUDBlackHole(t *testing.T) {
	var s pmtudState
	s.init(true, 1200, 1452)
	s.start(pmtudEpoch, 1452)
	runSearch(t, &s, pmtudEpoch, 1452)
	s.onPacketAcked(10, 1452)
	// Congestion: 5 older packets lost, a later one acknowledged.
	for pn := uint64(1); pn <= 5; pn++ {
		if s.onPacketLost(pmtudEpoch, pn, 1452) {
			t.Fatal("congestion losses taken for a black hole")
		}
	}
	// Small packets do not count either way.
	for pn := uint64(11); pn <= 20; pn++ {
		if s.onPacketLost(pmtudEpoch, pn, 1200) {
			t.Fatal("base-size losses taken for a black hole")
		}
	}
	var hole bool
	for pn := uint64(21); pn <= 23; pn++ {
		hole = s.onPacketLost(pmtudEpoch, pn, 1452)
	}
	if !hole || s.cur != 1200 || s.blackHoles != 1 {
		t.Fatalf("after 3 large losses: black hole %v, size %d", hole, s.cur)
	}
	// The search starts again from the old size down.
	if got, _ := runSearch(t, &s, pmtudEpoch, 1280); got != 1280 {
		t.Errorf("after the black hole settled at %d, want 1280", got)
	}
}

// pmtuPath is a memNet policy that drops datagrams larger than its limit.
type pmtuPath struct {
	mu      sync.Mutex
	limit   int
	dropped int
	largest map[netip.AddrPort]int // largest datagram delivered, by sender
}

func (p *pmtuPath) policy(_ int, from, _ netip.AddrPort, b []byte) (bool, time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(b) > p.limit {
		p.dropped++
		return true, 0
	}
	if p.largest == nil {
		p.largest = map[netip.AddrPort]int{}
	}
	p.largest[from] = max(p.largest[from], len(b))
	return false, 0
}

func (p *pmtuPath) set(limit int) {
	p.mu.Lock()
	p.limit = limit
	p.largest = nil
	p.mu.Unlock()
}

// fetchUntilSettled downloads in 200 kB steps (a round trip or two each)
// until both searches have ended: a binary search with three probes
// per failing size costs about twenty round trips.
func fetchUntilSettled(t *testing.T, c *Conn, sc *Conn) {
	t.Helper()
	for i := 0; i < 40; i++ {
		searching := false
		for _, x := range []*Conn{c, sc} {
			x.run(t.Context(), func(time.Time) { searching = searching || x.pmtud.searching || x.pmtud.probeSize != 0 })
		}
		if !searching {
			return
		}
		if err := fetch(t.Context(), c, 200_000); err != nil {
			t.Fatal(err)
		}
	}
	t.Fatal("the path MTU searches did not end")
}

// TestPMTUDSettles: over a path that drops datagrams above 1350 bytes the
// connection finds 1350 exactly and a 2 MB download completes.
func TestPMTUDSettles(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newMemNet(10 * time.Millisecond)
		path := &pmtuPath{limit: 1350}
		n.policy = path.policy
		var rec qlog.MemoryRecorder
		scfg := testServerConfig(t, "hq-interop")
		scfg.Tracer = func([]byte, bool) qlog.Recorder { return &rec }
		sep, cep, c, err := pair(t, n, scfg, testClientConfig(t, "hq-interop"))
		defer sep.Close()
		defer cep.Close()
		if err != nil {
			t.Fatal(err)
		}
		if err := fetch(t.Context(), c, 2<<20); err != nil {
			t.Fatal(err)
		}
		fetchUntilSettled(t, c, serverConn(sep))
		sst := serverConn(sep).Stats()
		cst := c.Stats()
		if sst.MaxDatagramSize != 1350 || cst.MaxDatagramSize != 1350 {
			t.Errorf("max datagram size: server %d, client %d; want 1350", sst.MaxDatagramSize, cst.MaxDatagramSize)
		}
		if got := c.ConnectionInfo().MaxDatagramSize; got != 1350 {
			t.Errorf("ConnectionInfo.MaxDatagramSize %d", got)
		}
		if sst.PMTUProbesLost < pmtudMaxProbes {
			t.Errorf("server: %d probes lost, want at least %d", sst.PMTUProbesLost, pmtudMaxProbes)
		}
		path.mu.Lock()
		largest := path.largest[netip.MustParseAddrPort(testServerAddr)]
		path.mu.Unlock()
		if largest != 1350 {
			t.Errorf("largest datagram delivered from the server: %d, want 1350", largest)
		}
		// qlog: the sizes climb from 1200 to 1350 and the last update
		// ends the search.
		evs := qlog.EventsOf[qlog.MTUUpdated](&rec)
		if len(evs) < 2 || evs[0].New != 1200 || evs[len(evs)-1].New != 1350 || !evs[len(evs)-1].Done {
			t.Errorf("mtu_updated events %+v", evs)
		}
		for i := 1; i < len(evs); i++ {
			if evs[i].New <= evs[i-1].New || evs[i].Old != evs[i-1].New {
				t.Errorf("mtu_updated %d: %+v after %+v", i, evs[i], evs[i-1])
			}
		}
		c.Close(0, "")
	})
}

// TestPMTUDBlackHoleRecovers: the path MTU shrinks from 1500 to 1300 in
// the middle of a download. The server notices full-size packets no longer
// arrive, falls back, finds 1300 and finishes the download.
func TestPMTUDBlackHoleRecovers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newMemNet(10 * time.Millisecond)
		path := &pmtuPath{limit: 1500}
		n.policy = path.policy
		sep, cep, c, err := pair(t, n, testServerConfig(t, "hq-interop"), testClientConfig(t, "hq-interop"))
		defer sep.Close()
		defer cep.Close()
		if err != nil {
			t.Fatal(err)
		}
		if err := fetch(t.Context(), c, 100_000); err != nil {
			t.Fatal(err)
		}
		sc := serverConn(sep)
		if got := sc.Stats().MaxDatagramSize; got != 1452 {
			t.Fatalf("before the change the server sends %d-byte datagrams, want 1452", got)
		}
		done := make(chan error)
		go func() { done <- fetch(t.Context(), c, 4<<20) }()
		time.Sleep(100 * time.Millisecond)
		path.set(1300)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		fetchUntilSettled(t, c, sc)
		st := sc.Stats()
		if st.PMTUBlackHoles < 1 || st.MaxDatagramSize != 1300 {
			t.Errorf("server: %d black holes, size %d; want at least 1 and 1300", st.PMTUBlackHoles, st.MaxDatagramSize)
		}
		// The black hole is noticed within a window's worth of losses,
		// not after thousands.
		if lost := st.PacketsLost - uint64(st.PMTUProbesLost); lost > 1500 {
			t.Errorf("server lost %d packets besides probes", lost)
		}
		c.Close(0, "")
	})
}

// TestPMTUDDisabled: with DisablePathMTUDiscovery the connection sends no
// probes and keeps InitialPacketSize.
func TestPMTUDDisabled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newMemNet(10 * time.Millisecond)
		path := &pmtuPath{limit: 1500}
		n.policy = path.policy
		scfg := testServerConfig(t, "hq-interop")
		scfg.DisablePathMTUDiscovery = true
		scfg.InitialPacketSize = 1280
		sep, cep, c, err := pair(t, n, scfg, testClientConfig(t, "hq-interop"))
		defer sep.Close()
		defer cep.Close()
		if err != nil {
			t.Fatal(err)
		}
		if err := fetch(t.Context(), c, 200_000); err != nil {
			t.Fatal(err)
		}
		st := serverConn(sep).Stats()
		path.mu.Lock()
		largest := path.largest[netip.MustParseAddrPort(testServerAddr)]
		path.mu.Unlock()
		if st.PMTUProbes != 0 || st.MaxDatagramSize != 1280 || largest != 1280 {
			t.Errorf("disabled: %d probes, size %d, largest datagram %d; want 0, 1280, 1280", st.PMTUProbes, st.MaxDatagramSize, largest)
		}
		c.Close(0, "")
	})
}
