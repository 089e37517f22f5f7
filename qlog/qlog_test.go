package qlog

import (
	"bytes"
	"encoding/json"
	"flag"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite golden files")

// epoch is a fixed reference time so that output is reproducible.
var epoch = time.Unix(1700000000, 123456000)

func at(ms float64) time.Time { return epoch.Add(time.Duration(ms * float64(time.Millisecond))) }

// sampleEvents covers every event type with the members each one writes, so
// that a round trip through Writer and Reader must give them back unchanged.
func sampleEvents() []Event {
	odcid := HexBytes{0x83, 0x94, 0xc8, 0xf0, 0x3e, 0x51, 0x57, 0x08}
	scid := HexBytes{0xc1, 0x01}
	return []Event{
		ConnectionStarted{
			Src:    netip.MustParseAddrPort("192.0.2.1:50000"),
			Dst:    netip.MustParseAddrPort("198.51.100.7:443"),
			SrcCID: scid, DstCID: odcid,
		},
		VersionInformation{ClientVersions: []Version{1, 0x6b3343cf}, ChosenVersion: 1},
		ALPNInformation{ClientALPNs: []string{"h3", "hq-interop"}, ChosenALPN: "h3"},
		ParametersSet{
			Owner:                     OwnerLocal,
			InitialSourceConnectionID: scid,
			MaxIdleTimeout:            30 * time.Second,
			MaxUDPPayloadSize:         1472,
			AckDelayExponent:          3,
			MaxAckDelay:               25 * time.Millisecond,
			ActiveConnectionIDLimit:   4,
			InitialMaxData:            1 << 20,
			InitialMaxStreamDataUni:   1 << 18,
			InitialMaxStreamsBidi:     100,
			MaxDatagramFrameSize:      1200,
			MinAckDelay:               1500 * time.Microsecond,
			GreaseQUICBit:             true,
			PreferredAddress: &PreferredAddress{
				IPv4: netip.MustParseAddr("203.0.113.9"), PortV4: 4433,
				ConnectionID: HexBytes{1, 2, 3}, StatelessResetToken: HexBytes(bytes.Repeat([]byte{0xab}, 16)),
			},
		},
		ConnectionStateUpdated{New: StateAttempted},
		KeyUpdated{KeyType: KeyClientInitial, New: HexBytes{0xde, 0xad}, Trigger: "tls"},
		PacketSent{
			Header: PacketHeader{PacketType: PacketTypeInitial, PacketNumber: 0, Version: 1,
				DCID: odcid, SCID: scid, Token: &Token{Type: "retry", Data: HexBytes{9, 9}}, Length: 1182},
			Frames: []FrameInfo{
				{FrameType: FrameCrypto, Offset: 0, Length: 290},
				{FrameType: FramePadding, Length: 880},
			},
			Raw: RawInfo{Length: 1200, PayloadLength: 1162},
		},
		DatagramsSent{Count: 1, Raw: []RawInfo{{Length: 1200}}},
		LossTimerUpdated{EventType: TimerSet, TimerType: "pto", PacketNumberSpace: SpaceInitial, Delta: 999 * time.Millisecond},
		DatagramsReceived{Count: 2, Raw: []RawInfo{{Length: 1200}, {Length: 57}}},
		PacketReceived{
			Header: PacketHeader{PacketType: PacketTypeHandshake, PacketNumber: 1, Version: 1, DCID: scid, SCID: HexBytes{}},
			Frames: []FrameInfo{
				{FrameType: FrameAck, AckDelay: 1234567 * time.Nanosecond, AckedRanges: []AckRange{{0, 0}, {2, 5}}, ECT0: 3},
				{FrameType: FrameNewConnectionID, SequenceNumber: 1, RetirePriorTo: 0, ConnectionID: HexBytes{7, 7, 7, 7},
					StatelessResetToken: HexBytes(bytes.Repeat([]byte{0x11}, 16))},
				{FrameType: FrameMaxStreams, StreamType: StreamTypeBidirectional, Maximum: 100},
				{FrameType: FrameNewToken, Token: &Token{Data: HexBytes{1, 2, 3, 4}}},
			},
			Raw:         RawInfo{Length: 1000},
			IsCoalesced: true,
		},
		MetricsUpdated{MinRTT: 10 * time.Millisecond, SmoothedRTT: 12500 * time.Microsecond, LatestRTT: 11 * time.Millisecond,
			RTTVariance: 5 * time.Millisecond, CongestionWindow: 12000, BytesInFlight: 0, SSThresh: 1 << 40, PacketsInFlight: 0,
			PacingRate: 1e9},
		MetricsUpdated{Fields: MetricBytesInFlight | MetricCongestionWindow, CongestionWindow: 14000, BytesInFlight: 1200},
		CongestionStateUpdated{Old: CongestionSlowStart, New: CongestionRecovery, Trigger: "ecn"},
		PacketSent{
			Header: PacketHeader{PacketType: PacketType1RTT, PacketNumber: 7, DCID: odcid, KeyPhaseBit: true},
			Frames: []FrameInfo{
				{FrameType: FrameStream, StreamID: 4, Offset: 1000, Length: 200, Fin: true},
				{FrameType: FrameResetStream, StreamID: 8, ErrorCode: 0x10c, FinalSize: 50},
				{FrameType: FrameStopSending, StreamID: 12, ErrorCode: 0x10d},
				{FrameType: FrameMaxData, Maximum: 1 << 30},
				{FrameType: FrameMaxStreamData, StreamID: 4, Maximum: 1 << 21},
				{FrameType: FrameDataBlocked, Limit: 77},
				{FrameType: FrameStreamDataBlocked, StreamID: 4, Limit: 66},
				{FrameType: FrameStreamsBlocked, StreamType: StreamTypeUnidirectional, Limit: 3},
				{FrameType: FrameRetireConnectionID, SequenceNumber: 2},
				{FrameType: FramePathChallenge, Data: HexBytes{1, 2, 3, 4, 5, 6, 7, 8}},
				{FrameType: FramePathResponse, Data: HexBytes{8, 7, 6, 5, 4, 3, 2, 1}},
				{FrameType: FrameHandshakeDone},
				{FrameType: FramePing},
				{FrameType: FrameDatagram, Length: 33},
				{FrameType: FrameAckFrequency, SequenceNumber: 1, AckElicitingThreshold: 10, RequestMaxAckDelay: 40 * time.Millisecond, ReorderingThreshold: 1},
				{FrameType: FrameImmediateAck},
				{FrameType: FrameUnknown, RawFrameType: 0x4242, Length: 5},
			},
			Raw:     RawInfo{Length: 1300},
			Trigger: "pto_probe",
		},
		PacketLost{Header: PacketHeader{PacketType: PacketType1RTT, PacketNumber: 5, DCID: odcid}, Trigger: "time_threshold"},
		PacketDropped{Raw: RawInfo{Length: 40}, Trigger: "header_parse_error"},
		PacketDropped{Header: PacketHeader{PacketType: PacketTypeRetry, Version: 1, DCID: scid, SCID: HexBytes{5}}, Trigger: "unexpected_packet"},
		PacketReceived{Header: PacketHeader{PacketType: PacketTypeVersionNegotiation, DCID: scid, SCID: odcid}},
		KeyUpdated{KeyType: KeyServer1RTT, Old: HexBytes{1}, New: HexBytes{2}, Generation: 1, Trigger: "remote_update"},
		KeyDiscarded{KeyType: KeyClientHandshake, Trigger: "tls"},
		MTUUpdated{Old: 1200, New: 1452, Done: true},
		MTUUpdated{New: 1200},
		PacketSent{
			Header: PacketHeader{PacketType: PacketType1RTT, PacketNumber: 9, DCID: odcid},
			Frames: []FrameInfo{{FrameType: FrameConnectionClose, ErrorSpace: ErrorSpaceTransport, ErrorCode: 0xa,
				Reason: "bad \"frame\"\n\x01", TriggerFrameType: 0x1e}},
		},
		PacketSent{
			Header: PacketHeader{PacketType: PacketType1RTT, PacketNumber: 10, DCID: odcid},
			Frames: []FrameInfo{{FrameType: FrameConnectionClose, ErrorSpace: ErrorSpaceApplication, ErrorCode: 0x100, Reason: "bye"}},
		},
		ConnectionClosed{Owner: OwnerRemote, Code: 0x128, Reason: "alert", Trigger: "error"},
		ConnectionClosed{Owner: OwnerLocal, Code: 0x999, Trigger: "error"},
		ConnectionClosed{Owner: OwnerLocal, Application: true, Code: 0x100, Reason: "done", Trigger: "application"},
		ConnectionStateUpdated{Old: StateDraining, New: StateClosed},
	}
}

func writeTrace(t testing.TB, events []Event) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, Trace{Title: "quiver test", Vantage: VantageClient,
		ODCID: []byte{0x83, 0x94, 0xc8, 0xf0, 0x3e, 0x51, 0x57, 0x08}, ReferenceTime: epoch})
	if err != nil {
		t.Fatal(err)
	}
	for i, ev := range events {
		w.Record(at(float64(i)*1.25), ev)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// decodeAs decodes r into a new value of ev's type, so the round trip test
// can compare like with like.
func decodeAs(t *testing.T, r Record, ev Event) Event {
	t.Helper()
	p := reflect.New(reflect.TypeOf(ev))
	if err := r.Decode(p.Interface()); err != nil {
		t.Fatalf("%s: %v", r.Name, err)
	}
	return p.Elem().Interface().(Event)
}

func TestRoundTrip(t *testing.T) {
	events := sampleEvents()
	f, err := Parse(writeTrace(t, events))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Ordered(); err != nil {
		t.Error(err)
	}
	h := f.Header
	if h.QlogVersion != "0.3" || h.QlogFormat != "JSON-SEQ" || h.VantagePoint != "client" ||
		h.ODCID != "8394c8f03e515708" || h.TimeFormat != "relative" || h.Title != "quiver test" {
		t.Errorf("header = %+v", h)
	}
	if want := 1700000000123.456; h.ReferenceTime != want {
		t.Errorf("reference_time = %v, want %v", h.ReferenceTime, want)
	}
	if len(f.Events) != len(events) {
		t.Fatalf("read %d events, wrote %d", len(f.Events), len(events))
	}
	for i, want := range events {
		r := f.Events[i]
		if r.Name != want.Name() {
			t.Errorf("event %d: name %q, want %q", i, r.Name, want.Name())
			continue
		}
		if wantTime := float64(i) * 1.25; r.Time != wantTime {
			t.Errorf("event %d: time %v, want %v", i, r.Time, wantTime)
		}
		got := decodeAs(t, r, want)
		if m, ok := want.(MetricsUpdated); ok && m.Fields == 0 {
			m.Fields = MetricAll // decoding reports the members present
			want = m
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("event %d (%s) round trip:\n got %+v\nwant %+v\ndata %s", i, r.Name, got, want, r.RawData)
		}
	}
}

// TestQvisShapes checks members whose spelling qvis depends on, in the
// generic form a JavaScript tool sees.
func TestQvisShapes(t *testing.T) {
	f, err := Parse(writeTrace(t, sampleEvents()))
	if err != nil {
		t.Fatal(err)
	}
	sent := f.Named(NamePacketSent)[0].Data
	hdr := sent["header"].(map[string]any)
	if hdr["packet_type"] != "initial" || hdr["packet_number"] != 0.0 || hdr["version"] != "00000001" || hdr["dcid"] != "8394c8f03e515708" {
		t.Errorf("initial header = %v", hdr)
	}
	if raw := sent["raw"].(map[string]any); raw["length"] != 1200.0 {
		t.Errorf("raw = %v", raw)
	}
	recv := f.Named(NamePacketReceived)[0].Data
	ack := recv["frames"].([]any)[0].(map[string]any)
	if got := ack["acked_ranges"]; !reflect.DeepEqual(got, []any{[]any{0.0}, []any{2.0, 5.0}}) {
		t.Errorf("acked_ranges = %v", got)
	}
	if ack["ack_delay"] != 1.234567 {
		t.Errorf("ack_delay = %v", ack["ack_delay"])
	}
	short := f.Named(NamePacketSent)[1].Data["header"].(map[string]any)
	if _, ok := short["version"]; ok {
		t.Errorf("1-RTT header has a version: %v", short)
	}
	if _, ok := short["scid"]; ok {
		t.Errorf("1-RTT header has an scid: %v", short)
	}
	closeFrame := f.Named(NamePacketSent)[2].Data["frames"].([]any)[0].(map[string]any)
	if closeFrame["error_code"] != "protocol_violation" || closeFrame["raw_error_code"] != 10.0 ||
		closeFrame["reason"] != "bad \"frame\"\n\x01" {
		t.Errorf("connection_close = %v", closeFrame)
	}
	closed := f.Named(NameConnectionClosed)
	if closed[0].Data["connection_code"] != "crypto_error_0x128" || closed[1].Data["connection_code"] != float64(0x999) {
		t.Errorf("connection_closed codes = %v, %v", closed[0].Data, closed[1].Data)
	}
	if len(f.Named("security:key_updated")) != 2 {
		t.Errorf("key updates are not logged as security:key_updated")
	}
	m := f.Named(NameMetricsUpdated)[1].Data
	if len(m) != 2 || m["bytes_in_flight"] != 1200.0 {
		t.Errorf("partial metrics_updated = %v", m)
	}
}

func TestGolden(t *testing.T) {
	odcid := HexBytes{0x01, 0x02, 0x03, 0x04}
	got := writeTrace(t, []Event{
		ConnectionStarted{Src: netip.MustParseAddrPort("[2001:db8::1]:4433"), Dst: netip.MustParseAddrPort("[2001:db8::2]:443"), DstCID: odcid},
		PacketSent{
			Header: PacketHeader{PacketType: PacketTypeInitial, PacketNumber: 0, Version: 1, DCID: odcid, SCID: HexBytes{}},
			Frames: []FrameInfo{{FrameType: FrameCrypto, Length: 245}, {FrameType: FramePadding, Length: 900}},
			Raw:    RawInfo{Length: 1200},
		},
		MetricsUpdated{Fields: MetricSmoothedRTT | MetricCongestionWindow, SmoothedRTT: 333 * time.Millisecond, CongestionWindow: 13500},
		PacketReceived{
			Header: PacketHeader{PacketType: PacketType1RTT, PacketNumber: 3, DCID: HexBytes{}},
			Frames: []FrameInfo{{FrameType: FrameAck, AckDelay: 250 * time.Microsecond, AckedRanges: []AckRange{{0, 3}}}},
		},
		ConnectionClosed{Owner: OwnerLocal, Code: 0, Trigger: "clean"},
	})
	path := filepath.Join("testdata", "small.sqlog")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("output differs from %s (run with -update if the change is intended):\n%s", path, got)
	}
}

