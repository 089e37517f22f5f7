package conformance_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/quiver-quic/quiver/conformance"
	"github.com/quiver-quic/quiver/transfer"
)

// Run a few handshake scenarios (family A, "hs-…") against a QUIC server
// started in the same process, Quiver's own file server here, and print
// their verdicts. A pattern such as "hs-*" selects a whole group; this
// example names quick ones, since five hs- scenarios watch for three
// seconds that the server stays silent. Package conformance/report writes
// the report as JSON, JUnit XML or a table, and a Baseline
// of its verdicts is what `quiver test --baseline` compares with.
func ExampleRun() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// The server under test: hq-interop and h3 from a folder on loopback.
	root, err := os.MkdirTemp("", "quiver-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(root)
	if err := os.WriteFile(filepath.Join(root, "index.html"), []byte(strings.Repeat("quiver ", 500)), 0o644); err != nil {
		log.Fatal(err)
	}
	srv, err := transfer.Listen(transfer.ServerConfig{Addr: "127.0.0.1:0", Root: root})
	if err != nil {
		log.Fatal(err)
	}
	serveCtx, stopServer := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(serveCtx) }()
	defer func() { stopServer(); <-served }()

	target := conformance.Target{Name: "quiver", Address: srv.Addr().String(), SmallPath: "/index.html"}
	rep, err := conformance.Run(ctx, target, conformance.Options{
		Scenarios: []string{"hs-v1-basic", "hs-server-tp-valid", "hs-cid-authentication", "hs-client-tp-*", "hs-zero-length-scid"},
		Parallel:  8,
	})
	if err != nil {
		log.Fatal(err) // an unknown scenario or pattern
	}
	fmt.Println("application protocols:", strings.Join(rep.Target.ALPN, ", "))
	for _, r := range rep.Results {
		fmt.Printf("%-32s %s\n", r.Scenario, r.Verdict)
	}
	fmt.Println("fails:", rep.Counts()[conformance.Fail])
	// Output:
	// application protocols: hq-interop, h3
	// hs-cid-authentication            pass
	// hs-client-tp-duplicate           pass
	// hs-client-tp-invalid             pass
	// hs-client-tp-server-only         pass
	// hs-client-tp-streams-over-limit  pass
	// hs-server-tp-valid               pass
	// hs-v1-basic                      pass
	// hs-zero-length-scid              pass
	// fails: 0
}

// A Baseline pins the verdicts a CI run expects; Compare lists what
// changed. Here the baseline expects a fail that the run no longer gives
// (a fix is a change too) and lacks a scenario the run added.
func ExampleBaseline_Compare() {
	base, err := conformance.ReadBaseline(strings.NewReader(`
# expected verdicts
hs-v1-basic pass
hs-v1-ipv6 pass|inconclusive
stream-overlap-different-data fail
`))
	if err != nil {
		log.Fatal(err)
	}
	rep := &conformance.Report{Results: []conformance.Result{
		{Scenario: "hs-v1-basic", Verdict: conformance.Pass},
		{Scenario: "hs-v1-ipv6", Verdict: conformance.Inconclusive},
		{Scenario: "stream-overlap-different-data", Verdict: conformance.Pass},
		{Scenario: "hs-zero-length-scid", Verdict: conformance.Pass},
	}}
	for _, c := range base.Compare(rep) {
		fmt.Println(c)
	}
	// Output:
	// hs-zero-length-scid: not in the baseline, got pass
	// stream-overlap-different-data: expected fail, got pass
}
