//go:build quicgo_config_addrvalidation

package main

import (
	"net"

	"github.com/quic-go/quic-go"
)

// forceRetry makes the server send a Retry to every new client; before
// v0.42 that was a Config field.
func forceRetry(_ *quic.Transport, qc *quic.Config) {
	qc.RequireAddressValidation = func(net.Addr) bool { return true }
}
