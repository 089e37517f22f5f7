// Package analyze decrypts and decodes the QUIC traffic in a packet capture,
// so that the interop runner can judge a test case from what was on the wire
// rather than from what the endpoints say about themselves.
//
// It reads a pcapng or pcap capture (pcap package) and NSS key logs (from the
// capture's Decryption Secrets Blocks or from files), groups datagrams into
// connections by connection ID, and decrypts every packet it has keys for:
// Initial packets with the version's initial secrets (v1 and v2), Handshake,
// 0-RTT and 1-RTT packets with the key log's secrets, following key updates.
// It splits coalesced packets, checks Retry integrity tags, records Version
// Negotiation, and reads the TLS messages in the CRYPTO streams that the
// checks need (ClientHello, ServerHello, EncryptedExtensions, Certificate).
//
// The analyzer shares only the packet protection primitives (quic/protect)
// and the wire codec (quic/wire) with the engine, never its connection code,
// so that a bug in the engine's state machine cannot hide itself in a verdict.
package analyze

import (
	"encoding/hex"
	"net/netip"
	"time"

	"github.com/quiver-quic/quiver/quic/wire"
)

// Direction says who sent a packet.
type Direction uint8

const (
	// FromClient is a packet the client sent.
	FromClient Direction = iota
	// FromServer is a packet the server sent.
	FromServer
)

// String returns "client" or "server", the side that sent.
func (d Direction) String() string {
	if d == FromServer {
		return "server"
	}
	return "client"
}

// MarshalText writes "client" or "server".
func (d Direction) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// HexBytes is a byte string written as hex in JSON.
type HexBytes []byte

// MarshalText writes the bytes in hex.
func (b HexBytes) MarshalText() ([]byte, error) { return []byte(hex.EncodeToString(b)), nil }

// String returns the bytes in hex.
func (b HexBytes) String() string { return hex.EncodeToString(b) }

// Packet is one QUIC packet of the capture, decrypted when keys were known.
type Packet struct {
	// Datagram is the index of the datagram in the capture (0-based), so
	// coalesced packets share it.
	Datagram int             `json:"datagram"`
	Time     time.Time       `json:"time"`
	Dir      Direction       `json:"dir"`
	Src      netip.AddrPort  `json:"src"`
	Dst      netip.AddrPort  `json:"dst"`
	Type     wire.PacketType `json:"-"`
	TypeName string          `json:"type"`
	Version  wire.Version    `json:"version,omitempty"`
	DCID     HexBytes        `json:"dcid,omitempty"`
	SCID     HexBytes        `json:"scid,omitempty"`
	Token    HexBytes        `json:"token,omitempty"`
	// Size is the packet's length within its datagram.
	Size int `json:"size"`
	// Decrypted says that header and payload protection were removed; PN,
	// KeyPhase and Frames are only meaningful then.
	Decrypted bool   `json:"decrypted"`
	PN        uint64 `json:"pn"`
	// KeyPhase is the key phase bit of a 1-RTT packet, and Generation the
	// number of key updates before the keys that opened it.
	KeyPhase   uint8   `json:"key_phase"`
	Generation int     `json:"generation,omitempty"`
	Frames     []Frame `json:"frames,omitempty"`
	// Error says why the packet could not be read (no keys, failed
	// authentication, malformed frame).
	Error string `json:"error,omitempty"`
	// Conn is the index of the connection the packet belongs to, or -1.
	Conn int `json:"conn"`
}

// AckEliciting reports whether the packet carries a frame other than ACK,
// PADDING and CONNECTION_CLOSE.
func (p *Packet) AckEliciting() bool {
	for _, f := range p.Frames {
		if f.Type.AckEliciting() {
			return true
		}
	}
	return false
}

// Has reports whether the packet carries a frame of type t (STREAM types
// match any STREAM frame when t is FrameTypeStream).
func (p *Packet) Has(t wire.FrameType) bool {
	for _, f := range p.Frames {
		if f.Type == t || (t == wire.FrameTypeStream && f.Type.IsStream()) {
			return true
		}
	}
	return false
}

