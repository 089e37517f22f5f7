package main

import (
	"context"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/quiver-quic/quiver/keylog"
	"github.com/quiver-quic/quiver/quic"
	"github.com/quiver-quic/quiver/transfer"
)

type serveOpts struct {
	addr, root, alpn, qlog, keylog, cert, key string
	retry                                     bool
	cpuprofile, cipher, preferred             string

	// Engine features and limits (quic.Config), each with the engine's
	// default as the flag's default.
	zeroRTT           bool
	datagrams         string
	maxDatagramFrame  uint64
	greaseQUICBit     bool
	keyUpdateInterval uint64
	minAckDelay       time.Duration
	ackRatio          string
	versions          string
	idleTimeout       time.Duration
	maxAckDelay       time.Duration
	maxStreamsBidi    int64
	maxStreamsUni     int64
	maxData           uint64
	maxStreamData     uint64
	maxUDPPayload     uint64
	maxPacketSize     int
	pmtud             bool
	ecn               bool
	cidLen            int
	cc                string
	activeCIDLimit    uint64
	resetKey          string
}

// demoServeFlags are the serve flags with which the demo starts Quiver:
// every engine feature a server can offer on at once. The DATAGRAM limit
// is below one packet so that dgram-too-large can exceed it; 127.0.0.2 is
// on Linux's loopback; a key update every 10000 packets shows in
// tls-server-key-update; v2 preferred shows compatible version
// negotiation; the adaptive ACK ratio shows ACK_FREQUENCY.
var demoServeFlags = []string{"--0rtt", "--datagrams", "echo", "--max-datagram-frame-size", "1024", "--preferred-address", "127.0.0.2:0",
	"--key-update-interval", "10000", "--versions", "2,1", "--ack-ratio", "adaptive"}

