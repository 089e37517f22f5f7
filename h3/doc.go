// Package h3 implements HTTP/3 (RFC 9114) with QPACK (RFC 9204) and
// hq-interop (HTTP/0.9 over QUIC, the interop runner's application protocol),
// client and server, on top of a small QUIC connection abstraction ([Conn] and
// [Stream]) that Quiver's engine satisfies through a thin adapter.
//
// Everything the package needs from QUIC is the interface in conn.go; only
// quic.go knows Quiver's engine ([FromQUIC]), so the rest is tested over an
// in-memory connection and can run over any QUIC stack.
//
// Where to start. A server: a [Server] with an http.Handler, and
// [Server.ServeConn] for each accepted connection, adapted with
// [FromQUIC]; [FileHandler] serves a folder. A client: [NewClientConn] on
// a dialed connection gives a [ClientConn], an http.RoundTripper. For
// hq-interop: [ServeHQ] and [GetHQ]. The package example runs both over
// loopback.
//
// QPACK is Quiver's own (package h3/qpack), with a dynamic table both ways:
// the endpoint advertises SETTINGS_QPACK_MAX_TABLE_CAPACITY 4096 and
// SETTINGS_QPACK_BLOCKED_STREAMS 16 by default (Server and ClientConfig
// fields change or turn them off), and once the peer's SETTINGS allow a
// table its encoder inserts the fields worth remembering and refers to them
// after the peer acknowledges them, so the peer's streams never block.
// [ClientConn.QPACKStats] tells how the tables were used. Server push is not
// implemented: a client never sends MAX_PUSH_ID, so a conformant server
// never pushes.
//
// Protocol violations by the peer become an [*Error] carrying the HTTP/3 error
// code, whether it is a connection or a stream error, and the RFC sentence that
// the violation breaks.
package h3
