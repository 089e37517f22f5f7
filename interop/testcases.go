package interop

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/quiver-quic/quiver/netem"
)

// Scenario is the emulated link of a test case: one Link per
// direction and an optional NAT rebinding schedule.
type Scenario struct {
	Name               string       `json:"name"`
	ToServer, ToClient netem.Link   `json:"-"`
	Rebind             netem.Rebind `json:"-"`
	// IPv6 runs the endpoints and the relay on ::1.
	IPv6 bool `json:"ipv6,omitempty"`
	// Lossy says that loss, corruption or a blackhole may make endpoints
	// abandon handshake attempts, which HS(n) then tolerates.
	Lossy bool `json:"lossy,omitempty"`
	// KernelBottleneck moves the rate and queue towards the client from
	// the relay to a tbf qdisc on the router's egress (namespace engine),
	// so that traffic the relay does not carry shares them.
	KernelBottleneck bool `json:"kernel_bottleneck,omitempty"`
	// CrossTraffic runs a TCP Cubic bulk flow from the server's side to
	// the client's through the bottleneck, from 5 s before the client
	// starts to the end.
	CrossTraffic bool `json:"cross_traffic,omitempty"`
}

// defaultLink is the default scenario's direction: 10 Mbit/s, 15 ms one
// way, a 25-packet queue; 28 bytes of IPv4 and UDP headers count towards
// the rate, as they would on a real link.
func defaultLink() netem.Link {
	return netem.Link{Rate: 10_000_000, Overhead: 28, QueuePackets: 25, Delay: 15 * time.Millisecond}
}

func scenario(name string, f func(l *netem.Link)) Scenario {
	s := Scenario{Name: name, ToServer: defaultLink(), ToClient: defaultLink()}
	if f != nil {
		f(&s.ToServer)
		f(&s.ToClient)
	}
	return s
}

// TestCase is one test case or measurement (docs/interop-results.md).
type TestCase struct {
	Name string `json:"name"`
	Abbr string `json:"abbr"`
	Desc string `json:"desc"`
	// ServerCase and ClientCase are the endpoint TESTCASE values.
	ServerCase, ClientCase string                   `json:"-"`
	Files                  func(seed uint64) []File `json:"-"`
	Scenario               Scenario                 `json:"-"`
	Timeout                time.Duration            `json:"-"`
	// KeyLog: without a valid key log the result is unsupported.
	KeyLog bool `json:"-"`
	// Certs is the certificate chain length and ExtraNames the inflated
	// leaf's extra names (amplificationlimit); 0 means the default.
	Certs, ExtraNames int `json:"-"`
	// NeedsNamespaces, when set, says why the test needs the namespace
	// engine; where that engine cannot run, the test is reported
	// unsupported with reason "environment".
	NeedsNamespaces string `json:"-"`
	// Judge applies the test's checks.
	Judge func(c *Cell) `json:"-"`
	// Measurement tests repeat the transfer and report a number.
	Measurement bool `json:"-"`
	Repetitions int  `json:"-"`
}

func files(n int, size int64, prefix string) func(uint64) []File {
	return func(seed uint64) []File { return fileSpecs(seed, n, size, prefix, false) }
}

const (
	kib = 1 << 10
	mib = 1 << 20
)

