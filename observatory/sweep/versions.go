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
	"strconv"
	"strings"
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
	slices.SortFunc(vs, CompareVersions)
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
		slices.SortFunc(out, CompareVersions)
		return out, nil
	case since != "":
		if _, ok := parseVersion(since); !ok {
			return nil, fmt.Errorf("since %q is not a version like v0.40.0", since)
		}
		var out []string
		for _, v := range all {
			if CompareVersions(v, since) >= 0 {
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

// semver is a parsed vMAJOR.MINOR.PATCH[-PRE].
type semver struct {
	n   [3]int
	pre string
}

func parseVersion(v string) (semver, bool) {
	var s semver
	rest, ok := strings.CutPrefix(v, "v")
	if !ok {
		return s, false
	}
	rest, s.pre, _ = strings.Cut(rest, "-")
	rest, _, _ = strings.Cut(rest, "+")
	parts := strings.Split(rest, ".")
	if len(parts) != 3 {
		return s, false
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return s, false
		}
		s.n[i] = n
	}
	return s, true
}

// CompareVersions orders semantic versions by release: v0.9.0 < v0.10.0,
// and a pre-release before its release. Strings that are not versions
// sort after every version, by text.
func CompareVersions(a, b string) int {
	x, okA := parseVersion(a)
	y, okB := parseVersion(b)
	switch {
	case !okA && !okB:
		return strings.Compare(a, b)
	case !okA:
		return 1
	case !okB:
		return -1
	}
	for i := range x.n {
		if c := x.n[i] - y.n[i]; c != 0 {
			if c < 0 {
				return -1
			}
			return 1
		}
	}
	switch {
	case x.pre == y.pre:
		return 0
	case x.pre == "":
		return 1
	case y.pre == "":
		return -1
	}
	return strings.Compare(x.pre, y.pre)
}
