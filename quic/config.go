package quic

import (
	"crypto/tls"
	"io"
	"time"

	"github.com/quiver-quic/quiver/qlog"
)

// QUIC versions the engine speaks.
const (
	// Version1 is QUIC version 1 (RFC 9000).
	Version1 uint32 = 0x00000001
	// Version2 is QUIC version 2 (RFC 9369).
	Version2 uint32 = 0x6b3343cf
)

// CongestionControl names a congestion controller.
type CongestionControl string

// Congestion controllers the engine implements.
const (
	NewReno CongestionControl = "reno"
	Cubic   CongestionControl = "cubic"
)

// A Config configures an Endpoint or a connection. A nil Config is not
// valid for Listen or Dial: TLSConfig is required. Zero values of the other
// fields select the defaults documented on each field.
type Config struct {
	// TLSConfig configures TLS 1.3. It must set NextProtos (ALPN); a server
	// configuration must carry certificates. MinVersion is forced to TLS 1.3.
	TLSConfig *tls.Config

	// Versions lists the QUIC versions in order of preference. A client
	// starts with the first one; a server accepts any of them. The default
	// is [Version1, Version2] for a server and [Version1] for a client.
	// All of them are offered in the version_information transport
	// parameter (RFC 9368); a server whose first choice among the
	// client's offer differs from the client's version moves the
	// connection to it (compatible version negotiation, for example
	// Versions [Version2, Version1] upgrades a v1 client offering v2).
	Versions []uint32

	// MaxIdleTimeout is the max_idle_timeout transport parameter.
	// Default 30s. A negative value disables the idle timeout.
	MaxIdleTimeout time.Duration
	// KeepAlivePeriod, when set, makes the connection send a PING after
	// this long without activity, so that it does not time out while idle
	// (RFC 9000 §10.1.2). Keep it below the idle timeout.
	KeepAlivePeriod time.Duration
	// InitialMaxData is the connection-level flow-control limit offered to
	// the peer. Default 16 MiB.
	InitialMaxData uint64
	// InitialMaxStreamData is the per-stream flow-control limit offered to
	// the peer, for every kind of stream. Default 4 MiB.
	InitialMaxStreamData uint64
	// MaxBidiStreams and MaxUniStreams are the number of concurrent
	// streams the peer may open. Default 100 each; a negative value means 0.
	MaxBidiStreams int64
	MaxUniStreams  int64
	// AckDelayExponent is the ack_delay_exponent transport parameter.
	// Default 3.
	AckDelayExponent uint8
	// MaxAckDelay is the max_ack_delay transport parameter. Default 25ms.
	MaxAckDelay time.Duration
	// ActiveConnectionIDLimit is the active_connection_id_limit transport
	// parameter. Default 4.
	ActiveConnectionIDLimit uint64
	// MaxUDPPayloadSize is the max_udp_payload_size transport parameter:
	// the largest datagram this endpoint accepts. Default 1452. What the
	// engine sends is set by InitialPacketSize, MaxPacketSize and path MTU
	// discovery.
	MaxUDPPayloadSize uint64

	// DisablePathMTUDiscovery turns DPLPMTUD (RFC 9000 §14.3, RFC 8899)
	// off: the connection then sends datagrams of InitialPacketSize bytes
	// at most. With it on (the default) the connection starts at
	// InitialPacketSize once the handshake is confirmed, probes larger
	// sizes with PING+PADDING packets up to MaxPacketSize (and the peer's
	// max_udp_payload_size), falls back to InitialPacketSize when full-size
	// packets stop arriving (a black hole), and probes again every ten
	// minutes. ConnStats.MaxDatagramSize reports the size in use.
	DisablePathMTUDiscovery bool
	// InitialPacketSize is the datagram size used from the confirmation
	// of the handshake until probing finds more (BASE_PLPMTU of RFC
	// 8899). Default and minimum 1200, the size every QUIC path carries
	// (RFC 9000 §14).
	InitialPacketSize int
	// MaxPacketSize is the largest datagram DPLPMTUD probes for
	// (MAX_PLPMTU). Default 1452 (a 1500-byte IPv6 path), at most 2048.
	MaxPacketSize int

	// Allow0RTT lets a server accept 0-RTT data in resumed connections, and
	// a client send 0-RTT data when it resumes a session whose ticket
	// allows it (TLSConfig.ClientSessionCache must be set; see DialEarly).
	// A server's Accept returns a connection that accepted 0-RTT before
	// its handshake completes: 0-RTT data can be replayed (RFC 9001 §9.2),
	// and the TLS state is complete only once the handshake is.
	Allow0RTT bool

	// StrictAcks makes the receiver decide whether to acknowledge after
	// every datagram, instead of after the burst one loop turn takes in.
	// RFC 9000 §13.2.2 allows either ("A receiver MAY process multiple
	// available packets before determining whether to send an ACK
	// frame"); strict, a receiver without ACK_FREQUENCY sends one ACK per
	// two ack-eliciting packets, RFC 9000's baseline, at the cost of a
	// loop turn per datagram. For measurements (quiver bench ackfreq's
	// "strict" ratio).
	StrictAcks bool

	// MinAckDelay is the min_ack_delay transport parameter of the ACK
	// frequency extension (draft-ietf-quic-ack-frequency): advertising it
	// lets the peer send ACK_FREQUENCY and IMMEDIATE_ACK. Default 1ms; a
	// negative value turns the extension off.
	MinAckDelay time.Duration

	// AckFrequency is the policy with which this endpoint, as a data
	// sender, asks the peer to acknowledge less often (needs the peer's
	// min_ack_delay). The zero value keeps RFC 9000's ACK rate.
	AckFrequency AckFrequencyPolicy

	// MaxDatagramFrameSize, when not 0, enables DATAGRAM frames (RFC 9221)
	// and is announced as max_datagram_frame_size: the largest DATAGRAM
	// frame we accept. See Conn.SendDatagram and Conn.ReceiveDatagram.
	MaxDatagramFrameSize uint64

	// StatelessResetKey derives the stateless reset tokens of the
	// endpoint's connection IDs. Keep it secret and stable across restarts
	// so that a restarted endpoint can reset connections it has forgotten
	// (RFC 9000 §10.3.2: "A single static key can be used across all
	// connections to the same endpoint by generating the proof using a
	// pseudorandom function that takes a static key and the connection ID
	// chosen by the endpoint"). The zero value picks a random key per
	// endpoint.
	StatelessResetKey [32]byte

	// TokenStore, on a client, keeps the address validation tokens servers
	// give in NEW_TOKEN frames and offers them in later connections to the
	// same server, which can then skip Retry (RFC 9000 §8.1.3). See
	// NewTokenStore.
	TokenStore TokenStore

	// RequireRetry makes a server answer every Initial without a valid
	// token with a Retry packet (RFC 9000 §8.1.2).
	RequireRetry bool

	// Congestion selects the congestion controller. Default Cubic.
	Congestion CongestionControl

	// Tracer, when set, is called once per connection and returns a qlog
	// recorder for it (or nil for none). odcid is the original destination
	// connection ID chosen by the client.
	Tracer func(odcid []byte, isClient bool) qlog.Recorder

	// KeyLog, when set, receives every TLS secret in SSLKEYLOGFILE format,
	// including CLIENT_EARLY_TRAFFIC_SECRET.
	KeyLog io.Writer

	// ConnectionIDLength is the length of the connection IDs the endpoint
	// issues, 0 to 20 (default 8). It is an endpoint setting: Listen,
	// NewEndpoint and the package-level Dial take it from their Config.
	// Zero-length IDs (RFC 9000 §5.1) route by peer address and suit
	// client endpoints with one connection per peer. Use -1 for zero.
	ConnectionIDLength int

	// DisableECN stops the engine from marking its packets ECT(0). It
	// still reads and reports the marks it receives.
	DisableECN bool

	// The fast-path switches below are endpoint settings (Listen,
	// NewEndpoint and the package-level Dial take them from their Config);
	// the zero value turns every offload on. They exist so that benchmarks
	// can sweep each one. The environment variables QUIVER_DISABLE_GSO,
	// QUIVER_DISABLE_GRO and QUIVER_DISABLE_BATCHING set to "true" turn
	// the same offloads off for every endpoint of the process.

	// DisableGSO stops the engine from sending a run of equal-size
	// datagrams in one system call with UDP generic segmentation offload
	// (UDP_SEGMENT). Each datagram then travels in its own message.
	DisableGSO bool
	// DisableGRO stops the engine from asking the kernel to coalesce
	// received datagrams (UDP_GRO), so that each read returns one datagram.
	DisableGRO bool
	// DisableBatching makes the endpoint read with one recvmsg per
	// datagram (or GRO batch) and write with one sendmsg per GSO run,
	// instead of recvmmsg and sendmmsg over several messages.
	DisableBatching bool
	// SocketBuffer is the send and receive buffer size asked of the kernel
	// for the sockets that Listen and Dial open. Default 8 MiB; a negative
	// value keeps the kernel's default. As root the size is forced
	// (SO_RCVBUFFORCE, SO_SNDBUFFORCE) past net.core.[rw]mem_max.
	SocketBuffer int

	// DisableGreaseQUICBit stops the engine from advertising the
	// grease_quic_bit transport parameter (RFC 9287). With it advertised
	// (the default) the engine accepts packets whose QUIC bit is 0;
	// without it such packets are discarded (RFC 9000 §17.2). Either way
	// the engine greases the bit on its own Handshake and 1-RTT packets
	// when the peer advertised the parameter.
	DisableGreaseQUICBit bool

	// PreferredAddress, on a server, is offered to clients in the
	// preferred_address transport parameter (RFC 9000 §9.6): after the
	// handshake they validate it and move their connections there. Listen
	// opens a socket on each address given (a zero port takes the port
	// the system picks); an Endpoint from NewEndpoint serves the sockets
	// given to ServePreferredAddress. Connections get a connection ID of
	// sequence 1 with the address; with zero-length connection IDs no
	// address is offered (§18.2).
	PreferredAddress *PreferredAddress
	// IgnorePreferredAddress makes a client stay on the address it
	// connected to even when the server offers a preferred address.
	IgnorePreferredAddress bool

	// KeyUpdateInterval is how many 1-RTT packets the connection seals
	// with one set of keys before it updates them on its own (RFC 9001
	// §6). Default 2^21, a quarter of AES-GCM's confidentiality limit;
	// smaller values exercise the peer's key update handling.
	KeyUpdateInterval uint64

	// TLS13Suites, when set on a client, are the TLS 1.3 cipher suites its
	// ClientHello offers, in that order, for this connection only (see
	// WithTLS13Suites for what is accepted and how). It needs
	// EnableTLS13SuiteControl: without it a dial with suites fails. Nil
	// offers crypto/tls's own list.
	TLS13Suites []uint16

	// The switches below make choices that the RFCs leave to each
	// implementation (or recommend without requiring) the other way from
	// the engine's default, so that the conformance suite can be run
	// against every such choice (conformance/variants). Each names the RFC
	// text that permits it. The zero value keeps the default.

	// PadWithZeros expands datagrams that must reach 1200 bytes with zero
	// bytes after the last packet, when that packet has a long header,
	// instead of PADDING frames inside it. RFC 9000 §14.1: a client
	// expands them "by adding PADDING frames to the Initial packet or by
	// coalescing the Initial packet ... Initial packets can even be
	// coalesced with invalid packets, which a receiver will discard."
	PadWithZeros bool
	// DisableBlockedFrames stops DATA_BLOCKED, STREAM_DATA_BLOCKED and
	// STREAMS_BLOCKED frames. RFC 9000 §4.1: "A sender SHOULD send a
	// STREAM_DATA_BLOCKED or DATA_BLOCKED frame to indicate to the
	// receiver that it has data to write but is blocked by flow control
	// limits" (a SHOULD: an endpoint without them is compliant, and a
	// scenario that checks for them is right to warn).
	DisableBlockedFrames bool
	// CloseAboveInitial sends CONNECTION_CLOSE, once Handshake keys are
	// there, only in Handshake and 1-RTT packets (1-RTT as soon as its
	// write keys are), not in an Initial packet. RFC 9000 §10.2.3:
	// "Generally, this means sending the frame in a packet with the
	// highest level of packet protection" and "Prior to confirming the
	// handshake, a peer might be unable to process 1-RTT packets, so an
	// endpoint SHOULD send a CONNECTION_CLOSE frame in both Handshake and
	// 1-RTT packets." (A server leaving out the Initial copy departs from
	// "A server SHOULD also send a CONNECTION_CLOSE frame in an Initial
	// packet".)
	CloseAboveInitial bool
	// DiscardEarly1RTT drops 1-RTT packets that arrive before the
	// handshake is complete instead of keeping them until the keys may be
	// used. RFC 9001 §5.7: "Received packets protected with 1-RTT keys MAY
	// be stored and later decrypted and used once the handshake is
	// complete."
	DiscardEarly1RTT bool
	// AckEveryPackets is how many ack-eliciting 1-RTT packets may arrive
	// before an ACK is sent at once; fewer wait at most max_ack_delay.
	// Default 2. RFC 9000 §13.2.2: "A receiver SHOULD send an ACK frame
	// after receiving at least two ack-eliciting packets", and
	// "Knowledge of network conditions ... might suggest alternative
	// acknowledgment strategies". 1 acknowledges every packet at once.
	AckEveryPackets int
	// InitialWindowPackets sets the initial congestion window in
	// full-sized datagrams. Default: RFC 9002 §7.2's "ten times the
	// maximum datagram size ..., while limiting the window to the larger
	// of 14,720 bytes or twice the maximum datagram size" (a SHOULD; a
	// larger value departs from it).
	InitialWindowPackets int
	// DisablePacing sends in-flight packets as soon as the congestion
	// window allows. RFC 9002 §7.7: "A sender SHOULD pace sending of all
	// in-flight packets based on input from the congestion controller"
	// and "Senders MUST either use pacing or limit such bursts": without
	// pacing, bursts are limited by the congestion window.
	DisablePacing bool

	// Probe holds test hooks (a *Probe, or any Hooks). Production code
	// leaves it nil.
	Probe Hooks
}

