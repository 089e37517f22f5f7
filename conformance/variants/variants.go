// Package variants runs the conformance suite against Quiver's own server
// and client made to take, one at a time (or several together where they
// do not interact), the choices the RFCs leave to an implementation: the
// compliant-variant matrix. A variant may not turn a pass of the default
// into a fail, warn or inconclusive; where it does, the tester is wrong,
// unless the scenario judges that very choice at SHOULD level or the
// variant departs from a SHOULD (Expected lists those, with the reason).
package variants

import (
	"fmt"
	"strings"
	"time"

	"github.com/quiver-quic/quiver/quic"
)

// A Variant is one permitted choice: a change to the engine's
// configuration, or a delay on the path, with the RFC text that allows it.
type Variant struct {
	Name string
	// RFC is the section that permits the choice ("RFC 9000 §14.1"), and
	// Quote its sentence.
	RFC, Quote string
	// Should, when not empty, says which SHOULD the variant departs from:
	// it is then permitted but not recommended, and a scenario judging
	// that SHOULD is right to warn.
	Should string
	// Edit changes the engine configuration (nil: only Delay).
	Edit func(*quic.Config)
	// Delay is a one-way delay added to what the variant sends: a server
	// or client slow to answer (the server's socket delays its writes;
	// the client reaches the tester through a relay).
	Delay time.Duration
	// Server and Client say in which roles the variant runs.
	Server, Client bool
	// NotCompliantServer marks a variant that is not compliant as a
	// server serving many clients; it runs as one only when asked by
	// name.
	NotCompliantServer bool
}

// Config describes the variant's configuration change in words (the
// docs' table).
func (v *Variant) Config() string { return configText[v.Name] }

