// Package transfer serves a directory and fetches URLs over Quiver's QUIC
// engine, with hq-interop (HTTP/0.9) or HTTP/3 chosen by ALPN. It is what
// `quiver serve` and `quiver get` run, and what the conformance suite, the
// interop runner and the demo start when they need Quiver as a peer.
//
// Where to start. A server: [Listen] with a [ServerConfig] (address, root
// folder, ALPNs, optional Retry, 0-RTT, preferred address, qlog and key
// log), then [Server.Serve] until its context ends; without a certificate
// it serves a fresh self-signed one (package certs). A client: [Get] with
// the URLs and a [ClientConfig]; it opens one connection per authority and
// fetches that authority's URLs concurrently on it, into files or a writer.
//
//	srv, err := transfer.Listen(transfer.ServerConfig{Addr: "127.0.0.1:4433", Root: "./www"})
//	go srv.Serve(ctx)
//	res, err := transfer.Get(ctx, []string{"https://127.0.0.1:4433/index.html"},
//		transfer.ClientConfig{Insecure: true, OutDir: "./dl"})
package transfer
