// Package quic is Quiver's QUIC engine (RFC 9000, 9001, 9002, 9369): an
// Endpoint on a UDP socket that dials and accepts connections, Conn and
// Stream with io.Reader/io.Writer semantics, and probe hooks ([Hooks]) that
// let conformance tests misbehave on purpose and watch every packet.
//
// A server:
//
//	ep, err := quic.Listen("udp", ":4433", &quic.Config{TLSConfig: tlsConf})
//	c, err := ep.Accept(ctx)
//	s, err := c.AcceptStream(ctx)
//
// A client:
//
//	c, err := quic.Dial(ctx, "udp", "example.com:443", &quic.Config{TLSConfig: tlsConf})
//	s, err := c.OpenStream(ctx)
//	s.Write(req); s.CloseWrite(); io.ReadAll(s)
//	c.Close(0, "")
//
// The package's runnable examples do this over loopback, and show DATAGRAM
// frames ([Conn.SendDatagram]), 0-RTT resumption ([DialEarly]), a [Probe]
// that drops a packet on purpose and a [Hooks] built on [NoHooks].
//
// How it is built. The Endpoint owns the socket; one goroutine reads it
// and routes each datagram by destination connection ID (endpoint.go;
// server.go does Version Negotiation, Retry and new connections). Each
// connection has one goroutine, its loop (conn_loop.go), which owns all
// its state: it reads the clock once per turn and passes now down. Stream
// buffers and flow control are shared with application goroutines under
// Conn.mu (stream.go, conn_streams.go). One file per concern:
// conn_recv.go (unprotect, parse, dispatch), conn_send.go (assemble,
// coalesce, pad, seal; GSO in gso.go, pacing in pacer.go), conn_tls.go
// (crypto/tls QUIC API, keys, key log), conn_loss.go (what each packet
// carried, loss and PTO through package recovery), conn_close.go
// (closing and draining), conn_ids.go (connection IDs, path validation,
// following a migrating peer), conn_migrate.go (client migration),
// conn_0rtt.go (resumption and 0-RTT), conn_keyupdate.go (key updates),
// conn_params.go (transport parameters), conn_ackfreq.go (ACK frequency
// extension, both roles), conn_datagram.go (RFC 9221), ecn.go (ECN marks
// in and out), conn_pmtud.go (path MTU discovery), conn_prefaddr.go
// (server's preferred address), conn_qlog.go (qlog events), hooks.go (the
// Hooks interface: a Policy of misbehaviour switches read once at the
// start, and seven named points, each called behind one nil check),
// probe.go and probe_packet.go (Probe, the field-per-behaviour Hooks),
// tlssuites.go (TLS 1.3 suite choice, only after EnableTLS13SuiteControl).
//
// Preferred address (RFC 9000 §9.6). A server with
// Config.PreferredAddress (or Endpoint.ServePreferredAddress) listens on a
// second socket that routes into the same connections and offers its
// address in the preferred_address transport parameter, with a
// connection ID of sequence 1 and its stateless reset token; a server
// with zero-length connection IDs offers none (§18.2). Once the handshake
// is confirmed the client sends PATH_CHALLENGE to the address of its own
// family under that connection ID, from its socket, and when the answer
// comes it sends everything there, retires the handshake's connection ID
// and resets congestion control and RTT for the new path (§9.4); if no
// answer comes within three PTOs (at least three times kInitialRtt's) it
// stays where it is. The server answers a PATH_CHALLENGE from the socket
// it arrived on, and once a non-probing packet arrives on the preferred
// socket it validates the client from there before it sends from there
// (§9.6.2). After acting on the offer a client may migrate although the
// server sent disable_active_migration (§18.2);
// Config.IgnorePreferredAddress keeps a client where it connected.
//
// Path MTU discovery (DPLPMTUD, RFC 9000 §14.3 and RFC 8899) is on by
// default. Until the handshake is confirmed every datagram carries 1200
// bytes; then the connection sends InitialPacketSize (default 1200) and
// probes larger sizes with packets of PING and PADDING: first the largest
// allowed (Config.MaxPacketSize, default 1452, and the peer's
// max_udp_payload_size), then by binary search, three lost probes
// failing a size. Probes count in flight but their loss is no congestion
// signal (RFC 9000 §14.4). When packets larger than the base size keep
// getting lost while none sent after the last acknowledged one arrives,
// the path is taken for a black hole: the size falls back to the base and
// a new search starts, first at the old size. A search that ended below
// the maximum starts again after ten minutes (RFC 8899 PMTU_RAISE_TIMER);
// a new peer address starts one at once. ConnStats.MaxDatagramSize and
// ConnectionInfo.MaxDatagramSize report the size in use, qlog records
// connectivity:mtu_updated, and Config.DisablePathMTUDiscovery turns it
// off.
//
// Tests: synctest_test.go and testpeer_test.go run in a testing/synctest
// bubble over an in-process network (memnet_test.go), the latter with a
// frame-level scripted client; interop_test.go runs against quic-go,
// x/net/quic and ngtcp2 through package peers.
//
// Wire encoding, packet protection, loss recovery and stream state come
// from packages wire, protect, recovery and streams.
package quic
