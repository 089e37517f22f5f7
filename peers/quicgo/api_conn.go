//go:build !quicgo_connection_iface

package main

import "github.com/quic-go/quic-go"

// quicConn and quicStream are quic-go's connection and stream.
type (
	quicConn   = *quic.Conn
	quicStream = *quic.Stream
)