// All is the matrix's list of variants.
var All = []*Variant{
	{Name: "retry", RFC: "RFC 9000 §8.1.2", Server: true,
		Quote: "Upon receiving the client's Initial packet, the server can request address validation by sending a Retry packet containing a token.",
		Edit:  func(c *quic.Config) { c.RequireRetry = true }},
	{Name: "zero-padding", RFC: "RFC 9000 §14.1", Server: true, Client: true,
		Quote: "A client MUST expand the payload of all UDP datagrams carrying Initial packets to at least the smallest allowed maximum " +
			"datagram size of 1200 bytes by adding PADDING frames to the Initial packet or by coalescing the Initial packet; " +
			"... Initial packets can even be coalesced with invalid packets, which a receiver will discard.",
		Edit: func(c *quic.Config) { c.PadWithZeros = true }},
	{Name: "no-blocked", RFC: "RFC 9000 §4.1", Server: true, Client: true,
		Quote: "A sender SHOULD send a STREAM_DATA_BLOCKED or DATA_BLOCKED frame to indicate to the receiver that it has data to write " +
			"but is blocked by flow control limits.",
		Should: "RFC 9000 §4.1 (STREAM_DATA_BLOCKED / DATA_BLOCKED SHOULD be sent); §19.14 STREAMS_BLOCKED likewise",
		Edit:   func(c *quic.Config) { c.DisableBlockedFrames = true }},
	{Name: "close-above-initial", RFC: "RFC 9000 §10.2.3", Server: true, Client: true,
		Quote: "Generally, this means sending the frame in a packet with the highest level of packet protection ... " +
			"an endpoint SHOULD send a CONNECTION_CLOSE frame in both Handshake and 1-RTT packets.",
		Should: "RFC 9000 §10.2.3: \"A server SHOULD also send a CONNECTION_CLOSE frame in an Initial packet\" (server role)",
		Edit:   func(c *quic.Config) { c.CloseAboveInitial = true }},
	{Name: "discard-early-1rtt", RFC: "RFC 9001 §5.7", Server: true, Client: true,
		Quote: "Received packets protected with 1-RTT keys MAY be stored and later decrypted and used once the handshake is complete.",
		Edit:  func(c *quic.Config) { c.DiscardEarly1RTT = true }},
	{Name: "ack-every-packet", RFC: "RFC 9000 §13.2.2", Server: true, Client: true,
		Quote: "A receiver SHOULD send an ACK frame after receiving at least two ack-eliciting packets.",
		Edit:  func(c *quic.Config) { c.AckEveryPackets = 1 }},
	{Name: "ack-every-10", RFC: "RFC 9000 §13.2.2", Server: true, Client: true,
		Quote: "Knowledge of network conditions, knowledge of the peer's congestion controller, or further research and experimentation " +
			"might suggest alternative acknowledgment strategies with better performance characteristics.",
		Should: "RFC 9000 §13.2.2: \"A receiver SHOULD send an ACK frame after receiving at least two ack-eliciting packets\"",
		Edit:   func(c *quic.Config) { c.AckEveryPackets = 10 }},
	// Client only: a server serves many connections on one address and
	// port, which RFC 9000 §5.1 forbids with zero-length IDs ("An
	// endpoint MUST NOT use the same IP address and port for multiple
	// concurrent connections with zero-length connection IDs, unless it
	// is certain that those protocol features are not in use"); run
	// against the whole server suite, whose connections come from ports
	// the system hands out again, it loses connections to port reuse.
	// `quiver variants --variants cid-0 --roles server` still runs it.
	{Name: "cid-0", RFC: "RFC 9000 §5.1", Client: true, NotCompliantServer: true,
		Quote: "A zero-length connection ID can be used when a connection ID is not needed to route to the correct endpoint.",
		Edit:  func(c *quic.Config) { c.ConnectionIDLength = -1 }},
	{Name: "cid-1", RFC: "RFC 9000 §17.2", Server: true, Client: true,
		Quote: "Destination Connection ID Length: ... In QUIC version 1, this value MUST NOT exceed 20 bytes.",
		Edit:  func(c *quic.Config) { c.ConnectionIDLength = 1 }},
	{Name: "cid-20", RFC: "RFC 9000 §17.2", Server: true, Client: true,
		Quote: "Destination Connection ID Length: ... In QUIC version 1, this value MUST NOT exceed 20 bytes.",
		Edit:  func(c *quic.Config) { c.ConnectionIDLength = 20 }},
	{Name: "iw-32", RFC: "RFC 9002 §7.2", Server: true, Client: true,
		Quote: "Endpoints SHOULD use an initial congestion window of ten times the maximum datagram size (max_datagram_size), " +
			"while limiting the window to the larger of 14,720 bytes or twice the maximum datagram size.",
		Should: "RFC 9002 §7.2: 32 packets exceeds the SHOULD's ten (Quiver's default is ten); not compliant with the SHOULD, allowed",
		Edit:   func(c *quic.Config) { c.InitialWindowPackets = 32 }},
	{Name: "newreno", RFC: "RFC 9002 §7", Server: true, Client: true,
		Quote: "This document specifies a sender-side congestion controller for QUIC similar to TCP NewReno. ... " +
			"A sender can unilaterally choose a different algorithm to use, such as CUBIC.",
		Edit: func(c *quic.Config) { c.Congestion = quic.NewReno }},
	{Name: "no-pacing", RFC: "RFC 9002 §7.7", Server: true, Client: true,
		Quote:  "Senders MUST either use pacing or limit such bursts.",
		Should: "RFC 9002 §7.7: \"A sender SHOULD pace sending of all in-flight packets\"",
		Edit:   func(c *quic.Config) { c.DisablePacing = true }},
	{Name: "key-update-100", RFC: "RFC 9001 §6", Server: true, Client: true,
		Quote: "Once the handshake is confirmed, an endpoint MAY initiate a key update.",
		Edit:  func(c *quic.Config) { c.KeyUpdateInterval = 100 }},
	{Name: "slow-server", RFC: "RFC 9002 §6.2.2", Server: true, Delay: 50 * time.Millisecond,
		Quote: "When no previous RTT is available, the initial RTT SHOULD be set to 333 milliseconds."},
	{Name: "slow-client", RFC: "RFC 9002 §6.2.2", Client: true, Delay: 50 * time.Millisecond,
		Quote: "When no previous RTT is available, the initial RTT SHOULD be set to 333 milliseconds."},
}

