// Command quiver tells how a QUIC implementation really behaves: whether it
// follows the RFCs, whether it works with the others, how fast it is, and how
// that changes from release to release.
//
// main is a thin wrapper: every subcommand is a function of its arguments and
// output streams (see cli.go), so the whole command line is tested in-process.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
