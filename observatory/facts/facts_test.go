package facts

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/quiver-quic/quiver/observatory/store"
)

func TestFromEvidence(t *testing.T) {
	ev := `{"scenario":"hs-v1-basic","verdict":"pass","facts":[
		{"key":"tp.raw","value":{"max_datagram_frame_size":"4004b0","disable_active_migration":"","0x1834":"5557",
			"initial_source_connection_id":"0102030405060708","stateless_reset_token":"00112233445566778899aabbccddeeff",
			"version_information":"000000016b3343cf0a1a2a3a00000001","0x17f7586d2cb570":"","max_idle_timeout":"80007530",
			"0x1d":"","0x17f7586d2cb571":""}},
		{"key":"tls.group","value":"X25519MLKEM768"},
		{"key":"cid.length","value":4},
		{"key":"retry.used","value":false},
		{"key":"loss.transfer-time","value":1.25},
		{"key":"cid.issued","value":{"limit-2":1,"limit-3":2}},
		{"key":"sr.token-matches","value":{"seq 0 (5a3acc47)":"no answer"}},
		{"key":"version.supported","value":["0x00000001","0x6b3343cf"]},
		{"key":"nothing","value":null}]}`
	fs, err := FromEvidence([]byte(ev))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, f := range fs {
		got[f.Key] = fmt.Sprintf("%s %s %s %s", f.Type, f.Value, f.Unit, f.Group)
	}
	want := map[string]string{
		// 0x4004 is a whole 2-byte varint; a byte after it makes the value no integer.
		"tp.max_datagram_frame_size":             "string 4004b0  tp",
		"tp.disable_active_migration":            "flag present  tp",
		"tp.initial_source_connection_id.length": "int 8 bytes tp",
		"tp.stateless_reset_token":               "flag present  tp",
		"tp.version_information":                 `list ["0x00000001","0x6b3343cf","0x00000001"]  tp`,
		"tp.0x17f7586d2cb570":                    "flag present  tp",
		"tp.max_idle_timeout":                    "int 30000 ms tp",
		"tp.grease":                              "int 1  tp",
		"tp.reset_stream_at":                     `list ["0x17f7586d2cb571","0x1d"]  tp`,
		"tls.group":                              "string X25519MLKEM768  ",
		"cid.length":                             "int 4 bytes ",
		"retry.used":                             "bool false  ",
		"loss.transfer-time":                     "float 1.25  ",
		"cid.issued.limit-2":                     "int 1  cid.issued",
		"cid.issued.limit-3":                     "int 2  cid.issued",
		"sr.token-matches":                       `string {"seq 0 (5a3acc47)":"no answer"}  `,
		"version.supported":                      `list ["0x00000001","0x6b3343cf"]  `,
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s = %q, want %q", k, got[k], w)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected fact %s = %q", k, got[k])
		}
	}
	for _, f := range fs {
		r := store.Record{Facts: []store.Fact{f}}
		_ = r
	}
	if _, err := FromEvidence([]byte(`{"facts":`)); err == nil {
		t.Error("FromEvidence of broken JSON: no error")
	}
}

func TestVarint(t *testing.T) {
	for _, tc := range []struct {
		hex string
		v   uint64
		n   int
	}{
		{"25", 37, 1}, {"7bbd", 15293, 2}, {"9d7f3e7d", 494878333, 4}, {"c2197c5eff14e88c", 151288809941952652, 8}, {"40", 0, 0}, {"", 0, 0},
	} {
		var b []byte
		fmt.Sscanf(tc.hex, "%x", &b)
		if v, n := varint(b); v != tc.v || n != tc.n {
			t.Errorf("varint(%s) = %d, %d; want %d, %d", tc.hex, v, n, tc.v, tc.n)
		}
	}
}