// Catalogue returns every test case and measurement, in the established
// runner's order.
func Catalogue() []*TestCase {
	def := scenario("default", nil)
	drop := func(p float64) func(*netem.Link) { return func(l *netem.Link) { l.Loss, l.MaxRun = p, 3 } }
	corrupt := func(p float64) func(*netem.Link) { return func(l *netem.Link) { l.Corrupt, l.MaxRun = p, 3 } }
	lossy := func(s Scenario) Scenario { s.Lossy = true; return s }
	rebindPort := def
	rebindPort.Name, rebindPort.Rebind = "rebind-port", netem.Rebind{First: time.Second, Every: 5 * time.Second}
	rebindAddr := rebindPort
	rebindAddr.Name, rebindAddr.Rebind.Addr = "rebind-addr", true
	ampl := def
	ampl.Name = "droplist-amplification"
	ampl.ToServer.DropList = []int{2, 3, 4, 5, 6, 7}
	v6 := def
	v6.IPv6 = true
	cross := def
	cross.Name, cross.KernelBottleneck, cross.CrossTraffic = "crosstraffic", true, true
	return []*TestCase{
		{Name: "handshake", Abbr: "H", Desc: "Handshake completes successfully.", ServerCase: "handshake", ClientCase: "handshake",
			Files: files(1, kib, "handshake-1KiB"), Scenario: def, Judge: judgeHandshake},
		{Name: "transfer", Abbr: "DC", Desc: "Stream data is being sent and received correctly. Connection close completes with a zero error code.",
			ServerCase: "transfer", ClientCase: "transfer", Scenario: def, Judge: judgeTransfer,
			Files: func(uint64) []File {
				return []File{{Name: "transfer-2MiB", Size: 2 * mib}, {Name: "transfer-3MiB", Size: 3 * mib}, {Name: "transfer-5MiB", Size: 5 * mib}}
			}},
		{Name: "longrtt", Abbr: "LR", Desc: "Connection is established over a 1.5 s RTT link; the ClientHello is retransmitted.",
			ServerCase: "handshake", ClientCase: "handshake", Files: files(1, kib, "longrtt-1KiB"),
			Scenario: scenario("longrtt", func(l *netem.Link) { l.Delay = 750 * time.Millisecond }), Judge: judgeLongRTT},
		{Name: "chacha20", Abbr: "C20", Desc: "Handshake completes using ChaCha20.", ServerCase: "chacha20", ClientCase: "chacha20",
			Files: files(1, 3*mib, "chacha20-3MiB"), Scenario: def, Judge: judgeChaCha20},
		{Name: "multiplexing", Abbr: "M", Desc: "Thousands of files are transferred over a single connection, and server increased stream limits to accommodate client requests.",
			ServerCase: "transfer", ClientCase: "transfer", Files: files(1999, 32, "mux"), Scenario: def, KeyLog: true, Judge: judgeMultiplexing},
		{Name: "retry", Abbr: "S", Desc: "Server sends a Retry, and a subsequent connection using the Retry token completes successfully.",
			ServerCase: "retry", ClientCase: "retry", Files: files(1, 10*kib, "retry-10KiB"), Scenario: def, Judge: judgeRetry},
		{Name: "resumption", Abbr: "R", Desc: "Connection is established using TLS Session Resumption.", ServerCase: "resumption", ClientCase: "resumption",
			Scenario: def, KeyLog: true, Judge: judgeResumption,
			Files: func(uint64) []File {
				return []File{{Name: "resumption-5KiB", Size: 5 * kib}, {Name: "resumption-10KiB", Size: 10 * kib}}
			}},
		{Name: "zerortt", Abbr: "Z", Desc: "0-RTT data is being sent and acted on.", ServerCase: "zerortt", ClientCase: "zerortt",
			Files: func(seed uint64) []File { return fileSpecs(seed, 40, 32, "", true) }, Scenario: def, Judge: judgeZeroRTT},
		{Name: "http3", Abbr: "3", Desc: "An H3 transaction succeeded.", ServerCase: "http3", ClientCase: "http3", Scenario: def, Judge: judgeHTTP3,
			Files: func(uint64) []File {
				return []File{{Name: "h3-5KiB", Size: 5 * kib}, {Name: "h3-10KiB", Size: 10 * kib}, {Name: "h3-500KiB", Size: 500 * kib}}
			}},
		{Name: "blackhole", Abbr: "B", Desc: "Transfer succeeds despite underlying network blacking out for a few seconds.",
			ServerCase: "transfer", ClientCase: "transfer", Files: files(1, 10*mib, "blackhole-10MiB"), Judge: judgeBasic,
			Scenario: lossy(scenario("blackhole", func(l *netem.Link) {
				l.Blackholes = []netem.Window{{From: 5 * time.Second, To: 7 * time.Second}}
			}))},
		{Name: "keyupdate", Abbr: "U", Desc: "One of the two endpoints updates keys and the peer responds correctly.",
			ServerCase: "transfer", ClientCase: "keyupdate", Files: files(1, 3*mib, "keyupdate-3MiB"), Scenario: def, KeyLog: true, Judge: judgeKeyUpdate},
		{Name: "ecn", Abbr: "E", Desc: "Explicit Congestion Notification is used.", ServerCase: "ecn", ClientCase: "ecn",
			Files: files(1, 100*kib, "ecn-100KiB"), Scenario: def, KeyLog: true, Judge: judgeECN},
		{Name: "amplificationlimit", Abbr: "A", Desc: "The server obeys the 3x amplification limit.", ServerCase: "transfer", ClientCase: "transfer",
			Files: files(1, 5*kib, "amplification-5KiB"), Scenario: ampl, KeyLog: true, Certs: 9, ExtraNames: 20, Judge: judgeAmplification},
		{Name: "handshakeloss", Abbr: "L1", Desc: "Handshake completes under extreme packet loss.", ServerCase: "multiconnect", ClientCase: "multiconnect",
			Files: files(50, kib, "hsloss-1KiB"), Scenario: lossy(scenario("drop-30", drop(0.30))), Timeout: 300 * time.Second, Judge: judgeMulti},
		{Name: "transferloss", Abbr: "L2", Desc: "Transfer completes under moderate packet loss.", ServerCase: "transfer", ClientCase: "transfer",
			Files: files(1, 2*mib, "transferloss-2MiB"), Scenario: lossy(scenario("drop-2", drop(0.02))), Judge: judgeBasic},
		{Name: "handshakecorruption", Abbr: "C1", Desc: "Handshake completes under extreme packet corruption.", ServerCase: "multiconnect", ClientCase: "multiconnect",
			Files: files(50, kib, "hscorrupt-1KiB"), Scenario: lossy(scenario("corrupt-30", corrupt(0.30))), Timeout: 300 * time.Second, Judge: judgeMulti},
		{Name: "transfercorruption", Abbr: "C2", Desc: "Transfer completes under moderate packet corruption.", ServerCase: "transfer", ClientCase: "transfer",
			Files: files(1, 2*mib, "transfercorrupt-2MiB"), Scenario: lossy(scenario("corrupt-2", corrupt(0.02))), Judge: judgeBasic},
		{Name: "ipv6", Abbr: "6", Desc: "A transfer across an IPv6-only network succeeded.", ServerCase: "transfer", ClientCase: "transfer",
			Scenario: v6, Judge: judgeIPv6,
			Files: func(uint64) []File {
				return []File{{Name: "ipv6-5KiB", Size: 5 * kib}, {Name: "ipv6-10KiB", Size: 10 * kib}}
			}},
		{Name: "v2", Abbr: "V2", Desc: "Server should select QUIC v2 in compatible version negotiation.", ServerCase: "v2", ClientCase: "v2",
			Files: files(1, kib, "v2-1KiB"), Scenario: def, Judge: judgeV2},
		{Name: "rebind-port", Abbr: "BP", Desc: "Transfer completes under frequent port rebindings on the client side.", ServerCase: "transfer", ClientCase: "transfer",
			Files: files(1, 10*mib, "rebind-port-10MiB"), Scenario: rebindPort, KeyLog: true, Judge: judgeRebind},
		{Name: "rebind-addr", Abbr: "BA", Desc: "Transfer completes under frequent IP address and port rebindings on the client side.", ServerCase: "transfer", ClientCase: "transfer",
			Files: files(1, 10*mib, "rebind-addr-10MiB"), Scenario: rebindAddr, KeyLog: true, Judge: judgeRebind},
		{Name: "connectionmigration", Abbr: "CM", Desc: "Client uses server's preferred address.", ServerCase: "connectionmigration", ClientCase: "transfer",
			Files: files(1, 2*mib, "migration-2MiB"), Scenario: def, KeyLog: true, Judge: judgeConnectionMigration,
			NeedsNamespaces: "the proxy engine cannot route the client to the server's preferred address"},
		{Name: "versionnegotiation", Abbr: "V", Desc: "Client greases the version; the server answers with Version Negotiation and the client completes a v1 connection.",
			ServerCase: "versionnegotiation", ClientCase: "versionnegotiation", Files: files(1, kib, "vn-1KiB"), Scenario: def, Judge: judgeVersionNegotiation},
		{Name: "ackfrequency", Abbr: "AF", Desc: "The data sender asks for fewer ACKs with ACK_FREQUENCY (project).", ServerCase: "ackfrequency", ClientCase: "ackfrequency",
			Files: files(1, 10*mib, "ackfreq-10MiB"), Scenario: def, KeyLog: true, Judge: judgeAckFrequency},
		{Name: "goodput", Abbr: "G", Desc: "Measures connection goodput over a 10 Mbit/s link.", ServerCase: "transfer", ClientCase: "transfer",
			Files: files(1, 10*mib, "goodput-10MiB"), Scenario: def, Measurement: true, Repetitions: 5, Judge: judgeBasic},
		{Name: "crosstraffic", Abbr: "C", Desc: "Measures goodput over a 10 Mbit/s link when competing with a TCP (cubic) connection.",
			ServerCase: "transfer", ClientCase: "transfer", Files: files(1, 25*mib, "crosstraffic-25MiB"), Scenario: cross, Measurement: true, Repetitions: 5,
			Timeout: 180 * time.Second, Judge: judgeBasic, NeedsNamespaces: "the proxy engine has no shared bottleneck for a TCP flow"},
	}
}

// Lookup returns the test cases named in a comma-separated list of names or
// abbreviations; "all" selects every one, "tests" every test case and
// "measurements" every measurement.
func Lookup(list string) ([]*TestCase, error) {
	all := Catalogue()
	var out []*TestCase
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		switch name {
		case "":
			continue
		case "all":
			return all, nil
		case "tests", "measurements":
			for _, tc := range all {
				if tc.Measurement == (name == "measurements") {
					out = append(out, tc)
				}
			}
			continue
		}
		i := slices.IndexFunc(all, func(tc *TestCase) bool { return tc.Name == name || strings.EqualFold(tc.Abbr, name) })
		if i < 0 {
			names := make([]string, len(all))
			for j, tc := range all {
				names[j] = tc.Name
			}
			return nil, fmt.Errorf("no test case %q (have %s)", name, strings.Join(names, ", "))
		}
		if !slices.Contains(out, all[i]) {
			out = append(out, all[i])
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no test cases selected")
	}
	return out, nil
}
