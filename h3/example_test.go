package h3_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"net/http"
	"sync"
	"time"

	"github.com/quiver-quic/quiver/certs"
	"github.com/quiver-quic/quiver/h3"
	"github.com/quiver-quic/quiver/quic"
)

// An HTTP/3 server with an ordinary http.Handler, on Quiver's QUIC engine,
// and a client that sends it one request. h3.FromQUIC adapts an engine
// connection to the package's Conn; a ClientConn is an http.RoundTripper
// (so it also fits in an http.Client's Transport).
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cert, pool, err := certs.SelfSigned()
	if err != nil {
		log.Fatal(err)
	}

	// The server: one ServeConn per accepted connection.
	mux := http.NewServeMux()
	mux.HandleFunc("GET /hello/{name}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintf(w, "hello, %s, over %s", r.PathValue("name"), r.Proto)
	})
	srv := &h3.Server{Handler: mux}
	ep, err := quic.Listen("udp", "127.0.0.1:0", &quic.Config{
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{h3.ALPNH3}}})
	if err != nil {
		log.Fatal(err)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer ep.Close()
	wg.Go(func() {
		for {
			c, err := ep.Accept(ctx)
			if err != nil {
				return
			}
			wg.Go(func() { srv.ServeConn(ctx, h3.FromQUIC(c)) })
		}
	})

	// The client.
	qc, err := quic.Dial(ctx, "udp", ep.Addr().String(), &quic.Config{
		TLSConfig: &tls.Config{RootCAs: pool, ServerName: "localhost", NextProtos: []string{h3.ALPNH3}}})
	if err != nil {
		log.Fatal(err)
	}
	cc, err := h3.NewClientConn(ctx, h3.FromQUIC(qc), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer cc.Close()
	req, err := http.NewRequestWithContext(ctx, "GET", "https://localhost/hello/reader", nil)
	if err != nil {
		log.Fatal(err)
	}
	resp, err := cc.RoundTrip(req)
	if err != nil {
		log.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(resp.Status, resp.Header.Get("Content-Type"))
	fmt.Println(string(body))
	// Output:
	// 200 OK text/plain
	// hello, reader, over HTTP/3.0
}
