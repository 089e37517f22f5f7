//go:build quicgo_no_resetstreamat

package main

import "github.com/quic-go/quic-go"

// enableResetStreamAt does nothing: before v0.54 quic-go had no
// RESET_STREAM_AT.
func enableResetStreamAt(*quic.Config) {}
