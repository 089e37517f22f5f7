package bench

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// testAgent is an in-process agent on loopback whose endpoint PIDs are
// reported on channels.
type testAgent struct {
	addr           string
	dir            string
	started, ended chan int
}

func startTestAgent(t *testing.T, keys string) *testAgent {
	t.Helper()
	l, err := ListenAgent("127.0.0.1:0", keys)
	if err != nil {
		t.Fatal(err)
	}
	ta := &testAgent{addr: l.Addr().String(), dir: t.TempDir(), started: make(chan int, 64), ended: make(chan int, 64)}
	a := &Agent{Bins: testBins, Dir: ta.dir, OnStart: func(pid int) { ta.started <- pid }, OnExit: func(pid int) { ta.ended <- pid }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Serve(ctx, l) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("agent: %v", err)
		}
	})
	return ta
}

func agentKeys(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "keys")
	if err := InitAgentKeys(dir); err != nil {
		t.Fatal(err)
	}
	if err := InitAgentKeys(dir); err == nil {
		t.Fatal("InitAgentKeys overwrote an existing set of keys")
	}
	return dir
}

func dialTestAgent(t *testing.T, addr, keys string) *AgentClient {
	t.Helper()
	c, err := DialAgent(addr, keys)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// jsonKeys lists the keys of a JSON object and of its first run.
func jsonKeys(t *testing.T, res *Result) []string {
	t.Helper()
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	var runs []map[string]json.RawMessage
	if err := json.Unmarshal(m["runs"], &runs); err != nil || len(runs) == 0 {
		t.Fatalf("runs: %v (%d)", err, len(runs))
	}
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	for k := range runs[0] {
		// A CPU trace needs one whole interval, which a short run on
		// either side may not last.
		if k != "cpu_trace" {
			keys = append(keys, "runs."+k)
		}
	}
	slices.Sort(keys)
	return keys
}

// TestAgentsLoopback runs a goodput and a handshake measurement with the
// server on one agent and the client on another, and checks that every
// run succeeded and that the JSON has the shape of a local run's.
func TestAgentsLoopback(t *testing.T) {
	keys := agentKeys(t)
	sa, ca := startTestAgent(t, keys), startTestAgent(t, keys)
	srv, cli := dialTestAgent(t, sa.addr, keys), dialTestAgent(t, ca.addr, keys)
	for _, kind := range []string{"goodput", "handshakes"} {
		t.Run(kind, func(t *testing.T) {
			o := Options{Pairs: []Pair{{"quiver", "quiver"}, {"tcp", "tcp"}}, Runs: 1, ALPN: "hq-interop", Bins: testBins, Size: 1 << 20, Handshakes: 10}
			remote, traces, err := MeasureRemote(t.Context(), o, kind, srv, cli)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range remote.Runs {
				if r.Err != "" {
					t.Errorf("%s: %s", r.Pair, r.Err)
				}
				if r.ServerCPU.Total() == 0 || r.ClientCPU.Total() == 0 {
					t.Errorf("%s: no CPU usage reported: %+v %+v", r.Pair, r.ServerCPU, r.ClientCPU)
				}
			}
			if len(traces) != 2*len(remote.Runs) {
				t.Errorf("%d endpoint traces for %d runs", len(traces), len(remote.Runs))
			}
			var local *Result
			if kind == "goodput" {
				local, err = Goodput(t.Context(), o)
			} else {
				local, err = Handshakes(t.Context(), o)
			}
			if err != nil {
				t.Fatal(err)
			}
			if lk, rk := jsonKeys(t, local), jsonKeys(t, remote); !slices.Equal(lk, rk) {
				t.Errorf("JSON keys differ:\nlocal  %v\nremote %v", lk, rk)
			}
		})
	}
}

// TestAgentRefusesWrongKey checks that an agent refuses a controller with
// keys from another `quiver agent init`, and one without a certificate,
// before anything starts.
func TestAgentRefusesWrongKey(t *testing.T) {
	keys, other := agentKeys(t), agentKeys(t)
	ta := startTestAgent(t, keys)
	// mixed trusts the agent's CA but holds another init's controller
	// certificate: only the agent's check can refuse it.
	mixed := t.TempDir()
	for _, f := range [][2]string{{keys, AgentCAFile}, {other, ControllerCertFile}, {other, ControllerKeyFile}} {
		b, err := os.ReadFile(filepath.Join(f[0], f[1]))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(mixed, f[1]), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	job := AgentJob{Role: "server", Kind: "handshakes", Impl: "quiver", Host: "127.0.0.1", ALPN: "hq-interop"}
	for _, dir := range []string{other, mixed} {
		c := dialTestAgent(t, ta.addr, dir)
		if e, err := c.Start(t.Context(), job); err == nil {
			e.Close()
			t.Fatalf("an agent accepted a controller with keys %s", dir)
		}
	}
	// The right keys get through, so the refusals above are the keys'.
	e, err := dialTestAgent(t, ta.addr, keys).Start(t.Context(), job)
	if err != nil {
		t.Fatal(err)
	}
	if d, err := e.Stop(); err != nil || d.Err != "" {
		t.Fatalf("stop: %v %+v", err, d)
	}
	<-ta.started
	<-ta.ended
	conn, err := tls.Dial("tcp", ta.addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"quiver-rpc"}})
	if err == nil {
		// TLS 1.3: the server's verdict on the (missing) client
		// certificate arrives with the first read.
		_, err = conn.Read(make([]byte, 1))
		conn.Close()
	}
	if err == nil {
		t.Fatal("an agent accepted a controller without a certificate")
	}
	select {
	case pid := <-ta.started:
		t.Fatalf("an endpoint (pid %d) started for a refused controller", pid)
	default:
	}
}