func serveCommand() *command {
	return &command{
		name:    "serve",
		summary: "serve files over QUIC with Quiver's engine (hq-interop and HTTP/3)",
		usage:   "[flags]",
		examples: []string{
			"quiver serve --addr 127.0.0.1:4433 --root ./www",
			"quiver serve --addr 127.0.0.1:4433 --root ./www --alpn h3 --retry --qlog ./qlog --keylog keys.log",
			"quiver serve --addr 127.0.0.1:4433 --root ./www --cipher chacha20",
			"quiver serve --addr 127.0.0.1:4433 --root ./www --preferred-address 127.0.0.2:4434",
			"quiver serve --addr 127.0.0.1:4433 --root ./www --0rtt --datagrams echo --versions 2,1 --key-update-interval 1000",
			"quiver serve --addr 127.0.0.1:4433 --root ./www --ack-ratio adaptive --idle-timeout 5s --max-streams-bidi 10 --pmtud=false",
		},
		setFlags: func(fs *flag.FlagSet) any {
			o := &serveOpts{}
			fs.StringVar(&o.addr, "addr", "127.0.0.1:4433", "UDP `address` to listen on")
			fs.StringVar(&o.root, "root", ".", "`directory` whose files are served")
			fs.StringVar(&o.alpn, "alpn", "hq-interop,h3", "application `protocols`, comma-separated")
			fs.BoolVar(&o.retry, "retry", false, "validate client addresses with Retry")
			fs.StringVar(&o.qlog, "qlog", "", "write a qlog file per connection under `dir`")
			fs.StringVar(&o.keylog, "keylog", "", "append TLS secrets to `file` (SSLKEYLOGFILE format)")
			fs.StringVar(&o.cert, "cert", "", "certificate `file` (PEM); default: a generated self-signed one")
			fs.StringVar(&o.key, "key", "", "private key `file` (PEM) for --cert")
			fs.StringVar(&o.cpuprofile, "cpuprofile", "", "write a pprof CPU profile to `file` (quiver bench)")
			fs.StringVar(&o.cipher, "cipher", "", cipherFlagUsage)
			fs.StringVar(&o.preferred, "preferred-address", "", "also serve on `addresses` (IPv4 and/or IPv6 host:port, comma-separated) and ask clients to move there after the handshake (RFC 9000 §9.6)")
			fs.BoolVar(&o.zeroRTT, "0rtt", false, "issue session tickets that allow 0-RTT and accept early data from resuming clients (RFC 9001 §4.6)")
			fs.StringVar(&o.datagrams, "datagrams", "off", "DATAGRAM frames (RFC 9221), `mode` off, echo (send each back) or discard")
			fs.Uint64Var(&o.maxDatagramFrame, "max-datagram-frame-size", 65535, "max_datagram_frame_size announced with --datagrams, in `bytes`")
			fs.BoolVar(&o.greaseQUICBit, "grease-quic-bit", true, "advertise grease_quic_bit and accept packets with the QUIC bit cleared (RFC 9287)")
			fs.Uint64Var(&o.keyUpdateInterval, "key-update-interval", 0, "update the 1-RTT keys after this many `packets` sealed (RFC 9001 §6; 0: the engine's 2^21)")
			fs.DurationVar(&o.minAckDelay, "min-ack-delay", time.Millisecond,
				"min_ack_delay to advertise, which lets clients send ACK_FREQUENCY (0 turns the extension off)")
			fs.StringVar(&o.ackRatio, "ack-ratio", "", "ask clients for one ACK per `N` packets with ACK_FREQUENCY, or adaptive (default: RFC 9000's rate)")
			fs.StringVar(&o.versions, "versions", "1,2",
				"QUIC `versions` accepted, in order of preference (1, 2 or hex); a client offering a preferred one is upgraded (RFC 9368)")
			fs.DurationVar(&o.idleTimeout, "idle-timeout", 30*time.Second, "max_idle_timeout (0: none)")
			fs.DurationVar(&o.maxAckDelay, "max-ack-delay", 25*time.Millisecond, "max_ack_delay transport parameter")
			fs.Int64Var(&o.maxStreamsBidi, "max-streams-bidi", 100, "concurrent bidirectional `streams` a client may open")
			fs.Int64Var(&o.maxStreamsUni, "max-streams-uni", 100, "concurrent unidirectional `streams` a client may open")
			fs.Uint64Var(&o.maxData, "max-data", 16<<20, "connection flow-control limit in `bytes` (initial_max_data)")
			fs.Uint64Var(&o.maxStreamData, "max-stream-data", 4<<20, "per-stream flow-control limit in `bytes`")
			fs.Uint64Var(&o.maxUDPPayload, "max-udp-payload-size", 1452, "max_udp_payload_size: the largest datagram accepted, in `bytes`")
			fs.IntVar(&o.maxPacketSize, "max-packet-size", 1452, "largest datagram path MTU discovery probes for, in `bytes` (1200 to 2048)")
			fs.BoolVar(&o.pmtud, "pmtud", true, "discover the path MTU (DPLPMTUD, RFC 9000 §14.3); off: 1200-byte datagrams")
			fs.BoolVar(&o.ecn, "ecn", true, "mark packets ECT(0) and validate ECN (RFC 9000 §13.4)")
			fs.IntVar(&o.cidLen, "cid-len", 8, "length of the connection IDs issued, 0 to 20 (0: zero-length, routed by address)")
			fs.StringVar(&o.cc, "cc", "cubic", "congestion controller `name`: cubic or reno")
			fs.Uint64Var(&o.activeCIDLimit, "active-cid-limit", 4, "active_connection_id_limit: connection IDs a client may give the server (at least 2)")
			fs.StringVar(&o.resetKey, "stateless-reset-key", "", "`file` holding a 32-byte key in hex from which stateless reset tokens derive, "+
				"so that a restarted server can reset the connections it forgot (RFC 9000 §10.3.2; default: a random key per run)")
			return o
		},
		run: func(ctx context.Context, env *cmdEnv, opts any, args []string) error {
			o := opts.(*serveOpts)
			if len(args) > 0 {
				return fmt.Errorf("%w: serve takes no arguments", errUsage)
			}
			restore, err := restrictCiphers(o.cipher)
			if err != nil {
				return err
			}
			defer restore()
			stopProfile, err := startCPUProfile(o.cpuprofile)
			if err != nil {
				return err
			}
			defer stopProfile()
			cfg, err := o.serverConfig()
			if err != nil {
				return err
			}
			cfg.Logf = func(format string, args ...any) {
				fmt.Fprintf(env.stderr, format+"\n", args...)
			}
			if o.keylog != "" {
				f, err := keylog.OpenFile(o.keylog)
				if err != nil {
					return err
				}
				defer f.Close()
				cfg.KeyLog = f
			}
			s, err := transfer.Listen(cfg)
			if err != nil {
				return err
			}
			fmt.Fprintf(env.stderr, "serving %s on %s (%s); interrupt to stop\n", o.root, s.Addr(), strings.Join(cfg.ALPN, ", "))
			return s.Serve(ctx)
		},
	}
}

