package main

import (
	"fmt"
	"io"
	"os"

	"github.com/quiver-quic/quiver/observatory/store"
)

// campaignProgress returns a campaign progress callback that rewrites one line
// on a terminal, or nil when w is not one.
func campaignProgress(w io.Writer) func(done, total int, rec store.Record) {
	if !isTerminal(w) {
		return nil
	}
	return func(done, total int, rec store.Record) {
		fmt.Fprintf(w, "\r%d/%d  %s  %s: %s\x1b[K", done, total, printableName(rec.Target.Name), rec.Scenario, rec.Verdict)
	}
}

// endCampaignProgress clears the progress line.
func endCampaignProgress(w io.Writer) {
	if isTerminal(w) {
		fmt.Fprint(w, "\r\x1b[K")
	}
}

// printableName keeps a target's name from driving the terminal.
func printableName(s string) string {
	b := []rune(s)
	for i, r := range b {
		if r < 0x20 || r == 0x7f {
			b[i] = '?'
		}
	}
	return string(b)
}

func statFile(name string) (os.FileInfo, error) { return os.Stat(name) }
