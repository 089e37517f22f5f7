// Package quic is Quiver's QUIC engine (RFC 9000, 9001, 9002, 9369): an
// Endpoint on a UDP socket that dials and accepts connections, Conn and
// Stream with io.Reader/io.Writer semantics, and probe hooks that let
// conformance tests misbehave on purpose and watch every packet.
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
// in and out), conn_qlog.go (qlog events), probe.go and probe_packet.go
// (test hooks).
//
// Tests: synctest_test.go and testpeer_test.go run in a testing/synctest
// bubble over an in-process network (memnet_test.go), the latter with a
// frame-level scripted client; interop_test.go runs against quic-go,
// x/net/quic and ngtcp2 through package peers.
//
// Wire encoding, packet protection, loss recovery and stream state come
// from packages wire, protect, recovery and streams.
package quic
