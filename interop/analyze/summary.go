package analyze

import "github.com/quiver-quic/quiver/quic/wire"

// Summary is the compact view of a trace that the result file keeps per
// test cell.
type Summary struct {
	Datagrams     int            `json:"datagrams"`
	Packets       int            `json:"packets"`
	Undecryptable int            `json:"undecryptable"`
	Unattributed  int            `json:"unattributed"`
	Handshakes    HandshakeCount `json:"handshakes"`
	Conns         []ConnSummary  `json:"conns,omitempty"`
}

// HandshakeCount is §4.3's count: completed handshakes, attempts (distinct
// server Initial SCIDs) and the surplus of attempts.
type HandshakeCount struct {
	Completed int `json:"completed"`
	Attempts  int `json:"attempts"`
	Abandoned int `json:"abandoned"`
}

// ConnSummary is the per-connection part of a Summary.
type ConnSummary struct {
	Versions              []string `json:"versions"`
	Completed             bool     `json:"completed"`
	Resumed               bool     `json:"resumed,omitempty"`
	CipherSuite           uint16   `json:"cipher_suite,omitempty"`
	ALPN                  string   `json:"alpn,omitempty"`
	Retries               int      `json:"retries,omitempty"`
	ZeroRTTBytes          uint64   `json:"zero_rtt_stream_bytes,omitempty"`
	KeyUpdates            [2]int   `json:"key_updates"`
	Paths                 int      `json:"paths"`
	MaxAmplificationRatio float64  `json:"max_amplification_ratio"`
	Packets               int      `json:"packets"`
}

// Summary condenses the trace.
func (t *Trace) Summary() Summary {
	s := Summary{Datagrams: t.Datagrams, Packets: len(t.Packets), Undecryptable: t.Undecryptable, Unattributed: t.Unattributed}
	s.Handshakes.Completed, s.Handshakes.Attempts = t.Handshakes()
	s.Handshakes.Abandoned = max(0, s.Handshakes.Attempts-s.Handshakes.Completed)
	for _, c := range t.Conns {
		cs := ConnSummary{Completed: c.Completed(), Resumed: c.Resumed(), Retries: len(c.Retries),
			ZeroRTTBytes: c.ZeroRTTStreamBytes, Paths: len(c.Paths), Packets: len(c.Packets),
			MaxAmplificationRatio: c.Amplification.MaxRatio}
		vs := map[wire.Version]bool{}
		for _, v := range append(append([]wire.Version{}, c.ClientVersions...), c.ServerVersions...) {
			if !vs[v] {
				vs[v] = true
				cs.Versions = append(cs.Versions, v.String())
			}
		}
		if c.ServerHello != nil {
			cs.CipherSuite = c.ServerHello.CipherSuite
		}
		if c.EncryptedExtensions != nil {
			cs.ALPN = c.EncryptedExtensions.ALPN
		}
		cs.KeyUpdates = [2]int{c.KeyPhases[FromClient].Generations, c.KeyPhases[FromServer].Generations}
		s.Conns = append(s.Conns, cs)
	}
	return s
}
