package bench

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/quiver-quic/quiver/peers"
	"github.com/quiver-quic/quiver/quic"
)

// Knobs are the settings the sweeps vary. The zero value leaves every
// implementation at its own default. A knob an implementation cannot take
// makes its configuration unsupported; it is never approximated.
type Knobs struct {
	// Cipher is the TLS 1.3 AEAD: aes128, aes256, chacha20, or
	// aes128-noaesni (AES-128-GCM with the CPU's AES and carry-less
	// multiplication instructions masked, the study's "without AES-NI").
	Cipher string `json:"cipher,omitempty"`
	// CC is the sender's congestion controller: cubic, reno or bbr.
	CC string `json:"cc,omitempty"`
	// GSO switches the sender's UDP generic segmentation offload: on or off.
	GSO string `json:"gso,omitempty"`
	// GRO switches UDP generic receive offload at both ends: on or off.
	GRO string `json:"gro,omitempty"`
	// KernelBuffers asks endpoints that size their own socket buffers to
	// keep the kernel's default (net.core.rmem_default), so that the
	// receive-buffer sweep reaches them; those that cannot are run as
	// they are, and their rows show it (drops stay 0).
	KernelBuffers bool `json:"kernel_buffers,omitempty"`
	// AckRatio asks the data receiver for one ACK per AckRatio
	// ack-eliciting packets (ACK frequency sender policy); 2 is the
	// default of RFC 9000 (1:2) on the bench's own Quiver endpoint, -1 the
	// adaptive policy, 0 leaves the knob alone.
	AckRatio int `json:"ack_ratio,omitempty"`
	// AckDelay, when positive, is a fixed Requested Max Ack Delay for the
	// fixed ratios (the study's 25 ms); 0 keeps smoothed RTT / 4.
	AckDelay time.Duration `json:"ack_delay_ns,omitempty"`
	// StrictAcks makes the bench's Quiver client acknowledge as RFC
	// 9000's strict 1:2 receiver (quic.Config.StrictAcks).
	StrictAcks bool `json:"strict_acks,omitempty"`
}

// Bins says where the endpoint programs are.
type Bins struct {
	// Quiver is the quiver binary (serve, get and the bench's helpers).
	Quiver string
	// Peers is the folder of quicgo-peer and xnet-peer.
	Peers string
}

// DefaultBins finds the quiver binary and the peers' folder. When this
// program is quiver, it is the quiver binary; the peers are in $QUIVER_BIN
// when set, else beside this program when quicgo-peer is there (as in
// bin/, where scripts/install-peers puts both), else in bin/ of the
// repository (peers.BinDir).
func DefaultBins() (Bins, error) {
	exe, err := os.Executable()
	if err == nil && filepath.Base(exe) == "quiver" {
		b := Bins{Quiver: exe, Peers: os.Getenv("QUIVER_BIN")}
		if b.Peers == "" {
			if _, err := os.Stat(filepath.Join(filepath.Dir(exe), "quicgo-peer")); err == nil {
				b.Peers = filepath.Dir(exe)
			} else if b.Peers, err = peers.BinDir(); err != nil {
				return b, err
			}
		}
		return b, nil
	}
	dir, err := peers.BinDir()
	if err != nil {
		return Bins{}, err
	}
	return Bins{Quiver: filepath.Join(dir, "quiver"), Peers: dir}, nil
}

// site is everything an endpoint's command line is made from.
type site struct {
	bins               Bins
	cert, key, root    string
	host               string
	port               int
	out                string
	file               string
	alpn               string
	knobs              Knobs
	profile            string // CPU profile file, or "" for none
	serverNS, clientNS string
}

// peerPath is where the peers manifest says role's program of the
// implementation called name is: an absolute path as it stands, a bare
// name in the bench's peers folder. The bench's own command lines differ
// from the manifest's (they take the sweep's knobs), the programs do not.
func (s *site) peerPath(name, role string) string {
	im, err := peers.Find(name)
	cmd := im.Server
	if role == "client" {
		cmd = im.Client
	}
	if err != nil || cmd == nil {
		panic("bench: the peers manifest lacks " + name + " " + role) // a programming error: the names are ours
	}
	if filepath.IsAbs(cmd.Path) {
		return cmd.Path
	}
	return filepath.Join(s.bins.Peers, cmd.Path)
}

func (s *site) addr() string { return net.JoinHostPort(s.host, strconv.Itoa(s.port)) }
func (s *site) url() string  { return "https://" + s.addr() + "/" + s.file }

