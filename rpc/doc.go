// Package rpc is a multi-transport RPC library: typed unary and streaming
// (server, client and bidirectional) calls over TCP+TLS, Unix sockets,
// HTTP/1.1, HTTP/2, QUIC (Quiver's engine, a stream per call), HTTP/3
// (Quiver's h3) and UDP (datagrams with retransmission, fragmentation and
// duplicate suppression).
//
// A Server holds handlers registered with [Register] and [RegisterStream]
// and serves them on any number of listeners ([Listener]) at once. A
// [Client] sends calls through one [Transport] at a time; [Client.Switch]
// replaces the transport while calls are in flight without losing any,
// and [Adaptive] chooses the transport from what the client measures.
//
// Every transport carries the same call model: a method name, a codec name,
// metadata, a timeout (a duration, because the two clocks may disagree), an
// idempotency flag and a payload; the answer is zero or more messages and a
// final [Status].
//
// Where to start. A server: [NewServer], handlers with [Register] (unary),
// [RegisterStream], [RegisterClientStream] or [RegisterBidiStream], then
// [Server.Serve] on each listener ([ListenTCP], [ListenQUIC] for QUIC and
// HTTP/3 on one UDP port, [ListenHTTP], [ListenUDP], [ListenUnix]). A
// client: [NewClient] with a transport ([DialTCP], [DialQUIC], ...), then
// [Call], [CallStream] or [OpenStream]; errors carry a [Code] ([CodeOf]).
// The examples show calls over TCP+TLS and QUIC, [Client.SwitchAsync]
// during a stream, and [NewAdaptive] falling back to TCP when UDP is
// blocked. docs/rpc.md in the repository describes the transports and
// the benchmarks.
package rpc
