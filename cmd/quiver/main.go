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

// suiteMemory is the soft memory limit of a conformance run: the suite keeps
// every packet a scenario saw, and with the garbage collector's default
// pacing a full run against a local server peaked near 360 MB resident;
// under a 120 MiB limit it peaks under 150 MB for the same verdicts and
// about the same time. It is soft: a run that needs more (a very large
// --large resource) gets it, at the cost of more collection. GOMEMLIMIT
// overrides it.
const suiteMemory = 120 << 20

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
