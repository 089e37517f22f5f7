// Command quiver tells how a QUIC implementation really behaves: whether it
// follows the RFCs, whether it works with the others, how fast it is, and how
// that changes from release to release.
//
// Install it with
//
//	go install github.com/quiver-quic/quiver/cmd/quiver@latest
//
// and run `quiver --help` for the commands, `quiver COMMAND --help` for
// a command's flags, examples and (test, test-client) exit statuses. The
// commands: demo (local servers of several implementations, the suite
// against each, a dashboard), test and test-client (the conformance suite
// against a server or a client, with JSON and JUnit reports and a
// baseline of expected verdicts for CI), grid, scenarios (the
// catalogue), serve and get (files over QUIC), interop (the implementation
// matrix), track and worker (the observatory's campaigns), web (its
// dashboard), bench (goodput, handshakes, sweeps, ACK frequency, RPC) and
// version. README.md has an example of each; docs/ci.md shows how to run
// Quiver in another project's CI.
//
// main is a thin wrapper: every subcommand is a function of its arguments and
// output streams (see cli.go), so the whole command line is tested in-process.
package main
