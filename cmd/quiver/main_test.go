package main

import (
	"testing"

	"github.com/quiver-quic/quiver/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

func TestSuiteMemoryLimit(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  string
		want int64
	}{
		{[]string{"test", "127.0.0.1:4433"}, "", suiteMemory},
		{[]string{"test-client", "--cmd", "x"}, "", suiteMemory},
		{[]string{"test", "127.0.0.1:4433"}, "1GiB", 0},
		{[]string{"bench", "goodput"}, "", 0},
		{nil, "", 0},
	} {
		if got := suiteMemoryLimit(tc.args, tc.env); got != tc.want {
			t.Errorf("%v GOMEMLIMIT=%q: %d, want %d", tc.args, tc.env, got, tc.want)
		}
	}
}
