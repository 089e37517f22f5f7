//go:build !quicgo_qlog_defaulttracer && !quicgo_qlog_none

package main

import (
	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/qlog"
)

// setQlogTracer makes quic-go write one qlog file per connection into
// $QLOGDIR.
func setQlogTracer(qc *quic.Config) error {
	qc.Tracer = qlog.DefaultConnectionTracer
	return nil
}
