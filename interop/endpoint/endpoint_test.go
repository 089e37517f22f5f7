package endpoint

import (
	"context"
	"io"
	"slices"
	"testing"

	"github.com/quiver-quic/quiver/internal/leakcheck"
	"github.com/quiver-quic/quiver/peers"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// TestUnsupportedExits127 checks the contract's rule that an unknown or
// unsupported TESTCASE exits with 127 at once, for both roles.
func TestUnsupportedExits127(t *testing.T) {
	for _, c := range []map[string]string{
		{"ROLE": "server", "TESTCASE": "no-such-test"},
		{"ROLE": "client", "TESTCASE": "no-such-test", "REQUESTS": "https://127.0.0.1:1/x"},
		{"ROLE": "server", "TESTCASE": "connectionmigration"},
		{"ROLE": "server", "TESTCASE": "ackfrequency"},
		{"ROLE": "client", "TESTCASE": "chacha20", "REQUESTS": "https://127.0.0.1:1/x"},
		{"ROLE": "client", "TESTCASE": "v2", "REQUESTS": "https://127.0.0.1:1/x"},
	} {
		if got := Main(context.Background(), nil, env(c), io.Discard); got != ExitUnsupported {
			t.Errorf("%v: exit %d, want %d", c, got, ExitUnsupported)
		}
	}
}

// TestManifestAgrees keeps the peers manifest's entry for Quiver in step
// with what the endpoint supports, since peers cannot import the engine.
func TestManifestAgrees(t *testing.T) {
	im, err := peers.Find("quiver")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(im.ServerCases, ServerCases) || !slices.Equal(im.ClientCases, ClientCases) {
		t.Errorf("manifest lists server %v, client %v; the endpoint supports server %v, client %v",
			im.ServerCases, im.ClientCases, ServerCases, ClientCases)
	}
}
