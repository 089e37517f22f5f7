package peers

import (
	"os/exec"
	"runtime"
	"syscall"
)

// startSupervised starts cmd in a process group of its own that receives
// SIGKILL when this process dies (prctl PR_SET_PDEATHSIG), then waits for
// it; wait's result goes to exited. The kernel sends the parent-death
// signal when the thread that forked the child ends, not the process, so
// the fork happens on a thread locked to this goroutine, which holds it
// until the child has exited: Go never ends a locked thread whose
// goroutine unlocks it, so the signal comes only with this process.
//
// The signal reaches the group's leader only; its own children stay in
// the group, which Stop (and an agent reaping a dead agent's groups)
// ends as a whole.
func startSupervised(cmd *exec.Cmd, exited func(error)) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		exited(cmd.Wait())
	}()
	return <-started
}
