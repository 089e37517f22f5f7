package wire

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// fullServerParams sets every parameter a server may send.
func fullServerParams() *TransportParameters {
	p := &TransportParameters{}
	p.SetDefaults()
	p.HasOriginalDestinationConnectionID = true
	p.OriginalDestinationConnectionID = []byte{1, 2, 3, 4, 5, 6, 7, 8}
	p.MaxIdleTimeout = 30000
	p.HasStatelessResetToken = true
	p.StatelessResetToken = token16
	p.MaxUDPPayloadSize = 1452
	p.InitialMaxData = 1 << 24
	p.InitialMaxStreamDataBidiLocal = 1 << 20
	p.InitialMaxStreamDataBidiRemote = 1 << 21
	p.InitialMaxStreamDataUni = 1 << 19
	p.InitialMaxStreamsBidi = 100
	p.InitialMaxStreamsUni = MaxStreams
	p.AckDelayExponent = 20
	p.MaxAckDelay = 1<<14 - 1
	p.DisableActiveMigration = true
	p.HasPreferredAddress = true
	p.PreferredAddress = PreferredAddress{IPv4: [4]byte{192, 0, 2, 1}, IPv4Port: 443, IPv6: [16]byte{0x20, 0x01, 0x0d, 0xb8, 15: 1},
		IPv6Port: 4433, ConnectionID: []byte{9, 9, 9, 9}, StatelessResetToken: token16}
	p.ActiveConnectionIDLimit = 8
	p.HasInitialSourceConnectionID = true
	p.InitialSourceConnectionID = []byte{}
	p.HasRetrySourceConnectionID = true
	p.RetrySourceConnectionID = bytes.Repeat([]byte{5}, 20)
	p.HasVersionInformation = true
	p.VersionInformation = VersionInformation{Chosen: Version1, Available: []Version{Version1, Version2, 0x4a4a4a4a}}
	p.HasMaxDatagramFrameSize = true
	p.MaxDatagramFrameSize = 65535
	p.GreaseQUICBit = true
	p.HasMinAckDelay = true
	p.MinAckDelay = 1000
	p.Unknown = []TransportParameter{{ID: 27, Value: []byte("grease")}, {ID: 0x1234567, Value: []byte{}}}
	return p
}

func TestTransportParametersRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name       string
		p          *TransportParameters
		fromServer bool
	}{
		{"server, all", fullServerParams(), true},
		{"defaults only", func() *TransportParameters { p := &TransportParameters{}; p.SetDefaults(); return p }(), false},
		{"client", func() *TransportParameters {
			p := &TransportParameters{}
			p.SetDefaults()
			p.HasInitialSourceConnectionID = true
			p.InitialSourceConnectionID = []byte{1}
			p.InitialMaxData = 1000
			p.HasMaxDatagramFrameSize = true // value 0 is present
			return p
		}(), false},
	} {
		b := tc.p.Marshal()
		got, err := ParseTransportParameters(b, tc.fromServer)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		// Raw mirrors the wire; compare the typed fields without it.
		raw := got.Raw
		got.Raw = nil
		if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", tc.p) {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.name, got, tc.p)
		}
		if re := got.Marshal(); !bytes.Equal(re, b) {
			t.Errorf("%s: re-encoded %x\nwant %x", tc.name, re, b)
		}
		got.Raw = raw
		if re := got.Marshal(); !bytes.Equal(re, b) {
			t.Errorf("%s: Raw re-encoded %x\nwant %x", tc.name, re, b)
		}
	}
}

// TestMinAckDelayVector checks the vector of docs/ack-frequency-engine.md §1: "TP
// min_ack_delay = 1,000 µs (ID, length, value): c0 00 00 00 ff 04 de 1b
// 02 43 e8".
func TestMinAckDelayVector(t *testing.T) {
	want := unhex(t, "c0000000ff04de1b0243e8")
	p := &TransportParameters{}
	p.SetDefaults()
	p.HasMinAckDelay, p.MinAckDelay = true, 1000
	if b := p.Marshal(); !bytes.Equal(b, want) {
		t.Errorf("min_ack_delay encoded as %x, want %x", b, want)
	}
	got, err := ParseTransportParameters(want, false)
	if err != nil || !got.HasMinAckDelay || got.MinAckDelay != 1000 {
		t.Errorf("%+v, %v", got, err)
	}
}

