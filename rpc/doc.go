// Package rpc is a multi-transport RPC library: typed unary and
// server-streaming calls over TCP+TLS, Unix sockets, HTTP/1.1, HTTP/2,
// QUIC (Quiver's engine, a stream per call), HTTP/3 (Quiver's h3) and UDP
// (datagrams with retransmission, fragmentation and duplicate suppression).
//
// A Server holds handlers registered with [Register] and [RegisterStream]
// and serves them on any number of [Listener]s at once. A [Client] sends
// calls through one [Transport] at a time; [Client.Switch] replaces the
// transport while calls are in flight without losing any, and [Adaptive]
// chooses the transport from what the client measures.
//
// Every transport carries the same call model: a method name, a codec name,
// metadata, a timeout (a duration, because the two clocks may disagree), an
// idempotency flag and a payload; the answer is zero or more messages and a
// final [Status].
package rpc
