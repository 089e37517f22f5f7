package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"
)

// readBuildInfo is debug.ReadBuildInfo; tests replace it.
var readBuildInfo = debug.ReadBuildInfo

// writeVersion prints the tool version, then what the Go toolchain
// recorded in the binary: the module version (a tag or a pseudo-version
// after `go install …@version`, "(devel)" in a checkout) and the VCS
// commit (stamped by `go build` in a checkout, else read from the
// pseudo-version).
func writeVersion(w io.Writer) {
	fmt.Fprintf(w, "quiver %s (%s %s/%s)\n", version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	bi, ok := readBuildInfo()
	if !ok {
		fmt.Fprintln(w, "module: no build information in this binary")
		return
	}
	fmt.Fprintf(w, "module %s %s\n", bi.Main.Path, bi.Main.Version)
	var rev, when string
	modified := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			when = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if rev == "" {
		rev = pseudoVersionCommit(bi.Main.Version)
	}
	switch {
	case rev == "":
		fmt.Fprintln(w, "commit unknown")
	case modified:
		fmt.Fprintf(w, "commit %s %s (with uncommitted changes)\n", rev, when)
	default:
		fmt.Fprintln(w, strings.TrimSpace("commit "+rev+" "+when))
	}
}

// pseudoVersionCommit returns the commit prefix that ends a Go module
// pseudo-version (vX.Y.Z-yyyymmddhhmmss-abcdefabcdef, possibly with
// "+incompatible"), or "" for a tag or "(devel)".
func pseudoVersionCommit(v string) string {
	v, _, _ = strings.Cut(v, "+")
	i := strings.LastIndexByte(v, '-')
	if i < 0 {
		return ""
	}
	rev, stamp := v[i+1:], v[:i]
	if len(rev) != 12 || strings.Trim(rev, "0123456789abcdef") != "" {
		return ""
	}
	// The part before is ...-yyyymmddhhmmss or ...0.yyyymmddhhmmss.
	j := strings.LastIndexAny(stamp, "-.")
	if j < 0 || len(stamp)-j-1 != 14 || strings.Trim(stamp[j+1:], "0123456789") != "" {
		return ""
	}
	return rev
}
