package netem

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// ErrNamespacesUnavailable means the namespace backend cannot run here:
// not root, or no ip(8) and tc(8).
var ErrNamespacesUnavailable = errors.New("netem: network namespaces need root and iproute2 (ip, tc)")

// The namespace backend's addresses, from the range reserved for
// benchmarking (RFC 2544, 198.18.0.0/15): the client's subnet is 198.18.0.0/24 and the server's
// 198.18.100.0/24, with the router at .2 on both.
var (
	NSClientAddr  = netip.MustParseAddr("198.18.0.100")
	NSClientAddr2 = netip.MustParseAddr("198.18.0.101") // the client's second address (migration)
	NSCrossClient = netip.MustParseAddr("198.18.0.90")  // cross-traffic receiver
	NSRouterC     = netip.MustParseAddr("198.18.0.2")
	NSRouterS     = netip.MustParseAddr("198.18.100.2")
	NSServerAddr  = netip.MustParseAddr("198.18.100.100")
	NSCrossServer = netip.MustParseAddr("198.18.100.110") // cross-traffic sender
	// NSRebindPool is local to the router (an AnyIP route on its
	// loopback) and routed through it from the server: a relay in the
	// router draws the client's new addresses for rebind-addr from it.
	NSRebindPool = netip.MustParsePrefix("198.18.100.128/25")
)

// NamespaceConfig configures a Namespaces topology.
type NamespaceConfig struct {
	// Prefix starts every namespace and interface name; the default is
	// "qv" and the process ID, so that a later run can tell a namespace
	// left behind by a dead process and remove it.
	Prefix string
	// RateToClient and RateToServer, when positive, shape the router's
	// egress towards each side with a tbf qdisc (bit/s): the kernel's
	// bottleneck, shared by everything that crosses the router. Delay,
	// loss and the rest stay in user space (the hosts have no netem
	// qdisc): run a Relay in the router namespace for them.
	RateToClient, RateToServer int64
	// QueueBytes is tbf's limit; 0 means 25 packets of 1,500 bytes.
	QueueBytes int
	// Forward turns IP forwarding on in the router, for traffic that does
	// not go through a relay (cross traffic).
	Forward bool
}

// Namespaces is a client, a router and a server network namespace joined
// by two veth pairs (client ↔ router ↔ server), built with ip(8) and
// tc(8) as root. Close removes them; so does a later SetupNamespaces once
// the process that made them is gone.
type Namespaces struct {
	Client, Router, Server string
	// RouterToClient and RouterToServer are the router's veth ends.
	RouterToClient, RouterToServer string

	mu     sync.Mutex
	closed bool
}

// nsPrefix is the common start of the names, for stale clean-up.
const nsPrefix = "qv"

// NamespacesAvailable reports why the backend cannot run, or nil.
func NamespacesAvailable() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w (running as uid %d)", ErrNamespacesUnavailable, os.Geteuid())
	}
	for _, tool := range []string{"ip", "tc"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%w: %v", ErrNamespacesUnavailable, err)
		}
	}
	return nil
}

