package peers

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ALPN values the peers speak.
const (
	ALPNHQ = "hq-interop" // HTTP/0.9 over QUIC, as the interop runner uses it
	ALPNH3 = "h3"         // HTTP/3
)

// InstallCommand is what a user runs to get every peer.
const InstallCommand = "scripts/install-peers"

var (
	// ErrUnsupported means the implementation cannot do what was asked: a
	// test case or ALPN it lacks, or a role it does not play. A peer that
	// exits with status 127 reports the same.
	ErrUnsupported = errors.New("not supported by this implementation")
	// ErrNotInstalled means the implementation's binary is missing.
	ErrNotInstalled = errors.New("not installed")
)

// Impl describes one QUIC implementation and how to run it.
type Impl struct {
	// Name is the implementation's name in result matrices; it matches the
	// established interop runner's where there is one.
	Name    string
	Aliases []string
	URL     string

	// ALPNs the adapter speaks; the first is its default.
	ALPNs []string
	// Versions are the QUIC versions it speaks, informational.
	Versions []string
	// ServerCases and ClientCases are the endpoint TESTCASE values each role
	// supports; any other makes StartServer or RunClient fail with
	// ErrUnsupported without starting anything.
	ServerCases []string
	ClientCases []string
	// DefaultCase is the TESTCASE passed when the caller names none, for
	// peers that refuse to run without one.
	DefaultCase string

	// Server and Client say how to start each role; nil if the
	// implementation does not play it.
	Server *Command
	Client *Command

	// ClientExitUnreliable is set for clients whose exit status says
	// nothing about success (gtlsclient, x/net's interop client): only the
	// downloaded files tell. RunClient checks the files for every client.
	ClientExitUnreliable bool

	// Release says how to build one of its released versions (quiver
	// track sweep) and which module a build's version comes from; nil
	// when only the installed build runs.
	Release *Release

	// Install says how to get the binaries.
	Install string
	Notes   string
}

// Release is where an implementation's releases come from and what a
// build of one is.
type Release struct {
	// Module is the Go module its releases are tagged in.
	Module string
	// Package is the command built from inside the module at the release;
	// empty when Quiver's adapter (peers/quicgo) is built against it.
	Package string
	// Binary is the built server's file name, as in bin/.
	Binary string
}

// Command is how to start one role of an implementation.
//
// Args and Env are templates. These placeholders are expanded:
//
//	{ADDR} {HOST} {PORT}  server address (server) or the first URL's (client)
//	{CERT} {KEY} {ROOT}   server certificate, key and folder of files to serve
//	{OUT} {CA}            client download folder and CA certificate
//	{ALPN} {TESTCASE}     application protocol and endpoint TESTCASE
//	{KEYLOG} {QLOGDIR}    key log file and qlog folder
//
// An argument that is exactly {URLS} becomes one argument per URL, and one
// that is exactly {OPTS} becomes the arguments of each condition in When
// that holds, followed by the caller's extra arguments. An environment entry
// that expands to the empty string is left out.
type Command struct {
	// Path is an absolute path, or a name looked up in the bin folder
	// (see BinDir).
	Path string
	Args []string
	Env  map[string]string
	// When adds arguments or environment for options that are set. The
	// conditions are "retry", "keylog", "qlog", "ca" and "alpn".
	When map[string]Extra
}

// Extra is what a condition of Command.When adds.
type Extra struct {
	Args []string
	// Env entries override the Command's own.
	Env map[string]string
}

// contractEnv is the interop runner's environment contract, shared by the
// adapters that follow it.
func contractEnv(role string) map[string]string {
	return map[string]string{
		"ROLE":          role,
		"TESTCASE":      "{TESTCASE}",
		"SSLKEYLOGFILE": "{KEYLOG}",
		"QLOGDIR":       "{QLOGDIR}",
	}
}

// adapterServer and adapterClient are the command lines of Quiver's own
// adapter quicgo-peer, which shares its flags with
// the x/net interop binary's -listen -cert -key -root and -output, plus
// -retry, -alpn and -ca. sub is an optional subcommand.
func adapterServer(path string, sub ...string) *Command {
	return &Command{
		Path: path,
		Args: append(sub, "-listen", "{ADDR}", "-cert", "{CERT}", "-key", "{KEY}", "-root", "{ROOT}", "{OPTS}"),
		Env:  contractEnv("server"),
		When: map[string]Extra{"retry": {Args: []string{"-retry"}}},
	}
}

