package qlog

import (
	"encoding/json"
	"net/netip"
	"strconv"
	"time"
)

// Event names. KeyUpdated and KeyDiscarded use the "security" category of
// the 0.3-era drafts, which is the one qvis knows.
const (
	NameConnectionStarted      = "transport:connection_started"
	NameConnectionClosed       = "transport:connection_closed"
	NameConnectionStateUpdated = "transport:connection_state_updated"
	NameVersionInformation     = "transport:version_information"
	NameALPNInformation        = "transport:alpn_information"
	NameParametersSet          = "transport:parameters_set"
	NamePacketSent             = "transport:packet_sent"
	NamePacketReceived         = "transport:packet_received"
	NamePacketDropped          = "transport:packet_dropped"
	NameDatagramsSent          = "transport:datagrams_sent"
	NameDatagramsReceived      = "transport:datagrams_received"
	NameKeyUpdated             = "security:key_updated"
	NameKeyDiscarded           = "security:key_discarded"
	NameMetricsUpdated         = "recovery:metrics_updated"
	NameCongestionStateUpdated = "recovery:congestion_state_updated"
	NameLossTimerUpdated       = "recovery:loss_timer_updated"
	NamePacketLost             = "recovery:packet_lost"
	NameMTUUpdated             = "connectivity:mtu_updated"
)

// PacketSent is logged for every packet the endpoint sends.
type PacketSent struct {
	Header PacketHeader `json:"header"`
	Frames []FrameInfo  `json:"frames"`
	Raw    RawInfo      `json:"raw"`
	// IsCoalesced says the packet shares a datagram with others.
	IsCoalesced bool `json:"is_coalesced"`
	// Trigger is why the packet was sent: "retransmit_reordered",
	// "retransmit_timeout", "pto_probe", "retransmit_crypto", "cc_bandwidth_probe";
	// empty for ordinary packets.
	Trigger string `json:"trigger"`
}

// Name returns NamePacketSent.
func (PacketSent) Name() string { return NamePacketSent }

// AppendData appends the event data.
func (ev PacketSent) AppendData(b []byte) []byte {
	return appendPacket(b, &ev.Header, ev.Frames, ev.Raw, ev.IsCoalesced, ev.Trigger)
}

// PacketReceived is logged for every packet the endpoint decrypts.
type PacketReceived struct {
	Header      PacketHeader `json:"header"`
	Frames      []FrameInfo  `json:"frames"`
	Raw         RawInfo      `json:"raw"`
	IsCoalesced bool         `json:"is_coalesced"`
	// Trigger is "keys_available" when the packet was buffered until its
	// keys arrived; empty otherwise.
	Trigger string `json:"trigger"`
}

// Name returns NamePacketReceived.
func (PacketReceived) Name() string { return NamePacketReceived }

// AppendData appends the event data.
func (ev PacketReceived) AppendData(b []byte) []byte {
	return appendPacket(b, &ev.Header, ev.Frames, ev.Raw, ev.IsCoalesced, ev.Trigger)
}

func appendPacket(b []byte, h *PacketHeader, fs []FrameInfo, raw RawInfo, coalesced bool, trigger string) []byte {
	e := enc{b: b}
	e.open()
	e.header("header", h)
	if fs != nil {
		e.frames("frames", fs)
	}
	if !raw.isZero() {
		e.raw("raw", raw)
	}
	if coalesced {
		e.bool("is_coalesced", true)
	}
	e.optStr("trigger", trigger)
	e.close()
	return e.b
}

// PacketDropped is logged for a packet that was discarded before or during
// processing. Header is written only when its PacketType is set, because a
// packet can be dropped before its header is understood.
type PacketDropped struct {
	Header PacketHeader `json:"header"`
	Raw    RawInfo      `json:"raw"`
	// Trigger is one of "key_unavailable", "unknown_connection_id",
	// "header_parse_error", "payload_decrypt_error", "protocol_violation",
	// "dos_prevention", "unsupported_version", "unexpected_packet",
	// "unexpected_source_connection_id", "unexpected_version", "duplicate",
	// "invalid_initial", "general".
	Trigger string `json:"trigger"`
}

