package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"math/big"
	"net"
	"runtime"
	"time"

	"github.com/quic-go/quic-go"
)

// runIdleConns opens n connections from one client socket to a server in
// this process, both quic-go, and prints the heap they hold per connection
// (runtime.MemStats.HeapInuse after a GC, before and after), so that
// Quiver's figure (quic TestIdleConnMemory) can be set beside it.
func runIdleConns(ctx context.Context, n int, out io.Writer) error {
	cert, err := selfSignedCert()
	if err != nil {
		return err
	}
	qc := &quic.Config{MaxIdleTimeout: 5 * time.Minute}
	sconn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return err
	}
	str := &quic.Transport{Conn: sconn}
	ln, err := str.Listen(&tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"idle"}}, qc)
	if err != nil {
		return err
	}
	var serverSide []any
	accepted := make(chan struct{})
	go func() {
		defer close(accepted)
		for len(serverSide) < n {
			c, err := ln.Accept(ctx)
			if err != nil {
				return
			}
			serverSide = append(serverSide, c)
		}
	}()
	cconn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return err
	}
	ctr := &quic.Transport{Conn: cconn}
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapInuse
	}
	h0 := heap()
	clientSide := make([]any, 0, n)
	ctls := &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"idle"}}
	for i := 0; i < n; i++ {
		c, err := ctr.Dial(ctx, sconn.LocalAddr(), ctls, qc)
		if err != nil {
			return fmt.Errorf("dial %d: %w", i, err)
		}
		clientSide = append(clientSide, c)
	}
	<-accepted
	time.Sleep(time.Second) // let the handshakes' last packets settle
	h1 := heap()
	fmt.Fprintf(out, "quic-go idle connections: %d, heap in use %d B per connection (client and server ends)\n",
		len(clientSide), (h1-h0)/uint64(n))
	runtime.KeepAlive(serverSide)
	runtime.KeepAlive(clientSide)
	return nil
}

func selfSignedCert() (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), DNSNames: []string{"localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
