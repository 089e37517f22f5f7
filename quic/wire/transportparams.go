package wire

import (
	"encoding/binary"
	"slices"
	"strconv"
)

// TransportParameterID identifies a transport parameter (RFC 9000 §18.2).
type TransportParameterID uint64

// Transport parameter IDs.
const (
	TPOriginalDestinationConnectionID TransportParameterID = 0x00
	TPMaxIdleTimeout                  TransportParameterID = 0x01
	TPStatelessResetToken             TransportParameterID = 0x02
	TPMaxUDPPayloadSize               TransportParameterID = 0x03
	TPInitialMaxData                  TransportParameterID = 0x04
	TPInitialMaxStreamDataBidiLocal   TransportParameterID = 0x05
	TPInitialMaxStreamDataBidiRemote  TransportParameterID = 0x06
	TPInitialMaxStreamDataUni         TransportParameterID = 0x07
	TPInitialMaxStreamsBidi           TransportParameterID = 0x08
	TPInitialMaxStreamsUni            TransportParameterID = 0x09
	TPAckDelayExponent                TransportParameterID = 0x0a
	TPMaxAckDelay                     TransportParameterID = 0x0b
	TPDisableActiveMigration          TransportParameterID = 0x0c
	TPPreferredAddress                TransportParameterID = 0x0d
	TPActiveConnectionIDLimit         TransportParameterID = 0x0e
	TPInitialSourceConnectionID       TransportParameterID = 0x0f
	TPRetrySourceConnectionID         TransportParameterID = 0x10
	TPVersionInformation              TransportParameterID = 0x11       // RFC 9368 §3
	TPMaxDatagramFrameSize            TransportParameterID = 0x20       // RFC 9221 §3
	TPGreaseQUICBit                   TransportParameterID = 0x2ab2     // RFC 9287 §3
	TPMinAckDelay                     TransportParameterID = 0xff04de1b // draft-ietf-quic-ack-frequency-14 §3 (provisional)
)

// IsGreaseTransportParameter reports whether id is reserved for greasing,
// 31 * N + 27 (RFC 9000 §18.1).
func IsGreaseTransportParameter(id uint64) bool { return id%31 == 27 }

var tpNames = map[TransportParameterID]string{
	TPOriginalDestinationConnectionID: "original_destination_connection_id",
	TPMaxIdleTimeout:                  "max_idle_timeout",
	TPStatelessResetToken:             "stateless_reset_token",
	TPMaxUDPPayloadSize:               "max_udp_payload_size",
	TPInitialMaxData:                  "initial_max_data",
	TPInitialMaxStreamDataBidiLocal:   "initial_max_stream_data_bidi_local",
	TPInitialMaxStreamDataBidiRemote:  "initial_max_stream_data_bidi_remote",
	TPInitialMaxStreamDataUni:         "initial_max_stream_data_uni",
	TPInitialMaxStreamsBidi:           "initial_max_streams_bidi",
	TPInitialMaxStreamsUni:            "initial_max_streams_uni",
	TPAckDelayExponent:                "ack_delay_exponent",
	TPMaxAckDelay:                     "max_ack_delay",
	TPDisableActiveMigration:          "disable_active_migration",
	TPPreferredAddress:                "preferred_address",
	TPActiveConnectionIDLimit:         "active_connection_id_limit",
	TPInitialSourceConnectionID:       "initial_source_connection_id",
	TPRetrySourceConnectionID:         "retry_source_connection_id",
	TPVersionInformation:              "version_information",
	TPMaxDatagramFrameSize:            "max_datagram_frame_size",
	TPGreaseQUICBit:                   "grease_quic_bit",
	TPMinAckDelay:                     "min_ack_delay",
}

// String returns the parameter's registered name, or its ID in hex.
func (id TransportParameterID) String() string {
	if s, ok := tpNames[id]; ok {
		return s
	}
	return "0x" + strconv.FormatUint(uint64(id), 16)
}

// Default values of transport parameters absent from the list
// (RFC 9000 §18.2).
const (
	DefaultMaxUDPPayloadSize       = 65527
	DefaultAckDelayExponent        = 3
	DefaultMaxAckDelay             = 25 // milliseconds
	DefaultActiveConnectionIDLimit = 2
)