// Name returns NamePacketDropped.
func (PacketDropped) Name() string { return NamePacketDropped }

// AppendData appends the event data.
func (ev PacketDropped) AppendData(b []byte) []byte {
	e := enc{b: b}
	e.open()
	if ev.Header.PacketType != "" {
		e.header("header", &ev.Header)
	}
	if !ev.Raw.isZero() {
		e.raw("raw", ev.Raw)
	}
	e.optStr("trigger", ev.Trigger)
	e.close()
	return e.b
}

// DatagramsSent is logged when UDP datagrams leave the endpoint; with GSO one
// event can cover several.
type DatagramsSent struct {
	Count uint64    `json:"count"`
	Raw   []RawInfo `json:"raw"`
}

// Name returns NameDatagramsSent.
func (DatagramsSent) Name() string { return NameDatagramsSent }

// AppendData appends the event data.
func (ev DatagramsSent) AppendData(b []byte) []byte { return appendDatagrams(b, ev.Count, ev.Raw) }

// DatagramsReceived is logged when UDP datagrams arrive; with GRO or
// recvmmsg one event can cover several.
type DatagramsReceived struct {
	Count uint64    `json:"count"`
	Raw   []RawInfo `json:"raw"`
}

// Name returns NameDatagramsReceived.
func (DatagramsReceived) Name() string { return NameDatagramsReceived }

// AppendData appends the event data.
func (ev DatagramsReceived) AppendData(b []byte) []byte {
	return appendDatagrams(b, ev.Count, ev.Raw)
}

func appendDatagrams(b []byte, count uint64, raw []RawInfo) []byte {
	e := enc{b: b}
	e.open()
	e.uint("count", count)
	if raw != nil {
		e.arrayStart("raw")
		for _, r := range raw {
			e.elemObject()
			if r.Length != 0 {
				e.uint("length", r.Length)
			}
			if r.PayloadLength != 0 {
				e.uint("payload_length", r.PayloadLength)
			}
			e.close()
		}
		e.arrayEnd()
	}
	e.close()
	return e.b
}

// ConnectionStarted is logged when a connection attempt begins (client) or
// the first Initial is accepted (server). Src and Dst are the local and the
// remote address as the engine sees them.
type ConnectionStarted struct {
	Src    netip.AddrPort
	Dst    netip.AddrPort
	SrcCID HexBytes
	DstCID HexBytes
}

// Name returns NameConnectionStarted.
func (ConnectionStarted) Name() string { return NameConnectionStarted }

// AppendData appends the event data.
func (ev ConnectionStarted) AppendData(b []byte) []byte {
	e := enc{b: b}
	e.open()
	ipv := "ipv4"
	if ev.Src.Addr().Is6() && !ev.Src.Addr().Is4In6() {
		ipv = "ipv6"
	}
	e.str("ip_version", ipv)
	e.str("src_ip", ev.Src.Addr().Unmap().String())
	e.str("dst_ip", ev.Dst.Addr().Unmap().String())
	e.str("protocol", "QUIC")
	e.uint("src_port", uint64(ev.Src.Port()))
	e.uint("dst_port", uint64(ev.Dst.Port()))
	if ev.SrcCID != nil {
		e.hex("src_cid", ev.SrcCID)
	}
	if ev.DstCID != nil {
		e.hex("dst_cid", ev.DstCID)
	}
	e.close()
	return e.b
}

