package analyze

import (
	"crypto/tls"
	"testing"

	"github.com/quiver-quic/quiver/quic/wire"
)

// FuzzAnalyze feeds arbitrary capture bytes to the analyzer, which must
// never panic, whatever the pcapng framing, headers or decrypted frames
// hold. The seeds are synthetic captures of whole connections.
func FuzzAnalyze(f *testing.F) {
	// Small seeds: the fuzzing engine makes little progress from captures
	// of several kilobytes.
	s := newSynth(f)
	s.compact = true
	c := s.conn(wire.Version1, tls.TLS_AES_128_GCM_SHA256, 8)
	c.handshake(false)
	c.gen[FromClient]++
	s.send(FromClient, s.client, c.short(FromClient, &wire.PingFrame{}))
	f.Add(s.bytes())
	s2 := newSynth(f)
	s2.compact = true
	c2 := s2.conn(wire.Version2, tls.TLS_CHACHA20_POLY1305_SHA256, 0)
	c2.handshake(true)
	f.Add(s2.bytes())
	f.Fuzz(func(t *testing.T, b []byte) {
		tr, err := AnalyzeBytes(b, Options{})
		if err != nil {
			return
		}
		tr.Handshakes()
		for _, c := range tr.Conns {
			c.Completed()
			c.Resumed()
		}
		_ = tr.Summary()
	})
}
