package bench

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// An agent's state file names the agent and the process group of each
// endpoint it runs, so that an agent starting later on the host can end
// the groups of an agent that died without stopping them (SIGKILL, an
// out-of-memory kill). The endpoints' leaders die with their agent by
// themselves (peers.Spawn sets PR_SET_PDEATHSIG); their children, if any,
// do not, and the state file is how they are found.
//
// The file is text, one process a line, each named by its PID and its
// start time (field 22 of /proc/PID/stat, clock ticks after boot), so
// that a PID the kernel has since given to another process is told apart;
// the agent's line also names its PID namespace (the inode of
// /proc/self/ns/pid), since PIDs mean nothing in another one:
//
//	quiver-agent-state 1
//	agent 4242 889120 4026531836
//	group 4250 889301
const agentStateMagic = "quiver-agent-state 1"

// Bounds a state file must keep; anything else is not one of ours.
const (
	maxStateGroups = 4096
	maxStatePID    = 1 << 22 // PID_MAX_LIMIT on 64-bit Linux
	maxStateBytes  = 1 << 20
)

// procID is a process: its PID and its start time.
type procID struct {
	PID   int
	Start uint64
}

// agentState is a parsed state file.
type agentState struct {
	Agent  procID
	PidNS  uint64
	Groups []procID
}

// parseAgentState reads a state file, refusing anything it did not write.
func parseAgentState(b []byte) (agentState, error) {
	var s agentState
	if len(b) > maxStateBytes {
		return s, fmt.Errorf("state file of %d bytes", len(b))
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if lines[0] != agentStateMagic {
		return s, errors.New("not a quiver agent state file")
	}
	if len(lines) < 2 {
		return s, errors.New("state file names no agent")
	}
	for i, line := range lines[1:] {
		f := strings.Split(line, " ")
		if i == 0 && len(f) == 4 && f[0] == "agent" {
			ns, err := strconv.ParseUint(f[3], 10, 64)
			if err != nil || ns == 0 || strconv.FormatUint(ns, 10) != f[3] {
				return s, fmt.Errorf("line 2: PID namespace %q", f[3])
			}
			s.PidNS, f = ns, f[:3]
		}
		if len(f) != 3 || i == 0 && s.PidNS == 0 {
			return s, fmt.Errorf("line %d: %q: want agent PID START PIDNS, or group PID START", i+2, line)
		}
		pid, err := strconv.Atoi(f[1])
		if err != nil || pid <= 1 || pid > maxStatePID || strconv.Itoa(pid) != f[1] {
			return s, fmt.Errorf("line %d: PID %q", i+2, f[1])
		}
		start, err := strconv.ParseUint(f[2], 10, 64)
		if err != nil || strconv.FormatUint(start, 10) != f[2] {
			return s, fmt.Errorf("line %d: start time %q", i+2, f[2])
		}
		id := procID{PID: pid, Start: start}
		switch {
		case f[0] == "agent" && i == 0:
			s.Agent = id
		case f[0] == "group" && i > 0:
			if len(s.Groups) == maxStateGroups {
				return s, fmt.Errorf("more than %d groups", maxStateGroups)
			}
			s.Groups = append(s.Groups, id)
		default:
			return s, fmt.Errorf("line %d: %q out of place", i+2, f[0])
		}
	}
	return s, nil
}

// marshal writes the state in the form parseAgentState reads.
func (s agentState) marshal() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s\nagent %d %d %d\n", agentStateMagic, s.Agent.PID, s.Agent.Start, s.PidNS)
	for _, g := range s.Groups {
		fmt.Fprintf(&b, "group %d %d\n", g.PID, g.Start)
	}
	return b.Bytes()
}

// procStat returns a process's group (field 5 of /proc/PID/stat) and
// start time (field 22); a zombie (state Z, field 3), which has exited
// and waits only for its parent to read its status, is not a process.
func procStat(pid int) (pgid int, start uint64, ok bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, 0, false
	}
	// The command name (field 2) may hold spaces; fields count from its ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 || f[0] == "Z" {
		return 0, 0, false
	}
	pgid, err1 := strconv.Atoi(f[2])
	start, err2 := strconv.ParseUint(f[19], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return pgid, start, true
}

