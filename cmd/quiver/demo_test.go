package main

import (
	"path/filepath"
	"regexp"
	"testing"
)

// TestDemoQuiverFeatures runs the demo on its two Quiver targets with
// scenarios that only a server with the features on can judge: quiver
// (0-RTT, DATAGRAM, preferred address, key updates) and quiver-retry
// (Retry).
func TestDemoQuiverFeatures(t *testing.T) {
	dir := t.TempDir()
	out, errs, code := quiver(t, "demo", "--no-web", "--impls", "quiver,quiver-retry",
		"--scenarios", "tls-ticket-max-early-data,dgram-respects-tester-limit,dgram-too-large,prefaddr-format,retry-format",
		"--db", filepath.Join(dir, "q.db"), "--artifacts", filepath.Join(dir, "art"))
	if code != 0 {
		t.Fatalf("demo: exit %d\n%s\n%s", code, out, errs)
	}
	for _, want := range []string{
		// quiver judges all but retry-format; quiver-retry judges that,
		// and not the 0-RTT ticket (it runs without --0rtt).
		`quiver: 4 pass.*1 unsupported`,
		`quiver-retry: 4 pass.*1 unsupported`,
		`quiver-retry runs: quiver serve --datagrams .*--retry`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
}