func adapterClient(path string, sub ...string) *Command {
	return &Command{
		Path: path,
		Args: append(sub, "-output", "{OUT}", "{OPTS}", "{URLS}"),
		Env:  contractEnv("client"),
		When: map[string]Extra{
			"alpn": {Args: []string{"-alpn", "{ALPN}"}},
			"ca":   {Args: []string{"-ca", "{CA}"}},
		},
	}
}

// Interop test cases, by the endpoint TESTCASE value.
var (
	quicgoServerCases = []string{"handshake", "transfer", "retry", "resumption", "zerortt", "http3",
		"multiconnect", "chacha20", "keyupdate", "v2", "ecn", "versionnegotiation"}
	quicgoClientCases = []string{"handshake", "transfer", "retry", "resumption", "zerortt", "http3",
		"multiconnect", "chacha20", "keyupdate", "v2", "ecn"}
	// Kept in step with interop/endpoint's ServerCases and ClientCases
	// (a test there checks it; peers does not import the engine).
	quiverServerCases = []string{"handshake", "transfer", "retry", "resumption", "zerortt", "http3", "multiconnect",
		"chacha20", "keyupdate", "ecn", "v2", "versionnegotiation", "connectionmigration", "ackfrequency"}
	quiverClientCases = []string{"handshake", "transfer", "retry", "resumption", "zerortt", "http3", "multiconnect",
		"chacha20", "keyupdate", "ecn", "v2", "versionnegotiation", "ackfrequency"}
)

// manifest is every implementation Quiver knows how to start.
var manifest = []Impl{
	{
		Name:     "quiver",
		URL:      "https://github.com/quiver-quic/quiver",
		ALPNs:    []string{ALPNHQ, ALPNH3},
		Versions: []string{"v1", "v2"},
		// The endpoint of interop/endpoint (`quiver interop endpoint`),
		// which follows the runner's contract; its lists say what the
		// engine's file server can do today.
		ServerCases: quiverServerCases,
		ClientCases: quiverClientCases,
		Server:      adapterServer("quiver", "interop", "endpoint"),
		Client:      adapterClient("quiver", "interop", "endpoint"),
		Install:     "go build -o bin/quiver ./cmd/quiver (make build)",
		Notes:       "Quiver's own engine through `quiver interop endpoint` (interop/endpoint).",
	},
	{
		Name:        "quic-go",
		Aliases:     []string{"quicgo"},
		URL:         "https://github.com/quic-go/quic-go",
		ALPNs:       []string{ALPNHQ, ALPNH3},
		Versions:    []string{"v1", "v2"},
		ServerCases: quicgoServerCases,
		ClientCases: quicgoClientCases,
		Server:      adapterServer("quicgo-peer"),
		Client:      adapterClient("quicgo-peer"),
		Release:     &Release{Module: "github.com/quic-go/quic-go", Binary: "quicgo-peer"},
		Install:     InstallCommand + " (builds peers/quicgo into bin/quicgo-peer)",
		Notes: "quic-go v0.65.0 through peers/quicgo. Serves hq-interop and h3 on one port. " +
			"v2 only when the client starts with v2 (no RFC 9368). Key update happens by itself " +
			"after 100 packets. No preferred_address, so no connectionmigration.",
	},
	{
		Name:        "go-x-net",
		Aliases:     []string{"x/net", "xnet"},
		URL:         "https://pkg.go.dev/golang.org/x/net/quic",
		ALPNs:       []string{ALPNHQ},
		Versions:    []string{"v1"},
		ServerCases: []string{"handshake", "transfer", "retry", "keyupdate", "chacha20", "versionnegotiation"},
		ClientCases: []string{"handshake", "transfer", "retry", "keyupdate"},
		// Its "transfer" shrinks the flow-control windows on purpose; a
		// plain download uses "handshake", which has the defaults.
		DefaultCase: "handshake",
		Server: &Command{
			Path: "xnet-peer",
			Args: []string{"-listen", "{ADDR}", "-cert", "{CERT}", "-key", "{KEY}", "-root", "{ROOT}", "{OPTS}"},
			Env:  map[string]string{"TESTCASE": "{TESTCASE}", "SSLKEYLOGFILE": "{KEYLOG}"},
			When: map[string]Extra{
				"qlog": {Args: []string{"-qlog", "{QLOGDIR}"}},
				// Its only switch for address validation is the test case.
				"retry": {Env: map[string]string{"TESTCASE": "retry"}},
			},
		},
		Client: &Command{
			Path: "xnet-peer",
			Args: []string{"-output", "{OUT}", "{OPTS}", "{URLS}"},
			Env:  map[string]string{"TESTCASE": "{TESTCASE}", "SSLKEYLOGFILE": "{KEYLOG}"},
			When: map[string]Extra{"qlog": {Args: []string{"-qlog", "{QLOGDIR}"}}},
		},
		ClientExitUnreliable: true,
		Release:              &Release{Module: "golang.org/x/net", Package: "golang.org/x/net/internal/quic/cmd/interop", Binary: "xnet-peer"},
		Install:              InstallCommand + " (builds golang.org/x/net/internal/quic/cmd/interop into bin/xnet-peer)",
		Notes: "x/net v0.62.0's interop binary. v1 only, hq-interop only, no 0-RTT (an attempt silently " +
			"becomes 1-RTT), no migration. Its client never verifies the certificate and exits 0 " +
			"even when a download fails.",
	},
	{
		Name:     "ngtcp2",
		URL:      "https://github.com/ngtcp2/ngtcp2",
		ALPNs:    []string{ALPNH3},
		Versions: []string{"v1", "v2draft"},
		// The Debian binaries speak only h3, which the interop runner uses
		// only for its http3 test case.
		ServerCases: []string{"http3"},
		ClientCases: []string{"http3"},
		Server: &Command{
			Path: "/usr/sbin/gtlsserver",
			// Key before certificate, unlike everyone else.
			Args: []string{"-q", "-d", "{ROOT}", "--max-dyn-length=200M", "{OPTS}", "{HOST}", "{PORT}", "{KEY}", "{CERT}"},
			// GnuTLS writes the key log named by SSLKEYLOGFILE.
			Env: map[string]string{"SSLKEYLOGFILE": "{KEYLOG}"},
			When: map[string]Extra{
				"retry": {Args: []string{"-V"}},
				"qlog":  {Args: []string{"--qlog-dir={QLOGDIR}"}},
			},
		},
		Client: &Command{
			Path: "/usr/bin/gtlsclient",
			Args: []string{"-q", "--exit-on-all-streams-close", "--download={OUT}", "{OPTS}", "{HOST}", "{PORT}", "{URLS}"},
			Env:  map[string]string{"SSLKEYLOGFILE": "{KEYLOG}"},
			When: map[string]Extra{"qlog": {Args: []string{"--qlog-dir={QLOGDIR}"}}},
		},
		ClientExitUnreliable: true,
		Install:              "apt-get install ngtcp2-server ngtcp2-client (or " + InstallCommand + ")",
		Notes: "ngtcp2 0.12.1 + GnuTLS from Debian. HTTP/3 only; v2 is the draft 0x709a50c4, " +
			"not RFC 9369. gtlsclient exits 0 even when the connection fails.",
	},
}