// alive says whether p still runs (the same process, not its PID reused).
func (p procID) alive() bool {
	_, start, ok := procStat(p.PID)
	return ok && start == p.Start
}

// groupLives says whether process group g, led by a process started at
// g.Start, still has a member. A group ID is not given to a new process
// while the group has members, so a member started no earlier than the
// leader is one of g's.
func groupLives(g procID) bool {
	if _, start, ok := procStat(g.PID); ok {
		return start == g.Start
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return false
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if pgid, start, ok := procStat(pid); ok && pgid == g.PID && start >= g.Start {
			return true
		}
	}
	return false
}

// ReapDeadAgents ends the endpoint groups that agents no longer running
// left in the state files of dir, removes those files, and returns how
// many groups it signalled. A file it cannot read as a state file is
// reported and left alone; nothing it names is touched.
func ReapDeadAgents(dir string, logf func(string, ...any)) (int, error) {
	names, err := filepath.Glob(filepath.Join(dir, "agent-*.state"))
	if err != nil {
		return 0, err
	}
	self := syscall.Getpgrp()
	myNS, err := pidNamespace()
	if err != nil {
		return 0, err
	}
	n := 0
	for _, name := range names {
		b, err := os.ReadFile(name)
		if err != nil {
			continue // removed by its agent meanwhile
		}
		s, err := parseAgentState(b)
		if err != nil {
			logf("agent state %s: %v; left alone", name, err)
			continue
		}
		if s.PidNS != myNS {
			continue // another PID namespace's agent: its PIDs are not ours
		}
		if s.Agent.alive() {
			continue
		}
		for _, g := range s.Groups {
			if g.PID == self || !groupLives(g) {
				continue
			}
			if err := syscall.Kill(-g.PID, syscall.SIGKILL); err == nil {
				logf("ended process group %d left by dead agent %d", g.PID, s.Agent.PID)
				n++
			}
		}
		if err := os.Remove(name); err != nil && !errors.Is(err, os.ErrNotExist) {
			return n, err
		}
	}
	return n, nil
}

// stateFile is an agent's own state file, rewritten (through a rename) on
// every endpoint start and end.
type stateFile struct {
	path  string
	state agentState
}

func newStateFile(dir string) (*stateFile, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	pid := os.Getpid()
	_, start, ok := procStat(pid)
	if !ok {
		return nil, errors.New("cannot read this process's start time from /proc")
	}
	ns, err := pidNamespace()
	if err != nil {
		return nil, err
	}
	f := &stateFile{path: filepath.Join(dir, "agent-"+strconv.Itoa(pid)+".state"), state: agentState{Agent: procID{pid, start}, PidNS: ns}}
	return f, f.write()
}

func (f *stateFile) write() error {
	tmp := f.path + ".tmp"
	if err := os.WriteFile(tmp, f.state.marshal(), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, f.path)
}

// add records the group led by pid (an endpoint spawned into a group of
// its own); remove forgets it once the group has been ended.
func (f *stateFile) add(pid int) error {
	_, start, ok := procStat(pid)
	if !ok {
		return nil // already gone: nothing to reap
	}
	f.state.Groups = append(f.state.Groups, procID{pid, start})
	return f.write()
}

func (f *stateFile) remove(pid int) error {
	g := f.state.Groups[:0]
	for _, x := range f.state.Groups {
		if x.PID != pid {
			g = append(g, x)
		}
	}
	f.state.Groups = g
	return f.write()
}

// close removes the file: the agent stopped its endpoints itself.
func (f *stateFile) close() error { return os.Remove(f.path) }

// pidNamespace is the inode of this process's PID namespace.
func pidNamespace() (uint64, error) {
	var st syscall.Stat_t
	if err := syscall.Stat("/proc/self/ns/pid", &st); err != nil {
		return 0, fmt.Errorf("PID namespace: %w", err)
	}
	return st.Ino, nil
}