// TestAgentControllerKilled kills a controller (a quiver process running a
// handshake benchmark through the agent) once both endpoints run, and
// checks that the agent stops and reaps both, by PID, and removes their
// files. Nothing here waits on a clock: the PIDs come from the agent's
// start and exit hooks.
func TestAgentControllerKilled(t *testing.T) {
	keys := agentKeys(t)
	ta := startTestAgent(t, keys)
	ctl := exec.Command(testBins.Quiver, "bench", "handshakes", "--impls", "quiver", "--n", "5000000", "--runs", "1",
		"--agent-keys", keys, "--server-agent", ta.addr, "--client-agent", ta.addr, "--out", t.TempDir())
	ctl.Env = append(os.Environ(), "QUIVER_BIN="+testBins.Peers)
	var out strings.Builder
	ctl.Stdout, ctl.Stderr = &out, &out
	if err := ctl.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		ctl.Wait()
		close(exited)
	}()
	var pids []int
	for len(pids) < 2 { // server, then client
		select {
		case pid := <-ta.started:
			pids = append(pids, pid)
		case <-exited:
			t.Fatalf("the controller ended before both endpoints ran:\n%s", out.String())
		}
	}
	if err := ctl.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-exited
	ended := []int{<-ta.ended, <-ta.ended}
	slices.Sort(pids)
	slices.Sort(ended)
	if !slices.Equal(pids, ended) {
		t.Fatalf("started %v, ended %v", pids, ended)
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("endpoint pid %d still exists after the controller died (kill 0: %v)", pid, err)
		}
	}
	runs, _ := filepath.Glob(filepath.Join(ta.dir, "run-*"))
	if len(runs) > 0 {
		t.Errorf("run folders left behind: %v", runs)
	}
}

// lineReader hands a process's output lines to a channel.
func lineReader(t *testing.T, cmd *exec.Cmd) <-chan string {
	t.Helper()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 16)
	var once sync.Once
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		once.Do(func() { close(lines) })
	}()
	return lines
}

