package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runAsCLI, set in the environment, makes this test binary behave as the
// quiver command, so that test-client can launch it as the client under
// test (`quiver get`) without a separate build.
const runAsCLI = "QUIVER_TEST_RUN_AS_CLI"

func init() {
	if os.Getenv(runAsCLI) == "1" {
		os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
	}
}

// TestTestClientBaseline: test-client takes the same baseline flags as
// test. Quiver's own client (this binary as `quiver get`) is the client
// under test.
func TestTestClientBaseline(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if strings.ContainsAny(exe, " '\"") {
		t.Skipf("test binary path %q needs quoting in a command template", exe)
	}
	t.Setenv(runAsCLI, "1") // for the client processes only: this one is past init
	client := exe + " get --insecure --out {outdir} {url}"
	base := filepath.Join(t.TempDir(), "client-baseline.txt")

	out, errOut, code := quiver(t, "test-client", "--scenarios", "cli-no-alpn-selected,cli-retry-bad-tag", "--write-baseline", base, "--cmd", client)
	if code != 0 {
		t.Fatalf("--write-baseline exited %d\n%s%s", code, out, errOut)
	}
	b, err := os.ReadFile(base)
	if err != nil || !strings.Contains(string(b), "\ncli-no-alpn-selected pass\ncli-retry-bad-tag pass\n") {
		t.Fatalf("baseline written (%v):\n%s\n%s%s", err, b, out, errOut)
	}
	if out, errOut, code = quiver(t, "test-client", "--baseline", base, "--cmd", client); code != 0 {
		t.Fatalf("unchanged verdicts exited %d\n%s%s", code, out, errOut)
	}
	edited := strings.Replace(string(b), "cli-retry-bad-tag pass", "cli-retry-bad-tag warn|fail", 1)
	if err := os.WriteFile(base, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = quiver(t, "test-client", "--baseline", base, "--cmd", client)
	if code != 1 || !strings.Contains(out, "cli-retry-bad-tag: expected warn or fail, got pass") {
		t.Fatalf("a changed verdict exited %d, want 1 naming cli-retry-bad-tag\n%s%s", code, out, errOut)
	}
}