const (
	defaultMaxIdleTimeout       = 30 * time.Second
	defaultInitialMaxData       = 16 << 20
	defaultInitialMaxStreamData = 4 << 20
	defaultMaxStreams           = 100
	defaultAckDelayExponent     = 3
	defaultMaxAckDelay          = 25 * time.Millisecond
	defaultActiveCIDLimit       = 4
	defaultMaxUDPPayloadSize    = 1452
	// defaultSocketBuffer is the socket buffer size Listen and Dial ask
	// for: large buffers absorb bursts at high rates.
	defaultSocketBuffer = 8 << 20

	// maxDatagramSize is the default largest datagram the engine sends
	// (MaxPacketSize), which DPLPMTUD probes for. RFC 9000 §14: every
	// path supports at least 1200 bytes.
	maxDatagramSize = 1200 + 252
	// minInitialDatagramSize is RFC 9000 §14.1: "A client MUST expand the
	// payload of all UDP datagrams carrying Initial packets to at least the
	// smallest allowed maximum datagram size of 1200 bytes".
	minInitialDatagramSize = 1200
	// defaultConnIDLen is the length of the connection IDs the engine
	// issues by default.
	defaultConnIDLen = 8
)

func (c *Config) maxIdleTimeout() time.Duration {
	switch {
	case c.MaxIdleTimeout == 0:
		return defaultMaxIdleTimeout
	case c.MaxIdleTimeout < 0:
		return 0
	}
	return c.MaxIdleTimeout
}

