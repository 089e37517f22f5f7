package rpc

import (
	"crypto/tls"
	"slices"
	"time"
)

// alpnRPC is the ALPN protocol of the framed transports (TCP+TLS, QUIC).
const alpnRPC = "quiver-rpc"

// handshakeTimeout bounds a server-side TLS handshake.
const handshakeTimeout = 10 * time.Second

// withALPN returns a copy of conf offering protos (and TLS 1.3 at least,
// which every transport uses).
func withALPN(conf *tls.Config, protos ...string) *tls.Config {
	var c *tls.Config
	if conf == nil {
		c = &tls.Config{}
	} else {
		c = conf.Clone()
	}
	c.NextProtos = slices.Clone(protos)
	c.MinVersion = tls.VersionTLS13
	return c
}