// UnmarshalJSON rebuilds the address-port pairs from the separate members.
func (ev *ConnectionStarted) UnmarshalJSON(b []byte) error {
	var aux struct {
		SrcIP   netip.Addr `json:"src_ip"`
		DstIP   netip.Addr `json:"dst_ip"`
		SrcPort uint16     `json:"src_port"`
		DstPort uint16     `json:"dst_port"`
		SrcCID  HexBytes   `json:"src_cid"`
		DstCID  HexBytes   `json:"dst_cid"`
	}
	if err := json.Unmarshal(b, &aux); err != nil {
		return err
	}
	*ev = ConnectionStarted{
		Src:    netip.AddrPortFrom(aux.SrcIP, aux.SrcPort),
		Dst:    netip.AddrPortFrom(aux.DstIP, aux.DstPort),
		SrcCID: aux.SrcCID,
		DstCID: aux.DstCID,
	}
	return nil
}

// ConnectionClosed is logged when the connection ends, whoever ended it,
// because conformance verdicts depend on who closed and why.
type ConnectionClosed struct {
	Owner Owner
	// Application says Code is an application error code rather than a
	// transport one.
	Application bool
	Code        uint64
	Reason      string
	// Trigger is one of "clean", "handshake_timeout", "idle_timeout",
	// "error", "stateless_reset", "version_mismatch", "application".
	Trigger string
}

// Name returns NameConnectionClosed.
func (ConnectionClosed) Name() string { return NameConnectionClosed }

// AppendData appends the event data.
func (ev ConnectionClosed) AppendData(b []byte) []byte {
	e := enc{b: b}
	e.open()
	e.optStr("owner", string(ev.Owner))
	if ev.Application {
		e.uint("application_code", ev.Code)
	} else {
		e.key("connection_code")
		if name := TransportErrorName(ev.Code); name != "unknown" {
			e.b = appendQuoted(e.b, name)
		} else {
			e.b = strconv.AppendUint(e.b, ev.Code, 10)
		}
	}
	e.optStr("reason", ev.Reason)
	e.optStr("trigger", ev.Trigger)
	e.close()
	return e.b
}

// UnmarshalJSON decodes connection_code (number or name) or application_code.
func (ev *ConnectionClosed) UnmarshalJSON(b []byte) error {
	var aux struct {
		Owner           Owner           `json:"owner"`
		ConnectionCode  json.RawMessage `json:"connection_code"`
		ApplicationCode *uint64         `json:"application_code"`
		Reason          string          `json:"reason"`
		Trigger         string          `json:"trigger"`
	}
	if err := json.Unmarshal(b, &aux); err != nil {
		return err
	}
	*ev = ConnectionClosed{Owner: aux.Owner, Reason: aux.Reason, Trigger: aux.Trigger}
	switch {
	case aux.ApplicationCode != nil:
		ev.Application = true
		ev.Code = *aux.ApplicationCode
	case len(aux.ConnectionCode) > 0:
		code, err := decodeErrorCode(aux.ConnectionCode)
		if err != nil {
			return err
		}
		ev.Code = code
	}
	return nil
}

// ConnectionState is a connection's lifecycle state.
type ConnectionState string

// Connection states of the 0.3-era quic events draft.
const (
	StateAttempted          ConnectionState = "attempted"
	StatePeerValidated      ConnectionState = "peer_validated"
	StateHandshakeStarted   ConnectionState = "handshake_started"
	StateEarlyWrite         ConnectionState = "early_write"
	StateHandshakeComplete  ConnectionState = "handshake_complete"
	StateHandshakeConfirmed ConnectionState = "handshake_confirmed"
	StateClosing            ConnectionState = "closing"
	StateDraining           ConnectionState = "draining"
	StateClosed             ConnectionState = "closed"
)

// ConnectionStateUpdated is logged on every state change.
type ConnectionStateUpdated struct {
	Old ConnectionState `json:"old"`
	New ConnectionState `json:"new"`
}

// Name returns NameConnectionStateUpdated.
func (ConnectionStateUpdated) Name() string { return NameConnectionStateUpdated }

// AppendData appends the event data.
func (ev ConnectionStateUpdated) AppendData(b []byte) []byte {
	e := enc{b: b}
	e.open()
	e.optStr("old", string(ev.Old))
	e.str("new", string(ev.New))
	e.close()
	return e.b
}

