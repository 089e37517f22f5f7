//go:build quicgo_qlog_defaulttracer

package main

import (
	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/qlog"
)

// setQlogTracer makes quic-go write one qlog file per connection into
// $QLOGDIR; before v0.45 the tracer was qlog.DefaultTracer.
func setQlogTracer(qc *quic.Config) error {
	qc.Tracer = qlog.DefaultTracer
	return nil
}