// SetupNamespaces builds the topology. On any failure it removes what it
// made before returning the error.
func SetupNamespaces(ctx context.Context, cfg NamespaceConfig) (_ *Namespaces, err error) {
	if err := NamespacesAvailable(); err != nil {
		return nil, err
	}
	removeStaleNamespaces(ctx)
	p := cfg.Prefix
	if p == "" {
		p = fmt.Sprintf("%s%d", nsPrefix, os.Getpid())
	}
	n := &Namespaces{Client: p + "-c", Router: p + "-r", Server: p + "-s"}
	defer func() {
		if err != nil {
			n.Close()
		}
	}()
	run := func(args ...string) {
		if err == nil {
			err = ipCmd(ctx, args...)
		}
	}
	for _, ns := range []string{n.Client, n.Router, n.Server} {
		run("ip", "netns", "add", ns)
		run("ip", "-n", ns, "link", "set", "lo", "up")
	}
	// Interface names are at most 15 bytes: the veth ends are named after
	// the namespace they sit in and the one they face.
	vc, vrc, vrs, vs := p+"c", p+"rc", p+"rs", p+"s"
	n.RouterToClient, n.RouterToServer = vrc, vrs
	if len(vrc) > 15 {
		return nil, fmt.Errorf("netem: namespace prefix %q is too long for interface names", p)
	}
	run("ip", "link", "add", vc, "netns", n.Client, "type", "veth", "peer", "name", vrc, "netns", n.Router)
	run("ip", "link", "add", vs, "netns", n.Server, "type", "veth", "peer", "name", vrs, "netns", n.Router)
	addr := func(ns, dev string, a netip.Addr) { run("ip", "-n", ns, "addr", "add", a.String()+"/24", "dev", dev) }
	addr(n.Client, vc, NSClientAddr)
	addr(n.Client, vc, NSClientAddr2)
	addr(n.Client, vc, NSCrossClient)
	addr(n.Router, vrc, NSRouterC)
	addr(n.Router, vrs, NSRouterS)
	addr(n.Server, vs, NSServerAddr)
	addr(n.Server, vs, NSCrossServer)
	for _, l := range [][2]string{{n.Client, vc}, {n.Router, vrc}, {n.Router, vrs}, {n.Server, vs}} {
		run("ip", "-n", l[0], "link", "set", l[1], "up")
		// Segmentation offloads would hand the router and the capture
		// 64 KiB super-packets that no real link carries.
		run("ip", "netns", "exec", l[0], "sh", "-c", "command -v ethtool >/dev/null && ethtool -K "+l[1]+" tso off gso off gro off >/dev/null 2>&1; true")
	}
	run("ip", "-n", n.Client, "route", "add", "default", "via", NSRouterC.String())
	run("ip", "-n", n.Server, "route", "add", "default", "via", NSRouterS.String())
	// Every address of the rebind pool is the router's own (AnyIP), and
	// the server reaches them through it rather than on its own subnet.
	run("ip", "-n", n.Router, "route", "add", "local", NSRebindPool.String(), "dev", "lo")
	run("ip", "-n", n.Server, "route", "add", NSRebindPool.String(), "via", NSRouterS.String())
	fwd := "0"
	if cfg.Forward {
		fwd = "1"
	}
	run("ip", "netns", "exec", n.Router, "sysctl", "-q", "-w", "net.ipv4.ip_forward="+fwd)
	q := cfg.QueueBytes
	if q <= 0 {
		q = 25 * 1500
	}
	for _, s := range []struct {
		dev  string
		rate int64
	}{{vrc, cfg.RateToClient}, {vrs, cfg.RateToServer}} {
		if s.rate > 0 {
			run("tc", "-n", n.Router, "qdisc", "add", "dev", s.dev, "root", "tbf",
				"rate", strconv.FormatInt(s.rate, 10)+"bit", "burst", "3000", "limit", strconv.Itoa(q))
		}
	}
	if err != nil {
		return nil, err
	}
	return n, nil
}

func ipCmd(ctx context.Context, args ...string) error {
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("netem: %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}

// removeStaleNamespaces deletes namespaces named qv<pid>-… whose process
// is gone: what an interrupted run could not remove.
func removeStaleNamespaces(ctx context.Context) {
	out, err := exec.CommandContext(ctx, "ip", "netns", "list").Output()
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(out), "\n") {
		name, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		rest, ok := strings.CutPrefix(name, nsPrefix)
		if !ok {
			continue
		}
		pidStr, _, ok := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidStr)
		if !ok || err != nil || pid == os.Getpid() {
			continue
		}
		if _, err := os.Stat("/proc/" + pidStr); err == nil || pid <= 0 {
			continue // its owner still runs
		}
		ipCmd(ctx, "ip", "netns", "del", name)
		os.RemoveAll(etcDir(name))
	}
}