// TestRawTransportParameters checks that a raw list with duplicates,
// out-of-range values and greased IDs is written verbatim, in order.
func TestRawTransportParameters(t *testing.T) {
	raw := []TransportParameter{
		{ID: uint64(TPMaxAckDelay), Value: AppendVarint(nil, 1<<14)},
		{ID: 27 + 31*5, Value: []byte{1, 2, 3}},
		{ID: uint64(TPMaxAckDelay), Value: AppendVarint(nil, 10)},
		{ID: uint64(TPAckDelayExponent), Value: AppendVarintLen(nil, 3, 8)},
	}
	p := &TransportParameters{Raw: raw}
	b := p.Marshal()
	list, err := ParseTransportParameterList(b)
	if err != nil || fmt.Sprint(list) != fmt.Sprint(raw) {
		t.Errorf("list %v, %v", list, err)
	}
	if _, err := ParseTransportParameters(b, true); err == nil {
		t.Error("invalid raw list accepted")
	}
}

func TestTransportParameterErrors(t *testing.T) {
	param := func(id TransportParameterID, v []byte) []byte { return AppendTransportParameter(nil, uint64(id), v) }
	intp := func(id TransportParameterID, v uint64) []byte { return param(id, AppendVarint(nil, v)) }
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	pa := func(cidLen int, extra int) []byte {
		v := make([]byte, 25+cidLen+16+extra)
		v[24] = byte(cidLen)
		return param(TPPreferredAddress, v)
	}
	for _, tc := range []struct {
		name       string
		b          []byte
		fromServer bool
		reason     string
	}{
		{"truncated ID", []byte{0x40}, true, "truncated"},
		{"truncated length", []byte{0x01}, true, "truncated"},
		{"value past end", []byte{0x01, 4, 0}, true, "past the end"},
		{"duplicate", cat(intp(TPInitialMaxData, 1), intp(TPInitialMaxData, 1)), true, "duplicate"},
		{"duplicate unknown", cat(param(0x1b, nil), param(0x1b, nil)), true, "duplicate"},
		{"duplicate min_ack_delay", cat(intp(TPMinAckDelay, 1), intp(TPMinAckDelay, 1)), true, "duplicate"},
		{"duplicate grease_quic_bit", cat(param(TPGreaseQUICBit, nil), param(TPGreaseQUICBit, nil)), true, "duplicate"},
		{"client sends original_destination_connection_id", param(TPOriginalDestinationConnectionID, []byte{1}), false, "server-only"},
		{"client sends preferred_address", pa(4, 0), false, "server-only"},
		{"client sends retry_source_connection_id", param(TPRetrySourceConnectionID, []byte{1}), false, "server-only"},
		{"client sends stateless_reset_token", param(TPStatelessResetToken, token16[:]), false, "server-only"},
		{"ack_delay_exponent 21", intp(TPAckDelayExponent, 21), true, "above 20"},
		{"max_ack_delay 2^14", intp(TPMaxAckDelay, 1<<14), true, "2^14"},
		{"max_udp_payload_size 1199", intp(TPMaxUDPPayloadSize, 1199), true, "below 1200"},
		{"active_connection_id_limit 1", intp(TPActiveConnectionIDLimit, 1), true, "at least 2"},
		{"active_connection_id_limit 0", intp(TPActiveConnectionIDLimit, 0), true, "at least 2"},
		{"initial_max_streams_bidi 2^60+1", intp(TPInitialMaxStreamsBidi, MaxStreams+1), true, "2^60"},
		{"initial_max_streams_uni 2^60+1", intp(TPInitialMaxStreamsUni, MaxStreams+1), true, "2^60"},
		{"integer with trailing byte", param(TPInitialMaxData, []byte{1, 2}), true, "exactly one"},
		{"empty integer", param(TPMaxIdleTimeout, nil), true, "exactly one"},
		{"stateless_reset_token 15 bytes", param(TPStatelessResetToken, token16[:15]), true, "16 bytes"},
		{"connection ID 21 bytes", param(TPInitialSourceConnectionID, make([]byte, 21)), true, "20 bytes"},
		{"disable_active_migration not empty", param(TPDisableActiveMigration, []byte{0}), true, "empty"},
		{"grease_quic_bit not empty", param(TPGreaseQUICBit, []byte{0}), true, "RFC 9287"},
		{"preferred_address zero-length CID", pa(0, 0), true, "1 to 20"},
		{"preferred_address CID 21", pa(21, 0), true, "1 to 20"},
		{"preferred_address bad length", pa(4, 1), true, "length"},
		{"preferred_address short", param(TPPreferredAddress, make([]byte, 30)), true, "too short"},
		{"version_information empty", param(TPVersionInformation, nil), true, "multiple of 4"},
		{"version_information 6 bytes", param(TPVersionInformation, make([]byte, 6)), true, "multiple of 4"},
		{"version_information chosen 0", param(TPVersionInformation, make([]byte, 4)), true, "Chosen Version"},
		{"version_information available 0", param(TPVersionInformation, []byte{0, 0, 0, 1, 0, 0, 0, 0}), true, "Available Version"},
		{"min_ack_delay > max_ack_delay", cat(intp(TPMaxAckDelay, 10), intp(TPMinAckDelay, 10001)), true, "min_ack_delay greater"},
		{"min_ack_delay > default max_ack_delay", intp(TPMinAckDelay, 25001), true, "min_ack_delay greater"},
	} {
		_, err := ParseTransportParameters(tc.b, tc.fromServer)
		var e *Error
		if !errors.As(err, &e) || e.Code != TransportParameterError || !strings.Contains(e.Reason, tc.reason) {
			t.Errorf("%s: err = %v, want TRANSPORT_PARAMETER_ERROR with %q", tc.name, err, tc.reason)
		}
	}
	// Boundary values that are valid.
	ok := cat(intp(TPAckDelayExponent, 20), intp(TPMaxAckDelay, 1<<14-1), intp(TPMaxUDPPayloadSize, 1200),
		intp(TPActiveConnectionIDLimit, 2), intp(TPInitialMaxStreamsBidi, MaxStreams), intp(TPMinAckDelay, (1<<14-1)*1000))
	if _, err := ParseTransportParameters(ok, false); err != nil {
		t.Errorf("boundary values: %v", err)
	}
}