// TestAgentsNamespaces runs the goodput bench across two network
// namespaces joined by a veth pair (the two "hosts"), an agent in each and
// the controller in the client's, all as quiver processes (root only).
func TestAgentsNamespaces(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root")
	}
	const nsA, nsB, ipA, ipB = "quiver-agent-a", "quiver-agent-b", "198.19.7.1", "198.19.7.2"
	ip := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	exec.Command("ip", "netns", "del", nsA).Run() // left over from a killed run
	exec.Command("ip", "netns", "del", nsB).Run()
	ip("netns", "add", nsA)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", nsA).Run() })
	ip("netns", "add", nsB)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", nsB).Run() })
	ip("link", "add", "qag-a", "netns", nsA, "type", "veth", "peer", "name", "qag-b", "netns", nsB)
	for _, x := range [][3]string{{nsA, "qag-a", ipA}, {nsB, "qag-b", ipB}} {
		ip("-n", x[0], "addr", "add", x[2]+"/24", "dev", x[1])
		ip("-n", x[0], "link", "set", x[1], "up")
		ip("-n", x[0], "link", "set", "lo", "up")
	}
	keys := agentKeys(t)
	var addrs []string
	for _, x := range [][2]string{{nsA, ipA}, {nsB, ipB}} {
		cmd := exec.Command("ip", "netns", "exec", x[0], testBins.Quiver, "agent", "serve", "--keys", keys, "--addr", x[1]+":0")
		cmd.Env = append(os.Environ(), "QUIVER_BIN="+testBins.Peers)
		lines := lineReader(t, cmd)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			cmd.Process.Signal(syscall.SIGTERM)
			cmd.Wait()
		})
		line := <-lines
		a, ok := strings.CutPrefix(line, "agent listening on ")
		if !ok {
			t.Fatalf("agent said %q", line)
		}
		addrs = append(addrs, a)
	}
	out := t.TempDir()
	for _, kind := range []string{"goodput", "handshakes"} {
		args := []string{"netns", "exec", nsB, testBins.Quiver, "bench", kind, "--impls", "quiver,tcp", "--runs", "1",
			"--agent-keys", keys, "--server-agent", addrs[0], "--client-agent", addrs[1], "--out", filepath.Join(out, kind)}
		if kind == "goodput" {
			args = append(args, "--size", "2MB")
		} else {
			args = append(args, "--n", "20")
		}
		if b, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", kind, err, b)
		}
		b, err := os.ReadFile(filepath.Join(out, kind, kind+".json"))
		if err != nil {
			t.Fatal(err)
		}
		var res Result
		if err := json.Unmarshal(b, &res); err != nil {
			t.Fatal(err)
		}
		if len(res.Runs) != 2 {
			t.Fatalf("%s: %d runs, want 2", kind, len(res.Runs))
		}
		for _, r := range res.Runs {
			if r.Err != "" || (r.GoodputMbps == 0 && r.HandshakesS == 0) {
				t.Errorf("%s %s: %q, %.1f Mbit/s, %.1f handshakes/s", kind, r.Pair, r.Err, r.GoodputMbps, r.HandshakesS)
			}
		}
		t.Logf("%s across the veth pair: %s %.1f / %s %.1f", kind, res.Runs[0].Pair, res.Runs[0].GoodputMbps+res.Runs[0].HandshakesS,
			res.Runs[1].Pair, res.Runs[1].GoodputMbps+res.Runs[1].HandshakesS)
	}
}

