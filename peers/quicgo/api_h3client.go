//go:build !quicgo_h3_roundtripper && !quicgo_h3_quicconfig

package main

import (
	"crypto/tls"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
)

// newH3Transport returns quic-go's HTTP/3 client.
func newH3Transport(tlsConf *tls.Config, qc *quic.Config) h3RoundTripper {
	return &http3.Transport{TLSClientConfig: tlsConf, QUICConfig: qc}
}