func TestComparable(t *testing.T) {
	for _, tc := range []struct {
		f    store.Fact
		want string
		ok   bool
	}{
		{store.Fact{Key: "ecn.marking", Type: store.FactString, Value: "not-ECT 17, ECT(1) 0, ECT(0) 0, CE 0"}, "not-ECT", true},
		{store.Fact{Key: "ecn.marking", Type: store.FactString, Value: "not-ECT 3, ECT(1) 0, ECT(0) 14, CE 0"}, "not-ECT+ECT(0)", true},
		{store.Fact{Key: "ack.delays", Type: store.FactString, Value: "1.6ms, 35.2ms"}, "", false},
		{store.Fact{Key: "loss.transfer-time", Type: store.FactFloat, Value: "1.5"}, "", false},
		{store.Fact{Key: "pto.first-retransmit-ms", Type: store.FactInt, Value: "300", Unit: "ms"}, "", false},
		{store.Fact{Key: "tp.max_idle_timeout", Group: "tp", Type: store.FactInt, Value: "30000", Unit: "ms"}, "30000", true},
		{store.Fact{Key: "handshake.server-bytes", Type: store.FactInt, Value: "2120"}, "", false},
		{store.Fact{Key: "version.supported", Type: store.FactList, Value: `["version 0xda2aaaba", "version 0x00000001"]`}, `["version 0x00000001"]`, true},
		{store.Fact{Key: "x.token", Type: store.FactString, Value: "token 5a3acc47e1"}, "", false},
		{store.Fact{Key: "retry.policy", Type: store.FactString, Value: "no retry on first contact"}, "no retry on first contact", true},
		{store.Fact{Key: "ack.ratio", Type: store.FactString, Value: "26 ACK packets for 50 ack-eliciting packets (0.52)"}, "1 ACK per 2 packets", true},
		{store.Fact{Key: "ack.ratio", Type: store.FactString, Value: "21 ACK packets for 50 ack-eliciting packets (0.42)"}, "1 ACK per 2 packets", true},
		{store.Fact{Key: "ack.ratio", Type: store.FactString, Value: "5 ACK packets for 50 ack-eliciting packets (0.10)"}, "1 ACK per 10 packets", true},
		// Noise around a policy stays on it: 7 ACKs for 50 packets (one
		// per 7.1) is still every 10th, 16 for 50 (one per 3.1) every 2nd.
		{store.Fact{Key: "ack.ratio-above-pn-100", Type: store.FactString, Value: "7 ACK packets for 50 ack-eliciting packets numbered above 100 (0.14)"}, "1 ACK per 10 packets", true},
		{store.Fact{Key: "ack.ratio-above-pn-100", Type: store.FactString, Value: "16 ACK packets for 50 ack-eliciting packets numbered above 100 (0.32)"}, "1 ACK per 2 packets", true},
		{store.Fact{Key: "ack.ratio", Type: store.FactString, Value: "50 ACK packets for 50 ack-eliciting packets (1.00)"}, "1 ACK per 1 packets", true},
		{store.Fact{Key: "ack.delays", Type: store.FactString, Value: "26 ACK packets for 50 ack-eliciting packets (0.52)"}, "", false},
		{store.Fact{Key: "v2.upgrade", Type: store.FactString, Value: "stays on v1 when v2 is offered"}, "stays on v1 when v2 is offered", true},
		{store.Fact{Key: "tls.cipher", Type: store.FactString, Value: "TLS_AES_128_GCM_SHA256"}, "TLS_AES_128_GCM_SHA256", true},
		{store.Fact{Key: "tls.group", Type: store.FactString, Value: "X25519MLKEM768"}, "X25519MLKEM768", true},
		{store.Fact{Key: "ecn.ce-feedback", Type: store.FactString, Value: "largest ECN-CE count 3; 3 CE-marked packets acknowledged"}, "", false},
		{store.Fact{Key: "ecn.ce-counted", Type: store.FactString, Value: "3 of 3"}, "", false},
		{store.Fact{Key: "keyupdate.server-cadence", Type: store.FactString, Value: "first update at packet 101"}, "first update at packet 101", true},
		{store.Fact{Key: "cid.retire-current", Type: store.FactString, Value: "close PROTOCOL_VIOLATION"}, "close PROTOCOL_VIOLATION", true},
	} {
		if v, ok := Comparable(tc.f); v != tc.want || ok != tc.ok {
			t.Errorf("Comparable(%+v) = %q, %v; want %q, %v", tc.f, v, ok, tc.want, tc.ok)
		}
	}
}