func (c *Config) initialMaxData() uint64 {
	if c.InitialMaxData == 0 {
		return defaultInitialMaxData
	}
	return c.InitialMaxData
}

func (c *Config) initialMaxStreamData() uint64 {
	if c.InitialMaxStreamData == 0 {
		return defaultInitialMaxStreamData
	}
	return c.InitialMaxStreamData
}

func streamsOrDefault(n int64) uint64 {
	switch {
	case n == 0:
		return defaultMaxStreams
	case n < 0:
		return 0
	}
	return uint64(n)
}

func (c *Config) maxBidiStreams() uint64 { return streamsOrDefault(c.MaxBidiStreams) }
func (c *Config) maxUniStreams() uint64  { return streamsOrDefault(c.MaxUniStreams) }

func (c *Config) ackDelayExponent() uint8 {
	if c.AckDelayExponent == 0 {
		return defaultAckDelayExponent
	}
	return c.AckDelayExponent
}

func (c *Config) maxAckDelay() time.Duration {
	if c.MaxAckDelay == 0 {
		return defaultMaxAckDelay
	}
	return c.MaxAckDelay
}

func (c *Config) activeCIDLimit() uint64 {
	if c.ActiveConnectionIDLimit < 2 {
		return defaultActiveCIDLimit
	}
	return c.ActiveConnectionIDLimit
}

