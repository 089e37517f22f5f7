//go:build quicgo_qlog_none

package main

import (
	"errors"

	"github.com/quic-go/quic-go"
)

// setQlogTracer refuses: before v0.41 quic-go had no ready-made tracer
// that writes into $QLOGDIR, and a sweep does not need qlog.
func setQlogTracer(*quic.Config) error {
	return errors.New("qlog: this quic-go release has no qlog.DefaultTracer (v0.41 and later have it)")
}
