package conformance

import (
	"strings"
	"testing"

	"github.com/quiver-quic/quiver/quic"
	"github.com/quiver-quic/quiver/quic/wire"
)

// expectSentence runs one scenario against addr and checks its verdict and
// that its sentence contains want (for scenarios cited from knowledge,
// whose judgements report observed with the verdict they would have).
func expectSentence(t *testing.T, name, addr, id string, v Verdict, want string) {
	t.Helper()
	rep := runSuite(t, Target{Name: name, Address: addr, ALPN: []string{"hq-interop"}, SmallPath: "/" + smallFile, LargePath: "/" + largeFile}, []string{id}, nil)
	got, s := verdictOf(rep, id)
	if got != v || !strings.Contains(s, want) {
		t.Errorf("%s against %s: %s (%s), want %s with %q", id, name, got, s, v, want)
	}
}

// TestMisbehavingServerGreaseBit: a server that advertises grease_quic_bit
// but discards packets with the bit cleared.
func TestMisbehavingServerGreaseBit(t *testing.T) {
	addr := startQuiverWith(t, func(c *quic.Config) {
		c.DisableGreaseQUICBit = true
		c.Probe = &quic.Probe{TransportParameters: func(tp *wire.TransportParameters) { tp.GreaseQUICBit = true }}
	})
	expectSentence(t, "quiver-gqb-liar", addr, "grease-quic-bit-accepted", Observed, "would be fail")
}

func TestJudgeDatagramSizes(t *testing.T) {
	for _, tc := range []struct {
		sizes []int
		want  Verdict
	}{
		{nil, Unsupported},
		{[]int{103, 193}, Pass},
		{[]int{200}, Pass},
		{[]int{103, 201}, Fail},
		{[]int{403}, Fail},
	} {
		if v, s, _ := judgeDatagramSizes(tc.sizes, 200); v != tc.want {
			t.Errorf("judgeDatagramSizes(%v, 200) = %s (%s), want %s", tc.sizes, v, s, tc.want)
		}
	}
}

func TestJudgeQUICBitGrease(t *testing.T) {
	for _, tc := range []struct {
		set, cleared int
		want         Verdict
	}{
		{5, 5, Inconclusive},
		{400, 0, Warn},
		{0, 400, Warn},
		{200, 190, Pass},
		{399, 1, Pass},
	} {
		if v, s := judgeQUICBitGrease(tc.set, tc.cleared); v != tc.want {
			t.Errorf("judgeQUICBitGrease(%d, %d) = %s (%s), want %s", tc.set, tc.cleared, v, s, tc.want)
		}
	}
}