var configText = map[string]string{
	"retry":               "RequireRetry",
	"zero-padding":        "PadWithZeros",
	"no-blocked":          "DisableBlockedFrames",
	"close-above-initial": "CloseAboveInitial",
	"discard-early-1rtt":  "DiscardEarly1RTT",
	"ack-every-packet":    "AckEveryPackets = 1",
	"ack-every-10":        "AckEveryPackets = 10",
	"cid-0":               "ConnectionIDLength = -1 (zero length)",
	"cid-1":               "ConnectionIDLength = 1",
	"cid-20":              "ConnectionIDLength = 20",
	"iw-32":               "InitialWindowPackets = 32",
	"newreno":             "Congestion = NewReno (default Cubic)",
	"no-pacing":           "DisablePacing",
	"key-update-100":      "KeyUpdateInterval = 100",
	"slow-server":         "50 ms one-way delay on the server's datagrams (its socket holds each back)",
	"slow-client":         "50 ms one-way delay on the client's datagrams (netem relay)",
}

// Find returns the variant named name.
func Find(name string) (*Variant, error) {
	for _, v := range All {
		if v.Name == name {
			return v, nil
		}
	}
	return nil, fmt.Errorf("unknown variant %q (known: %s)", name, strings.Join(Names(), ", "))
}

// Names lists every variant's name.
func Names() []string {
	var out []string
	for _, v := range All {
		out = append(out, v.Name)
	}
	return out
}

// A Target is what one column of the matrix runs: the default (no
// variant), one variant, or several that do not interact, combined to
// save time.
type Target struct {
	Variants []*Variant
	// Named: the user asked for these variants by name, so they run as a
	// server even where they are not compliant as one.
	Named bool
}

// Name is the target's column name: "default" or the variants joined by
// "+".
func (t Target) Name() string {
	if len(t.Variants) == 0 {
		return "default"
	}
	var n []string
	for _, v := range t.Variants {
		n = append(n, v.Name)
	}
	return strings.Join(n, "+")
}

// Has reports whether the target includes the variant named name.
func (t Target) Has(name string) bool {
	for _, v := range t.Variants {
		if v.Name == name {
			return true
		}
	}
	return false
}

// edit applies every variant's configuration change.
func (t Target) edit(c *quic.Config) {
	for _, v := range t.Variants {
		if v.Edit != nil {
			v.Edit(c)
		}
	}
}

// delay is the largest delay of the target's variants.
func (t Target) delay() time.Duration {
	var d time.Duration
	for _, v := range t.Variants {
		d = max(d, v.Delay)
	}
	return d
}

// serves and clients report whether every variant of the target runs in
// that role.
func (t Target) serves() bool {
	for _, v := range t.Variants {
		if !v.Server && !(t.Named && v.NotCompliantServer) {
			return false
		}
	}
	return true
}

func (t Target) clients() bool {
	for _, v := range t.Variants {
		if !v.Client {
			return false
		}
	}
	return true
}

// Singles is one target per variant.
func Singles(vs []*Variant) []Target {
	var out []Target
	for _, v := range vs {
		out = append(out, Target{Variants: []*Variant{v}})
	}
	return out
}

// Combined is the short matrix CI runs: the variants grouped into a few
// targets whose choices do not interact (each group holds at most one
// connection ID length, one ACK policy and one delay), for each role.
func Combined() (server, client []Target) {
	group := func(names ...string) Target {
		var t Target
		for _, n := range names {
			v, err := Find(n)
			if err != nil {
				panic(err)
			}
			t.Variants = append(t.Variants, v)
		}
		return t
	}
	server = []Target{
		group("retry", "zero-padding", "no-blocked", "close-above-initial", "cid-1", "ack-every-packet", "newreno", "key-update-100"),
		group("discard-early-1rtt", "cid-20", "ack-every-10", "iw-32", "no-pacing", "slow-server"),
	}
	client = []Target{
		group("zero-padding", "no-blocked", "close-above-initial", "cid-1", "ack-every-packet", "newreno", "key-update-100"),
		group("discard-early-1rtt", "cid-20", "ack-every-10", "iw-32", "no-pacing", "slow-client"),
		group("cid-0"),
	}
	return server, client
}
