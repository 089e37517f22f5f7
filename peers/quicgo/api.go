package main

import "net/http"

// quic-go's API changed over its releases, and Quiver builds this adapter
// at many of them (quiver track sweep). Everything that differs between
// releases lives in the api_*.go files, in pairs or triples selected by
// build tags; the default (no tag) is the API of the release in go.mod.
// The sweep reads the declarations of the quic-go release it builds and
// sets the tags (observatory/sweep), so each tag names the older API:
//
//	quicgo_connection_iface      quic.Connection and quic.Stream are interfaces (before v0.53; later *quic.Conn, *quic.Stream)
//	quicgo_versionnumber         versions are quic.VersionNumber (before v0.42; later quic.Version)
//	quicgo_config_addrvalidation Retry is forced with Config.RequireAddressValidation (before v0.42; later Transport.VerifySourceAddress)
//	quicgo_h3_roundtripper       the HTTP/3 client is http3.RoundTripper with QUICConfig (v0.43 to v0.47; later http3.Transport)
//	quicgo_h3_quicconfig         the HTTP/3 client is http3.RoundTripper with QuicConfig (before v0.43)
//	quicgo_qlog_defaulttracer    qlog.DefaultTracer only (v0.41 to v0.44; from v0.45 qlog.DefaultConnectionTracer)
//	quicgo_qlog_none             no ready-made qlog tracer (before v0.41): -qlog is refused
//	quicgo_no_resetstreamat      no Config.EnableStreamResetPartialDelivery (before v0.54): RESET_STREAM_AT is not offered
//
// The adapter needs quic.Transport (v0.35 and later); releases before
// v0.37.5 do not build with Go 1.21 or later at all.

// h3RoundTripper is quic-go's HTTP/3 client, whatever its type's name in
// the release (newH3Transport makes one).
type h3RoundTripper interface {
	http.RoundTripper
	Close() error
}
