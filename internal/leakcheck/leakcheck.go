// Package leakcheck fails a test binary whose tests leave goroutines behind.
//
// A QUIC engine that leaks a goroutine per connection is a memory leak in any
// long-running observatory, so every package's TestMain runs this check.
package leakcheck

import (
	"fmt"
	"os"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"
)

// Main runs the tests and then checks that only the goroutines present
// before them remain. Goroutines get a grace period to finish exiting,
// because closing a socket or cancelling a context ends its goroutine
// asynchronously.
func Main(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if leaks := Find(5 * time.Second); len(leaks) > 0 {
			fmt.Fprintf(os.Stderr, "leakcheck: %d goroutine(s) outlived the tests:\n\n%s\n", len(leaks), strings.Join(leaks, "\n\n"))
			code = 1
		}
	}
	os.Exit(code)
}

// Find returns the stacks of goroutines that are neither the runtime's nor
// the testing framework's, waiting up to grace for them to exit.
func Find(grace time.Duration) []string {
	deadline := time.Now().Add(grace)
	for {
		leaks := interesting()
		if len(leaks) == 0 || time.Now().After(deadline) {
			return leaks
		}
		// Polling is the only way to wait for an arbitrary goroutine to end;
		// this is not synchronisation inside a test.
		time.Sleep(20 * time.Millisecond)
	}
}

func interesting() []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if isBenign(g) {
			continue
		}
		out = append(out, g)
	}
	sort.Strings(out)
	return out
}

func isBenign(stack string) bool {
	for _, s := range []string{
		"leakcheck.interesting", // this goroutine
		"testing.(*M).",         // the test binary's main goroutine
		"testing.runTests",
		"created by testing.",   // tests and the test runner's helpers
		"created by os/signal.", // the signal loop, alive for the process
		"created by runtime.gc", // the runtime's own workers
		"runtime.ensureSigM",
	} {
		if strings.Contains(stack, s) {
			return true
		}
	}
	return false
}
