package qlog

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse checks that the reader never panics and that whatever it
// accepts satisfies the invariants it promises.
func FuzzParse(f *testing.F) {
	if b, err := os.ReadFile(filepath.Join("testdata", "small.sqlog")); err == nil {
		f.Add(b)
	}
	f.Add(writeTrace(f, sampleEvents()))
	f.Add([]byte("\x1e{\"qlog_version\":\"0.3\",\"qlog_format\":\"JSON-SEQ\",\"trace\":{\"common_fields\":{\"reference_time\":-1e3}}}\x1e\x1e{\"time\":0,\"name\":\"a:b\",\"data\":null}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse(data)
		if err != nil {
			return
		}
		if file.Header.QlogVersion != QlogVersion || file.Header.QlogFormat != QlogFormat {
			t.Fatalf("accepted header %+v", file.Header)
		}
		for _, r := range file.Events {
			if r.Category() == "" || r.Type() == "" {
				t.Fatalf("accepted event name %q", r.Name)
			}
			// Typed decoding may fail on foreign data but must not panic.
			switch r.Name {
			case NamePacketSent:
				_, _ = As[PacketSent](r)
			case NamePacketReceived:
				_, _ = As[PacketReceived](r)
			case NameMetricsUpdated:
				_, _ = As[MetricsUpdated](r)
			case NameConnectionClosed:
				_, _ = As[ConnectionClosed](r)
			case NameParametersSet:
				_, _ = As[ParametersSet](r)
			case NameConnectionStarted:
				_, _ = As[ConnectionStarted](r)
			case NameLossTimerUpdated:
				_, _ = As[LossTimerUpdated](r)
			}
		}
	})
}
