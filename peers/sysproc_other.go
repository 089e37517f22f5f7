//go:build !linux

package peers

import (
	"os/exec"
	"syscall"
)

// startSupervised starts cmd in a process group of its own and waits for
// it; wait's result goes to exited. Only Linux also kills the child when
// this process dies (sysproc_linux.go).
func startSupervised(cmd *exec.Cmd, exited func(error)) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	go func() { exited(cmd.Wait()) }()
	return nil
}