// Close removes the namespaces (and with them the veth pairs and
// qdiscs). It is safe to call more than once.
func (n *Namespaces) Close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil
	}
	n.closed = true
	var errs []error
	for _, ns := range []string{n.Client, n.Router, n.Server} {
		if err := ipCmd(context.Background(), "ip", "netns", "del", ns); err != nil && !strings.Contains(err.Error(), "No such file") {
			errs = append(errs, err)
		}
		if err := os.RemoveAll(etcDir(ns)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// etcDir is the folder whose files `ip netns exec` bind-mounts over /etc
// for processes it starts in namespace ns.
func etcDir(ns string) string { return filepath.Join("/etc/netns", ns) }

// SetHosts gives the processes started in namespace ns through Command
// (ip netns exec) their own /etc/hosts: each name resolves to its
// addresses, as the established interop runner's hosts file does.
func (n *Namespaces) SetHosts(ns string, names map[string][]netip.Addr) error {
	var b strings.Builder
	b.WriteString("127.0.0.1\tlocalhost\n::1\tlocalhost\n")
	for _, name := range slices.Sorted(maps.Keys(names)) {
		for _, a := range names[name] {
			fmt.Fprintf(&b, "%s\t%s\n", a, name)
		}
	}
	if err := os.MkdirAll(etcDir(ns), 0o755); err != nil {
		return fmt.Errorf("netem: hosts of %s: %w", ns, err)
	}
	return os.WriteFile(filepath.Join(etcDir(ns), "hosts"), []byte(b.String()), 0o644)
}

// Command returns argv that runs argv inside namespace ns.
func (n *Namespaces) Command(ns string, argv ...string) []string {
	return append([]string{"ip", "netns", "exec", ns}, argv...)
}

// Do runs f on an OS thread that has joined namespace ns, so that the
// sockets f opens live there (a socket keeps the namespace it was made
// in). f must not start goroutines that open sockets.
func (n *Namespaces) Do(ns string, f func() error) error {
	target, err := os.Open("/var/run/netns/" + ns)
	if err != nil {
		return fmt.Errorf("netem: namespace %s: %w", ns, err)
	}
	defer target.Close()
	errc := make(chan error, 1)
	go func() {
		// The goroutine keeps its thread locked to the end if it cannot
		// return to the original namespace, so the runtime discards the
		// thread instead of reusing it elsewhere.
		runtime.LockOSThread()
		orig, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
		if err != nil {
			errc <- err
			return
		}
		defer orig.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("netem: join namespace %s: %w", ns, err)
			return
		}
		ferr := f()
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- errors.Join(ferr, fmt.Errorf("netem: leave namespace %s: %w", ns, err))
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// ListenUDP opens a UDP socket in namespace ns; a Relay given it through
// RelayConfig.ListenUDP runs inside that namespace.
func (n *Namespaces) ListenUDP(ns string) func(network string, laddr *net.UDPAddr) (*net.UDPConn, error) {
	return func(network string, laddr *net.UDPAddr) (c *net.UDPConn, err error) {
		derr := n.Do(ns, func() error {
			c, err = net.ListenUDP(network, laddr)
			return nil
		})
		return c, errors.Join(derr, err)
	}
}

// interceptTable is the routing table in which the router holds the
// addresses it intercepts (Intercept).
const interceptTable = "44"

// Intercept makes the router take in, rather than forward, the packets
// that the client's side sends to addr: a policy rule looks up what
// arrives on the router's veth from the client, for addr, in a table where
// addr is local. A relay socket bound to addr with ListenUDPTransparent
// then answers for it, while the router's own packets to addr still go
// out to the server. This keeps the link in the path when a client sends
// to the server's real address, as it does to a preferred address (RFC
// 9000 §9.6).
func (n *Namespaces) Intercept(ctx context.Context, addr netip.Addr) error {
	if !addr.Is4() {
		return fmt.Errorf("netem: intercept %s: the namespaces are IPv4 only", addr)
	}
	pfx := addr.String() + "/32"
	if err := ipCmd(ctx, "ip", "-n", n.Router, "route", "add", "local", pfx, "dev", "lo", "table", interceptTable); err != nil {
		return err
	}
	return ipCmd(ctx, "ip", "-n", n.Router, "rule", "add", "iif", n.RouterToClient, "to", pfx, "lookup", interceptTable, "pref", "100")
}

// ListenUDPTransparent is ListenUDP for a socket that may bind, and send
// from, an address that is not the namespace's own (IP_TRANSPARENT), such
// as one Intercept hands to the router.
func (n *Namespaces) ListenUDPTransparent(ns string) func(network string, laddr *net.UDPAddr) (*net.UDPConn, error) {
	lc := net.ListenConfig{Control: func(network, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			if strings.HasSuffix(network, "6") {
				serr = unix.SetsockoptInt(int(fd), unix.SOL_IPV6, unix.IPV6_TRANSPARENT, 1)
				return
			}
			serr = unix.SetsockoptInt(int(fd), unix.SOL_IP, unix.IP_TRANSPARENT, 1)
		})
		return errors.Join(err, serr)
	}}
	return func(network string, laddr *net.UDPAddr) (c *net.UDPConn, err error) {
		derr := n.Do(ns, func() error {
			var pc net.PacketConn
			pc, err = lc.ListenPacket(context.Background(), network, laddr.String())
			if err == nil {
				c = pc.(*net.UDPConn)
			}
			return nil
		})
		return c, errors.Join(derr, err)
	}
}