// VersionInformation is logged when versions are known: the client's offer,
// the server's Version Negotiation list, and the chosen version.
type VersionInformation struct {
	ServerVersions []Version `json:"server_versions"`
	ClientVersions []Version `json:"client_versions"`
	ChosenVersion  Version   `json:"chosen_version"`
}

// Name returns NameVersionInformation.
func (VersionInformation) Name() string { return NameVersionInformation }

// AppendData appends the event data.
func (ev VersionInformation) AppendData(b []byte) []byte {
	e := enc{b: b}
	e.open()
	list(&e, "server_versions", ev.ServerVersions, appendVersion)
	list(&e, "client_versions", ev.ClientVersions, appendVersion)
	if ev.ChosenVersion != 0 {
		e.key("chosen_version")
		e.b = appendVersion(e.b, ev.ChosenVersion)
	}
	e.close()
	return e.b
}

// ALPNInformation is logged when application protocols are offered and chosen.
type ALPNInformation struct {
	ServerALPNs []string `json:"server_alpns"`
	ClientALPNs []string `json:"client_alpns"`
	ChosenALPN  string   `json:"chosen_alpn"`
}

// Name returns NameALPNInformation.
func (ALPNInformation) Name() string { return NameALPNInformation }

// AppendData appends the event data.
func (ev ALPNInformation) AppendData(b []byte) []byte {
	e := enc{b: b}
	e.open()
	list(&e, "server_alpns", ev.ServerALPNs, appendQuoted)
	list(&e, "client_alpns", ev.ClientALPNs, appendQuoted)
	e.optStr("chosen_alpn", ev.ChosenALPN)
	e.close()
	return e.b
}

// PreferredAddress is the preferred_address transport parameter.
type PreferredAddress struct {
	IPv4                netip.Addr `json:"ip_v4"`
	PortV4              uint16     `json:"port_v4"`
	IPv6                netip.Addr `json:"ip_v6"`
	PortV6              uint16     `json:"port_v6"`
	ConnectionID        HexBytes   `json:"connection_id"`
	StatelessResetToken HexBytes   `json:"stateless_reset_token"`
}

// ParametersSet is logged when the local transport parameters are chosen
// and when the peer's are received. Connection IDs and the reset token are
// written only when not nil; numeric parameters are always written, as the
// values in effect.
type ParametersSet struct {
	Owner                           Owner    `json:"owner"`
	ResumptionAllowed               bool     `json:"resumption_allowed"`
	EarlyDataEnabled                bool     `json:"early_data_enabled"`
	TLSCipher                       string   `json:"tls_cipher"`
	OriginalDestinationConnectionID HexBytes `json:"original_destination_connection_id"`
	InitialSourceConnectionID       HexBytes `json:"initial_source_connection_id"`
	RetrySourceConnectionID         HexBytes `json:"retry_source_connection_id"`
	StatelessResetToken             HexBytes `json:"stateless_reset_token"`
	DisableActiveMigration          bool     `json:"disable_active_migration"`

	MaxIdleTimeout                 time.Duration `json:"-"`
	MaxUDPPayloadSize              uint64        `json:"max_udp_payload_size"`
	AckDelayExponent               uint64        `json:"ack_delay_exponent"`
	MaxAckDelay                    time.Duration `json:"-"`
	ActiveConnectionIDLimit        uint64        `json:"active_connection_id_limit"`
	InitialMaxData                 uint64        `json:"initial_max_data"`
	InitialMaxStreamDataBidiLocal  uint64        `json:"initial_max_stream_data_bidi_local"`
	InitialMaxStreamDataBidiRemote uint64        `json:"initial_max_stream_data_bidi_remote"`
	InitialMaxStreamDataUni        uint64        `json:"initial_max_stream_data_uni"`
	InitialMaxStreamsBidi          uint64        `json:"initial_max_streams_bidi"`
	InitialMaxStreamsUni           uint64        `json:"initial_max_streams_uni"`
	// MaxDatagramFrameSize (RFC 9221) is written when not zero.
	MaxDatagramFrameSize uint64 `json:"max_datagram_frame_size"`
	// MinAckDelay (ack frequency extension) is written when not zero.
	MinAckDelay time.Duration `json:"-"`
	// GreaseQUICBit (RFC 9287) is written when true.
	GreaseQUICBit    bool              `json:"grease_quic_bit"`
	PreferredAddress *PreferredAddress `json:"preferred_address"`
}

