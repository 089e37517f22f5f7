//go:build quicgo_h3_roundtripper

package main

import (
	"crypto/tls"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
)

// newH3Transport returns quic-go's HTTP/3 client, http3.RoundTripper
// before v0.48.
func newH3Transport(tlsConf *tls.Config, qc *quic.Config) h3RoundTripper {
	return &http3.RoundTripper{TLSClientConfig: tlsConf, QUICConfig: qc}
}
