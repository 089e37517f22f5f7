// Package peers starts other QUIC implementations as local processes, so
// that Quiver's conformance suite, interop runner and benchmarks can test
// against them.
//
// The manifest is the one list of implementations: each with its name and
// aliases (go-x-net is also x/net), how to start it as a server and as a
// client, which ALPNs it speaks, which interop test cases it supports, and
// how to build one of its releases ([Release]). The demo, the benchmarks,
// the interop runner and the version sweep all look implementations up
// here. [Spawn] is the one supervisor of child processes. [Find] looks one
// up; [Impl.StartServer] and [Impl.RunClient]
// run it. The Go peers are built by scripts/install-peers into bin/ (or
// $QUIVER_BIN) from the separate module peers/quicgo, which this package
// never imports; ngtcp2 comes from Debian's ngtcp2-server and ngtcp2-client.
//
// Where to start: [All] lists the manifest, [Find] returns one [Impl] by
// name; [Impl.Supports] says whether it plays a role in a test case;
// [BinDir] and [Impl.Binary] locate the binaries, and a missing one is
// reported with [InstallCommand]. [SelfSigned] and [WriteSelfSignedCert]
// give the certificates the peers serve, [FreeUDPPort] a port to serve on.
// [Spawn] starts any other program under the same supervision.
package peers