// parseServeFlags reads serve flags (as the demo gives them) into options.
func parseServeFlags(args []string) (*serveOpts, error) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o := serveCommand().setFlags(fs).(*serveOpts)
	if err := fs.Parse(args); err != nil {
		return nil, fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("%w: serve takes no arguments", errUsage)
	}
	return o, nil
}

// serverConfig turns the flags into the file server's configuration,
// with a usage error for each value out of range.
func (o *serveOpts) serverConfig() (transfer.ServerConfig, error) {
	cfg := transfer.ServerConfig{
		Addr:      o.addr,
		Root:      o.root,
		ALPN:      splitList(o.alpn),
		Retry:     o.retry,
		QlogDir:   o.qlog,
		Allow0RTT: o.zeroRTT,
	}
	bad := func(flag string, err error) (transfer.ServerConfig, error) {
		return transfer.ServerConfig{}, fmt.Errorf("%w: --%s: %v", errUsage, flag, err)
	}
	if o.preferred != "" {
		pa, err := parsePreferredAddress(o.preferred)
		if err != nil {
			return bad("preferred-address", err)
		}
		cfg.PreferredAddress = pa
	}
	if (o.cert == "") != (o.key == "") {
		return transfer.ServerConfig{}, fmt.Errorf("%w: --cert and --key go together", errUsage)
	}
	if o.cert != "" {
		c, err := tls.LoadX509KeyPair(o.cert, o.key)
		if err != nil {
			return transfer.ServerConfig{}, fmt.Errorf("load certificate: %w", err)
		}
		cfg.Certificate = &c
	}
	var err error
	if cfg.Datagrams, err = transfer.ParseDatagramMode(o.datagrams); err != nil {
		return bad("datagrams", err)
	}
	if o.maxDatagramFrame == 0 || o.maxDatagramFrame > 1<<62-1 {
		return bad("max-datagram-frame-size", fmt.Errorf("%d is not in 1 to 2^62-1 (turn DATAGRAM off with --datagrams off)", o.maxDatagramFrame))
	}
	cfg.MaxDatagramFrameSize = o.maxDatagramFrame
	if cfg.Versions, err = parseVersions(o.versions); err != nil {
		return bad("versions", err)
	}
	ackFreq, err := parseAckRatio(o.ackRatio)
	if err != nil {
		return bad("ack-ratio", err)
	}
	if ackFreq.Ratio != 0 && o.minAckDelay <= 0 {
		// Harmless to the engine, but a sign of a mistake.
		return bad("ack-ratio", errors.New("ACK_FREQUENCY goes with the extension on (--min-ack-delay above 0)"))
	}
	switch {
	case o.idleTimeout < 0:
		return bad("idle-timeout", errors.New("negative"))
	case o.maxAckDelay <= 0 || o.maxAckDelay >= 1<<14*time.Millisecond:
		// RFC 9000 §18.2: "Values of 2^14 or greater are invalid."
		return bad("max-ack-delay", fmt.Errorf("%v is not in (0, 2^14 ms)", o.maxAckDelay))
	case o.minAckDelay < 0 || (o.minAckDelay > 0 && o.minAckDelay > o.maxAckDelay):
		// draft-ietf-quic-ack-frequency §3: min_ack_delay above
		// max_ack_delay is a TRANSPORT_PARAMETER_ERROR.
		return bad("min-ack-delay", fmt.Errorf("%v is not in [0, --max-ack-delay]", o.minAckDelay))
	case o.maxStreamsBidi < 0 || o.maxStreamsBidi > 1<<60:
		return bad("max-streams-bidi", fmt.Errorf("%d is not in 0 to 2^60", o.maxStreamsBidi))
	case o.maxStreamsUni < 0 || o.maxStreamsUni > 1<<60:
		return bad("max-streams-uni", fmt.Errorf("%d is not in 0 to 2^60", o.maxStreamsUni))
	case o.maxData == 0 || o.maxData > 1<<62-1:
		return bad("max-data", fmt.Errorf("%d is not in 1 to 2^62-1", o.maxData))
	case o.maxStreamData == 0 || o.maxStreamData > 1<<62-1:
		return bad("max-stream-data", fmt.Errorf("%d is not in 1 to 2^62-1", o.maxStreamData))
	case o.maxUDPPayload < 1200 || o.maxUDPPayload > 65527:
		// RFC 9000 §18.2: "Values below 1200 are invalid." and "The
		// default for this parameter is the maximum permitted UDP
		// payload of 65527."
		return bad("max-udp-payload-size", fmt.Errorf("%d is not in 1200 to 65527", o.maxUDPPayload))
	case o.maxPacketSize < 1200 || o.maxPacketSize > 2048:
		return bad("max-packet-size", fmt.Errorf("%d is not in 1200 to 2048", o.maxPacketSize))
	case o.cidLen < 0 || o.cidLen > 20:
		return bad("cid-len", fmt.Errorf("%d is not in 0 to 20", o.cidLen))
	case o.cc != string(quic.Cubic) && o.cc != string(quic.NewReno):
		return bad("cc", fmt.Errorf("unknown congestion controller %q: use cubic or reno", o.cc))
	case o.activeCIDLimit < 2:
		// RFC 9000 §18.2: "The value of the active_connection_id_limit
		// parameter MUST be at least 2."
		return bad("active-cid-limit", fmt.Errorf("%d is below 2", o.activeCIDLimit))
	}
	var resetKey [32]byte
	if o.resetKey != "" {
		b, err := os.ReadFile(o.resetKey)
		if err != nil {
			return transfer.ServerConfig{}, fmt.Errorf("--stateless-reset-key: %w", err)
		}
		k, err := hex.DecodeString(strings.TrimSpace(string(b)))
		if err != nil || len(k) != 32 {
			return bad("stateless-reset-key", fmt.Errorf("%s does not hold 64 hex digits (32 bytes)", o.resetKey))
		}
		copy(resetKey[:], k)
	}
	cfg.EditQUIC = func(q *quic.Config) {
		q.DisableGreaseQUICBit = !o.greaseQUICBit
		q.KeyUpdateInterval = o.keyUpdateInterval
		q.MinAckDelay = o.minAckDelay
		if o.minAckDelay == 0 {
			q.MinAckDelay = -1
		}
		q.AckFrequency = ackFreq
		q.MaxIdleTimeout = o.idleTimeout
		if o.idleTimeout == 0 {
			q.MaxIdleTimeout = -1
		}
		q.MaxAckDelay = o.maxAckDelay
		q.MaxBidiStreams = streamsFlag(o.maxStreamsBidi)
		q.MaxUniStreams = streamsFlag(o.maxStreamsUni)
		q.InitialMaxData = o.maxData
		q.InitialMaxStreamData = o.maxStreamData
		q.MaxUDPPayloadSize = o.maxUDPPayload
		q.MaxPacketSize = o.maxPacketSize
		q.DisablePathMTUDiscovery = !o.pmtud
		q.DisableECN = !o.ecn
		q.ConnectionIDLength = o.cidLen
		if o.cidLen == 0 {
			q.ConnectionIDLength = -1
		}
		q.Congestion = quic.CongestionControl(o.cc)
		q.ActiveConnectionIDLimit = o.activeCIDLimit
		q.StatelessResetKey = resetKey
	}
	return cfg, nil
}

