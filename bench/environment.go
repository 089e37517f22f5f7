package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
)

// The namespace pair of the veth topology. The addresses come from the
// range reserved for benchmarking (RFC 2544, 198.18.0.0/15).
const (
	nsServer  = "quiver-bench-a"
	nsClient  = "quiver-bench-b"
	vethSrv   = "qb-a"
	vethCli   = "qb-b"
	serverIP  = "198.18.0.1"
	clientIP  = "198.18.0.2"
	sysRmemDf = "/proc/sys/net/core/rmem_default"
	sysRmemMx = "/proc/sys/net/core/rmem_max"
)

// environment owns what a measurement changes on the host: the receive
// buffer sysctls and the namespace pair. restore puts everything back,
// also after a failure.
type environment struct {
	rmemDefault, rmemMax string
	rmemSet              int
	netns                bool
	rate                 int64 // tbf rate in force on the veth pair; -1 none yet
	nic                  nicState
}

func newEnvironment(ctx context.Context, cs []cell) (*environment, error) {
	e := &environment{rmemDefault: readTrim(sysRmemDf), rmemMax: readTrim(sysRmemMx), rate: -1}
	for _, c := range cs {
		if c.cfg.Topology == "veth" {
			if err := e.setupNetns(ctx); err != nil {
				e.restore()
				return nil, err
			}
			break
		}
	}
	return e, nil
}

// apply sets the host up for one configuration.
func (e *environment) apply(cfg Config) error {
	want := cfg.Rmem
	if want != e.rmemSet {
		if want > 0 {
			// rmem_max first, so that rmem_default never exceeds it.
			for _, f := range []string{sysRmemMx, sysRmemDf} {
				if err := os.WriteFile(f, []byte(strconv.Itoa(want)), 0o644); err != nil {
					return fmt.Errorf("set %s (needs root): %w", f, err)
				}
			}
		} else if err := e.restoreRmem(); err != nil {
			return err
		}
		e.rmemSet = want
	}
	if cfg.Topology == "veth" {
		if err := e.nic.apply(cfg.MTU, cfg.Offload); err != nil {
			return err
		}
	}
	if cfg.Topology == "veth" && cfg.Rate != e.rate {
		if err := shape(cfg.Rate); err != nil {
			return err
		}
		e.rate = cfg.Rate
	}
	return nil
}

func (e *environment) restoreRmem() error {
	// Order matters when the saved default is above the current maximum.
	for _, kv := range [][2]string{{sysRmemMx, e.rmemMax}, {sysRmemDf, e.rmemDefault}} {
		if readTrim(kv[0]) == kv[1] {
			continue
		}
		if err := os.WriteFile(kv[0], []byte(kv[1]), 0o644); err != nil {
			return fmt.Errorf("restore %s to %s: %w", kv[0], kv[1], err)
		}
	}
	return nil
}

// restore undoes every change.
func (e *environment) restore() {
	if e.rmemSet != 0 {
		e.restoreRmem()
		e.rmemSet = 0
	}
	if e.netns {
		teardownNetns()
		e.netns = false
	}
}

func ipCmd(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// setupNetns creates the server and client namespaces joined by a veth
// pair, MTU 1500, server 198.18.0.1, client 198.18.0.2. Leftovers of an
// interrupted run are removed first.
func (e *environment) setupNetns(ctx context.Context) error {
	teardownNetns()
	e.netns = true
	steps := [][]string{
		{"netns", "add", nsServer},
		{"netns", "add", nsClient},
		{"link", "add", vethSrv, "netns", nsServer, "type", "veth", "peer", "name", vethCli, "netns", nsClient},
		{"-n", nsServer, "addr", "add", serverIP + "/24", "dev", vethSrv},
		{"-n", nsClient, "addr", "add", clientIP + "/24", "dev", vethCli},
		{"-n", nsServer, "link", "set", "lo", "up"},
		{"-n", nsClient, "link", "set", "lo", "up"},
		{"-n", nsServer, "link", "set", vethSrv, "up", "mtu", "1500"},
		{"-n", nsClient, "link", "set", vethCli, "up", "mtu", "1500"},
	}
	for _, s := range steps {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := ipCmd(s...); err != nil {
			return fmt.Errorf("veth topology (needs root and network namespaces): %w", err)
		}
	}
	return nil
}

// teardownNetns removes the namespaces; deleting a namespace removes its
// end of the veth pair, and with it the other end.
func teardownNetns() {
	for _, ns := range []string{nsServer, nsClient} {
		if _, err := os.Stat("/run/netns/" + ns); err == nil {
			ipCmd("netns", "del", ns)
		}
	}
}

// shape puts a tbf qdisc of rate bit/s on both veth ends (0: none). The
// bucket holds 10 ms at the rate, and the queue 5 ms, so that a fast link
// is not starved by the timer granularity and not bloated either.
func shape(rate int64) error {
	for _, side := range [][2]string{{nsServer, vethSrv}, {nsClient, vethCli}} {
		exec.Command("ip", "netns", "exec", side[0], "tc", "qdisc", "del", "dev", side[1], "root").Run()
		if rate <= 0 {
			continue
		}
		burst := max(rate/8/100, 64<<10)
		args := []string{"netns", "exec", side[0], "tc", "qdisc", "add", "dev", side[1], "root", "tbf",
			"rate", strconv.FormatInt(rate, 10) + "bit", "burst", strconv.FormatInt(burst, 10), "latency", "5ms"}
		if err := ipCmd(args...); err != nil {
			return fmt.Errorf("tbf at %d bit/s: %w", rate, err)
		}
	}
	return nil
}

// UDPCounters are the kernel's UDP counters (/proc/net/snmp, "Udp:").
type UDPCounters struct {
	InDatagrams  int64 `json:"in_datagrams"`
	OutDatagrams int64 `json:"out_datagrams"`
	InErrors     int64 `json:"in_errors"`
	RcvbufErrors int64 `json:"rcvbuf_errors"`
	SndbufErrors int64 `json:"sndbuf_errors"`
}

func (c UDPCounters) sub(b UDPCounters) UDPCounters {
	return UDPCounters{c.InDatagrams - b.InDatagrams, c.OutDatagrams - b.OutDatagrams, c.InErrors - b.InErrors,
		c.RcvbufErrors - b.RcvbufErrors, c.SndbufErrors - b.SndbufErrors}
}

// udp reads the UDP counters of a namespace ("" for the bench's own).
func (e *environment) udp(ns string) UDPCounters {
	var b []byte
	if ns == "" {
		b, _ = os.ReadFile("/proc/net/snmp")
	} else {
		b, _ = exec.Command("ip", "netns", "exec", ns, "cat", "/proc/net/snmp").Output()
	}
	return parseSNMP(string(b))
}

// parseSNMP reads the "Udp:" header and value lines of /proc/net/snmp.
func parseSNMP(s string) UDPCounters {
	var names []string
	var c UDPCounters
	for _, l := range strings.Split(s, "\n") {
		rest, ok := strings.CutPrefix(l, "Udp: ")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if names == nil {
			names = f
			continue
		}
		for i, v := range f {
			if i >= len(names) {
				break
			}
			n, _ := strconv.ParseInt(v, 10, 64)
			switch names[i] {
			case "InDatagrams":
				c.InDatagrams = n
			case "OutDatagrams":
				c.OutDatagrams = n
			case "InErrors":
				c.InErrors = n
			case "RcvbufErrors":
				c.RcvbufErrors = n
			case "SndbufErrors":
				c.SndbufErrors = n
			}
		}
	}
	return c
}