// All returns every implementation in the manifest.
func All() []Impl {
	return slices.Clone(manifest)
}

// Find returns the implementation called name, or one of its aliases,
// ignoring case.
func Find(name string) (Impl, error) {
	for _, im := range manifest {
		if strings.EqualFold(im.Name, name) || slices.ContainsFunc(im.Aliases, func(a string) bool { return strings.EqualFold(a, name) }) {
			return im, nil
		}
	}
	names := make([]string, len(manifest))
	for i, im := range manifest {
		names[i] = im.Name
	}
	return Impl{}, fmt.Errorf("no QUIC implementation %q in the manifest (have %s)", name, strings.Join(names, ", "))
}

// Supports reports whether role ("server" or "client") supports the
// endpoint TESTCASE tc; the empty test case means a plain download.
func (im Impl) Supports(role, tc string) bool {
	cases := im.ClientCases
	cmd := im.Client
	if role == "server" {
		cases, cmd = im.ServerCases, im.Server
	}
	return cmd != nil && (tc == "" || slices.Contains(cases, tc))
}

// check refuses a role, test case or ALPN the implementation lacks.
func (im Impl) check(role, tc, alpn string) (*Command, error) {
	cmd := im.Client
	if role == "server" {
		cmd = im.Server
	}
	if cmd == nil {
		return nil, fmt.Errorf("%s as %s: %w", im.Name, role, ErrUnsupported)
	}
	if !im.Supports(role, tc) {
		return nil, fmt.Errorf("%s %s, test case %q: %w", im.Name, role, tc, ErrUnsupported)
	}
	if alpn != "" && !slices.Contains(im.ALPNs, alpn) {
		return nil, fmt.Errorf("%s %s, ALPN %q: %w", im.Name, role, alpn, ErrUnsupported)
	}
	return cmd, nil
}