// Frame is the summary of a decoded frame: its type and the fields the
// checks use. Byte fields are copies.
type Frame struct {
	Type wire.FrameType `json:"-"`
	Name string         `json:"type"`
	// StreamID for STREAM, MAX_STREAM_DATA, RESET_STREAM, STOP_SENDING.
	StreamID uint64 `json:"stream_id,omitempty"`
	// Offset and Length for STREAM and CRYPTO, Length for PADDING.
	Offset uint64 `json:"offset,omitempty"`
	Length int    `json:"length,omitempty"`
	Fin    bool   `json:"fin,omitempty"`
	// Largest is an ACK's Largest Acknowledged; Ranges its ranges.
	Largest uint64          `json:"largest,omitempty"`
	Ranges  []wire.AckRange `json:"ranges,omitempty"`
	// ECN holds an ACK_ECN frame's ECT(0), ECT(1) and CE counts.
	ECN *[3]uint64 `json:"ecn,omitempty"`
	// Data is the 8 bytes of PATH_CHALLENGE or PATH_RESPONSE.
	Data HexBytes `json:"data,omitempty"`
	// Seq and CID for NEW_CONNECTION_ID (and Seq for RETIRE_CONNECTION_ID).
	Seq uint64   `json:"seq,omitempty"`
	CID HexBytes `json:"cid,omitempty"`
	// Max is the limit of MAX_DATA, MAX_STREAM_DATA, MAX_STREAMS and the
	// *_BLOCKED frames.
	Max uint64 `json:"max,omitempty"`
	// ErrorCode and Reason for CONNECTION_CLOSE, RESET_STREAM, STOP_SENDING.
	ErrorCode uint64 `json:"error_code,omitempty"`
	Reason    string `json:"reason,omitempty"`
	// AckFrequency holds an ACK_FREQUENCY frame's fields
	// (draft-ietf-quic-ack-frequency §4); its sequence number is in Seq.
	AckFrequency *AckFrequencyFields `json:"ack_frequency,omitempty"`
	// First is the first byte of STREAM data at offset 0, which names the
	// stream type of an HTTP/3 unidirectional stream and the first frame
	// type of a request stream; -1 otherwise.
	First int `json:"-"`
}

// AckFrequencyFields are the values an ACK_FREQUENCY frame asks for.
type AckFrequencyFields struct {
	Threshold uint64 `json:"ack_eliciting_threshold"`
	// MaxAckDelay is the Requested Max Ack Delay in microseconds.
	MaxAckDelay uint64 `json:"requested_max_ack_delay_us"`
	Reordering  uint64 `json:"reordering_threshold"`
}

// Retry is a Retry packet seen on a connection.
type Retry struct {
	Time     time.Time    `json:"time"`
	Version  wire.Version `json:"version"`
	SCID     HexBytes     `json:"scid"`
	Token    HexBytes     `json:"token"`
	TagValid bool         `json:"tag_valid"`
}

// VersionNegotiation is a Version Negotiation packet.
type VersionNegotiation struct {
	Time     time.Time      `json:"time"`
	Dir      Direction      `json:"dir"`
	DCID     HexBytes       `json:"dcid"`
	SCID     HexBytes       `json:"scid"`
	Versions []wire.Version `json:"versions"`
	Conn     int            `json:"conn"`
}

// ClientHello is what the analyzer reads from a ClientHello.
type ClientHello struct {
	Random       HexBytes `json:"random"`
	CipherSuites []uint16 `json:"cipher_suites"`
	ALPN         []string `json:"alpn,omitempty"`
	EarlyData    bool     `json:"early_data,omitempty"`
	PreSharedKey bool     `json:"pre_shared_key,omitempty"`
	// TransportParameters are the client's, when they parse.
	TransportParameters *wire.TransportParameters `json:"-"`
	// TPError says why the transport parameters did not parse.
	TPError string `json:"tp_error,omitempty"`
}

