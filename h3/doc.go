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
// QPACK is static-table only: the endpoint advertises
// SETTINGS_QPACK_MAX_TABLE_CAPACITY = 0 and SETTINGS_QPACK_BLOCKED_STREAMS = 0,
// opens its encoder and decoder streams as RFC 9204 §4.2 expects, and never
// writes an instruction on them. Server push is not implemented: a client
// never sends MAX_PUSH_ID, so a conformant server never pushes.
//
// Protocol violations by the peer become an [*Error] carrying the HTTP/3 error
// code, whether it is a connection or a stream error, and the RFC sentence that
// the violation breaks.
package h3