// TransportParameter is one parameter as it appears on the wire.
type TransportParameter struct {
	ID    uint64
	Value []byte
}

// PreferredAddress is the value of the preferred_address transport
// parameter (RFC 9000 §18.2).
type PreferredAddress struct {
	IPv4                [4]byte
	IPv4Port            uint16
	IPv6                [16]byte
	IPv6Port            uint16
	ConnectionID        []byte
	StatelessResetToken [16]byte
}

// VersionInformation is the value of the version_information transport
// parameter (RFC 9368 §3).
type VersionInformation struct {
	Chosen    Version
	Available []Version
}

// TransportParameters holds the transport parameters of one endpoint.
//
// Integer parameters with a default hold that default when absent (call
// SetDefaults before filling a value to send). Parameters whose absence
// means something have a Has field.
//
// Raw, when not nil, replaces everything else on encoding: it is written
// verbatim, in order, duplicates included, which lets probes send any
// list. IDs and lengths are written in their shortest encoding; a probe
// that needs non-minimal ones builds the bytes with AppendVarintLen.
// ParseTransportParameters fills Raw with the received list; set Raw to
// nil before re-encoding a parsed value from its typed fields.
type TransportParameters struct {
	HasOriginalDestinationConnectionID bool
	OriginalDestinationConnectionID    []byte
	// MaxIdleTimeout is in milliseconds; 0 means no idle timeout.
	MaxIdleTimeout                 uint64
	HasStatelessResetToken         bool
	StatelessResetToken            [16]byte
	MaxUDPPayloadSize              uint64
	InitialMaxData                 uint64
	InitialMaxStreamDataBidiLocal  uint64
	InitialMaxStreamDataBidiRemote uint64
	InitialMaxStreamDataUni        uint64
	InitialMaxStreamsBidi          uint64
	InitialMaxStreamsUni           uint64
	AckDelayExponent               uint64
	// MaxAckDelay is in milliseconds.
	MaxAckDelay                  uint64
	DisableActiveMigration       bool
	HasPreferredAddress          bool
	PreferredAddress             PreferredAddress
	ActiveConnectionIDLimit      uint64
	HasInitialSourceConnectionID bool
	InitialSourceConnectionID    []byte
	HasRetrySourceConnectionID   bool
	RetrySourceConnectionID      []byte
	HasVersionInformation        bool
	VersionInformation           VersionInformation
	// HasMaxDatagramFrameSize is set when the peer supports DATAGRAM
	// (RFC 9221 §3).
	HasMaxDatagramFrameSize bool
	MaxDatagramFrameSize    uint64
	// GreaseQUICBit is the empty grease_quic_bit parameter (RFC 9287).
	GreaseQUICBit bool
	// HasMinAckDelay is set when the endpoint accepts ACK_FREQUENCY and
	// IMMEDIATE_ACK frames; MinAckDelay is in microseconds.
	HasMinAckDelay bool
	MinAckDelay    uint64

	// Unknown holds parameters this package does not know (greased ones
	// included), in received order; they are encoded after the known
	// ones.
	Unknown []TransportParameter
	// Raw is the verbatim parameter list; see the type's comment.
	Raw []TransportParameter
}

// SetDefaults sets every parameter with a default to that default
// (RFC 9000 §18.2).
func (p *TransportParameters) SetDefaults() {
	p.MaxUDPPayloadSize = DefaultMaxUDPPayloadSize
	p.AckDelayExponent = DefaultAckDelayExponent
	p.MaxAckDelay = DefaultMaxAckDelay
	p.ActiveConnectionIDLimit = DefaultActiveConnectionIDLimit
}

// AppendTransportParameter appends one parameter: ID, length and value.
func AppendTransportParameter(b []byte, id uint64, value []byte) []byte {
	b = AppendVarint(b, id)
	b = AppendVarint(b, uint64(len(value)))
	return append(b, value...)
}

func appendIntParam(b []byte, id TransportParameterID, v uint64) []byte {
	b = AppendVarint(b, uint64(id))
	b = AppendVarint(b, uint64(VarintLen(v)))
	return AppendVarint(b, v)
}

