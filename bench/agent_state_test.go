package bench

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// FuzzAgentState: no input crashes the state file's parser, and what it
// accepts it writes back in a form that reads the same.
func FuzzAgentState(f *testing.F) {
	f.Add([]byte("quiver-agent-state 1\nagent 4242 889120 4026531836\ngroup 4250 889301\n"))
	f.Add([]byte("quiver-agent-state 1\nagent 4242 889120 4026531836\n"))
	f.Add([]byte("quiver-agent-state 1\nagent 4242 889120\n"))
	f.Add([]byte("quiver-agent-state 1\ngroup 1 1\n"))
	f.Add([]byte("quiver-agent-state 1\nagent 0 1\n"))
	f.Add([]byte("quiver-agent-state 2\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := parseAgentState(b)
		if err != nil {
			return
		}
		if s.Agent.PID <= 1 || s.PidNS == 0 {
			t.Fatalf("agent PID %d in PID namespace %d accepted", s.Agent.PID, s.PidNS)
		}
		for _, g := range s.Groups {
			if g.PID <= 1 || g.PID > maxStatePID {
				t.Fatalf("group %d accepted", g.PID)
			}
		}
		s2, err := parseAgentState(s.marshal())
		if err != nil || s2.Agent != s.Agent || s2.PidNS != s.PidNS || !slices.Equal(s2.Groups, s.Groups) {
			t.Fatalf("%q: written back as %q: %+v, %v", b, s.marshal(), s2, err)
		}
	})
}

// waitGone waits, on a pidfd opened before the process was signalled,
// until the process has exited; the test's deadline, not a clock of its
// own, bounds the wait.
func waitGone(t *testing.T, pidfd int, what string) {
	t.Helper()
	timeout := -1
	if d, ok := t.Deadline(); ok {
		timeout = int(time.Until(d)/time.Millisecond) - 5000
	}
	fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, timeout)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			t.Fatalf("poll pidfd of %s: %v", what, err)
		}
		if n == 0 {
			t.Fatalf("%s still runs", what)
		}
		return
	}
}

func pidfdOf(t *testing.T, pid int) int {
	t.Helper()
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		t.Fatalf("pidfd_open %d: %v", pid, err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// spawnGroup starts a shell in a group of its own with a child of its
// own (which no parent-death signal reaches), and returns both PIDs.
func spawnGroup(t *testing.T) (sh *exec.Cmd, child int) {
	t.Helper()
	sh = exec.Command("/bin/sh", "-c", "sleep 600 & echo $!; wait")
	sh.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := sh.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		syscall.Kill(-sh.Process.Pid, syscall.SIGKILL)
		sh.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	child, err = strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatal(err)
	}
	return sh, child
}

func writeState(t *testing.T, dir, name string, s agentState) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, s.marshal(), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestReapDeadAgents: the groups of a dead agent's state file end, the
// leader's child included, and the file goes; a live agent's groups, a
// dead agent's of another PID namespace, and a file that is not a state
// file are left alone.
func TestReapDeadAgents(t *testing.T) {
	dir := t.TempDir()
	_, myStart, ok := procStat(os.Getpid())
	if !ok {
		t.Skip("no /proc")
	}
	ns, err := pidNamespace()
	if err != nil {
		t.Fatal(err)
	}
	orphan, orphanChild := spawnGroup(t)
	kept, keptChild := spawnGroup(t)
	group := func(c *exec.Cmd) procID {
		_, start, ok := procStat(c.Process.Pid)
		if !ok {
			t.Fatalf("no /proc entry for %d", c.Process.Pid)
		}
		return procID{c.Process.Pid, start}
	}
	// This process under another start time is an agent whose PID has
	// since been given to someone else: dead.
	dead := writeState(t, dir, "agent-1.state", agentState{Agent: procID{os.Getpid(), myStart + 1}, PidNS: ns, Groups: []procID{group(orphan)}})
	live := writeState(t, dir, "agent-2.state", agentState{Agent: procID{os.Getpid(), myStart}, PidNS: ns, Groups: []procID{group(kept)}})
	foreign := writeState(t, dir, "agent-4.state", agentState{Agent: procID{os.Getpid(), myStart + 1}, PidNS: ns + 1, Groups: []procID{group(kept)}})
	junk := filepath.Join(dir, "agent-3.state")
	os.WriteFile(junk, []byte("group "+strconv.Itoa(kept.Process.Pid)+" 0\n"), 0o600)
	fds := []int{pidfdOf(t, orphan.Process.Pid), pidfdOf(t, orphanChild)}
	n, err := ReapDeadAgents(dir, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("signalled %d groups, want 1", n)
	}
	waitGone(t, fds[0], "the dead agent's endpoint")
	waitGone(t, fds[1], "the child of the dead agent's endpoint")
	for _, pid := range []int{kept.Process.Pid, keptChild} {
		if err := syscall.Kill(pid, 0); err != nil {
			t.Errorf("live agent's process %d: %v", pid, err)
		}
	}
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Errorf("dead agent's state file: %v, want it removed", err)
	}
	for _, p := range []string{live, junk, foreign} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s: %v, want it kept", p, err)
		}
	}
}

// TestAgentKilledLeavesNoEndpoint SIGKILLs a `quiver agent serve` that
// runs a server endpoint: the endpoint dies with it (PR_SET_PDEATHSIG),
// and the next agent to start on the host removes its state file.
func TestAgentKilledLeavesNoEndpoint(t *testing.T) {
	keys := agentKeys(t)
	state := t.TempDir()
	agent := exec.Command(testBins.Quiver, "agent", "serve", "--keys", keys, "--addr", "127.0.0.1:0", "--state", state)
	agent.Env = append(os.Environ(), "QUIVER_BIN="+testBins.Peers)
	lines := lineReader(t, agent)
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		agent.Process.Kill()
		agent.Wait()
	})
	addr, ok := strings.CutPrefix(<-lines, "agent listening on ")
	if !ok {
		t.Fatal("the agent did not say where it listens")
	}
	c := dialTestAgent(t, addr, keys)
	e, err := c.Start(t.Context(), AgentJob{Role: "server", Kind: "goodput", Impl: "quiver", Host: "127.0.0.1", ALPN: "hq-interop", Size: 1000})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	pid := e.Started.PID
	fd := pidfdOf(t, pid)
	file := filepath.Join(state, "agent-"+strconv.Itoa(agent.Process.Pid)+".state")
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	s, err := parseAgentState(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Groups) != 1 || s.Groups[0].PID != pid || s.Agent.PID != agent.Process.Pid {
		t.Fatalf("state file %q does not name the agent %d and its endpoint %d", b, agent.Process.Pid, pid)
	}
	if err := agent.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	agent.Wait()
	waitGone(t, fd, "the endpoint of the killed agent")
	if _, err := os.Stat(file); err != nil {
		t.Fatalf("the killed agent's state file: %v", err)
	}
	if _, err := ReapDeadAgents(state, t.Logf); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Errorf("the killed agent's state file survived the next agent's start: %v", err)
	}
}
