package bench

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/quiver-quic/quiver/quic"
)

// TestAckFreqDelayMode checks the "N@D" ratios (a fixed Requested Max Ack
// Delay, the study's 25 ms) from the command line to the engine
// configuration of the bench's Quiver server, and that the plain ratio
// keeps smoothed RTT / 4.
func TestAckFreqDelayMode(t *testing.T) {
	cs, err := AckFreqConfigs([]string{"lossy"}, []string{"10", "10@25ms", "adaptive", "strict"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range cs {
		names = append(names, c.Name)
	}
	if want := []string{"lossy/1:10", "lossy/1:10@25ms", "lossy/adaptive", "lossy/strict"}; !slices.Equal(names, want) {
		t.Fatalf("configs %v, want %v", names, want)
	}
	if cs[1].Knobs.AckDelay != 25*time.Millisecond || cs[0].Knobs.AckDelay != 0 {
		t.Errorf("delays %v, %v", cs[0].Knobs.AckDelay, cs[1].Knobs.AckDelay)
	}
	if cs[1].Path.Down.Loss != 0.01 || cs[1].Path.Up.Loss != 0.01 {
		t.Errorf("lossy path: %+v", cs[1].Path)
	}
	if args := quiverOwnArgs(cs[1].Knobs); !slices.Contains(args, "--ack-delay") || !slices.Contains(args, "25ms") {
		t.Errorf("endpoint args %v lack --ack-delay 25ms", args)
	}
	if k := cs[3].Knobs; k.AckRatio != 2 || !k.StrictAcks || !slices.Contains(quiverOwnArgs(k), "--strict-acks") {
		t.Errorf("strict: knobs %+v, args %v", k, quiverOwnArgs(k))
	}
	var scfg, ccfg quic.Config
	QuiverEndpointConfig{AckRatio: 2, StrictAcks: true}.apply(&scfg, true)
	QuiverEndpointConfig{AckRatio: 2, StrictAcks: true}.apply(&ccfg, false)
	if scfg.StrictAcks || !ccfg.StrictAcks || ccfg.AckFrequency.Ratio != 0 || scfg.AckFrequency.Ratio != 0 {
		t.Errorf("strict 1:2: server %v %+v, client %v %+v; want only the client strict and no policy",
			scfg.StrictAcks, scfg.AckFrequency, ccfg.StrictAcks, ccfg.AckFrequency)
	}
	for _, bad := range []string{"2@25ms", "adaptive@25ms", "10@", "10@-1ms", "10@soon"} {
		if _, err := AckFreqConfigs([]string{"terrestrial"}, []string{bad}); err == nil {
			t.Errorf("ratio %q accepted", bad)
		}
	}
	for _, x := range []struct {
		q    QuiverEndpointConfig
		want time.Duration
	}{
		{QuiverEndpointConfig{AckRatio: 10}, -1},
		{QuiverEndpointConfig{AckRatio: 10, AckDelay: 25 * time.Millisecond}, 25 * time.Millisecond},
	} {
		var srv, cli quic.Config
		if err := x.q.apply(&srv, true); err != nil {
			t.Fatal(err)
		}
		if err := x.q.apply(&cli, false); err != nil {
			t.Fatal(err)
		}
		if srv.AckFrequency.Ratio != 10 || srv.AckFrequency.MaxAckDelay != x.want {
			t.Errorf("%+v: server policy %+v, want ratio 10, delay %v", x.q, srv.AckFrequency, x.want)
		}
		if cli.AckFrequency != (quic.AckFrequencyPolicy{}) {
			t.Errorf("%+v: the client got a policy %+v", x.q, cli.AckFrequency)
		}
	}
}

// FuzzAckFreqRatios feeds arbitrary --ratios values to AckFreqConfigs: an
// error or configurations whose knobs say what their names say, never a
// panic.
func FuzzAckFreqRatios(f *testing.F) {
	for _, s := range []string{"2", "10@25ms", "1:64@1s", "adaptive", "adaptive@5ms", "10@", "@", "0", "-3", "10@-1ms"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, ratio string) {
		cs, err := AckFreqConfigs([]string{"terrestrial"}, []string{ratio})
		if err != nil {
			return
		}
		if len(cs) != 1 {
			t.Fatalf("%q: %d configs", ratio, len(cs))
		}
		k := cs[0].Knobs
		if k.AckRatio == 0 || k.AckRatio < -1 || k.AckDelay < 0 || (k.AckDelay > 0) != strings.Contains(cs[0].Name, "@") {
			t.Fatalf("%q: config %q with knobs %+v", ratio, cs[0].Name, k)
		}
	})
}
