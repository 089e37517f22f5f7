package peers

import (
	"bufio"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestUDPBoundByInNamespace checks readiness for a server in a network
// namespace of its own: its port is bound there, not in the runner's, and
// udpBoundBy must still see it (and not see it from the runner's table).
func TestUDPBoundByInNamespace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for a network namespace")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("no unshare")
	}
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	// unshare execs the binder in a fresh network namespace; it prints
	// its port and holds the socket until stdin closes.
	cmd := exec.Command(unshare, "--net", py, "-c",
		"import socket,sys\ns=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\ns.bind(('127.0.0.1',0))\nprint(s.getsockname()[1],flush=True)\nsys.stdin.read()")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		cmd.Wait()
	}()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("binder: %v", err)
	}
	port, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("binder printed %q", line)
	}
	if !udpBoundBy(cmd.Process.Pid, port) {
		t.Errorf("port %d bound in the server's namespace not seen", port)
	}
	want := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(port))
	if got := udpBound(cmd.Process.Pid); !slices.Equal(got, []netip.AddrPort{want}) {
		t.Errorf("udpBound = %v, want [%v]", got, want)
	}
	for _, a := range udpSockets(os.Getpid()) {
		if int(a.Port()) == port {
			t.Skipf("port %d happens to be bound in the runner's namespace too", port)
		}
	}
}

// TestParseProcAddr reads addresses as /proc/net/udp and udp6 print them on
// a little-endian host.
func TestParseProcAddr(t *testing.T) {
	for in, want := range map[string]string{
		"0100007F:1F90":                         "127.0.0.1:8080",
		"6464126C:01BB":                         "108.18.100.100:443",
		"00000000:0000":                         "0.0.0.0:0",
		"00000000000000000000000001000000:0050": "[::1]:80",
		"0000000000000000FFFF00000100007F:01BC": "127.0.0.1:444",
	} {
		got, ok := parseProcAddr(in)
		if !ok || got.String() != want {
			t.Errorf("parseProcAddr(%q) = %v, %v; want %s", in, got, ok, want)
		}
	}
	for _, bad := range []string{"", "0100007F", "0100007F:", "0100007:1F90", "ZZ00007F:1F90", "0100007F:10000"} {
		if _, ok := parseProcAddr(bad); ok {
			t.Errorf("parseProcAddr(%q) accepted", bad)
		}
	}
}