// cellsOf builds a history: one run per version, each map a result of one
// scenario with its facts.
func cellsOf(scenario string, versions []string, values []map[string]string) []store.FactCell {
	var out []store.FactCell
	for i, vs := range values {
		for k, v := range vs {
			typ, group, unit := store.FactInt, "", ""
			if strings.HasPrefix(k, "tp.") {
				group = "tp"
			}
			if strings.HasPrefix(v, "[") {
				typ = store.FactList
			}
			if v == "present" {
				typ = store.FactFlag
			}
			if k == "tp.max_datagram_frame_size" {
				unit = "bytes"
			}
			out = append(out, store.FactCell{
				ResultID: int64(100*(i+1)) + int64(len(scenario)), RunID: int64(i + 1), Scenario: scenario,
				Target: store.Target{Name: "quic-go releases", Implementation: "quic-go", Version: versions[i]},
				Fact:   store.Fact{Key: k, Group: group, Type: typ, Value: v, Unit: unit},
			})
		}
	}
	return out
}

func TestDetectChanges(t *testing.T) {
	vs := []string{"v0.40.1", "v0.41.0", "v0.42.0", "v0.43.1", "v0.44.0", "v0.46.0"}
	basic := cellsOf("hs-v1-basic", vs, []map[string]string{
		{"tp.max_datagram_frame_size": "1200", "tp.disable_active_migration": "present", "tp.grease": "1", "cid.length": "4"},
		{"tp.max_datagram_frame_size": "16383", "tp.disable_active_migration": "present", "tp.grease": "1"},
		{"tp.max_datagram_frame_size": "16383", "tp.disable_active_migration": "present", "tp.grease": "1", "cid.length": "4"},
		{"tp.max_datagram_frame_size": "16383", "tp.disable_active_migration": "present", "tp.grease": "1", "cid.length": "4"},
		{"tp.max_datagram_frame_size": "16383", "tp.grease": "1", "cid.length": "4"},
		{"tp.max_datagram_frame_size": "16383", "tp.grease": "1", "cid.length": "4", "tp.0x17f7586d2cb570": "present", "tp.active_connection_id_limit": "4"},
	})
	tpValid := cellsOf("hs-server-tp-valid", vs[:2], []map[string]string{
		{"tp.max_datagram_frame_size": "1200", "tp.grease": "1"},
		{"tp.max_datagram_frame_size": "16383", "tp.grease": "1"},
	})
	// A value that differs at every step is noise, not a change.
	noisy := cellsOf("close-closing-state", vs, []map[string]string{
		{"close.closes-to-burst": "3"}, {"close.closes-to-burst": "5"}, {"close.closes-to-burst": "6"},
		{"close.closes-to-burst": "4"}, {"close.closes-to-burst": "6"}, {"close.closes-to-burst": "5"},
	})
	// A value that changes three times and comes back to one it had is
	// noise too (a token's size); a regression and its fix is not.
	token := cellsOf("token-new-token-format", vs, []map[string]string{
		{"token.size": "74"}, {"token.size": "78"}, {"token.size": "78"}, {"token.size": "79"}, {"token.size": "78"}, {"token.size": "78"},
	})
	regress := cellsOf("cid-supply", vs, []map[string]string{
		{"cid.issued": "3"}, {"cid.issued": "3"}, {"cid.issued": "3"}, {"cid.issued": "1"}, {"cid.issued": "3"}, {"cid.issued": "3"},
	})
	var all []store.FactCell
	for i := range vs {
		for _, src := range [][]store.FactCell{basic, tpValid, noisy, token, regress} {
			for _, c := range src {
				if c.RunID == int64(i+1) {
					all = append(all, c)
				}
			}
		}
	}
	var got []string
	for _, c := range DetectChanges(all) {
		got = append(got, c.String()+" ["+strings.Join(c.Scenarios, ",")+"]")
	}
	want := []string{
		"quic-go v0.41.0: tp.max_datagram_frame_size 1200 → 16383 bytes [hs-server-tp-valid,hs-v1-basic]",
		"quic-go v0.43.1: cid.issued 3 → 1 [cid-supply]",
		"quic-go v0.44.0: cid.issued 1 → 3 [cid-supply]",
		"quic-go v0.44.0: tp.disable_active_migration no longer seen (was present) [hs-v1-basic]",
		"quic-go v0.46.0: tp.0x17f7586d2cb570 appeared (present) [hs-v1-basic]",
		"quic-go v0.46.0: tp.active_connection_id_limit appeared (4; absent means 2) [hs-v1-basic]",
	}
	if g, w := strings.Join(got, "\n"), strings.Join(want, "\n"); g != w {
		t.Errorf("DetectChanges:\n%s\nwant:\n%s", g, w)
	}
	var buf bytes.Buffer
	if err := WriteChanges(&buf, DetectChanges(all)); err != nil || !strings.Contains(buf.String(), "1200 → 16383") {
		t.Errorf("WriteChanges: %v\n%s", err, buf.String())
	}
	buf.Reset()
	WriteChanges(&buf, nil)
	if buf.String() != "no fact changes\n" {
		t.Errorf("WriteChanges(nil) = %q", buf.String())
	}
	j, _ := json.Marshal(DetectChanges(all)[0])
	if !strings.Contains(string(j), `"key":"tp.max_datagram_frame_size"`) || !strings.Contains(string(j), `"to_version":"v0.41.0"`) {
		t.Errorf("JSON: %s", j)
	}
}

