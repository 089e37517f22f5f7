//go:build quicgo_h3_quicconfig

package main

import (
	"crypto/tls"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
)

// newH3Transport returns quic-go's HTTP/3 client, http3.RoundTripper with
// a QuicConfig field before v0.43.
func newH3Transport(tlsConf *tls.Config, qc *quic.Config) h3RoundTripper {
	return &http3.RoundTripper{TLSClientConfig: tlsConf, QuicConfig: qc}
}
