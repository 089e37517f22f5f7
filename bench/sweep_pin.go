package bench

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
)

// PinModes are the CPU placements of the pin sweep (the study pinned each
// endpoint): "same" puts server and client on CPU 0, "sibling" on the two
// hardware threads of CPU 0's core, "different" on CPU 0 and the first
// CPU of another core; "none" leaves the scheduler free.
var PinModes = []string{"none", "same", "sibling", "different"}

// pinCPUs returns the CPU of each role for a mode, or an error when the
// host cannot place them so (no SMT sibling, one core).
func pinCPUs(mode string) (server, client int, err error) {
	switch mode {
	case "same":
		return 0, 0, nil
	case "sibling":
		sib := siblings(0)
		if len(sib) < 2 {
			return 0, 0, fmt.Errorf("CPU 0 has no hardware-thread sibling: %w", errUnsupported)
		}
		return sib[0], sib[1], nil
	case "different":
		sib := siblings(0)
		for cpu := 1; cpu < runtime.NumCPU(); cpu++ {
			if !slices.Contains(sib, cpu) {
				return 0, cpu, nil
			}
		}
		return 0, 0, fmt.Errorf("no CPU outside CPU 0's core: %w", errUnsupported)
	}
	return 0, 0, fmt.Errorf("pin mode %q: want one of %s", mode, strings.Join(PinModes, ", "))
}

// siblings lists the hardware threads of cpu's core (sysfs), or just cpu.
func siblings(cpu int) []int {
	b, err := os.ReadFile(fmt.Sprintf("/sys/devices/system/cpu/cpu%d/topology/thread_siblings_list", cpu))
	if err != nil {
		return []int{cpu}
	}
	var out []int
	for _, part := range strings.Split(strings.TrimSpace(string(b)), ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err1 := strconv.Atoi(lo)
		z := a
		var err2 error
		if isRange {
			z, err2 = strconv.Atoi(hi)
		}
		if err1 != nil || err2 != nil {
			return []int{cpu}
		}
		for c := a; c <= z; c++ {
			out = append(out, c)
		}
	}
	return out
}

// pinned wraps an endpoint's command in taskset for the role's CPU; an
// unknown or impossible mode was refused when the configuration was made.
func pinned(spec cmdSpec, mode, role string) cmdSpec {
	if mode == "" || mode == "none" || spec.Path == "" {
		return spec
	}
	srv, cli, err := pinCPUs(mode)
	if err != nil {
		return spec
	}
	cpu := srv
	if role == "client" {
		cpu = cli
	}
	spec.Args = append([]string{"-c", strconv.Itoa(cpu), spec.Path}, spec.Args...)
	spec.Path = "taskset"
	if p, err := exec.LookPath("taskset"); err == nil {
		spec.Path = p
	}
	return spec
}

// pinConfig fills a pin sweep point, refusing a placement this host
// cannot make.
func pinConfig(c *Config, v string) error {
	if v != "none" {
		if _, _, err := pinCPUs(v); err != nil {
			return err
		}
	}
	c.Name, c.Pin = "pin="+v, v
	return nil
}