// impl is how the bench starts one implementation.
type impl struct {
	name  string
	alpns []string
	// proto is the server's transport: udp, or tcp for TCP+TLS.
	proto string
	// goProfile says whether the endpoints can write a Go CPU profile.
	goProfile bool
	server    func(s *site) (cmdSpec, error)
	client    func(s *site) (cmdSpec, error)
	// hsClient, when set, runs n full handshakes, parallel at a time, and
	// prints "handshakes N elapsed-ns D".
	hsClient func(s *site, n, parallel int) (cmdSpec, error)
}

// noAESNI is the environment that masks the AES and carry-less
// multiplication instructions from Go's crypto, so that AES-GCM runs in
// software (docs/highway.md, the cipher sweep: GODEBUG=cpu.aes=off,cpu.pclmulqdq=off).
const noAESNI = "GODEBUG=cpu.aes=off,cpu.pclmulqdq=off"

// goCipherEnv maps the cipher knob for endpoints built on Go's crypto/tls
// that cannot restrict their TLS 1.3 suites (quic-go, x/net): a Go client
// offers all three suites, AES-128-GCM first when the CPU has AES
// instructions, ChaCha20-Poly1305 first when it has not, and a Go server
// picks the first suite of its own list that the client offers, ChaCha20
// first when the client did not put AES first. So such a client can be
// made to negotiate ChaCha20 (GODEBUG=cpu.aes=off on the client) but never
// AES-256-GCM alone; such a server takes whatever suite a restricting
// client (Quiver's bench endpoint, ngtcp2) offers. Quiver's and TCP+TLS's
// bench endpoints restrict the process-wide list instead (quic.RestrictTLS13Suites).
func goCipherEnv(k Knobs, client bool) ([]string, error) {
	switch k.Cipher {
	case "", "aes128":
		return nil, nil
	case "chacha20":
		if client {
			return []string{"GODEBUG=cpu.aes=off"}, nil
		}
		return nil, nil
	case "aes256":
		if client {
			return nil, fmt.Errorf("cipher aes256 with a Go client that offers every suite: %w", errUnsupported)
		}
		return nil, nil
	case "aes128-noaesni":
		if client {
			return nil, fmt.Errorf("cipher aes128-noaesni with a Go client that would then prefer ChaCha20: %w", errUnsupported)
		}
		return []string{noAESNI}, nil
	}
	return nil, fmt.Errorf("cipher %s: %w", k.Cipher, errUnsupported)
}

// ownCipherArgs are the flags and environment of the bench's own Go
// endpoints (Quiver, TCP+TLS), which restrict the suites themselves.
func ownCipherArgs(k Knobs) (args, env []string) {
	switch k.Cipher {
	case "":
		return nil, nil
	case "aes128-noaesni":
		return []string{"--cipher", "aes128"}, []string{noAESNI}
	}
	return []string{"--cipher", k.Cipher}, nil
}

// quiverOwn says whether a knob needs the bench's own Quiver endpoint
// rather than quiver serve and get.
func quiverOwn(k Knobs) bool {
	return k.CC != "" || k.AckRatio != 0 || k.Cipher != "" || k.KernelBuffers
}

// only refuses a knob value other than the implementation's default.
func only(knob, value string, allowed ...string) error {
	if value == "" || slices.Contains(allowed, value) {
		return nil
	}
	return fmt.Errorf("%s=%s: %w", knob, value, errUnsupported)
}

func profileArgs(flag, path string) []string {
	if path == "" {
		return nil
	}
	return []string{flag, path}
}

// quiverEnv switches Quiver's offloads off through its environment
// variables (quic.Config documents them).
func quiverEnv(k Knobs) []string {
	var env []string
	if k.GSO == "off" {
		env = append(env, "QUIVER_DISABLE_GSO=true")
	}
	if k.GRO == "off" {
		env = append(env, "QUIVER_DISABLE_GRO=true")
	}
	return env
}

// quiverOwnArgs are the engine flags of the bench's own Quiver endpoint.
func quiverOwnArgs(k Knobs) []string {
	var args []string
	if k.CC != "" {
		args = append(args, "--cc", k.CC)
	}
	if k.AckRatio != 0 {
		args = append(args, "--ack-ratio", strconv.Itoa(k.AckRatio))
	}
	if k.AckDelay > 0 {
		args = append(args, "--ack-delay", k.AckDelay.String())
	}
	if k.StrictAcks {
		args = append(args, "--strict-acks")
	}
	if k.KernelBuffers {
		args = append(args, "--socket-buffer", "-1")
	}
	return args
}