func appendBytesParam(b []byte, id TransportParameterID, v []byte) []byte {
	return AppendTransportParameter(b, uint64(id), v)
}

// Append appends the encoded parameter list, the body of the
// quic_transport_parameters TLS extension. If Raw is not nil it is
// written verbatim; otherwise the typed fields are written in ID order,
// integers only when they differ from their default, followed by
// Unknown. Values are not validated.
func (p *TransportParameters) Append(b []byte) []byte {
	if p.Raw != nil {
		for _, tp := range p.Raw {
			b = AppendTransportParameter(b, tp.ID, tp.Value)
		}
		return b
	}
	if p.HasOriginalDestinationConnectionID {
		b = appendBytesParam(b, TPOriginalDestinationConnectionID, p.OriginalDestinationConnectionID)
	}
	if p.MaxIdleTimeout != 0 {
		b = appendIntParam(b, TPMaxIdleTimeout, p.MaxIdleTimeout)
	}
	if p.HasStatelessResetToken {
		b = appendBytesParam(b, TPStatelessResetToken, p.StatelessResetToken[:])
	}
	if p.MaxUDPPayloadSize != DefaultMaxUDPPayloadSize {
		b = appendIntParam(b, TPMaxUDPPayloadSize, p.MaxUDPPayloadSize)
	}
	ints := [...]struct {
		id TransportParameterID
		v  uint64
	}{
		{TPInitialMaxData, p.InitialMaxData},
		{TPInitialMaxStreamDataBidiLocal, p.InitialMaxStreamDataBidiLocal},
		{TPInitialMaxStreamDataBidiRemote, p.InitialMaxStreamDataBidiRemote},
		{TPInitialMaxStreamDataUni, p.InitialMaxStreamDataUni},
		{TPInitialMaxStreamsBidi, p.InitialMaxStreamsBidi},
		{TPInitialMaxStreamsUni, p.InitialMaxStreamsUni},
	}
	for _, e := range ints {
		if e.v != 0 {
			b = appendIntParam(b, e.id, e.v)
		}
	}
	if p.AckDelayExponent != DefaultAckDelayExponent {
		b = appendIntParam(b, TPAckDelayExponent, p.AckDelayExponent)
	}
	if p.MaxAckDelay != DefaultMaxAckDelay {
		b = appendIntParam(b, TPMaxAckDelay, p.MaxAckDelay)
	}
	if p.DisableActiveMigration {
		b = appendBytesParam(b, TPDisableActiveMigration, nil)
	}
	if p.HasPreferredAddress {
		pa := &p.PreferredAddress
		b = AppendVarint(b, uint64(TPPreferredAddress))
		b = AppendVarint(b, uint64(4+2+16+2+1+len(pa.ConnectionID)+16))
		b = append(b, pa.IPv4[:]...)
		b = binary.BigEndian.AppendUint16(b, pa.IPv4Port)
		b = append(b, pa.IPv6[:]...)
		b = binary.BigEndian.AppendUint16(b, pa.IPv6Port)
		b = append(b, byte(len(pa.ConnectionID)))
		b = append(b, pa.ConnectionID...)
		b = append(b, pa.StatelessResetToken[:]...)
	}
	if p.ActiveConnectionIDLimit != DefaultActiveConnectionIDLimit {
		b = appendIntParam(b, TPActiveConnectionIDLimit, p.ActiveConnectionIDLimit)
	}
	if p.HasInitialSourceConnectionID {
		b = appendBytesParam(b, TPInitialSourceConnectionID, p.InitialSourceConnectionID)
	}
	if p.HasRetrySourceConnectionID {
		b = appendBytesParam(b, TPRetrySourceConnectionID, p.RetrySourceConnectionID)
	}
	if p.HasVersionInformation {
		vi := &p.VersionInformation
		b = AppendVarint(b, uint64(TPVersionInformation))
		b = AppendVarint(b, uint64(4+4*len(vi.Available)))
		b = binary.BigEndian.AppendUint32(b, uint32(vi.Chosen))
		for _, v := range vi.Available {
			b = binary.BigEndian.AppendUint32(b, uint32(v))
		}
	}
	if p.HasMaxDatagramFrameSize {
		b = appendIntParam(b, TPMaxDatagramFrameSize, p.MaxDatagramFrameSize)
	}
	if p.GreaseQUICBit {
		b = appendBytesParam(b, TPGreaseQUICBit, nil)
	}
	if p.HasMinAckDelay {
		b = appendIntParam(b, TPMinAckDelay, p.MinAckDelay)
	}
	for _, tp := range p.Unknown {
		b = AppendTransportParameter(b, tp.ID, tp.Value)
	}
	return b
}

