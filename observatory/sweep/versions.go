// Package sweep measures an implementation's released versions one after
// the other: it lists them from the Go module proxy, builds a server at
// each (quic-go through Quiver's adapter peers/quicgo, x/net through its
// own interop command), runs the conformance suite against it, and stores
// the results as a series ordered by release, one run per version.
//
// Builds are cached under ~/.cache/quiver/sweeps, failures included, keyed
// by the version, the Go toolchain and the adapter's source, so a second
// sweep only runs the suite.
package sweep

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"

	"github.com/quiver-quic/quiver/observatory/results"
)

// ListVersions returns the released versions of a Go module, oldest first,
// as the module proxy lists them (`go list -m -versions`).
func ListVersions(ctx context.Context, module string) ([]string, error) {
	cmd := exec.CommandContext(ctx, "go", "list", "-m", "-versions", module)
	cmd.Dir = tempModDir()
	cmd.Env = goEnv()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list -m -versions %s: %v: %s", module, err, strings.TrimSpace(stderr.String()))
	}
	f := strings.Fields(string(out))
	if len(f) < 2 {
		return nil, fmt.Errorf("the module proxy lists no released version of %s", module)
	}
	vs := f[1:]
	slices.SortFunc(vs, results.CompareVersions)
	return vs, nil
}

// Exists reports whether module@version is on the module proxy. Some
// proxies list only part of a module's releases; the others can still be
// fetched by name.
func Exists(ctx context.Context, module, version string) bool {
	cmd := exec.CommandContext(ctx, "go", "list", "-m", "-json", module+"@"+version)
	cmd.Dir = tempModDir()
	cmd.Env = goEnv()
	return cmd.Run() == nil
}

// Choose picks the versions to sweep from all (oldest first): the ones
// listed, which must exist, or every version since (inclusive) since.
// The result is in release order.
func Choose(all, listed []string, since string) ([]string, error) {
	switch {
	case len(listed) > 0 && since != "":
		return nil, fmt.Errorf("give either versions or since, not both")
	case len(listed) > 0:
		var out []string
		for _, v := range listed {
			if !slices.Contains(all, v) {
				return nil, fmt.Errorf("version %s is not on the module proxy (it lists %s … %s)", v, all[0], all[len(all)-1])
			}
			if !slices.Contains(out, v) {
				out = append(out, v)
			}
		}
		slices.SortFunc(out, results.CompareVersions)
		return out, nil
	case since != "":
		if !results.IsVersion(since) {
			return nil, fmt.Errorf("since %q is not a version like v0.40.0", since)
		}
		var out []string
		for _, v := range all {
			if results.CompareVersions(v, since) >= 0 {
				out = append(out, v)
			}
		}
		if len(out) == 0 {
			return nil, fmt.Errorf("no released version since %s (the newest is %s)", since, all[len(all)-1])
		}
		return out, nil
	}
	return nil, fmt.Errorf("give the versions to sweep, or a version to sweep since")
}