// impls is every implementation the bench knows, by name.
var impls = map[string]*impl{
	"quiver": {
		name: "quiver", proto: "udp", goProfile: true,
		server: func(s *site) (cmdSpec, error) {
			if err := only("gso", s.knobs.GSO, "on", "off"); err != nil {
				return cmdSpec{}, err
			}
			if err := only("gro", s.knobs.GRO, "on", "off"); err != nil {
				return cmdSpec{}, err
			}
			env := quiverEnv(s.knobs)
			if quiverOwn(s.knobs) {
				// quiver serve has no such flags: the bench's own hq-interop
				// endpoint on the same engine takes them.
				if s.alpn != peers.ALPNHQ {
					return cmdSpec{}, fmt.Errorf("the bench's Quiver endpoint speaks hq-interop only, not %s: %w", s.alpn, errUnsupported)
				}
				if err := only("cc", s.knobs.CC, "cubic", "reno"); err != nil {
					return cmdSpec{}, err
				}
				if r := s.knobs.AckRatio; r != 0 && r != 2 {
					if err := ApplyAckPolicy(&quic.Config{}, r, true); err != nil {
						return cmdSpec{}, fmt.Errorf("ACK ratio %s: %w: %v", ratioName(r), errUnsupported, err)
					}
				}
				args := []string{"bench", "quiver-serve", "--addr", s.addr(), "--cert", s.cert, "--key", s.key, "--root", s.root}
				args = append(args, quiverOwnArgs(s.knobs)...)
				cargs, cenv := ownCipherArgs(s.knobs)
				args = append(args, cargs...)
				return cmdSpec{Path: s.bins.Quiver, Args: append(args, profileArgs("--cpuprofile", s.profile)...), Env: append(env, cenv...), Netns: s.serverNS}, nil
			}
			args := []string{"serve", "--addr", s.addr(), "--cert", s.cert, "--key", s.key, "--root", s.root, "--alpn", s.alpn}
			return cmdSpec{Path: s.bins.Quiver, Args: append(args, profileArgs("--cpuprofile", s.profile)...), Env: env, Netns: s.serverNS}, nil
		},
		client: func(s *site) (cmdSpec, error) {
			env := quiverEnv(s.knobs)
			if quiverOwn(s.knobs) {
				if s.alpn != peers.ALPNHQ {
					return cmdSpec{}, fmt.Errorf("the bench's Quiver endpoint speaks hq-interop only, not %s: %w", s.alpn, errUnsupported)
				}
				args := []string{"bench", "quiver-get", "--out", s.out}
				args = append(args, quiverOwnArgs(s.knobs)...)
				if s.knobs.AckRatio != 0 {
					// The ACK counts from the receiver's own packets.
					args = append(args, "--ack-stats")
				}
				cargs, cenv := ownCipherArgs(s.knobs)
				args = append(append(args, cargs...), profileArgs("--cpuprofile", s.profile)...)
				return cmdSpec{Path: s.bins.Quiver, Args: append(args, s.url()), Env: append(env, cenv...), Netns: s.clientNS}, nil
			}
			args := []string{"get", "--insecure", "--alpn", s.alpn, "--out", s.out}
			args = append(append(args, profileArgs("--cpuprofile", s.profile)...), s.url())
			return cmdSpec{Path: s.bins.Quiver, Args: args, Env: env, Netns: s.clientNS}, nil
		},
		hsClient: func(s *site, n, parallel int) (cmdSpec, error) {
			args := []string{"bench", "hs-client", "--impl", "quiver", "--alpn", s.alpn, "--n", strconv.Itoa(n), "--parallel", strconv.Itoa(parallel)}
			args = append(append(args, profileArgs("--cpuprofile", s.profile)...), s.url())
			return cmdSpec{Path: s.bins.Quiver, Args: args, Netns: s.clientNS}, nil
		},
	},
	"quic-go": {
		name: "quic-go", proto: "udp", goProfile: true,
		server: func(s *site) (cmdSpec, error) {
			if err := only("cc", s.knobs.CC, "cubic"); err != nil {
				return cmdSpec{}, err
			}
			// quic-go v0.65 has no UDP GRO: "off" is what it always does.
			if err := only("gro", s.knobs.GRO, "off"); err != nil {
				return cmdSpec{}, fmt.Errorf("%w (quic-go reads one datagram per message)", err)
			}
			env, err := goCipherEnv(s.knobs, false)
			if err != nil {
				return cmdSpec{}, err
			}
			if s.knobs.GSO == "off" {
				env = append(env, "QUIC_GO_DISABLE_GSO=true")
			}
			args := []string{"-listen", s.addr(), "-cert", s.cert, "-key", s.key, "-root", s.root}
			return cmdSpec{Path: s.peerPath("quic-go", "server"), Args: append(args, profileArgs("-cpuprofile", s.profile)...), Env: env, Netns: s.serverNS}, nil
		},
		client: func(s *site) (cmdSpec, error) {
			env, err := goCipherEnv(s.knobs, true)
			if err != nil {
				return cmdSpec{}, err
			}
			if s.knobs.GSO == "off" {
				env = append(env, "QUIC_GO_DISABLE_GSO=true")
			}
			args := []string{"-output", s.out, "-alpn", s.alpn}
			args = append(append(args, profileArgs("-cpuprofile", s.profile)...), s.url())
			return cmdSpec{Path: s.peerPath("quic-go", "client"), Args: args, Env: env, Netns: s.clientNS}, nil
		},
		hsClient: func(s *site, n, parallel int) (cmdSpec, error) {
			args := []string{"-handshakes", strconv.Itoa(n), "-parallel", strconv.Itoa(parallel), "-alpn", s.alpn}
			args = append(append(args, profileArgs("-cpuprofile", s.profile)...), s.url())
			return cmdSpec{Path: s.peerPath("quic-go", "client"), Args: args, Netns: s.clientNS}, nil
		},
	},
	"go-x-net": {
		// x/net's interop binary: NewReno only, no GSO, no profile flag.
		name: "go-x-net", proto: "udp",
		server: func(s *site) (cmdSpec, error) {
			if err := only("cc", s.knobs.CC, "reno"); err != nil {
				return cmdSpec{}, err
			}
			if err := only("gso", s.knobs.GSO, "off"); err != nil {
				return cmdSpec{}, err
			}
			if err := only("gro", s.knobs.GRO, "off"); err != nil {
				return cmdSpec{}, err
			}
			env, err := goCipherEnv(s.knobs, false)
			if err != nil {
				return cmdSpec{}, err
			}
			args := []string{"-listen", s.addr(), "-cert", s.cert, "-key", s.key, "-root", s.root}
			// Its "transfer" test case shrinks the flow-control windows on
			// purpose; "handshake" keeps the defaults (see peers).
			return cmdSpec{Path: s.peerPath("go-x-net", "server"), Args: args, Env: append(env, "TESTCASE=handshake"), Netns: s.serverNS}, nil
		},
		client: func(s *site) (cmdSpec, error) {
			env, err := goCipherEnv(s.knobs, true)
			if err != nil {
				return cmdSpec{}, err
			}
			return cmdSpec{Path: s.peerPath("go-x-net", "client"), Args: []string{"-output", s.out, s.url()},
				Env: append(env, "TESTCASE=handshake"), Netns: s.clientNS}, nil
		},
	},
	"ngtcp2": {
		// Debian's ngtcp2 0.12.1 with GnuTLS: HTTP/3 only.
		name: "ngtcp2", proto: "udp",
		server: func(s *site) (cmdSpec, error) {
			args := []string{"-q", "-d", s.root}
			if err := only("cc", s.knobs.CC, "cubic", "reno", "bbr"); err != nil {
				return cmdSpec{}, err
			}
			// ngtcp2 0.12's examples have no UDP GRO.
			if err := only("gro", s.knobs.GRO, "off"); err != nil {
				return cmdSpec{}, err
			}
			if s.knobs.Cipher == "aes128-noaesni" {
				return cmdSpec{}, fmt.Errorf("AES without AES-NI in GnuTLS: %w", errUnsupported)
			}
			if s.knobs.CC != "" {
				args = append(args, "--cc="+s.knobs.CC)
			}
			if s.knobs.GSO == "off" {
				args = append(args, "--max-gso-dgrams=1")
			}
			return cmdSpec{Path: s.peerPath("ngtcp2", "server"), Args: append(args, s.host, strconv.Itoa(s.port), s.key, s.cert), Netns: s.serverNS}, nil
		},
		client: func(s *site) (cmdSpec, error) {
			args := []string{"-q", "--exit-on-all-streams-close", "--download=" + s.out}
			switch s.knobs.Cipher {
			case "":
			case "aes128":
				args = append(args, "--ciphers="+gnutlsOnly("AES-128-GCM"))
			case "aes256":
				args = append(args, "--ciphers="+gnutlsOnly("AES-256-GCM"))
			case "chacha20":
				args = append(args, "--ciphers="+gnutlsOnly("CHACHA20-POLY1305"))
			default:
				return cmdSpec{}, fmt.Errorf("cipher %s: %w", s.knobs.Cipher, errUnsupported)
			}
			return cmdSpec{Path: s.peerPath("ngtcp2", "client"), Args: append(args, s.host, strconv.Itoa(s.port), s.url()), Netns: s.clientNS}, nil
		},
	},
	"tcp": {
		// Go crypto/tls over TCP (TLS 1.3, HTTP/1.1), the study's baseline.
		name: "tcp", alpns: []string{"http/1.1"}, proto: "tcp", goProfile: true,
		server: func(s *site) (cmdSpec, error) {
			if err := only("gso", s.knobs.GSO, "on"); err != nil {
				return cmdSpec{}, fmt.Errorf("%w (TCP segmentation is the kernel's)", err)
			}
			if s.knobs.GRO != "" {
				return cmdSpec{}, fmt.Errorf("gro=%s: TCP receive offload is the kernel's: %w", s.knobs.GRO, errUnsupported)
			}
			args := []string{"bench", "tls-serve", "--addr", s.addr(), "--cert", s.cert, "--key", s.key, "--root", s.root}
			if s.knobs.CC != "" {
				args = append(args, "--cc", s.knobs.CC)
			}
			cargs, env := ownCipherArgs(s.knobs)
			args = append(args, cargs...)
			return cmdSpec{Path: s.bins.Quiver, Args: append(args, profileArgs("--cpuprofile", s.profile)...), Env: env, Netns: s.serverNS}, nil
		},
		client: func(s *site) (cmdSpec, error) {
			cargs, env := ownCipherArgs(s.knobs)
			args := append([]string{"bench", "tls-get", "--out", s.out}, cargs...)
			args = append(append(args, profileArgs("--cpuprofile", s.profile)...), s.url())
			return cmdSpec{Path: s.bins.Quiver, Args: args, Env: env, Netns: s.clientNS}, nil
		},
		hsClient: func(s *site, n, parallel int) (cmdSpec, error) {
			args := []string{"bench", "hs-client", "--impl", "tcp", "--n", strconv.Itoa(n), "--parallel", strconv.Itoa(parallel)}
			args = append(append(args, profileArgs("--cpuprofile", s.profile)...), s.url())
			return cmdSpec{Path: s.bins.Quiver, Args: args, Netns: s.clientNS}, nil
		},
	},
}