// streamsFlag maps a stream-count flag onto quic.Config, where 0 means
// the default and a negative value means none.
func streamsFlag(n int64) int64 {
	if n == 0 {
		return -1
	}
	return n
}

// parseVersions reads --versions: 1, 2 (or v1, v2) or a hex version
// number, in order of preference.
func parseVersions(s string) ([]uint32, error) {
	var out []uint32
	for _, item := range splitList(s) {
		var v uint32
		switch strings.ToLower(item) {
		case "1", "v1":
			v = quic.Version1
		case "2", "v2":
			v = quic.Version2
		default:
			n, err := strconv.ParseUint(strings.TrimPrefix(strings.ToLower(item), "0x"), 16, 32)
			if err != nil || (uint32(n) != quic.Version1 && uint32(n) != quic.Version2) {
				return nil, fmt.Errorf("unknown QUIC version %q: the engine speaks 1 (0x00000001) and 2 (0x6b3343cf)", item)
			}
			v = uint32(n)
		}
		if slices.Contains(out, v) {
			return nil, fmt.Errorf("version %q listed twice", item)
		}
		out = append(out, v)
	}
	if len(out) == 0 {
		return nil, errors.New("no version")
	}
	return out, nil
}

// parseAckRatio reads --ack-ratio: empty (RFC 9000's rate), a ratio N of
// at least 2, or adaptive.
func parseAckRatio(s string) (quic.AckFrequencyPolicy, error) {
	switch s {
	case "", "0", "1":
		return quic.AckFrequencyPolicy{}, nil
	case "adaptive":
		return quic.AckFrequencyPolicy{Ratio: quic.AdaptiveAckRatio}, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 2 || n > 1<<20 {
		return quic.AckFrequencyPolicy{}, fmt.Errorf("%q is not a ratio from 2 to 2^20 or adaptive", s)
	}
	return quic.AckFrequencyPolicy{Ratio: n}, nil
}

// parsePreferredAddress reads --preferred-address: at most one IPv4 and
// one IPv6 host:port, comma-separated.
func parsePreferredAddress(s string) (*quic.PreferredAddress, error) {
	pa := &quic.PreferredAddress{}
	for _, item := range splitList(s) {
		a, err := netip.ParseAddrPort(item)
		if err != nil {
			return nil, err
		}
		a = netip.AddrPortFrom(a.Addr().Unmap(), a.Port())
		slot := &pa.IPv6
		if a.Addr().Is4() {
			slot = &pa.IPv4
		}
		if slot.IsValid() {
			return nil, fmt.Errorf("two addresses of one family: %s", s)
		}
		*slot = a
	}
	if !pa.IPv4.IsValid() && !pa.IPv6.IsValid() {
		return nil, fmt.Errorf("no address in %q", s)
	}
	return pa, nil
}

// splitList splits a comma-separated flag value, dropping empty items.
// cipherFlagUsage documents --cipher for serve and get.
const cipherFlagUsage = "TLS 1.3 cipher `suites` to offer or accept, comma-separated: aes128, aes256, chacha20 (default: crypto/tls's choice)"

// restrictCiphers applies --cipher: crypto/tls has no per-connection choice
// of TLS 1.3 suites, so the list applies to the whole process.
func restrictCiphers(list string) (restore func(), err error) {
	if list == "" {
		return func() {}, nil
	}
	var suites []uint16
	for _, name := range splitList(list) {
		s, err := quic.ParseTLS13Suite(name)
		if err != nil {
			return nil, fmt.Errorf("%w: --cipher: %v", errUsage, err)
		}
		suites = append(suites, s)
	}
	quic.EnableTLS13SuiteControl()
	return quic.RestrictTLS13Suites(suites...)
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// isTerminal reports whether w is a character device, so that progress
// lines are drawn only for a person and never into a pipe or a file.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