// Name returns NameParametersSet.
func (ParametersSet) Name() string { return NameParametersSet }

// AppendData appends the event data.
func (ev ParametersSet) AppendData(b []byte) []byte {
	e := enc{b: b}
	e.open()
	e.optStr("owner", string(ev.Owner))
	if ev.ResumptionAllowed {
		e.bool("resumption_allowed", true)
	}
	if ev.EarlyDataEnabled {
		e.bool("early_data_enabled", true)
	}
	e.optStr("tls_cipher", ev.TLSCipher)
	optHex := func(k string, v HexBytes) {
		if v != nil {
			e.hex(k, v)
		}
	}
	optHex("original_destination_connection_id", ev.OriginalDestinationConnectionID)
	optHex("initial_source_connection_id", ev.InitialSourceConnectionID)
	optHex("retry_source_connection_id", ev.RetrySourceConnectionID)
	optHex("stateless_reset_token", ev.StatelessResetToken)
	e.bool("disable_active_migration", ev.DisableActiveMigration)
	e.ms("max_idle_timeout", ev.MaxIdleTimeout)
	e.uint("max_udp_payload_size", ev.MaxUDPPayloadSize)
	e.uint("ack_delay_exponent", ev.AckDelayExponent)
	e.ms("max_ack_delay", ev.MaxAckDelay)
	e.uint("active_connection_id_limit", ev.ActiveConnectionIDLimit)
	e.uint("initial_max_data", ev.InitialMaxData)
	e.uint("initial_max_stream_data_bidi_local", ev.InitialMaxStreamDataBidiLocal)
	e.uint("initial_max_stream_data_bidi_remote", ev.InitialMaxStreamDataBidiRemote)
	e.uint("initial_max_stream_data_uni", ev.InitialMaxStreamDataUni)
	e.uint("initial_max_streams_bidi", ev.InitialMaxStreamsBidi)
	e.uint("initial_max_streams_uni", ev.InitialMaxStreamsUni)
	if ev.MaxDatagramFrameSize != 0 {
		e.uint("max_datagram_frame_size", ev.MaxDatagramFrameSize)
	}
	if ev.MinAckDelay != 0 {
		e.ms("min_ack_delay", ev.MinAckDelay)
	}
	if ev.GreaseQUICBit {
		e.bool("grease_quic_bit", true)
	}
	if pa := ev.PreferredAddress; pa != nil {
		e.objectStart("preferred_address")
		if pa.IPv4.IsValid() {
			e.str("ip_v4", pa.IPv4.String())
			e.uint("port_v4", uint64(pa.PortV4))
		}
		if pa.IPv6.IsValid() {
			e.str("ip_v6", pa.IPv6.String())
			e.uint("port_v6", uint64(pa.PortV6))
		}
		e.hex("connection_id", pa.ConnectionID)
		e.hex("stateless_reset_token", pa.StatelessResetToken)
		e.close()
	}
	e.close()
	return e.b
}

