// Package h3 implements HTTP/3 (RFC 9114) with QPACK (RFC 9204) and
// hq-interop (HTTP/0.9 over QUIC, the interop runner's application protocol),
// client and server, on top of a small QUIC connection abstraction ([Conn] and
// [Stream]) that Quiver's engine satisfies through a thin adapter.
//
// The package never imports the engine: everything it needs from QUIC is in
// conn.go, so it is tested over an in-memory connection and can later run over
// any QUIC stack.
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