// ServerHello is what the analyzer reads from a ServerHello.
type ServerHello struct {
	CipherSuite  uint16 `json:"cipher_suite"`
	PreSharedKey bool   `json:"pre_shared_key,omitempty"`
}

// EncryptedExtensions is what the analyzer reads from the server's
// EncryptedExtensions.
type EncryptedExtensions struct {
	ALPN                string                    `json:"alpn,omitempty"`
	EarlyData           bool                      `json:"early_data,omitempty"`
	TransportParameters *wire.TransportParameters `json:"-"`
	TPError             string                    `json:"tp_error,omitempty"`
}

// KeyPhases counts the key updates of one direction.
type KeyPhases struct {
	// Packets counts decrypted 1-RTT packets per key phase bit.
	Packets [2]int `json:"packets"`
	// Generations is the number of key updates seen (0: none).
	Generations int `json:"generations"`
	// FirstUpdate is the time of the first packet with the second
	// generation's keys.
	FirstUpdate time.Time `json:"first_update,omitzero"`
	// FirstUpdateBytes is how many STREAM bytes the direction had sent
	// before its first key update.
	FirstUpdateBytes uint64 `json:"first_update_stream_bytes,omitempty"`
}

// ECNCounts follows the ACK_ECN frames of one direction.
type ECNCounts struct {
	Frames int `json:"frames"`
	// Last is the latest ECT(0), ECT(1) and CE counts.
	Last [3]uint64 `json:"last"`
	// Decreased is set when a count went down between two ACK_ECN frames.
	Decreased bool `json:"decreased,omitempty"`
}

// Amplification is the anti-amplification walk of RFC 9000 §8.1 over the
// server's datagrams before the client's address was validated.
type Amplification struct {
	// ClientBytes and ServerBytes are UDP payload bytes before validation.
	ClientBytes int `json:"client_bytes"`
	ServerBytes int `json:"server_bytes"`
	// MaxRatio is the highest ServerBytes/ClientBytes reached.
	MaxRatio float64 `json:"max_ratio"`
	// Exceeded is set when the server ever sent more than 3× what it had
	// received before validation.
	Exceeded bool `json:"exceeded"`
	// Validated is when the address was validated (zero if never).
	Validated time.Time `json:"validated,omitzero"`
	// CompatRatio is the established runner's walk: each client Initial
	// packet adds 3× its size, each server packet is charged.
	CompatMaxRatio float64 `json:"compat_max_ratio"`
}

// Path is one client 4-tuple seen by the server side of the capture.
type Path struct {
	Client netip.AddrPort `json:"client"`
	Server netip.AddrPort `json:"server"`
	First  time.Time      `json:"first"`
	// ChallengedByServer: the server sent PATH_CHALLENGE on this path;
	// FirstServerChallenge: its first packet on the path carried one.
	ChallengedByServer   bool `json:"challenged_by_server"`
	FirstServerChallenge bool `json:"first_server_packet_challenge"`
	// Validated: a matching PATH_RESPONSE came back from the client on it.
	Validated bool `json:"validated"`
	// Bytes before validation in each direction; Exceeded when the server
	// sent more than 3× what it received before validation.
	ClientBytes int  `json:"client_bytes"`
	ServerBytes int  `json:"server_bytes"`
	Exceeded    bool `json:"exceeded"`
	// ChallengedByClient: the client sent PATH_CHALLENGE towards this
	// server address; ClientValidated: the server answered it.
	ChallengedByClient bool `json:"challenged_by_client,omitempty"`
	ClientValidated    bool `json:"client_validated,omitempty"`
	// ClientValidatedFromServer: the PATH_RESPONSE that validated the
	// client's challenge came from this path's server address.
	ClientValidatedFromServer bool `json:"client_validated_from_server,omitempty"`
}