// UnmarshalJSON decodes the duration members from float milliseconds.
func (ev *ParametersSet) UnmarshalJSON(b []byte) error {
	type plain ParametersSet
	aux := struct {
		*plain
		MaxIdleTimeout msField `json:"max_idle_timeout"`
		MaxAckDelay    msField `json:"max_ack_delay"`
		MinAckDelay    msField `json:"min_ack_delay"`
	}{plain: (*plain)(ev)}
	if err := json.Unmarshal(b, &aux); err != nil {
		return err
	}
	setMs(&ev.MaxIdleTimeout, aux.MaxIdleTimeout)
	setMs(&ev.MaxAckDelay, aux.MaxAckDelay)
	setMs(&ev.MinAckDelay, aux.MinAckDelay)
	return nil
}

// KeyType names a secret.
type KeyType string

// Key types.
const (
	KeyServerInitial   KeyType = "server_initial_secret"
	KeyClientInitial   KeyType = "client_initial_secret"
	KeyServerHandshake KeyType = "server_handshake_secret"
	KeyClientHandshake KeyType = "client_handshake_secret"
	KeyServer0RTT      KeyType = "server_0rtt_secret"
	KeyClient0RTT      KeyType = "client_0rtt_secret"
	KeyServer1RTT      KeyType = "server_1rtt_secret"
	KeyClient1RTT      KeyType = "client_1rtt_secret"
)

func (k KeyType) is1RTT() bool { return k == KeyServer1RTT || k == KeyClient1RTT }

// KeyUpdated is logged when a key is installed: from TLS, or by a key
// update. Old and New hold secrets and are written only when not nil, so
// that an engine can log key updates without leaking secrets into qlog.
type KeyUpdated struct {
	KeyType KeyType  `json:"key_type"`
	Old     HexBytes `json:"old"`
	New     HexBytes `json:"new"`
	// Generation is the key phase generation; written for 1-RTT keys only.
	Generation uint64 `json:"generation"`
	// Trigger is "tls", "remote_update" or "local_update".
	Trigger string `json:"trigger"`
}

// Name returns NameKeyUpdated.
func (KeyUpdated) Name() string { return NameKeyUpdated }

// AppendData appends the event data.
func (ev KeyUpdated) AppendData(b []byte) []byte {
	e := enc{b: b}
	e.open()
	e.str("key_type", string(ev.KeyType))
	if ev.Old != nil {
		e.hex("old", ev.Old)
	}
	if ev.New != nil {
		e.hex("new", ev.New)
	}
	if ev.KeyType.is1RTT() {
		e.uint("generation", ev.Generation)
	}
	e.optStr("trigger", ev.Trigger)
	e.close()
	return e.b
}

// KeyDiscarded is logged when a key is dropped (Initial and Handshake keys
// after the handshake, old 1-RTT keys after an update).
type KeyDiscarded struct {
	KeyType    KeyType `json:"key_type"`
	Generation uint64  `json:"generation"`
	Trigger    string  `json:"trigger"`
}

// Name returns NameKeyDiscarded.
func (KeyDiscarded) Name() string { return NameKeyDiscarded }

// AppendData appends the event data.
func (ev KeyDiscarded) AppendData(b []byte) []byte {
	e := enc{b: b}
	e.open()
	e.str("key_type", string(ev.KeyType))
	if ev.KeyType.is1RTT() {
		e.uint("generation", ev.Generation)
	}
	e.optStr("trigger", ev.Trigger)
	e.close()
	return e.b
}

// MTUUpdated is logged when path MTU discovery changes the largest
// datagram the endpoint sends (draft-ietf-quic-qlog-quic-events
// mtu_updated). Done says that the search has ended for now.
type MTUUpdated struct {
	Old  uint32 `json:"old"`
	New  uint32 `json:"new"`
	Done bool   `json:"done"`
}

// Name returns NameMTUUpdated.
func (MTUUpdated) Name() string { return NameMTUUpdated }

// AppendData appends the event data.
func (ev MTUUpdated) AppendData(b []byte) []byte {
	e := enc{b: b}
	e.open()
	if ev.Old != 0 {
		e.uint("old", uint64(ev.Old))
	}
	e.uint("new", uint64(ev.New))
	if ev.Done {
		e.bool("done", true)
	}
	e.close()
	return e.b
}
