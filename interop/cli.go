package interop

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/quiver-quic/quiver/peers"
)

// Impls returns the implementations named in a comma-separated list that
// can play role ("server" or "client"); "all" selects every one in the
// manifest that plays it.
func Impls(list, role string) ([]peers.Impl, error) {
	var out []peers.Impl
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		switch name {
		case "":
			continue
		case "all":
			for _, im := range peers.All() {
				if im.Supports(role, "") && !slices.ContainsFunc(out, func(x peers.Impl) bool { return x.Name == im.Name }) {
					out = append(out, im)
				}
			}
			continue
		}
		im, err := peers.Find(name)
		if err != nil {
			return nil, err
		}
		if !im.Supports(role, "") {
			return nil, fmt.Errorf("%s cannot run as %s", im.Name, role)
		}
		if !slices.ContainsFunc(out, func(x peers.Impl) bool { return x.Name == im.Name }) {
			out = append(out, im)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no %ss selected", role)
	}
	return out, nil
}

// isTerminal reports whether w is a terminal, where progress is drawn.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// Progress returns a Matrix.Progress function: a live count on a terminal,
// nothing when w is piped or a file.
func Progress(w io.Writer) func(done, total int, server, client string, tc *TestCase, res *CellResult) {
	if !isTerminal(w) {
		return nil
	}
	return func(done, total int, server, client string, tc *TestCase, res *CellResult) {
		if res == nil {
			fmt.Fprintf(w, "\r\033[K[%d/%d] %s ← %s: %s …", done+1, total, server, client, tc.Name)
			return
		}
		if done == total {
			fmt.Fprintf(w, "\r\033[K")
		}
	}
}

// Summary writes the matrix as text: per test case, a line per pair.
func (r *Result) Summary(w io.Writer) {
	counts := map[string]int{}
	for _, tc := range Catalogue() {
		if _, ok := r.Tests[tc.Abbr]; !ok {
			continue
		}
		fmt.Fprintf(w, "%s (%s)\n", tc.Name, tc.Abbr)
		for ci, c := range r.Clients {
			for si, s := range r.Servers {
				cr := r.Quiver.Cells[ci*len(r.Servers)+si][tc.Abbr]
				if cr == nil {
					continue
				}
				counts[cr.Result]++
				line := fmt.Sprintf("  %-10s ← %-10s %-11s", s, c, cr.Result)
				if cr.Details != "" {
					line += " " + cr.Details
				}
				if cr.Result == FailedRes && cr.Detail != "" {
					d := cr.Detail
					if len(d) > 100 {
						d = d[:100] + "…"
					}
					line += " (" + cr.Reason + ": " + d + ")"
				}
				fmt.Fprintln(w, strings.TrimRight(line, " "))
			}
		}
	}
	fmt.Fprintf(w, "\n%d succeeded, %d failed, %d unsupported\n", counts[Succeeded], counts[FailedRes], counts[Unsupported])
}
