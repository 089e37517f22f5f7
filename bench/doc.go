// Package bench measures how fast QUIC implementations are on one machine:
// bulk goodput and CPU cost per byte (Goodput), handshakes per second
// (Handshakes), the same across socket-buffer, GSO, GRO, cipher,
// congestion controller, ACK policy and link-rate settings (Sweep), where
// a Go endpoint spends its CPU (ClassifyProfile), and what a lower ACK
// frequency buys on emulated paths (AckFreq).
//
// Every endpoint runs as its own process, so that its CPU time comes from
// the kernel's rusage of that process alone: Quiver through `quiver serve`
// and `quiver get` (or the bench's own endpoint when a knob that those
// commands lack is swept), quic-go and x/net through the peer binaries that
// scripts/install-peers builds, ngtcp2 through Debian's gtlsserver and
// gtlsclient, and TCP+TLS through a small Go crypto/tls server and client
// inside the quiver binary (`quiver bench tls-serve`, `tls-get`).
//
// Measurements on a shared two-core machine are noisy, so runs of the
// configurations being compared alternate (round-robin) and the reports
// give the median with its spread and ratios between implementations
// measured in the same run; no number is meant to be compared with one from
// another run. Results are written as Go benchmark lines (for benchstat),
// CSV, JSON, a Markdown report and SVG/PNG charts, each with the exact
// command line that produced it.
//
// Where to start: [Goodput], [Handshakes], [Sweep] and [AckFreq] each take
// [Options] and return a [Result]; [WriteFiles] writes every report of
// one. `quiver bench goodput|handshakes|sweep|ackfreq` are thin wrappers
// over them (`quiver bench rpc` over package rpc/rpcbench), and
// docs/highway.md in the repository shows their commands and results.
package bench
