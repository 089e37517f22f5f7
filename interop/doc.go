// Package interop is Quiver's interop runner: it pairs the clients and
// servers of different QUIC implementations, runs test cases (handshake,
// transfer, retry, resumption, 0-RTT, key update, migration, loss and
// corruption, cross traffic, and goodput measurements) over an emulated
// link, and judges each cell from the decrypted packet capture rather than
// from what the endpoints say about themselves. `quiver interop` runs it.
//
// Where to start. [Catalogue] lists the test cases and [Lookup] selects
// them by name or abbreviation; [Impls] picks implementations from the
// peers manifest (package peers) by name and role. A [Matrix] runs every
// server × client pair over the selected test cases and returns a
// [Result], the established runner's result.json with Quiver's extensions
// (link records, handshake counts, per-check outcomes); [Result.Summary]
// prints the grid. [Runner.RunCell] runs a single cell.
//
//	servers, _ := interop.Impls("quiver,quic-go", "server")
//	clients, _ := interop.Impls("quiver,quic-go", "client")
//	tests, _ := interop.Lookup("handshake,transfer")
//	m := &interop.Matrix{Servers: servers, Clients: clients, Tests: tests, LogDir: "logs", Seed: 1}
//	res, dir, err := m.Run(ctx)
//
// How a cell runs. Each endpoint is a process started through the
// interop runner's endpoint contract (ROLE, TESTCASE, REQUESTS, WWW,
// DOWNLOADS, CERTS, SSLKEYLOGFILE, QLOGDIR; exit status 127 for a test case
// it does not support), Quiver's own being package interop/endpoint. The
// link between them is a netem.Relay on loopback ("proxy" engine) or,
// as root, network namespaces joined by veth pairs with the relay as the
// router ("ns" engine), which test cases that need real addresses or
// kernel queues (crosstraffic, connectionmigration) require; "auto" picks
// per test case. The link records a trace on each side (the runner's
// trace_node_left and trace_node_right), and package interop/analyze
// decrypts them with the endpoints' key logs and decodes them for the
// checks (testcases.go, checks.go). Results and an HTML page go to
// the run folder (html.go).
//
// docs/interop-results.md in the repository has the current matrix and
// what each failure means.
package interop
