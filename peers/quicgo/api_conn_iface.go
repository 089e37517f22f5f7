//go:build quicgo_connection_iface

package main

import "github.com/quic-go/quic-go"

// quicConn and quicStream are quic-go's connection and stream, interfaces
// before v0.53.
type (
	quicConn   = quic.Connection
	quicStream = quic.Stream
)
