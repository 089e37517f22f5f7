package peers

import (
	"bufio"
	"os"
	"os/exec"
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
	if len(udpInodes(os.Getpid(), port)) != 0 {
		t.Skipf("port %d happens to be bound in the runner's namespace too", port)
	}
}
