// Package report renders a conformance Report: WriteTable (the terminal
// table grouped by family), WriteJSON and ReadJSON (the versioned JSON of
// docs/conformance-report.md), WriteJUnit (JUnit XML for CI), WriteGrid
// (a Markdown grid of several reports) and ProgressLine (one live line on
// a terminal while a run goes). It reads reports only; running scenarios
// is package conformance's.
package report
