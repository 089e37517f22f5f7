package conformance

import "testing"

func TestWorst(t *testing.T) {
	for _, tc := range []struct {
		in   []Verdict
		want Verdict
	}{
		{[]Verdict{Pass, Warn}, Warn},
		{[]Verdict{Pass, Fail, Inconclusive}, Fail},
		{[]Verdict{Fail, Errored}, Errored},
		{[]Verdict{Pass, Unsupported, Errored}, Unsupported},
		{[]Verdict{Observed, Pass}, Pass},
		{[]Verdict{Observed}, Observed},
		{nil, Inconclusive},
		{[]Verdict{Warn, Inconclusive}, Inconclusive},
	} {
		if got := Worst(tc.in...); got != tc.want {
			t.Errorf("Worst(%v) = %s, want %s", tc.in, got, tc.want)
		}
	}
}
