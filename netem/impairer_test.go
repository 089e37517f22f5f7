package netem

import (
	"bytes"
	"math"
	"testing"
	"time"

	"github.com/quiver-quic/quiver/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// epoch is a fixed start so that Impairer tests never read the clock.
var epoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func newImpairer(t *testing.T, l Link, seed uint64) *Impairer {
	t.Helper()
	im, err := NewImpairer(l, seed)
	if err != nil {
		t.Fatal(err)
	}
	return im
}

func TestImpairerPerfectLink(t *testing.T) {
	im := newImpairer(t, Link{}, 1)
	for i := range 100 {
		now := epoch.Add(time.Duration(i) * time.Millisecond)
		v := im.Process(now, make([]byte, 1200))
		if v.Drop != NotDropped || v.Copies != 1 || !v.At[0].Equal(now) || v.Corrupt || v.Reordered {
			t.Fatalf("datagram %d: verdict %+v, want immediate delivery", i, v)
		}
	}
}

func TestImpairerRate(t *testing.T) {
	for _, tc := range []struct {
		rate  int64
		size  int
		n     int
		delay time.Duration
	}{
		{10e6, 1250, 1000, 10 * time.Millisecond}, // 1 ms per datagram
		{10e6, 1200, 1000, 15 * time.Millisecond}, // 960 µs
		{1e9, 1500, 10000, 0},                     // 12 µs
		{3e6, 1000, 999, 0},                       // 2666.67 µs: the carry must keep the total exact
	} {
		im := newImpairer(t, Link{Rate: tc.rate, Delay: tc.delay}, 1)
		var last time.Time
		for i := range tc.n {
			v := im.Process(epoch, make([]byte, tc.size))
			if v.Copies != 1 {
				t.Fatalf("rate %d: datagram %d dropped: %v", tc.rate, i, v.Drop)
			}
			if !v.At[0].After(last) {
				t.Fatalf("rate %d: datagram %d delivered at %v, not after %v", tc.rate, i, v.At[0], last)
			}
			last = v.At[0]
		}
		// N datagrams of S bytes at R take N*S*8/R, to the nanosecond.
		want := time.Duration(int64(tc.n)*int64(tc.size)*8*int64(time.Second)/tc.rate) + tc.delay
		if got := last.Sub(epoch); got != want {
			t.Errorf("rate %d, %d×%d B: last delivery after %v, want %v", tc.rate, tc.n, tc.size, got, want)
		}
	}
}

func TestImpairerRateIdleGap(t *testing.T) {
	// A datagram that arrives on an idle link starts at once; the link
	// does not bank unused time as credit.
	im := newImpairer(t, Link{Rate: 8e6}, 1) // 1 µs per byte
	v := im.Process(epoch, make([]byte, 1000))
	if got := v.At[0].Sub(epoch); got != time.Millisecond {
		t.Fatalf("first: %v", got)
	}
	now := epoch.Add(5 * time.Millisecond)
	v = im.Process(now, make([]byte, 1000))
	if got := v.At[0].Sub(now); got != time.Millisecond {
		t.Fatalf("after idle: %v, want 1ms", got)
	}
}

func TestImpairerQueue(t *testing.T) {
	// Packet limit: one datagram is serialised, QueuePackets wait, the rest
	// are tail-dropped.
	im := newImpairer(t, Link{Rate: 10e6, QueuePackets: 25}, 1)
	var delivered int
	for range 100 {
		if v := im.Process(epoch, make([]byte, 1250)); v.Copies == 1 {
			delivered++
		} else if v.Drop != DropQueue {
			t.Fatalf("drop cause %v, want queue", v.Drop)
		}
	}
	if delivered != 26 {
		t.Errorf("burst of 100 into a 25-packet queue: %d delivered, want 26", delivered)
	}
	// Once one serialisation time has passed, exactly one place is free.
	now := epoch.Add(time.Millisecond)
	if v := im.Process(now, make([]byte, 1250)); v.Copies != 1 {
		t.Errorf("after 1 ms: dropped, want a free place")
	}
	if v := im.Process(now, make([]byte, 1250)); v.Drop != DropQueue {
		t.Errorf("second after 1 ms: admitted, want the queue full")
	}
	if s := im.Stats(); s.LostQueue != 75 || s.Offered != 102 {
		t.Errorf("stats %+v", s)
	}

	// Byte limit, with per-datagram overhead counted.
	im = newImpairer(t, Link{Rate: 10e6, QueueBytes: 10000, Overhead: 28}, 1)
	delivered = 0
	for range 100 {
		if v := im.Process(epoch, make([]byte, 972)); v.Copies == 1 {
			delivered++
		}
	}
	if delivered != 11 { // 1 on the wire + 10×1000 B waiting
		t.Errorf("byte queue: %d delivered, want 11", delivered)
	}
}

func TestImpairerLossRatio(t *testing.T) {
	const n = 100000
	for _, tc := range []struct {
		loss   float64
		maxRun int
	}{
		{0.02, 0}, {0.3, 0}, {0.02, 3}, {0.3, 3}, {0.9, 3}, {0.5, 1},
	} {
		im := newImpairer(t, Link{Loss: tc.loss, MaxRun: tc.maxRun}, 42)
		run, lost := 0, 0
		for i := range n {
			v := im.Process(epoch.Add(time.Duration(i)), make([]byte, 100))
			if v.Drop == DropLoss {
				lost++
				run++
				if tc.maxRun > 0 && run > tc.maxRun {
					t.Fatalf("loss %v: %d losses in a row, cap %d", tc.loss, run, tc.maxRun)
				}
			} else {
				run = 0
			}
		}
		want := EffectiveLoss(tc.loss, tc.maxRun)
		got := float64(lost) / n
		// Four standard deviations of a binomial proportion: a fixed seed
		// makes the test stable, the tolerance makes it meaningful.
		tol := 4*math.Sqrt(want*(1-want)/n) + 1e-4
		if math.Abs(got-want) > tol {
			t.Errorf("loss %v cap %d: measured %.4f, want %.4f ± %.4f", tc.loss, tc.maxRun, got, want, tol)
		}
	}
}

func TestEffectiveLoss(t *testing.T) {
	// 30 % loss with runs capped at 3 leaves 29.4 % effective loss.
	if got := EffectiveLoss(0.3, 3); math.Abs(got-0.294) > 0.0005 {
		t.Errorf("EffectiveLoss(0.3, 3) = %v, want 29.4 %%", got)
	}
	if got := EffectiveLoss(0.02, 3); math.Abs(got-0.02) > 0.000002 {
		t.Errorf("EffectiveLoss(0.02, 3) = %v, want 2.0 %%", got)
	}
	if got := EffectiveLoss(1, 3); got != 0.75 {
		t.Errorf("EffectiveLoss(1, 3) = %v, want 3 of every 4", got)
	}
}

func TestImpairerGilbertElliott(t *testing.T) {
	const n = 200000
	ge := &GilbertElliott{P: 0.01, R: 0.2, LossGood: 0.001, LossBad: 0.5}
	im := newImpairer(t, Link{Burst: ge}, 7)
	lost, runs := 0, 0
	prev := false
	for i := range n {
		l := im.Process(epoch.Add(time.Duration(i)), make([]byte, 100)).Drop == DropLoss
		if l {
			lost++
			if !prev {
				runs++
			}
		}
		prev = l
	}
	want := (ge.R*ge.LossGood + ge.P*ge.LossBad) / (ge.P + ge.R)
	got := float64(lost) / n
	if math.Abs(got-want) > 0.1*want {
		t.Errorf("Gilbert-Elliott loss %.4f, want %.4f ± 10 %%", got, want)
	}
	// Bursty: the mean run is well above the 1/(1-p) of independent loss.
	if mean := float64(lost) / float64(runs); mean < 1.5 {
		t.Errorf("mean loss run %.2f, want clustered losses", mean)
	}
}

func TestImpairerBlackhole(t *testing.T) {
	im := newImpairer(t, Link{Blackholes: []Window{{5 * time.Second, 7 * time.Second}}}, 1)
	im.SetEpoch(epoch)
	for ms := 0; ms < 10000; ms++ {
		at := time.Duration(ms) * time.Millisecond
		v := im.Process(epoch.Add(at), []byte{1})
		in := at >= 5*time.Second && at < 7*time.Second
		if in != (v.Drop == DropBlackhole) {
			t.Fatalf("at t0+%v: drop %v, in window %v", at, v.Drop, in)
		}
	}
	if s := im.Stats(); s.LostBlackhole != 2000 {
		t.Errorf("dropped %d, want exactly the 2000 datagrams of the window", s.LostBlackhole)
	}

	// Repeated: on 5 s, off 2 s, forever.
	im = newImpairer(t, Link{Blackholes: []Window{{5 * time.Second, 7 * time.Second}}, BlackholePeriod: 7 * time.Second}, 1)
	im.SetEpoch(epoch)
	for _, c := range []struct {
		at   time.Duration
		drop bool
	}{{4999 * time.Millisecond, false}, {5 * time.Second, true}, {6999 * time.Millisecond, true}, {7 * time.Second, false}, {12 * time.Second, true}, {14 * time.Second, false}, {70*time.Second + 5*time.Second, true}} {
		if got := im.Process(epoch.Add(c.at), []byte{1}).Drop == DropBlackhole; got != c.drop {
			t.Errorf("repeat, t0+%v: dropped %v, want %v", c.at, got, c.drop)
		}
	}
}

func TestImpairerDropList(t *testing.T) {
	im := newImpairer(t, Link{DropList: []int{2, 3, 4, 5, 6, 7}}, 1)
	for i := 1; i <= 10; i++ {
		dropped := im.Process(epoch, []byte{byte(i)}).Drop == DropList
		if want := i >= 2 && i <= 7; dropped != want {
			t.Errorf("datagram %d: dropped %v, want %v", i, dropped, want)
		}
	}
}

func TestImpairerCorrupt(t *testing.T) {
	const n = 20000
	im := newImpairer(t, Link{Corrupt: 0.3, MaxRun: 3}, 3)
	orig := bytes.Repeat([]byte{0x40}, 1200) // a short header, never VN
	corrupted, run := 0, 0
	for i := range n {
		v := im.Process(epoch.Add(time.Duration(i)), orig)
		p := bytes.Clone(orig)
		v.Apply(p)
		diff := 0
		for j := range p {
			if p[j] != orig[j] {
				diff++
				if j >= 50 {
					t.Fatalf("byte %d corrupted, want within the first 50", j)
				}
			}
		}
		if v.Corrupt != (diff == 1) || diff > 1 {
			t.Fatalf("verdict corrupt=%v but %d bytes differ", v.Corrupt, diff)
		}
		if v.Corrupt {
			corrupted++
			if run++; run > 3 {
				t.Fatalf("%d corrupted in a row", run)
			}
		} else {
			run = 0
		}
	}
	want := EffectiveLoss(0.3, 3)
	if got := float64(corrupted) / n; math.Abs(got-want) > 0.015 {
		t.Errorf("corrupted %.4f, want %.4f", got, want)
	}

	// Version Negotiation is spared.
	vn := []byte{0xc0, 0, 0, 0, 0, 8, 1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 1}
	im = newImpairer(t, Link{Corrupt: 1}, 3)
	for range 100 {
		if im.Process(epoch, vn).Corrupt {
			t.Fatal("Version Negotiation packet corrupted")
		}
	}
	// A short datagram is corrupted within its length.
	for range 100 {
		v := im.Process(epoch, []byte{0x40, 1, 2})
		if !v.Corrupt || v.CorruptOffset >= 3 || v.CorruptXOR == 0 {
			t.Fatalf("short datagram: %+v", v)
		}
	}
}

func TestImpairerReorder(t *testing.T) {
	im := newImpairer(t, Link{Delay: 10 * time.Millisecond, Reorder: 0.1, ReorderDelay: 5 * time.Millisecond}, 9)
	var ats []time.Time
	reordered := 0
	for i := range 1000 {
		v := im.Process(epoch.Add(time.Duration(i)*time.Millisecond), []byte{1})
		ats = append(ats, v.At[0])
		if v.Reordered {
			reordered++
			if want := epoch.Add(time.Duration(i)*time.Millisecond + 15*time.Millisecond); !v.At[0].Equal(want) {
				t.Fatalf("reordered datagram %d at %v, want %v", i, v.At[0], want)
			}
		}
	}
	inversions := 0
	for i := 1; i < len(ats); i++ {
		if ats[i].Before(ats[i-1]) {
			inversions++
		}
	}
	if reordered < 50 || reordered > 150 || inversions == 0 {
		t.Errorf("reordered %d, inversions %d: want about 100 of each", reordered, inversions)
	}
}

func TestImpairerJitterKeepsOrder(t *testing.T) {
	im := newImpairer(t, Link{Delay: 20 * time.Millisecond, Jitter: 10 * time.Millisecond}, 5)
	var last time.Time
	spread := map[time.Duration]bool{}
	for i := range 1000 {
		now := epoch.Add(time.Duration(i) * 100 * time.Microsecond)
		v := im.Process(now, []byte{1})
		if v.At[0].Before(last) {
			t.Fatalf("datagram %d overtook its predecessor", i)
		}
		if d := v.At[0].Sub(now); d < 10*time.Millisecond || d > 30*time.Millisecond+time.Millisecond {
			t.Fatalf("datagram %d delayed %v, outside 20±10 ms (plus FIFO hold)", i, d)
		}
		spread[v.At[0].Sub(now).Round(time.Millisecond)] = true
		last = v.At[0]
	}
	if len(spread) < 5 {
		t.Errorf("delays take %d distinct values, want jitter", len(spread))
	}
}

func TestImpairerDuplicate(t *testing.T) {
	im := newImpairer(t, Link{Duplicate: 0.25, Rate: 10e6, Delay: time.Millisecond}, 11)
	dups := 0
	for i := range 4000 {
		v := im.Process(epoch.Add(time.Duration(i)*10*time.Millisecond), make([]byte, 1250))
		if v.Copies == 2 {
			dups++
			// The copy takes its own turn on the serialiser.
			if got := v.At[1].Sub(v.At[0]); got != time.Millisecond {
				t.Fatalf("copy %v after the original, want one serialisation time", got)
			}
		}
	}
	if dups < 900 || dups > 1100 {
		t.Errorf("%d duplicated of 4000, want about 1000", dups)
	}
	if s := im.Stats(); s.Duplicated != uint64(dups) {
		t.Errorf("stats say %d duplicated, counted %d", s.Duplicated, dups)
	}
}

func TestImpairerDeterministic(t *testing.T) {
	l := Link{Rate: 5e6, Delay: 7 * time.Millisecond, Jitter: time.Millisecond, Loss: 0.1, MaxRun: 2,
		Corrupt: 0.1, Reorder: 0.05, Duplicate: 0.05, QueuePackets: 10}
	run := func(seed uint64) []Verdict {
		im := newImpairer(t, l, seed)
		var out []Verdict
		for i := range 2000 {
			out = append(out, im.Process(epoch.Add(time.Duration(i)*500*time.Microsecond), make([]byte, 700)))
		}
		return out
	}
	a, b, c := run(1), run(1), run(2)
	same := func(x, y []Verdict) bool {
		for i := range x {
			if x[i] != y[i] {
				return false
			}
		}
		return true
	}
	if !same(a, b) {
		t.Error("same seed, different verdicts")
	}
	if same(a, c) {
		t.Error("different seeds, same verdicts")
	}
}

func TestLinkValidate(t *testing.T) {
	bad := []Link{
		{Loss: -0.1}, {Loss: 1.5}, {Loss: math.NaN()}, {Rate: -1}, {Delay: -time.Millisecond},
		{DropList: []int{0}}, {Blackholes: []Window{{2 * time.Second, time.Second}}},
		{Burst: &GilbertElliott{P: 2}},
	}
	for _, l := range bad {
		if _, err := NewImpairer(l, 1); err == nil {
			t.Errorf("%+v accepted", l)
		}
	}
	if err := (&Link{Rate: 1e6, Loss: 1, Corrupt: 0}).Validate(); err != nil {
		t.Errorf("valid link rejected: %v", err)
	}
}

// TestImpairerRandomConfigs is a property test: random links and traffic
// never panic, never deliver before arrival, and keep the counters
// consistent.
func TestImpairerRandomConfigs(t *testing.T) {
	r := newTestRand(99)
	for iter := range 300 {
		l := randomLink(r)
		im := newImpairer(t, l, uint64(iter))
		now := epoch
		var copies uint64
		for i := range 500 {
			now = now.Add(time.Duration(r.IntN(2000)) * time.Microsecond)
			p := make([]byte, r.IntN(1500))
			v := im.Process(now, p)
			if (v.Drop == NotDropped) != (v.Copies > 0) {
				t.Fatalf("iter %d #%d: drop %v with %d copies", iter, i, v.Drop, v.Copies)
			}
			for c := range v.Copies {
				if v.At[c].Before(now) {
					t.Fatalf("iter %d #%d: delivered before it arrived (%+v)", iter, i, l)
				}
			}
			copies += uint64(v.Copies)
		}
		s := im.Stats()
		if s.Offered != 500 || s.Offered-s.Dropped()+s.Duplicated != copies {
			t.Fatalf("iter %d: stats %+v, %d copies", iter, s, copies)
		}
	}
}
