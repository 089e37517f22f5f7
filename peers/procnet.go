package peers

import (
	"bufio"
	"encoding/hex"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// udpBoundBy reports whether process pid, or another process in the group
// it leads, holds a UDP socket bound to local port port. It reads Linux's
// /proc/net/udp{,6} for the sockets on the port and /proc/PID/fd for the
// process's own sockets, so that a stranger on the same port never passes
// for the peer being ready. The socket tables are read through
// /proc/PID/net, which shows the network namespace of pid: a server
// started in its own namespace (namespace mode) binds its port
// there, not in the runner's.
func udpBoundBy(pid, port int) bool { return boundBy(pid, "udp", port) }

// boundBy is udpBoundBy for proto "udp" or "tcp" (a listening socket).
func boundBy(pid int, proto string, port int) bool {
	inodes := map[string]bool{}
	for inode, a := range sockets(pid, proto) {
		if int(a.Port()) == port {
			inodes[inode] = true
		}
	}
	return len(inodes) > 0 && groupOwns(pid, inodes, func(string) bool { return true })
}

// udpBound returns the local addresses of every UDP socket that process
// pid, or a process of the group it leads, holds, in pid's network
// namespace, sorted.
func udpBound(pid int) []netip.AddrPort {
	socks := udpSockets(pid)
	inodes := map[string]bool{}
	for inode := range socks {
		inodes[inode] = true
	}
	var out []netip.AddrPort
	groupOwns(pid, inodes, func(inode string) bool {
		if a := socks[inode]; !slices.Contains(out, a) {
			out = append(out, a)
		}
		return false // all of them
	})
	slices.SortFunc(out, func(a, b netip.AddrPort) int { return a.Compare(b) })
	return out
}

// groupOwns calls found for each of inodes that pid, or a process of the
// group it leads, has a file descriptor on, until found returns true; it
// reports whether one did.
func groupOwns(pid int, inodes map[string]bool, found func(inode string) bool) bool {
	if ownsSocket(pid, inodes, found) {
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
		if ownsSocket(other, inodes, found) {
			return true
		}
	}
	return false
}

// udpSockets returns the local address of each UDP socket in the network
// namespace of process pid, by socket inode.
func udpSockets(pid int) map[string]netip.AddrPort { return sockets(pid, "udp") }

// sockets returns the local address of each socket of proto ("udp", or
// "tcp" for listening TCP sockets) in the network namespace of process
// pid, by socket inode.
func sockets(pid int, proto string) map[string]netip.AddrPort {
	socks := map[string]netip.AddrPort{}
	for _, table := range []string{proto, proto + "6"} {
		f, err := os.Open(filepath.Join("/proc", strconv.Itoa(pid), "net", table))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Scan() // header
		for sc.Scan() {
			// sl local_address rem_address st tx:rx tr:tm retrnsmt uid timeout inode ...
			fields := strings.Fields(sc.Text())
			// 0A is TCP's LISTEN state.
			if len(fields) < 10 || (proto == "tcp" && fields[3] != "0A") {
				continue
			}
			if a, ok := parseProcAddr(fields[1]); ok {
				socks[fields[9]] = a
			}
		}
		f.Close()
	}
	return socks
}

// parseProcAddr reads an address of /proc/net/udp{,6}: the IP address in
// hex, as 32-bit words in the host's (little-endian) order, a colon and
// the port in hex.
func parseProcAddr(s string) (netip.AddrPort, bool) {
	hexIP, hexPort, ok := strings.Cut(s, ":")
	port, err := strconv.ParseUint(hexPort, 16, 16)
	if !ok || err != nil || (len(hexIP) != 8 && len(hexIP) != 32) {
		return netip.AddrPort{}, false
	}
	raw, err := hex.DecodeString(hexIP)
	if err != nil {
		return netip.AddrPort{}, false
	}
	for w := 0; w+4 <= len(raw); w += 4 {
		raw[w], raw[w+1], raw[w+2], raw[w+3] = raw[w+3], raw[w+2], raw[w+1], raw[w]
	}
	a, _ := netip.AddrFromSlice(raw)
	return netip.AddrPortFrom(a.Unmap(), uint16(port)), true
}

// ownsSocket calls found for each of inodes that pid has a file
// descriptor on, until found returns true; it reports whether one did.
func ownsSocket(pid int, inodes map[string]bool, found func(inode string) bool) bool {
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
		if inode, ok := strings.CutPrefix(link, "socket:["); ok && inodes[strings.TrimSuffix(inode, "]")] && found(strings.TrimSuffix(inode, "]")) {
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