// gnutlsOnly is a GnuTLS priority string that allows TLS 1.3 with one AEAD.
func gnutlsOnly(cipher string) string {
	return "NORMAL:-VERS-ALL:+VERS-TLS1.3:-CIPHER-ALL:+" + cipher
}

// ImplNames lists the implementations the bench can run: those of peers'
// manifest (the one list of implementations) it has endpoints for, and
// tcp, its TCP+TLS baseline.
func ImplNames() []string {
	var names []string
	for _, im := range peers.All() {
		if impls[im.Name] != nil {
			names = append(names, im.Name)
		}
	}
	return append(names, "tcp")
}

// lookupImpl finds an implementation by its name or an alias in peers'
// manifest (quic-go or quicgo; go-x-net, x/net or xnet), or the TCP+TLS
// baseline (tcp, tls, tcp+tls). The ALPNs of a QUIC implementation are
// the manifest's.
func lookupImpl(name string) (*impl, error) {
	n := strings.ToLower(strings.TrimSpace(name))
	var alpns []string
	switch n {
	case "tcp", "tls", "tcp+tls":
		n = "tcp"
	default:
		pim, err := peers.Find(n)
		if err != nil {
			return nil, fmt.Errorf("unknown implementation %q (have %s)", name, strings.Join(ImplNames(), ", "))
		}
		n, alpns = pim.Name, pim.ALPNs
	}
	im, ok := impls[n]
	if !ok {
		return nil, fmt.Errorf("the bench has no endpoints for %s (have %s)", n, strings.Join(ImplNames(), ", "))
	}
	c := *im
	if alpns != nil {
		c.alpns = alpns
	}
	return &c, nil
}

// pairALPN picks the application protocol a pair speaks: want when both
// speak it, else the first the server speaks that the client also does.
func pairALPN(srv, cli *impl, want string) (string, error) {
	if srv.proto != cli.proto {
		return "", fmt.Errorf("%s server and %s client: %w (one is TCP, the other QUIC)", srv.name, cli.name, errUnsupported)
	}
	if srv.proto == "tcp" {
		return "http/1.1", nil
	}
	if want != "" && slices.Contains(srv.alpns, want) && slices.Contains(cli.alpns, want) {
		return want, nil
	}
	for _, a := range srv.alpns {
		if slices.Contains(cli.alpns, a) {
			return a, nil
		}
	}
	return "", fmt.Errorf("%s server and %s client share no application protocol: %w", srv.name, cli.name, errUnsupported)
}