func (c *Config) maxUDPPayloadSize() uint64 {
	if c.MaxUDPPayloadSize == 0 {
		return defaultMaxUDPPayloadSize
	}
	return c.MaxUDPPayloadSize
}

// maxPacketSizeLimit bounds MaxPacketSize: the receive buffers hold 2048
// bytes.
const maxPacketSizeLimit = recvBufSize

func (c *Config) initialPacketSize() int {
	return min(max(c.InitialPacketSize, minInitialDatagramSize), c.maxPacketSize())
}

func (c *Config) maxPacketSize() int {
	if c.MaxPacketSize == 0 {
		return maxDatagramSize
	}
	return min(max(c.MaxPacketSize, minInitialDatagramSize), maxPacketSizeLimit)
}

func (c *Config) versions(isClient bool) []uint32 {
	if len(c.Versions) > 0 {
		return c.Versions
	}
	if isClient {
		return []uint32{Version1}
	}
	return []uint32{Version1, Version2}
}

func (c *Config) congestion() CongestionControl {
	if c.Congestion == "" {
		return Cubic
	}
	return c.Congestion
}

// socketBuffer is the socket buffer size to ask for, 0 for none.
func (c *Config) socketBuffer() int {
	switch {
	case c.SocketBuffer < 0:
		return 0
	case c.SocketBuffer == 0:
		return defaultSocketBuffer
	}
	return c.SocketBuffer
}

func (c *Config) connIDLen() int {
	switch {
	case c.ConnectionIDLength < 0:
		return 0
	case c.ConnectionIDLength == 0:
		return defaultConnIDLen
	}
	return min(c.ConnectionIDLength, 20)
}
