//go:build !quicgo_versionnumber

package main

import "github.com/quic-go/quic-go"

// quicVersion is a QUIC version number.
type quicVersion = quic.Version