func TestEscaping(t *testing.T) {
	for _, s := range []string{"", "plain", "q\"b\\s", "\x00\x1f\x7f", "héllo ✓", "bad \xff utf8", "\u2028"} {
		b := appendQuoted(nil, s)
		var got string
		if err := json.Unmarshal(b, &got); err != nil {
			t.Errorf("%q encodes to invalid JSON %s: %v", s, b, err)
			continue
		}
		want := strings.ToValidUTF8(s, "\ufffd")
		if got != want {
			t.Errorf("%q decodes to %q, want %q", s, got, want)
		}
	}
}

func TestParseRejects(t *testing.T) {
	const rs = "\x1e"
	header := `{"qlog_version":"0.3","qlog_format":"JSON-SEQ","trace":{"vantage_point":{"type":"server"},"common_fields":{"reference_time":5,"time_format":"relative"}}}`
	good := rs + header + "\n" + rs + `{"time":1.5,"name":"transport:packet_sent","data":{}}` + "\n"
	if _, err := Parse([]byte(good)); err != nil {
		t.Fatalf("good trace rejected: %v", err)
	}
	for name, in := range map[string]string{
		"no separator":          header,
		"empty":                 "",
		"only separator":        rs,
		"version":               strings.Replace(good, `"0.3"`, `"0.4"`, 1),
		"missing version":       strings.Replace(good, `"qlog_version":"0.3",`, ``, 1),
		"format":                strings.Replace(good, `"JSON-SEQ"`, `"JSON"`, 1),
		"string reference":      strings.Replace(good, `"reference_time":5`, `"reference_time":"5"`, 1),
		"missing reference":     strings.Replace(good, `"reference_time":5,`, ``, 1),
		"absolute time":         strings.Replace(good, `"relative"`, `"absolute"`, 1),
		"no trace":              rs + `{"qlog_version":"0.3","qlog_format":"JSON-SEQ"}`,
		"string time":           strings.Replace(good, `"time":1.5`, `"time":"1.5"`, 1),
		"missing time":          strings.Replace(good, `"time":1.5,`, ``, 1),
		"name without category": strings.Replace(good, `"transport:packet_sent"`, `"packet_sent"`, 1),
		"empty type":            strings.Replace(good, `"transport:packet_sent"`, `"transport:"`, 1),
		"data not object":       strings.Replace(good, `"data":{}`, `"data":[1]`, 1),
		"truncated event":       good[:len(good)-5],
	} {
		if _, err := Parse([]byte(in)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestOrdered(t *testing.T) {
	f := &File{Events: []Record{{Time: 1, Name: "a:b"}, {Time: 0.5, Name: "a:c"}}}
	if f.Ordered() == nil {
		t.Error("decreasing times accepted")
	}
}

func TestAsChecksName(t *testing.T) {
	r := Record{Name: NamePacketReceived, RawData: json.RawMessage(`{"header":{"packet_type":"1RTT"}}`)}
	if _, err := As[PacketSent](r); err == nil {
		t.Error("As decoded a packet_received as PacketSent")
	}
	ev, err := As[PacketReceived](r)
	if err != nil || ev.Header.PacketType != PacketType1RTT {
		t.Errorf("As = %+v, %v", ev, err)
	}
}

func TestMemoryRecorder(t *testing.T) {
	var m MemoryRecorder
	var file bytes.Buffer
	w, err := NewWriter(&file, Trace{Vantage: VantageServer, ReferenceTime: epoch})
	if err != nil {
		t.Fatal(err)
	}
	r := Tee(&m, nil, Discard, w)
	if !r.Enabled() {
		t.Fatal("tee with enabled recorders reports disabled")
	}
	r.Record(at(1), PacketSent{Header: PacketHeader{PacketType: PacketType1RTT, PacketNumber: 1}})
	r.Record(at(2), MetricsUpdated{})
	r.Record(at(3), PacketSent{Header: PacketHeader{PacketType: PacketType1RTT, PacketNumber: 2}})
	sent := EventsOf[PacketSent](&m)
	if len(sent) != 2 || sent[1].Header.PacketNumber != 2 {
		t.Errorf("EventsOf = %+v", sent)
	}
	if n := len(m.Named(NameMetricsUpdated)); n != 1 {
		t.Errorf("Named found %d metrics events", n)
	}
	if evs := m.Events(); len(evs) != 3 || !evs[2].Time.Equal(at(3)) {
		t.Errorf("Events = %+v", evs)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if w.Enabled() || Discard.Enabled() {
		t.Error("closed writer or Discard reports enabled")
	}
	f, err := Parse(file.Bytes())
	if err != nil || len(f.Events) != 3 {
		t.Fatalf("tee'd file: %v, %v", f, err)
	}
	m.Reset()
	if len(m.Events()) != 0 {
		t.Error("Reset kept events")
	}
}

func TestFileWriter(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "qlog")
	odcid := []byte{0xca, 0xfe, 0x00, 0x01}
	w, err := NewFileWriter(dir, odcid, VantageServer)
	if err != nil {
		t.Fatal(err)
	}
	w.Record(time.Now(), ConnectionStateUpdated{New: StateHandshakeComplete})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	f, err := ReadFile(filepath.Join(dir, "cafe0001_server.sqlog"))
	if err != nil {
		t.Fatal(err)
	}
	if f.Header.VantagePoint != "server" || f.Header.ODCID != "cafe0001" || len(f.Events) != 1 {
		t.Errorf("file = %+v", f)
	}
	if _, err := NewFileWriter(dir, odcid, VantageNetwork); err == nil {
		t.Error("network vantage accepted for a connection file")
	}
	if _, err := NewFileWriter(dir, nil, VantageClient); err == nil {
		t.Error("empty ODCID accepted")
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, io.ErrClosedPipe }

func TestWriteErrorIsKept(t *testing.T) {
	w, err := NewWriter(failWriter{}, Trace{ReferenceTime: epoch})
	if err != nil {
		t.Fatal(err) // the header sits in the buffer until the first flush
	}
	if err := w.Flush(); err == nil {
		t.Fatal("Flush to a failing writer succeeded")
	}
	if w.Enabled() {
		t.Error("writer still enabled after an error")
	}
	if w.Close() == nil || w.Err() == nil {
		t.Error("error forgotten")
	}
}

// TestRecordDoesNotAllocate guards the hot path: encoding into the reusable
// buffer must not allocate once the buffer has grown.
func TestRecordDoesNotAllocate(t *testing.T) {
	w, err := NewWriter(io.Discard, Trace{ReferenceTime: epoch})
	if err != nil {
		t.Fatal(err)
	}
	var ev Event = PacketSent{
		Header: PacketHeader{PacketType: PacketType1RTT, PacketNumber: 77, DCID: HexBytes{1, 2, 3, 4, 5, 6, 7, 8}},
		Frames: []FrameInfo{
			{FrameType: FrameAck, AckDelay: time.Millisecond, AckedRanges: []AckRange{{1, 70}, {72, 76}}},
			{FrameType: FrameStream, StreamID: 0, Offset: 1 << 20, Length: 1200},
		},
		Raw: RawInfo{Length: 1252},
	}
	now := at(10)
	w.Record(now, ev)
	if n := testing.AllocsPerRun(100, func() { w.Record(now, ev) }); n != 0 {
		t.Errorf("Record allocates %v times per event", n)
	}
}

func BenchmarkRecordPacketSent(b *testing.B) {
	w, _ := NewWriter(io.Discard, Trace{ReferenceTime: epoch})
	var ev Event = PacketSent{
		Header: PacketHeader{PacketType: PacketType1RTT, PacketNumber: 77, DCID: HexBytes{1, 2, 3, 4, 5, 6, 7, 8}},
		Frames: []FrameInfo{{FrameType: FrameStream, StreamID: 0, Offset: 1 << 20, Length: 1200}},
		Raw:    RawInfo{Length: 1252},
	}
	now := at(10)
	b.ReportAllocs()
	for b.Loop() {
		w.Record(now, ev)
	}
}
