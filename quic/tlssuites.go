package quic

import (
	"crypto/tls"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	_ "unsafe" // go:linkname
)

// crypto/tls chooses TLS 1.3 cipher suites itself: Config.CipherSuites
// applies to TLS 1.2 only, and a client offers AES-128-GCM, ChaCha20 and
// AES-256-GCM in an order that depends on AES hardware support. RFC 9001
// §5.3 lets any TLS 1.3 suite protect QUIC packets, and interop test cases
// ("chacha20") and conformance scenarios (tls-chacha20-only,
// tls-aes256-only) need a client that offers exactly one. The only handle
// crypto/tls exposes for that is the process-wide preference list it keeps
// for TLS 1.3, which it marks as reachable by go:linkname (go.dev/issue/67401).
// Clients offer exactly that list and servers choose only from it.
//
// Rewriting it is confined to this file and happens only in a process that
// opted in with EnableTLS13SuiteControl: a program that never calls it
// never touches crypto/tls's variables, and its handshake steps take no
// lock.

// suiteControl is set by EnableTLS13SuiteControl.
var suiteControl atomic.Bool

// errNoSuiteControl is the error of a suite list without the opt-in.
var errNoSuiteControl = errors.New("quic: TLS 1.3 suite lists need quic.EnableTLS13SuiteControl (crypto/tls has no per-connection TLS 1.3 suite setting)")

// EnableTLS13SuiteControl opts this process in to choosing TLS 1.3 cipher
// suites: RestrictTLS13Suites and Config.TLS13Suites, which fail without
// it. Go's crypto/tls offers no such choice ("Note that TLS 1.3
// ciphersuites are not configurable", tls.Config.CipherSuites), so both
// rewrite the process-wide list crypto/tls keeps, through go:linkname, and
// from this call on every crypto/tls step of every QUIC connection in the
// process holds a lock that serialises it with those rewrites. Test tools
// call it (the quiver command, the conformance suite, bench and interop
// endpoints), never the engine: a server or client that does not choose
// suites pays nothing and runs crypto/tls as shipped. Call it before the
// first handshake of the process; it cannot be undone.
func EnableTLS13SuiteControl() { suiteControl.Store(true) }

//go:linkname tls13Suites crypto/tls.defaultCipherSuitesTLS13
var tls13Suites []uint16

//go:linkname tls13SuitesNoAES crypto/tls.defaultCipherSuitesTLS13NoAES
var tls13SuitesNoAES []uint16

// The TLS 1.3 suites of RFC 8446 §B.4 that crypto/tls does not implement.
const (
	TLS_AES_128_CCM_SHA256   uint16 = 0x1304
	TLS_AES_128_CCM_8_SHA256 uint16 = 0x1305
)

// suitesMu serialises changes to the process-wide lists.
var suitesMu sync.Mutex

// TLS13Suites are the TLS 1.3 cipher suites every crypto/tls client in this
// process offers, in order, and every server accepts, as crypto/tls holds them
// now.
func TLS13Suites() []uint16 {
	suitesMu.Lock()
	defer suitesMu.Unlock()
	return append([]uint16(nil), tls13Suites...)
}

// RestrictTLS13Suites makes every crypto/tls client in this process offer
// exactly suites (in that order) and every server choose only among them,
// until restore is called; it needs EnableTLS13SuiteControl. The setting
// is process-wide, not per connection:
// call it before any handshake starts and restore after the last one ends
// (crypto/tls reads the lists without locking). An empty list or a suite that
// is not a TLS 1.3 suite (RFC 8446 §B.4) is an error and changes nothing.
// TLS_AES_128_CCM_SHA256 and TLS_AES_128_CCM_8_SHA256 may be offered, for
// conformance probes, but crypto/tls implements neither: a server that
// selects one fails the handshake. Reserved GREASE values (RFC 8701:
// 0x0A0A, 0x1A1A, … 0xFAFA) may be listed too, so that a client offers
// them; a server never selects one, since crypto/tls knows no such suite.
func RestrictTLS13Suites(suites ...uint16) (restore func(), err error) {
	if !suiteControl.Load() {
		return nil, errNoSuiteControl
	}
	if len(suites) == 0 {
		return nil, fmt.Errorf("quic: RestrictTLS13Suites needs at least one suite")
	}
	if err := checkTLS13Suites(suites); err != nil {
		return nil, err
	}
	// Exclusive with every handshake step of the engine, so that a
	// per-connection list (WithTLS13Suites) never saves or restores a
	// list half changed.
	tlsStepGate.Lock()
	defer tlsStepGate.Unlock()
	suitesMu.Lock()
	defer suitesMu.Unlock()
	saved, savedNoAES := tls13Suites, tls13SuitesNoAES
	tls13Suites = append([]uint16(nil), suites...)
	tls13SuitesNoAES = append([]uint16(nil), suites...)
	var once sync.Once
	return func() {
		once.Do(func() {
			tlsStepGate.Lock()
			defer tlsStepGate.Unlock()
			suitesMu.Lock()
			defer suitesMu.Unlock()
			tls13Suites, tls13SuitesNoAES = saved, savedNoAES
		})
	}, nil
}