// RESET_STREAM_AT moves from a draft's identifier to 0x1d, then both are
// sent (quic-go v0.54.0, v0.61.0, v0.62.0): one fact, three changes, and
// three changes along a long series are not noise.
func TestDetectChangesResetStreamAt(t *testing.T) {
	var vs []string
	var values []map[string]string
	for i := range 12 {
		vs = append(vs, fmt.Sprintf("v0.%d.0", 50+i))
		m := map[string]string{"tp.grease": "1"}
		switch {
		case i >= 10:
			m["tp.reset_stream_at"] = `["0x17f7586d2cb571","0x1d"]`
		case i >= 8:
			m["tp.reset_stream_at"] = `["0x1d"]`
		case i >= 4:
			m["tp.reset_stream_at"] = `["0x17f7586d2cb571"]`
		}
		values = append(values, m)
	}
	var got []string
	for _, c := range DetectChanges(cellsOf("hs-server-tp-valid", vs, values)) {
		got = append(got, c.String())
	}
	want := []string{
		`quic-go v0.54.0: tp.reset_stream_at appeared (["0x17f7586d2cb571"])`,
		`quic-go v0.58.0: tp.reset_stream_at ["0x17f7586d2cb571"] → ["0x1d"]`,
		`quic-go v0.60.0: tp.reset_stream_at ["0x1d"] → ["0x17f7586d2cb571","0x1d"]`,
	}
	if g, w := strings.Join(got, "\n"), strings.Join(want, "\n"); g != w {
		t.Errorf("DetectChanges:\n%s\nwant:\n%s", g, w)
	}
}

func FuzzFromEvidence(f *testing.F) {
	f.Add([]byte(`{"facts":[{"key":"tp","value":{"max_idle_timeout":"7530","0x1b":""}},{"key":"a","value":{"b":{"c":[1,2]}}}]}`))
	f.Add([]byte(`{"facts":[{"key":"tp.raw","value":{"version_information":"0000"}}]}`))
	f.Fuzz(func(t *testing.T, ev []byte) {
		fs, err := FromEvidence(ev)
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, f := range fs {
			if seen[f.Key] {
				t.Fatalf("key %s twice", f.Key)
			}
			seen[f.Key] = true
			Comparable(f)
		}
	})
}
