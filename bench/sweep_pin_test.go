package bench

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestPinned runs a command through the pin sweep's wrapper and reads its
// CPU affinity back from the kernel.
func TestPinned(t *testing.T) {
	if _, err := exec.LookPath("taskset"); err != nil {
		t.Skip("no taskset")
	}
	spec := cmdSpec{Path: "/bin/cat", Args: []string{"/proc/self/status"}}
	if got := pinned(spec, "none", "server"); got.Path != spec.Path {
		t.Errorf("none: %v", got)
	}
	for _, role := range []string{"server", "client"} {
		p := pinned(spec, "same", role)
		out, err := exec.Command(p.Path, p.Args...).Output()
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if !strings.Contains(string(out), "Cpus_allowed_list:\t0\n") {
			t.Errorf("%s pinned to CPU 0 reports:\n%s", role, out)
		}
	}
	if srv, cli, err := pinCPUs("different"); err == nil && (srv == cli || slices.Contains(siblings(srv), cli)) {
		t.Errorf("different: CPUs %d and %d share a core", srv, cli)
	}
	if _, err := SweepConfigs("pin", []string{"everywhere"}, "loopback"); err == nil {
		t.Error("pin=everywhere accepted")
	}
}
