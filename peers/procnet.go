package peers

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// udpBoundBy reports whether process pid, or another process in the group
// it leads, holds a UDP socket bound to local port port. It reads Linux's
// /proc/net/udp{,6} for the sockets on the port and /proc/PID/fd for the
// process's own sockets, so that a stranger on the same port never passes
// for the peer being ready. The socket tables are read through
// /proc/PID/net, which shows the network namespace of pid: a server
// started in its own namespace (namespace mode, §3.1) binds its port
// there, not in the runner's.
func udpBoundBy(pid, port int) bool {
	inodes := udpInodes(pid, port)
	if len(inodes) == 0 {
		return false
	}
	if ownsSocket(pid, inodes) {
		return true
	}
	// Adapters that start the real server as a child: look at the group.
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return false
	}
	for _, e := range entries {
		other, err := strconv.Atoi(e.Name())
		if err != nil || other == pid || processGroup(other) != pid {
			continue
		}
		if ownsSocket(other, inodes) {
			return true
		}
	}
	return false
}

// udpInodes returns the socket inodes of UDP sockets bound to port in the
// network namespace of process pid.
func udpInodes(pid, port int) map[string]bool {
	inodes := map[string]bool{}
	want := strings.ToUpper(strconv.FormatInt(int64(port), 16))
	for _, table := range []string{"udp", "udp6"} {
		f, err := os.Open(filepath.Join("/proc", strconv.Itoa(pid), "net", table))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Scan() // header
		for sc.Scan() {
			// sl local_address rem_address st tx:rx tr:tm retrnsmt uid timeout inode ...
			fields := strings.Fields(sc.Text())
			if len(fields) < 10 {
				continue
			}
			_, hexPort, ok := strings.Cut(fields[1], ":")
			if ok && strings.TrimLeft(hexPort, "0") == want {
				inodes[fields[9]] = true
			}
		}
		f.Close()
	}
	return inodes
}

// ownsSocket reports whether pid has a file descriptor on one of inodes.
func ownsSocket(pid int, inodes map[string]bool) bool {
	dir := filepath.Join("/proc", strconv.Itoa(pid), "fd")
	fds, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, fd := range fds {
		link, err := os.Readlink(filepath.Join(dir, fd.Name()))
		if err != nil {
			continue
		}
		if inode, ok := strings.CutPrefix(link, "socket:["); ok && inodes[strings.TrimSuffix(inode, "]")] {
			return true
		}
	}
	return false
}

// processGroup returns the process group of pid, or -1.
func processGroup(pid int) int {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return -1
	}
	// The command name in parentheses may hold spaces; fields follow it.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return -1
	}
	fields := strings.Fields(s[i+1:])
	// After the name: state, ppid, pgrp.
	if len(fields) < 3 {
		return -1
	}
	pg, err := strconv.Atoi(fields[2])
	if err != nil {
		return -1
	}
	return pg
}
