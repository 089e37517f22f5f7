//go:build !quicgo_no_resetstreamat

package main

import "github.com/quic-go/quic-go"

// enableResetStreamAt offers RESET_STREAM_AT (the reset_stream_at
// transport parameter of draft-ietf-quic-reliable-stream-reset), so that
// a sweep sees which identifier each release sends for it.
func enableResetStreamAt(qc *quic.Config) { qc.EnableStreamResetPartialDelivery = true }