// Marshal returns the encoded parameter list; see Append.
func (p *TransportParameters) Marshal() []byte { return p.Append(nil) }

// ParseTransportParameterList splits an encoded list into its parameters,
// in order, duplicates included, without interpreting any value. Values
// are sub-slices of b.
func ParseTransportParameterList(b []byte) ([]TransportParameter, error) {
	var list []TransportParameter
	for len(b) > 0 {
		id, n, err := ConsumeVarint(b)
		if err != nil {
			return list, tpErr("RFC 9000 §18: truncated transport parameter ID")
		}
		b = b[n:]
		l, n, err := ConsumeVarint(b)
		if err != nil {
			return list, tpErr("RFC 9000 §18: truncated length of transport parameter " + TransportParameterID(id).String())
		}
		b = b[n:]
		if uint64(len(b)) < l {
			return list, tpErr("RFC 9000 §18: value of transport parameter " + TransportParameterID(id).String() + " runs past the end of the extension")
		}
		list = append(list, TransportParameter{ID: id, Value: b[:l:l]})
		b = b[l:]
	}
	return list, nil
}

// ParseTransportParameters parses and validates the parameters sent by the
// peer; fromServer tells whether the peer is the server. Violations of
// RFC 9000 §18.2, RFC 9221, RFC 9287, RFC 9368 and
// draft-ietf-quic-ack-frequency-14 are returned as an *Error with code
// TRANSPORT_PARAMETER_ERROR and a reason quoting the rule. Absent
// parameters take their defaults; byte values are sub-slices of b; Raw
// holds the whole list.
func ParseTransportParameters(b []byte, fromServer bool) (*TransportParameters, error) {
	list, err := ParseTransportParameterList(b)
	if err != nil {
		return nil, err
	}
	p := &TransportParameters{Raw: list}
	p.SetDefaults()
	var seen uint64 // bit i: known parameter with index < 64 seen
	var seenGrease, seenMinAck bool
	var others []uint64
	for _, tp := range list {
		id := TransportParameterID(tp.ID)
		name := id.String()
		// RFC 9000 §7.4: "An endpoint SHOULD treat receipt of duplicate
		// transport parameters as a connection error of type
		// TRANSPORT_PARAMETER_ERROR."
		dup := false
		switch {
		case tp.ID < 64:
			dup = seen&(1<<tp.ID) != 0
			seen |= 1 << tp.ID
		case id == TPGreaseQUICBit:
			dup, seenGrease = seenGrease, true
		case id == TPMinAckDelay:
			dup, seenMinAck = seenMinAck, true
		default:
			// Checked after the loop, in O(n log n): an extension can hold
			// thousands of parameters.
			others = append(others, tp.ID)
		}
		if dup {
			return nil, tpErr("RFC 9000 §7.4: duplicate transport parameter " + name)
		}
		if !fromServer {
			switch id {
			case TPOriginalDestinationConnectionID, TPPreferredAddress, TPRetrySourceConnectionID, TPStatelessResetToken:
				// RFC 9000 §18.2: "A client MUST NOT include any
				// server-only transport parameter ... A server MUST treat
				// receipt of any of these transport parameters as a
				// connection error of type TRANSPORT_PARAMETER_ERROR."
				return nil, tpErr("RFC 9000 §18.2: server-only transport parameter " + name + " sent by a client")
			}
		}
		if err := p.setParam(id, tp.Value); err != nil {
			return nil, err
		}
	}
	slices.Sort(others)
	for i := 1; i < len(others); i++ {
		if others[i] == others[i-1] {
			return nil, tpErr("RFC 9000 §7.4: duplicate transport parameter " + TransportParameterID(others[i]).String())
		}
	}
	// draft-ietf-quic-ack-frequency-14 §3: "Endpoints that support this
	// extension MUST treat receipt of a min_ack_delay that is greater than
	// the max_ack_delay as a connection error of type
	// TRANSPORT_PARAMETER_ERROR."
	if p.HasMinAckDelay && p.MinAckDelay > p.MaxAckDelay*1000 {
		return nil, tpErr("draft-ietf-quic-ack-frequency-14 §3: min_ack_delay greater than max_ack_delay")
	}
	return p, nil
}