// tlsStepGate makes a per-connection suite list possible although
// crypto/tls keeps only the process-wide one: crypto/tls reads that list
// when a client builds its ClientHello (tls.QUICConn.Start) and when a
// server picks a suite for one (HandleData). Every such step this package
// runs (and the conformance suite's raw client, through WithTLS13Suites)
// holds the gate shared; a ClientHello with its own list is built with the
// gate held exclusively, the list swapped in and restored around that one
// call, so no other handshake in the process reads it.
var tlsStepGate sync.RWMutex

// WithTLS13Suites runs f, a crypto/tls step of a QUIC connection (Start,
// HandleData), with suites as the TLS 1.3 cipher suites crypto/tls offers
// and accepts; nil runs f with the process's list as it is. A ClientHello
// built by f offers exactly suites, so one connection can offer its own
// list while others handshake beside it. The suites accepted are those of
// RestrictTLS13Suites (TLS 1.3 suites, the two CCM suites crypto/tls does
// not implement, and RFC 8701 GREASE values). Without
// EnableTLS13SuiteControl, f runs as it is and a non-nil suites is an
// error.
func WithTLS13Suites(suites []uint16, f func() error) error {
	if !suiteControl.Load() {
		if suites != nil {
			return errNoSuiteControl
		}
		return f()
	}
	if suites == nil {
		tlsStepGate.RLock()
		defer tlsStepGate.RUnlock()
		return f()
	}
	if err := checkTLS13Suites(suites); err != nil {
		return err
	}
	tlsStepGate.Lock()
	defer tlsStepGate.Unlock()
	suitesMu.Lock()
	saved, savedNoAES := tls13Suites, tls13SuitesNoAES
	tls13Suites = append([]uint16(nil), suites...)
	tls13SuitesNoAES = append([]uint16(nil), suites...)
	suitesMu.Unlock()
	defer func() {
		suitesMu.Lock()
		tls13Suites, tls13SuitesNoAES = saved, savedNoAES
		suitesMu.Unlock()
	}()
	return f()
}

// checkTLS13Suites accepts what a ClientHello may offer as TLS 1.3 suites.
func checkTLS13Suites(suites []uint16) error {
	if len(suites) == 0 {
		return fmt.Errorf("quic: at least one TLS 1.3 cipher suite is needed")
	}
	for _, s := range suites {
		switch s {
		case tls.TLS_AES_128_GCM_SHA256, tls.TLS_AES_256_GCM_SHA384, tls.TLS_CHACHA20_POLY1305_SHA256,
			TLS_AES_128_CCM_SHA256, TLS_AES_128_CCM_8_SHA256:
		default:
			if IsGreaseValue(s) {
				continue
			}
			return fmt.Errorf("quic: %s (%#04x) is not a TLS 1.3 cipher suite", tls.CipherSuiteName(s), s)
		}
	}
	return nil
}

// IsGreaseValue reports whether v is one of the sixteen reserved GREASE
// code points of RFC 8701 §2 (0x0A0A, 0x1A1A, … 0xFAFA), which TLS cipher
// suites, extensions, groups and versions all reserve.
func IsGreaseValue(v uint16) bool {
	return v&0x0f0f == 0x0a0a && v>>8 == v&0xff
}

// ParseTLS13Suite maps a cipher name as users write it (aes128, aes256,
// chacha20, or the IANA name) to its TLS 1.3 suite.
func ParseTLS13Suite(name string) (uint16, error) {
	switch name {
	case "aes128", "aes128gcm", "aes-128-gcm", "TLS_AES_128_GCM_SHA256":
		return tls.TLS_AES_128_GCM_SHA256, nil
	case "aes256", "aes256gcm", "aes-256-gcm", "TLS_AES_256_GCM_SHA384":
		return tls.TLS_AES_256_GCM_SHA384, nil
	case "chacha20", "chacha20poly1305", "chacha20-poly1305", "TLS_CHACHA20_POLY1305_SHA256":
		return tls.TLS_CHACHA20_POLY1305_SHA256, nil
	}
	return 0, fmt.Errorf("unknown cipher %q (want aes128, aes256 or chacha20)", name)
}
