package main

import (
	"crypto/tls"
	_ "unsafe" // go:linkname
)

// crypto/tls offers no per-config choice of TLS 1.3 cipher suites; the
// chacha20 test case needs a client that offers only ChaCha20. The process
// is one client, so the process-wide preference lists crypto/tls keeps (and
// marks reachable by go:linkname, go.dev/issue/67401) are narrowed for it.

//go:linkname tls13Suites crypto/tls.defaultCipherSuitesTLS13
var tls13Suites []uint16

//go:linkname tls13SuitesNoAES crypto/tls.defaultCipherSuitesTLS13NoAES
var tls13SuitesNoAES []uint16

// offerOnlyChaCha20 makes every ClientHello of this process offer only
// TLS_CHACHA20_POLY1305_SHA256.
func offerOnlyChaCha20() {
	tls13Suites = []uint16{tls.TLS_CHACHA20_POLY1305_SHA256}
	tls13SuitesNoAES = []uint16{tls.TLS_CHACHA20_POLY1305_SHA256}
}
