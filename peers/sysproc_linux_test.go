package peers

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestSpawnDiesWithParent SIGKILLs a process that spawned a child through
// Spawn (this test binary, re-run as a helper) and waits, on a pidfd
// opened before the kill, for the child to end: the parent-death signal
// must reach it although the parent could run no cleanup. Only the
// test's deadline bounds the wait.
func TestSpawnDiesWithParent(t *testing.T) {
	if os.Getenv("QUIVER_SPAWN_HELPER") == "1" {
		p, err := Spawn(context.Background(), Spec{Name: "sleeper", Role: "test", Path: "/bin/sleep", Args: []string{"600"}})
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Println(p.Pid())
		select {} // until killed
	}
	helper := exec.Command(os.Args[0], "-test.run=^TestSpawnDiesWithParent$")
	helper.Env = append(os.Environ(), "QUIVER_SPAWN_HELPER=1")
	out, err := helper.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	defer helper.Wait()
	defer helper.Process.Kill()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("helper: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("helper said %q", line)
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := helper.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	helper.Wait()
	timeout := -1
	if d, ok := t.Deadline(); ok {
		timeout = int(time.Until(d)/time.Millisecond) - 5000
	}
	for {
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, timeout)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			syscall.Kill(-pid, syscall.SIGKILL)
			t.Fatalf("the spawned process %d outlived its SIGKILLed parent", pid)
		}
		return
	}
}
