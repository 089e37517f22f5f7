package results

import (
	"strconv"
	"strings"
)

// semver is a parsed vMAJOR.MINOR.PATCH[-PRE].
type semver struct {
	n   [3]int
	pre string
}

// IsVersion reports whether v is a semantic version: vMAJOR.MINOR.PATCH,
// with an optional pre-release.
func IsVersion(v string) bool {
	_, ok := parseVersion(v)
	return ok
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