func (p *TransportParameters) setParam(id TransportParameterID, v []byte) error {
	name := id.String()
	intValue := func() (uint64, error) {
		x, n, err := ConsumeVarint(v)
		if err != nil || n != len(v) {
			// RFC 9000 §18: an integer parameter's value is one
			// variable-length integer filling its Length.
			return 0, tpErr("RFC 9000 §18.2: " + name + " must hold exactly one variable-length integer")
		}
		return x, nil
	}
	cid := func() ([]byte, error) {
		if len(v) > MaxCIDLen {
			return nil, tpErr("RFC 9000 §17.2: " + name + " longer than 20 bytes")
		}
		return v, nil
	}
	empty := func() error {
		if len(v) != 0 {
			return tpErr("RFC 9000 §18.2: " + name + " must have an empty value")
		}
		return nil
	}
	var err error
	switch id {
	case TPOriginalDestinationConnectionID:
		p.HasOriginalDestinationConnectionID = true
		p.OriginalDestinationConnectionID, err = cid()
	case TPInitialSourceConnectionID:
		p.HasInitialSourceConnectionID = true
		p.InitialSourceConnectionID, err = cid()
	case TPRetrySourceConnectionID:
		p.HasRetrySourceConnectionID = true
		p.RetrySourceConnectionID, err = cid()
	case TPMaxIdleTimeout:
		p.MaxIdleTimeout, err = intValue()
	case TPStatelessResetToken:
		if len(v) != 16 {
			return tpErr("RFC 9000 §18.2: stateless_reset_token must be 16 bytes")
		}
		p.HasStatelessResetToken = true
		copy(p.StatelessResetToken[:], v)
	case TPMaxUDPPayloadSize:
		if p.MaxUDPPayloadSize, err = intValue(); err == nil && p.MaxUDPPayloadSize < 1200 {
			// RFC 9000 §18.2: "Values below 1200 are invalid."
			return tpErr("RFC 9000 §18.2: max_udp_payload_size values below 1200 are invalid")
		}
	case TPInitialMaxData:
		p.InitialMaxData, err = intValue()
	case TPInitialMaxStreamDataBidiLocal:
		p.InitialMaxStreamDataBidiLocal, err = intValue()
	case TPInitialMaxStreamDataBidiRemote:
		p.InitialMaxStreamDataBidiRemote, err = intValue()
	case TPInitialMaxStreamDataUni:
		p.InitialMaxStreamDataUni, err = intValue()
	case TPInitialMaxStreamsBidi, TPInitialMaxStreamsUni:
		x, e := intValue()
		if e != nil {
			return e
		}
		if x > MaxStreams {
			// RFC 9000 §4.6: "If a max_streams transport parameter ... is
			// received with a value greater than 2^60 ... the connection
			// MUST be closed immediately with a connection error of type
			// TRANSPORT_PARAMETER_ERROR".
			return tpErr("RFC 9000 §4.6: " + name + " greater than 2^60")
		}
		if id == TPInitialMaxStreamsBidi {
			p.InitialMaxStreamsBidi = x
		} else {
			p.InitialMaxStreamsUni = x
		}
	case TPAckDelayExponent:
		if p.AckDelayExponent, err = intValue(); err == nil && p.AckDelayExponent > 20 {
			// RFC 9000 §18.2: "Values above 20 are invalid."
			return tpErr("RFC 9000 §18.2: ack_delay_exponent values above 20 are invalid")
		}
	case TPMaxAckDelay:
		if p.MaxAckDelay, err = intValue(); err == nil && p.MaxAckDelay >= 1<<14 {
			// RFC 9000 §18.2: "Values of 2^14 or greater are invalid."
			return tpErr("RFC 9000 §18.2: max_ack_delay values of 2^14 or greater are invalid")
		}
	case TPDisableActiveMigration:
		err = empty()
		p.DisableActiveMigration = true
	case TPPreferredAddress:
		return p.setPreferredAddress(v)
	case TPActiveConnectionIDLimit:
		if p.ActiveConnectionIDLimit, err = intValue(); err == nil && p.ActiveConnectionIDLimit < 2 {
			// RFC 9000 §18.2: "An endpoint that receives a value less than
			// 2 MUST close the connection with an error of type
			// TRANSPORT_PARAMETER_ERROR."
			return tpErr("RFC 9000 §18.2: active_connection_id_limit must be at least 2")
		}
	case TPVersionInformation:
		// RFC 9368 §3: Chosen Version (32) followed by Available Versions
		// (32) ...; "If the endpoint receives a Chosen Version equal to
		// zero, or any Available Version equal to zero, it MUST treat it
		// as a parsing failure", and a parsing failure is a
		// TRANSPORT_PARAMETER_ERROR.
		if len(v) < 4 || len(v)%4 != 0 {
			return tpErr("RFC 9368 §3: version_information length must be a non-zero multiple of 4")
		}
		vi := VersionInformation{Chosen: Version(binary.BigEndian.Uint32(v))}
		if vi.Chosen == 0 {
			return tpErr("RFC 9368 §3: Chosen Version equal to zero")
		}
		for i := 4; i < len(v); i += 4 {
			av := Version(binary.BigEndian.Uint32(v[i:]))
			if av == 0 {
				return tpErr("RFC 9368 §3: Available Version equal to zero")
			}
			vi.Available = append(vi.Available, av)
		}
		p.HasVersionInformation = true
		p.VersionInformation = vi
	case TPMaxDatagramFrameSize:
		p.HasMaxDatagramFrameSize = true
		p.MaxDatagramFrameSize, err = intValue()
	case TPGreaseQUICBit:
		// RFC 9287 §3: "An endpoint that receives a grease_quic_bit
		// transport parameter with a non-zero length MUST treat this as a
		// connection error of type TRANSPORT_PARAMETER_ERROR".
		if len(v) != 0 {
			return tpErr("RFC 9287 §3: grease_quic_bit must have an empty value")
		}
		p.GreaseQUICBit = true
	case TPMinAckDelay:
		p.HasMinAckDelay = true
		p.MinAckDelay, err = intValue()
	default:
		p.Unknown = append(p.Unknown, TransportParameter{ID: uint64(id), Value: v})
	}
	return err
}