// TestAgentRefusesBadJobs checks that an authenticated controller still
// cannot make the agent run anything but a bounded benchmark endpoint.
func TestAgentRefusesBadJobs(t *testing.T) {
	keys := agentKeys(t)
	ta := startTestAgent(t, keys)
	c := dialTestAgent(t, ta.addr, keys)
	good := AgentJob{Role: "server", Kind: "goodput", Impl: "quiver", Host: "127.0.0.1", ALPN: "hq-interop", Size: 1000}
	for _, x := range []struct {
		name string
		edit func(j *AgentJob)
	}{
		{"role", func(j *AgentJob) { j.Role = "shell" }},
		{"kind", func(j *AgentJob) { j.Kind = "exec" }},
		{"impl", func(j *AgentJob) { j.Impl = "/bin/sh" }},
		{"huge-file", func(j *AgentJob) { j.Size = 1 << 40 }},
		{"negative-file", func(j *AgentJob) { j.Size = -1 }},
		{"handshakes", func(j *AgentJob) { j.Handshakes = 1 << 40 }},
		{"port", func(j *AgentJob) { j.Port = 70000 }},
	} {
		j := good
		x.edit(&j)
		if e, err := c.Start(t.Context(), j); err == nil {
			e.Close()
			t.Errorf("%s: job %+v accepted", x.name, j)
		}
	}
	select {
	case pid := <-ta.started:
		t.Fatalf("an endpoint (pid %d) started for a refused job", pid)
	default:
	}
}

// TestAgentSweep runs an endpoint sweep through agents with profiles: a
// run per configuration, each with both ends' CPU split; a sweep that
// changes the network between the ends is refused with the reason.
func TestAgentSweep(t *testing.T) {
	keys := agentKeys(t)
	sa, ca := startTestAgent(t, keys), startTestAgent(t, keys)
	srv, cli := dialTestAgent(t, sa.addr, keys), dialTestAgent(t, ca.addr, keys)
	cfgs, err := SweepConfigs("cc", []string{"cubic", "reno"}, "")
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Pairs: []Pair{{"quiver", "quiver"}}, Runs: 1, ALPN: "hq-interop", Bins: testBins, Size: 4 << 20, Configs: cfgs, Profile: true}
	res, _, err := MeasureRemote(t.Context(), o, "sweep", srv, cli)
	if err != nil {
		t.Fatal(err)
	}
	if res.Kind != "sweep" || len(res.Runs) != 2 {
		t.Fatalf("%s result with %d runs, want a sweep of 2", res.Kind, len(res.Runs))
	}
	for _, r := range res.Runs {
		if r.Err != "" || r.GoodputMbps == 0 {
			t.Errorf("%s: %q, %.1f Mbit/s", r.Config, r.Err, r.GoodputMbps)
		}
		if _, ok := r.Profiles["server"]; !ok {
			t.Errorf("%s: no server profile: %v", r.Config, r.Profiles)
		}
		if _, ok := r.Profiles["client"]; !ok {
			t.Errorf("%s: no client profile: %v", r.Config, r.Profiles)
		}
	}
	if n := len(sa.started); n != 2 {
		t.Fatalf("%d servers started for 2 runs", n)
	}
	// quic-go takes no Reno: a note, and nothing started for it.
	o.Configs, _ = SweepConfigs("cc", []string{"reno"}, "")
	o.Pairs, o.Profile = []Pair{{"quic-go", "quic-go"}}, false
	if res, _, err := MeasureRemote(t.Context(), o, "sweep", srv, cli); err == nil || res == nil || len(res.Unsupported) != 1 {
		t.Errorf("quic-go with Reno through agents: %v, want it noted as unsupported", err)
	}
	for _, p := range []string{"mtu", "offload", "rcvbuf", "rate"} {
		cfgs, err := SweepConfigs(p, []string{strings.Split(SweepParams[p], ",")[0]}, "")
		if err != nil {
			t.Fatal(err)
		}
		o.Configs = cfgs
		if _, _, err := MeasureRemote(t.Context(), o, "sweep", srv, cli); err == nil || !strings.Contains(err.Error(), "needs both ends local") {
			t.Errorf("%s sweep through agents: %v, want it refused as needing both ends local", p, err)
		}
	}
	if n := len(sa.started); n != 2 {
		t.Errorf("%d servers started, want the cc sweep's 2 and none for a refused sweep", n)
	}
}