// PreferredAddrs returns the addresses of the server's preferred_address
// transport parameter (RFC 9000 §18.2), when the trace shows it: an
// all-zero address or port leaves that family out.
func (c *Conn) PreferredAddrs() []netip.AddrPort {
	ee := c.EncryptedExtensions
	if ee == nil || ee.TransportParameters == nil || !ee.TransportParameters.HasPreferredAddress {
		return nil
	}
	pa := ee.TransportParameters.PreferredAddress
	var out []netip.AddrPort
	if v4 := netip.AddrFrom4(pa.IPv4); pa.IPv4Port != 0 && !v4.IsUnspecified() {
		out = append(out, netip.AddrPortFrom(v4, pa.IPv4Port))
	}
	if v6 := netip.AddrFrom16(pa.IPv6); pa.IPv6Port != 0 && !v6.IsUnspecified() {
		out = append(out, netip.AddrPortFrom(v6, pa.IPv6Port))
	}
	return out
}

// Close is a CONNECTION_CLOSE frame.
type Close struct {
	Dir         Direction `json:"dir"`
	Application bool      `json:"application"`
	Code        uint64    `json:"code"`
	Reason      string    `json:"reason,omitempty"`
}

// Conn is one QUIC connection in the capture.
type Conn struct {
	Index int `json:"index"`
	// ODCID is the Destination Connection ID of the client's first Initial.
	ODCID HexBytes `json:"odcid"`
	// ClientCIDs and ServerCIDs are every connection ID each side chose
	// (long-header SCIDs and NEW_CONNECTION_ID), in order of appearance.
	ClientCIDs []HexBytes `json:"client_cids"`
	ServerCIDs []HexBytes `json:"server_cids"`
	// ServerInitialSCIDs are the SCIDs of the server's Initial packets:
	// the established runner's handshake attempts.
	ServerInitialSCIDs []HexBytes     `json:"server_initial_scids"`
	First              time.Time      `json:"first"`
	Last               time.Time      `json:"last"`
	Client             netip.AddrPort `json:"client"`
	Server             netip.AddrPort `json:"server"`
	// Versions are the versions of the long headers, by sender.
	ClientVersions []wire.Version `json:"client_versions"`
	ServerVersions []wire.Version `json:"server_versions"`

	Retries             []Retry              `json:"retries,omitempty"`
	VersionNegotiations []VersionNegotiation `json:"version_negotiations,omitempty"`
	// RetryTokenReused: a client Initial after a Retry carried its token;
	// RetryPNsContinue: its packet number was above every client Initial
	// packet number before the Retry; RetryDCID: it used the Retry's SCID
	// as its DCID.
	RetryTokenReused bool `json:"retry_token_reused,omitempty"`
	RetryPNsContinue bool `json:"retry_pns_continue,omitempty"`
	RetryDCID        bool `json:"retry_dcid,omitempty"`

	ClientHello         *ClientHello         `json:"client_hello,omitempty"`
	ServerHello         *ServerHello         `json:"server_hello,omitempty"`
	EncryptedExtensions *EncryptedExtensions `json:"encrypted_extensions,omitempty"`
	// ServerCertificate: the server's Handshake CRYPTO data held a
	// Certificate message (a full handshake, not a resumption).
	ServerCertificate bool `json:"server_certificate"`
	// ServerHandshakeCryptoMax is the highest offset reached by the
	// server's Handshake CRYPTO frames.
	ServerHandshakeCryptoMax uint64 `json:"server_handshake_crypto_max"`
	// ClientHelloSends counts client Initial packets whose CRYPTO data
	// covers offset 0, i.e. ClientHello transmissions.
	ClientHelloSends int `json:"client_hello_sends"`
	// ClientInitialSuites are the suites offered by every ClientHello
	// transmission (one entry per decrypted ClientHello start).
	ClientHelloSuites [][]uint16 `json:"-"`

	// Handshake progress.
	ClientHandshakePackets int       `json:"client_handshake_packets"`
	FirstClientHandshake   time.Time `json:"-"`
	HandshakeDone          bool      `json:"handshake_done"`
	Client1RTT             bool      `json:"client_1rtt"`
	// HandshakeKeys says that the key log held this connection's
	// Handshake secrets.
	HandshakeKeys bool `json:"handshake_keys"`
	AppKeys       bool `json:"app_keys"`

	ZeroRTTPackets     int    `json:"zero_rtt_packets"`
	ZeroRTTBytes       int    `json:"zero_rtt_bytes"`
	ZeroRTTStreamBytes uint64 `json:"zero_rtt_stream_bytes"`
	// OneRTTStreamBytes counts the STREAM payload of client 1-RTT packets.
	ClientOneRTTStreamBytes uint64 `json:"client_1rtt_stream_bytes"`
	ServerStreamBytes       uint64 `json:"server_stream_bytes"`

	KeyPhases [2]KeyPhases `json:"key_phases"`
	ECN       [2]ECNCounts `json:"ecn"`
	// FrameCounts counts frames by name and sender.
	FrameCounts [2]map[string]int `json:"frame_counts"`
	// StreamStarts maps stream IDs to the first byte of their data.
	StreamStarts [2]map[uint64]byte `json:"-"`
	Closes       []Close            `json:"closes,omitempty"`

	Amplification Amplification `json:"amplification"`
	Paths         []*Path       `json:"paths,omitempty"`
	// ServerChallenges counts the distinct PATH_CHALLENGE data the server
	// sent; UnansweredChallenges those no client PATH_RESPONSE echoed.
	ServerChallenges     int `json:"server_challenges,omitempty"`
	UnansweredChallenges int `json:"unanswered_challenges,omitempty"`

	Packets []*Packet `json:"-"`

	// analyzer state
	st *connState
}