func (p *TransportParameters) setPreferredAddress(v []byte) error {
	const fixed = 4 + 2 + 16 + 2 + 1
	if len(v) < fixed+16 {
		return tpErr("RFC 9000 §18.2: preferred_address too short")
	}
	pa := &p.PreferredAddress
	copy(pa.IPv4[:], v[0:4])
	pa.IPv4Port = binary.BigEndian.Uint16(v[4:6])
	copy(pa.IPv6[:], v[6:22])
	pa.IPv6Port = binary.BigEndian.Uint16(v[22:24])
	l := int(v[24])
	if len(v) != fixed+l+16 {
		return tpErr("RFC 9000 §18.2: preferred_address length does not match its connection ID length")
	}
	if l == 0 || l > MaxCIDLen {
		// RFC 9000 §18.2: "a server MUST NOT include a zero-length
		// connection ID in this transport parameter. A client MUST treat a
		// violation of these requirements as a connection error of type
		// TRANSPORT_PARAMETER_ERROR."
		return tpErr("RFC 9000 §18.2: preferred_address connection ID must be 1 to 20 bytes")
	}
	pa.ConnectionID = v[fixed : fixed+l : fixed+l]
	copy(pa.StatelessResetToken[:], v[fixed+l:])
	p.HasPreferredAddress = true
	return nil
}