func TestTransportParameterDefaults(t *testing.T) {
	p, err := ParseTransportParameters(nil, true)
	if err != nil {
		t.Fatal(err)
	}
	if p.MaxUDPPayloadSize != 65527 || p.AckDelayExponent != 3 || p.MaxAckDelay != 25 || p.ActiveConnectionIDLimit != 2 ||
		p.InitialMaxData != 0 || p.HasMaxDatagramFrameSize || p.HasMinAckDelay {
		t.Errorf("defaults: %+v", p)
	}
	if TPMinAckDelay.String() != "min_ack_delay" || TransportParameterID(0x99).String() != "0x99" {
		t.Error("String")
	}
	if !IsGreaseTransportParameter(27) || !IsGreaseTransportParameter(31*1000+27) || IsGreaseTransportParameter(28) {
		t.Error("IsGreaseTransportParameter")
	}
}

// TestManyTransportParameters checks that a large extension (the TLS limit
// is 65535 bytes) is checked for duplicates without quadratic work.
func TestManyTransportParameters(t *testing.T) {
	var b []byte
	for i := range 16000 {
		b = AppendTransportParameter(b, uint64(1000+i*31), nil)
	}
	p, err := ParseTransportParameters(b, false)
	if err != nil || len(p.Unknown) != 16000 {
		t.Fatalf("%v", err)
	}
	b = AppendTransportParameter(b, 1000+5*31, nil)
	if _, err := ParseTransportParameters(b, false); err == nil || !strings.Contains(err.Error(), "duplicate") {
		t.Fatalf("duplicate at the end: %v", err)
	}
}
