package peers

import (
	"context"
	"errors"
	"net"
	"os/exec"
	"strconv"
	"testing"
	"time"
)

// TestSpawnSupervises: Spawn's process is ready when its TCP port
// listens, Stop ends it and is not an error, and the usage is read at
// exit.
func TestSpawnSupervises(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	p, err := Spawn(t.Context(), Spec{Name: "listener", Role: "test", Path: py, Args: []string{"-c",
		"import socket,time\ns=socket.socket()\ns.bind(('127.0.0.1'," + strconv.Itoa(port) + "))\ns.listen()\n" +
			"time.sleep(300)"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.WaitListening(t.Context(), "tcp", port, time.Minute); err != nil {
		t.Fatal(err)
	}
	if u := p.Usage(); u != (Usage{}) {
		t.Errorf("usage %+v while running, want none yet", u)
	}
	if err := p.Stop(); err != nil {
		t.Errorf("Stop: %v", err)
	}
	if u := p.Usage(); u.MaxRSS == 0 {
		t.Errorf("usage %+v after exit, want the peak RSS", u)
	}
	if err := p.Wait(); err != nil {
		t.Errorf("Wait after Stop: %v", err)
	}
}

// TestSpawnEarlyExit: a process that exits before it listens is an error
// of WaitListening and of Stop, and a protocol other than udp or tcp is
// refused.
func TestSpawnEarlyExit(t *testing.T) {
	p, err := Spawn(context.Background(), Spec{Name: "quitter", Role: "test", Path: "/bin/sh", Args: []string{"-c", "echo bye; exit 3"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.WaitListening(t.Context(), "udp", 1, time.Minute); !errors.Is(err, errExitedEarly) {
		t.Errorf("WaitListening = %v, want an early exit", err)
	}
	if err := p.Stop(); err == nil {
		t.Error("Stop after an exit with status 3 is not an error")
	}
	if err := p.WaitListening(t.Context(), "sctp", 1, time.Second); err == nil {
		t.Error("protocol sctp accepted")
	}
}