// Completed reports whether the handshake completed, judged from the
// capture: the client sent a Handshake packet and the server then sent
// HANDSHAKE_DONE (RFC 9001 §4.1.2); without keys, the client's first 1-RTT
// packet stands in.
func (c *Conn) Completed() bool {
	if c.ClientHandshakePackets == 0 {
		return false
	}
	if c.AppKeys {
		return c.HandshakeDone
	}
	return c.HandshakeDone || c.Client1RTT
}

// Resumed reports whether the connection was a resumption: the ServerHello
// accepted a pre-shared key, or the server's Handshake data had no
// Certificate.
func (c *Conn) Resumed() bool {
	if c.ServerHello != nil && c.ServerHello.PreSharedKey {
		return true
	}
	return c.HandshakeKeys && c.ClientHandshakePackets > 0 && !c.ServerCertificate
}

// Trace is everything the analyzer read from one capture.
type Trace struct {
	Conns []*Conn `json:"conns"`
	// Packets is every QUIC packet in capture order, including those that
	// belong to no connection (Conn == -1).
	Packets             []*Packet            `json:"-"`
	VersionNegotiations []VersionNegotiation `json:"version_negotiations,omitempty"`
	Datagrams           int                  `json:"datagrams"`
	// Unattributed counts packets that matched no connection (corrupted
	// headers, stray datagrams).
	Unattributed int `json:"unattributed"`
	// Undecryptable counts packets for which no keys opened the payload.
	Undecryptable int `json:"undecryptable"`
	// ServerAddrs are the addresses judged to be the server's.
	ServerAddrs []netip.AddrPort `json:"server_addrs"`
	// Keys counts the key log entries used.
	KeyLogEntries int `json:"keylog_entries"`
}

// Handshakes counts handshakes as §4.3 defines them: attempts are distinct
// server Initial SCIDs, completed the connections whose handshake completed.
func (t *Trace) Handshakes() (completed, attempts int) {
	seen := map[string]bool{}
	for _, c := range t.Conns {
		for _, s := range c.ServerInitialSCIDs {
			seen[string(s)] = true
		}
		if c.Completed() {
			completed++
		}
	}
	return completed, len(seen)
}
