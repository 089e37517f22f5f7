//go:build quicgo_versionnumber

package main

import "github.com/quic-go/quic-go"

// quicVersion is a QUIC version number, quic.VersionNumber before v0.42.
type quicVersion = quic.VersionNumber
