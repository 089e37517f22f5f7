package main

import (
	"context"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
)

func main() {
	if lim := suiteMemoryLimit(os.Args[1:], os.Getenv("GOMEMLIMIT")); lim > 0 {
		debug.SetMemoryLimit(lim)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// suiteMemory is the soft memory limit of a conformance run. The recorder
// keeps a bounded record per scenario (conformance/recorder_keep.go), so
// the live heap of a full run stays well under it whatever the size of
// --large; the limit makes the garbage collector return what parallel
// scenarios leave behind before the heap doubles: a full run against a
// local server with a 100 MB --large peaked at 147 MB resident under a
// 120 MiB limit and 127 MB under 100 MiB, with the same verdicts. It is
// soft: a run that needs more gets it, at the cost of more collection.
// GOMEMLIMIT overrides it.
const suiteMemory = 100 << 20

// suiteMemoryLimit returns the memory limit for the command line args, or
// 0 to leave the runtime's default.
func suiteMemoryLimit(args []string, gomemlimit string) int64 {
	if gomemlimit != "" || len(args) == 0 {
		return 0
	}
	switch args[0] {
	case "test", "test-client":
		return suiteMemory
	}
	return 0
}
