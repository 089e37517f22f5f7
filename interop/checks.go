package interop

import (
	"crypto/tls"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/quiver-quic/quiver/interop/analyze"
	"github.com/quiver-quic/quiver/netem"
	"github.com/quiver-quic/quiver/quic/wire"
)

// Check classes: which checks decide a result (docs/interop-results.md).
const (
	Base   = "base"
	Extra  = "extra"
	Compat = "compat"
)

// Check statuses. Skipped means the check could not be evaluated (no key
// log, or the engine cannot show what it needs).
const (
	Passed  = "succeeded"
	Failed  = "failed"
	Skipped = "skipped"
)

// Check is one judged criterion of a cell.
type Check struct {
	ID     string `json:"id"`
	Class  string `json:"class"`
	Status string `json:"status"`
	Detail string `json:"detail,omitempty"`
	// Corrected marks a base check that replaces the established
	// criterion, which is then recorded as a compat check.
	Corrected bool `json:"corrected,omitempty"`
}

// Cell is what the judges of one test case see: the two decrypted traces,
// the files and the download folder.
type Cell struct {
	Test        *TestCase
	Files       []File
	Downloads   string
	ClientTrace *analyze.Trace
	ServerTrace *analyze.Trace
	// KeyLog says that a valid key log (one with a
	// SERVER_HANDSHAKE_TRAFFIC_SECRET line) was available.
	KeyLog bool
	// Link is what the link did, including the ECN codepoints of the
	// datagrams it carried (the relay reads them from the IP header).
	Link   *LinkRecord
	Checks []Check
	// Environment, when set by a judge, makes the result unsupported
	// with reason environment.
	Environment string
}

func (c *Cell) add(id, class string, ok bool, format string, args ...any) *Check {
	st := Failed
	if ok {
		st = Passed
	}
	c.Checks = append(c.Checks, Check{ID: id, Class: class, Status: st, Detail: fmt.Sprintf(format, args...)})
	return &c.Checks[len(c.Checks)-1]
}

func (c *Cell) skip(id, class, format string, args ...any) {
	c.Checks = append(c.Checks, Check{ID: id, Class: class, Status: Skipped, Detail: fmt.Sprintf(format, args...)})
}

// outcome turns the checks into the result and the compat result.
func (c *Cell) outcome(strict bool) (result, compat string) {
	result, compat = "succeeded", "succeeded"
	for _, ch := range c.Checks {
		if ch.Status != Failed {
			continue
		}
		switch ch.Class {
		case Base:
			result = "failed"
			if !ch.Corrected {
				compat = "failed"
			}
		case Extra:
			if strict {
				result = "failed"
			}
		case Compat:
			compat = "failed"
		}
	}
	return result, compat
}

// checkFiles is FILES: every requested file arrived, byte for byte.
func (c *Cell) checkFiles() {
	ok, detail := compareDownloads(c.Downloads, c.Files)
	c.add("files", Base, ok, "%s", detail)
}

// checkV1 is V1: the versions of server-sent Initial packets are exactly
// {v1}.
func (c *Cell) checkV1() {
	vs := initialVersions(c.ServerTrace, analyze.FromServer)
	c.add("v1", Base, slices.Equal(vs, []wire.Version{wire.Version1}), "server Initial versions %s", versionList(vs))
}

func initialVersions(t *analyze.Trace, dir analyze.Direction) []wire.Version {
	var vs []wire.Version
	for _, p := range t.Packets {
		if p.Dir == dir && p.Type == wire.PacketTypeInitial && !slices.Contains(vs, p.Version) {
			vs = append(vs, p.Version)
		}
	}
	slices.Sort(vs)
	return vs
}

func versionList(vs []wire.Version) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = v.String()
	}
	return "{" + strings.Join(s, ", ") + "}"
}

// checkNoRetry is NORETRY on the client trace.
func (c *Cell) checkNoRetry(class string) {
	n := 0
	for _, p := range c.ClientTrace.Packets {
		if p.Type == wire.PacketTypeRetry {
			n++
		}
	}
	c.add("noretry", class, n == 0, "%d Retry packets", n)
}

// checkHS is HS(n) with §4.3's count on the server trace: completed
// handshakes must equal n; attempts must too, except on lossy scenarios,
// where abandoned attempts are reported but tolerated. The established
// rule (attempts = n) is the compat check.
func (c *Cell) checkHS(n int) {
	done, attempts := c.ServerTrace.Handshakes()
	if c.Test.Scenario.Lossy {
		ch := c.add("handshakes", Base, done == n, "%d completed, %d attempts (%d abandoned), want %d completed", done, attempts, max(0, attempts-done), n)
		ch.Corrected = true
		c.add("handshakes-compat", Compat, attempts == n, "%d server Initial SCIDs, want %d", attempts, n)
		return
	}
	c.add("handshakes", Base, done == n && attempts == n, "%d completed, %d attempts, want %d", done, attempts, n)
}

func (c *Cell) basic(n int) {
	c.checkHS(n)
	c.checkV1()
	c.checkFiles()
}

func judgeBasic(c *Cell) { c.basic(1) }

func judgeMulti(c *Cell) { c.basic(len(c.Files)) }

func judgeHandshake(c *Cell) {
	c.basic(1)
	c.checkNoRetry(Base)
	c.checkALPN("hq-interop")
}

// checkALPN is the extra check that the ClientHello offered alpn and the
// EncryptedExtensions selected it (the latter needs the key log).
func (c *Cell) checkALPN(alpn string) {
	for _, cn := range c.ServerTrace.Conns {
		if cn.ClientHello == nil {
			continue
		}
		c.add("alpn-offered", Extra, slices.Contains(cn.ClientHello.ALPN, alpn), "ClientHello offers %q", cn.ClientHello.ALPN)
		if cn.EncryptedExtensions == nil {
			c.skip("alpn-selected", Extra, "EncryptedExtensions not decrypted (key log)")
		} else {
			c.add("alpn-selected", Extra, cn.EncryptedExtensions.ALPN == alpn, "server selected %q", cn.EncryptedExtensions.ALPN)
		}
		return
	}
	c.add("alpn-offered", Extra, false, "no ClientHello read")
}

func judgeTransfer(c *Cell) {
	c.basic(1)
	cn := firstCompleted(c.ServerTrace)
	if cn == nil || !cn.AppKeys || cn.ClientHello == nil || cn.ClientHello.TransportParameters == nil {
		c.skip("flow-control", Extra, "needs a decrypted connection with the client's transport parameters")
		return
	}
	tp := cn.ClientHello.TransportParameters
	c.add("small-windows", Extra, tp.InitialMaxData < 10*mib && tp.InitialMaxStreamDataBidiLocal < 2*mib,
		"client initial_max_data %d, initial_max_stream_data_bidi_local %d", tp.InitialMaxData, tp.InitialMaxStreamDataBidiLocal)
	md, msd := cn.FrameCounts[analyze.FromClient]["MAX_DATA"], cn.FrameCounts[analyze.FromClient]["MAX_STREAM_DATA"]
	c.add("credit-updates", Extra, md > 0 && msd > 0, "client sent %d MAX_DATA and %d MAX_STREAM_DATA", md, msd)
	// Concurrency: every request stream was opened before the first
	// response finished.
	opened := 0
	var firstFin = -1
	for i, p := range cn.Packets {
		for _, f := range p.Frames {
			if !f.Type.IsStream() {
				continue
			}
			if p.Dir == analyze.FromClient && f.Offset == 0 && f.StreamID%4 == 0 {
				if firstFin < 0 {
					opened++
				}
			}
			if p.Dir == analyze.FromServer && f.Fin && firstFin < 0 {
				firstFin = i
			}
		}
	}
	c.add("concurrent", Extra, opened >= len(c.Files), "%d of %d requests sent before the first response completed", opened, len(c.Files))
}

func firstCompleted(t *analyze.Trace) *analyze.Conn {
	for _, cn := range t.Conns {
		if cn.Completed() {
			return cn
		}
	}
	if len(t.Conns) > 0 {
		return t.Conns[0]
	}
	return nil
}

func judgeLongRTT(c *Cell) {
	c.basic(1)
	sends := 0
	for _, cn := range c.ClientTrace.Conns {
		sends += cn.ClientHelloSends
	}
	c.add("clienthello-retransmitted", Base, sends >= 2, "ClientHello sent %d times (CRYPTO offset 0 in client Initials)", sends)
	c.checkNoRetry(Extra)
}

func judgeChaCha20(c *Cell) {
	c.basic(1)
	n, bad := 0, ""
	for _, cn := range c.ClientTrace.Conns {
		for _, s := range cn.ClientHelloSuites {
			n++
			if !slices.Equal(s, []uint16{tls.TLS_CHACHA20_POLY1305_SHA256}) {
				bad = fmt.Sprintf("a ClientHello offers %s", suiteList(s))
			}
		}
	}
	c.add("chacha20-only", Base, n > 0 && bad == "", "%d ClientHellos read; %s", n, orDefault(bad, "each offers only TLS_CHACHA20_POLY1305_SHA256"))
	if cn := firstCompleted(c.ClientTrace); cn != nil && cn.ServerHello != nil {
		c.add("chacha20-selected", Extra, cn.ServerHello.CipherSuite == tls.TLS_CHACHA20_POLY1305_SHA256, "ServerHello selects %s", tls.CipherSuiteName(cn.ServerHello.CipherSuite))
	}
}

func suiteList(s []uint16) string {
	n := make([]string, len(s))
	for i, x := range s {
		n[i] = fmt.Sprintf("0x%04x", x)
	}
	return strings.Join(n, ",")
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

func judgeMultiplexing(c *Cell) {
	c.basic(1)
	cn := firstCompleted(c.ServerTrace)
	if cn == nil || cn.EncryptedExtensions == nil || cn.EncryptedExtensions.TransportParameters == nil {
		c.skip("stream-limit", Base, "server transport parameters not decrypted")
		return
	}
	lim := cn.EncryptedExtensions.TransportParameters.InitialMaxStreamsBidi
	c.add("stream-limit", Base, lim > 0 && lim <= 1000, "server initial_max_streams_bidi %d (want 1..1000)", lim)
	ms := cn.FrameCounts[analyze.FromServer][wire.FrameTypeMaxStreamsBidi.String()]
	c.add("max-streams", Extra, ms > 0, "server sent %d MAX_STREAMS frames", ms)
}

func judgeRetry(c *Cell) {
	c.basic(1)
	var retries []analyze.Retry
	var cn *analyze.Conn
	for _, x := range c.ClientTrace.Conns {
		if len(x.Retries) > 0 {
			retries, cn = x.Retries, x
			break
		}
	}
	tokens := 0
	for _, r := range retries {
		if len(r.Token) > 0 {
			tokens++
		}
	}
	c.add("retry-sent", Base, len(retries) > 0 && tokens == len(retries), "%d Retry packets, %d with a token", len(retries), tokens)
	if cn == nil {
		return
	}
	c.add("token-reused", Base, cn.RetryTokenReused, "a later client Initial carries the Retry token: %v", cn.RetryTokenReused)
	c.add("pn-continue", Base, cn.RetryPNsContinue, "post-Retry Initial packet numbers above pre-Retry ones: %v", cn.RetryPNsContinue)
	valid := true
	for _, r := range retries {
		valid = valid && r.TagValid
	}
	c.add("retry-tag", Extra, valid, "integrity tags verify: %v", valid)
	c.add("retry-dcid", Extra, cn.RetryDCID, "post-Retry Initial uses the Retry SCID as DCID: %v", cn.RetryDCID)
	if ee := cn.EncryptedExtensions; ee != nil && ee.TransportParameters != nil {
		tp := ee.TransportParameters
		ok := tp.HasOriginalDestinationConnectionID && string(tp.OriginalDestinationConnectionID) == string(cn.ODCID) &&
			tp.HasRetrySourceConnectionID && string(tp.RetrySourceConnectionID) == string(retries[len(retries)-1].SCID)
		c.add("retry-tps", Extra, ok, "original_destination_connection_id %x (want %x), retry_source_connection_id %x (want %x)",
			tp.OriginalDestinationConnectionID, []byte(cn.ODCID), tp.RetrySourceConnectionID, []byte(retries[len(retries)-1].SCID))
	} else {
		c.skip("retry-tps", Extra, "server transport parameters not decrypted")
	}
}

// handshaking returns the connections in which the client sent a
// Handshake packet, in order.
func handshaking(t *analyze.Trace) []*analyze.Conn {
	var out []*analyze.Conn
	for _, cn := range t.Conns {
		if cn.ClientHandshakePackets > 0 {
			out = append(out, cn)
		}
	}
	return out
}

func judgeResumption(c *Cell) {
	c.basic(2)
	hs := handshaking(c.ServerTrace)
	if len(hs) < 2 {
		c.add("resumed", Base, false, "%d connections reached the Handshake space, want 2", len(hs))
		return
	}
	c.add("first-certificate", Base, hs[0].ServerCertificate, "first connection's server Handshake data has a Certificate: %v", hs[0].ServerCertificate)
	c.add("second-no-certificate", Base, !hs[1].ServerCertificate && hs[1].HandshakeKeys, "second connection's has one: %v (decrypted: %v)", hs[1].ServerCertificate, hs[1].HandshakeKeys)
	c.add("two-connections", Base, len(hs) == 2, "%d connections with Handshake packets", len(hs))
	psk := hs[1].ServerHello != nil && hs[1].ServerHello.PreSharedKey
	c.add("psk", Extra, psk, "second ServerHello carries pre_shared_key: %v", psk)
	c.add("no-0rtt", Extra, hs[1].ZeroRTTPackets == 0, "%d 0-RTT packets", hs[1].ZeroRTTPackets)
}

func judgeZeroRTT(c *Cell) {
	c.basic(2)
	var zero, oneRTT uint64
	keys := true
	for _, cn := range c.ClientTrace.Conns {
		if !cn.AppKeys {
			keys = false
		}
		zero += cn.ZeroRTTStreamBytes
		if cn.ZeroRTTStreamBytes == 0 {
			zero += uint64(cn.ZeroRTTBytes) // undecrypted: count packet bytes
		}
		oneRTT += cn.ClientOneRTTStreamBytes
	}
	if !keys {
		// Without keys the 1-RTT payload is the packets' size.
		oneRTT = 0
		for _, p := range c.ClientTrace.Packets {
			if p.Dir == analyze.FromClient && p.Type == wire.PacketType1RTT {
				oneRTT += uint64(p.Size)
			}
		}
	}
	c.add("0rtt-sent", Base, zero > 0, "client 0-RTT payload %d bytes", zero)
	limit := uint64(0.5 * 250 * float64(len(c.Files)))
	c.add("1rtt-small", Base, oneRTT <= limit, "client 1-RTT payload %d bytes (at most %d)", oneRTT, limit)
	if hs := handshaking(c.ServerTrace); len(hs) >= 2 && hs[1].EncryptedExtensions != nil {
		c.add("0rtt-accepted", Extra, hs[1].EncryptedExtensions.EarlyData, "second EncryptedExtensions carries early_data: %v", hs[1].EncryptedExtensions.EarlyData)
	} else {
		c.skip("0rtt-accepted", Extra, "second EncryptedExtensions not decrypted")
	}
}

func judgeHTTP3(c *Cell) {
	c.basic(1)
	c.checkALPN("h3")
	cn := firstCompleted(c.ServerTrace)
	if cn == nil || !cn.AppKeys {
		c.skip("h3-streams", Extra, "1-RTT not decrypted (key log)")
		return
	}
	for _, d := range []analyze.Direction{analyze.FromClient, analyze.FromServer} {
		control := false
		for id, b := range cn.StreamStarts[d] {
			if id%4 >= 2 && b == 0x00 {
				control = true
			}
		}
		c.add("control-stream-"+d.String(), Extra, control, "%s opened an HTTP/3 control stream: %v", d, control)
	}
	headers, reqs := 0, 0
	for id, b := range cn.StreamStarts[analyze.FromClient] {
		if id%4 == 0 {
			reqs++
			if b == 0x01 {
				headers++
			}
		}
	}
	c.add("headers-frames", Extra, reqs > 0 && headers == reqs, "%d of %d request streams start with HEADERS", headers, reqs)
}

func judgeKeyUpdate(c *Cell) {
	c.basic(1)
	cl := firstCompleted(c.ClientTrace)
	sv := firstCompleted(c.ServerTrace)
	if cl == nil || sv == nil || !cl.AppKeys || !sv.AppKeys {
		c.add("key-phase", Base, false, "the key phase cannot be read without 1-RTT keys")
		return
	}
	c.add("client-key-phase-1", Base, cl.KeyPhases[analyze.FromClient].Packets[1] > 0,
		"client trace: %d client 1-RTT packets with key phase 1 (%d updates)", cl.KeyPhases[analyze.FromClient].Packets[1], cl.KeyPhases[analyze.FromClient].Generations)
	c.add("server-key-phase-1", Base, sv.KeyPhases[analyze.FromServer].Packets[1] > 0,
		"server trace: %d server 1-RTT packets with key phase 1 (%d updates)", sv.KeyPhases[analyze.FromServer].Packets[1], sv.KeyPhases[analyze.FromServer].Generations)
	// Extra: the first update came before half the file was delivered.
	var delivered uint64
	var at uint64
	found := false
	for _, p := range cl.Packets {
		if p.Type != wire.PacketType1RTT || !p.Decrypted {
			continue
		}
		if p.Generation >= 1 && !found {
			found, at = true, delivered
		}
		if p.Dir == analyze.FromServer {
			for _, f := range p.Frames {
				if f.Type.IsStream() {
					delivered += uint64(f.Length)
				}
			}
		}
	}
	var total int64
	for _, f := range c.Files {
		total += f.Size
	}
	c.add("early-update", Extra, found && at < uint64(total)/2, "first key phase 1 packet after %d of %d bytes", at, total)
	kue := false
	for _, cn := range [](*analyze.Conn){cl, sv} {
		for _, cc := range cn.Closes {
			if !cc.Application && cc.Code == uint64(wire.KeyUpdateError) {
				kue = true
			}
		}
	}
	c.add("no-key-update-error", Extra, !kue, "CONNECTION_CLOSE with KEY_UPDATE_ERROR: %v", kue)
}

func judgeECN(c *Cell) {
	c.checkHS(1)
	c.checkNoRetry(Base)
	c.checkFiles()
	// The marks: the relay reads every datagram's IP ECN field and counts
	// the codepoints per direction, as a capture's IP header would show
	// them (the ecn test case: some packet carries ECT(0) or ECT(1) each way, none CE;
	// the link never marks).
	if c.Link == nil {
		c.skip("ecn-marks", Base, "no link record")
	} else {
		for _, d := range []struct {
			name string
			st   netem.Stats
		}{{"client", c.Link.StatsToServer}, {"server", c.Link.StatsToClient}} {
			e := d.st.ECN
			c.add("ecn-marks-"+d.name, Base, e[netem.ECT0]+e[netem.ECT1] > 0 && e[netem.CE] == 0,
				"%s datagrams: %d not-ECT, %d ECT(0), %d ECT(1), %d CE", d.name, e[netem.NotECT], e[netem.ECT0], e[netem.ECT1], e[netem.CE])
		}
	}
	cn := firstCompleted(c.ClientTrace)
	if cn == nil || !cn.AppKeys {
		c.add("ack-ecn", Base, false, "1-RTT not decrypted")
		return
	}
	for _, d := range []analyze.Direction{analyze.FromClient, analyze.FromServer} {
		c.add("ack-ecn-"+d.String(), Base, cn.ECN[d].Frames > 0, "%s sent %d ACK_ECN frames, last counts %v", d, cn.ECN[d].Frames, cn.ECN[d].Last)
		c.add("ecn-counts-monotonic-"+d.String(), Extra, !cn.ECN[d].Decreased, "counts never decrease: %v", !cn.ECN[d].Decreased)
	}
}

func judgeAmplification(c *Cell) {
	c.basic(1)
	cn := firstCompleted(c.ServerTrace)
	if cn == nil {
		return
	}
	c.add("large-chain", Base, cn.ServerHandshakeCryptoMax >= 7500, "server Handshake CRYPTO reaches offset %d (want 7500+)", cn.ServerHandshakeCryptoMax)
	c.add("no-vn", Base, len(c.ServerTrace.VersionNegotiations) == 0, "%d Version Negotiation packets", len(c.ServerTrace.VersionNegotiations))
	am := cn.Amplification
	ch := c.add("amplification", Base, !am.Exceeded, "before validation the server sent %d bytes for %d received (max ratio %.2f, limit 3)", am.ServerBytes, am.ClientBytes, am.MaxRatio)
	ch.Corrected = true
	c.add("amplification-compat", Compat, am.CompatMaxRatio < 4, "established walk: max ratio %.2f (fails at 4)", am.CompatMaxRatio)
}

func judgeIPv6(c *Cell) {
	c.basic(1)
	v4 := func(dir analyze.Direction) int {
		n := 0
		for _, p := range c.ServerTrace.Packets {
			if p.Dir == dir && p.Src.Addr().Unmap().Is4() {
				n++
			}
		}
		return n
	}
	c.add("server-ipv6-only", Base, v4(analyze.FromServer) == 0, "%d server packets over IPv4", v4(analyze.FromServer))
	c.add("client-ipv6-only", Extra, v4(analyze.FromClient) == 0, "%d client packets over IPv4", v4(analyze.FromClient))
}

func judgeV2(c *Cell) {
	ci := initialVersions(c.ServerTrace, analyze.FromClient)
	si := initialVersions(c.ServerTrace, analyze.FromServer)
	c.add("client-v1-initial", Base, slices.Contains(ci, wire.Version1), "client Initial versions %s", versionList(ci))
	c.add("server-v2-initial", Base, slices.Contains(si, wire.Version2), "server Initial versions %s", versionList(si))
	var hv []wire.Version
	for _, p := range c.ServerTrace.Packets {
		if p.Type == wire.PacketTypeHandshake && !slices.Contains(hv, p.Version) {
			hv = append(hv, p.Version)
		}
	}
	c.add("handshake-v2", Base, slices.Equal(hv, []wire.Version{wire.Version2}), "Handshake packet versions %s", versionList(hv))
	c.checkFiles()
	done, attempts := c.ServerTrace.Handshakes()
	c.add("handshakes", Extra, done == 1 && attempts == 1, "%d completed, %d attempts", done, attempts)
	if cn := firstCompleted(c.ServerTrace); cn != nil && cn.ClientHello != nil && cn.ClientHello.TransportParameters != nil && cn.EncryptedExtensions != nil && cn.EncryptedExtensions.TransportParameters != nil {
		a, b := cn.ClientHello.TransportParameters.HasVersionInformation, cn.EncryptedExtensions.TransportParameters.HasVersionInformation
		c.add("version-information", Extra, a && b, "version_information sent by client %v, server %v", a, b)
	}
}

func judgeRebind(c *Cell) {
	c.basic(1)
	cn := firstCompleted(c.ServerTrace)
	if cn == nil {
		return
	}
	addrs := map[netip.Addr]bool{}
	for _, p := range cn.Paths {
		addrs[p.Client.Addr()] = true
	}
	if c.Test.Scenario.Rebind.Addr {
		c.add("address-changed", Base, len(addrs) > 1, "%d client IP addresses on the server trace", len(addrs))
	}
	c.add("tuples", Base, len(cn.Paths) >= 2, "%d client 4-tuples on the server trace", len(cn.Paths))
	var unchallenged, exceeded, notFirst []string
	for _, p := range cn.Paths[min(1, len(cn.Paths)):] {
		if !p.ChallengedByServer {
			unchallenged = append(unchallenged, p.Client.String())
		}
		if p.Exceeded {
			exceeded = append(exceeded, fmt.Sprintf("%s (%d for %d)", p.Client, p.ServerBytes, p.ClientBytes))
		}
		if !p.FirstServerChallenge {
			notFirst = append(notFirst, p.Client.String())
		}
	}
	ch := c.add("path-challenged", Base, len(unchallenged) == 0, "new tuples without a server PATH_CHALLENGE: %s", orDefault(strings.Join(unchallenged, " "), "none"))
	ch.Corrected = true
	ch = c.add("path-amplification", Base, len(exceeded) == 0, "new tuples where the server exceeded 3x before validation: %s", orDefault(strings.Join(exceeded, " "), "none"))
	ch.Corrected = true
	if cl := firstCompleted(c.ClientTrace); cl != nil {
		ch = c.add("challenges-answered", Base, cl.UnansweredChallenges == 0, "client trace: %d of %d delivered challenges unanswered", cl.UnansweredChallenges, cl.ServerChallenges)
		ch.Corrected = true
	}
	c.add("first-packet-challenge-compat", Compat, len(notFirst) == 0, "new tuples whose first server packet lacks PATH_CHALLENGE: %s", orDefault(strings.Join(notFirst, " "), "none"))
	c.add("all-challenges-answered-compat", Compat, cn.UnansweredChallenges == 0, "server trace: %d of %d challenges unanswered", cn.UnansweredChallenges, cn.ServerChallenges)
}

func judgeVersionNegotiation(c *Cell) {
	vns := c.ClientTrace.VersionNegotiations
	var first *analyze.Packet
	for _, p := range c.ClientTrace.Packets {
		if p.Dir == analyze.FromClient && p.Type != wire.PacketType1RTT {
			first = p
			break
		}
	}
	if len(vns) == 0 || first == nil {
		c.add("vn", Base, false, "%d Version Negotiation packets", len(vns))
		return
	}
	vn := vns[0]
	ok := string(vn.DCID) == string(first.SCID) && string(vn.SCID) == string(first.DCID) &&
		slices.Contains(vn.Versions, wire.Version1) && !slices.Contains(vn.Versions, first.Version)
	c.add("vn", Base, ok, "VN DCID %x SCID %x versions %s after a first packet of %s", []byte(vn.DCID), []byte(vn.SCID), versionList(vn.Versions), first.Version)
	after := initialVersions(c.ClientTrace, analyze.FromClient)
	good := len(after) > 0
	for _, v := range after {
		good = good && slices.Contains(vn.Versions, v)
	}
	c.add("client-switched", Base, good, "client Initial versions %s", versionList(after))
	done, _ := c.ServerTrace.Handshakes()
	c.add("handshakes", Base, done == 1, "%d completed", done)
	c.checkFiles()
}

// judgeConnectionMigration judges connectionmigration: the client moves to the server's
// preferred address (RFC 9000 §9.6). A path is the full 4-tuple, so the
// move changes the path even when the client keeps its own address; the
// checks read the client trace for what the client sent and received and
// the server trace for the server's own validation.
func judgeConnectionMigration(c *Cell) {
	c.basic(1)
	cl, sv := firstCompleted(c.ClientTrace), firstCompleted(c.ServerTrace)
	if cl == nil || sv == nil {
		c.add("preferred-address", Base, false, "no connection on the traces")
		return
	}
	// 1. RFC 9000 §9.6: "A server conveys a preferred address by including
	// the preferred_address transport parameter in the TLS handshake."
	prefs := cl.PreferredAddrs()
	c.add("preferred-address", Base, len(prefs) > 0, "server preferred_address %v", prefs)
	if len(prefs) == 0 {
		return
	}
	isPref := func(a netip.AddrPort) bool {
		return slices.Contains(prefs, netip.AddrPortFrom(a.Addr().Unmap(), a.Port()))
	}

	// 2. §9.6.1: "Once the handshake is confirmed, the client SHOULD select
	// one of the two addresses provided by the server and initiate path
	// validation"; §9.6.2: "A client that migrates to a preferred address
	// MUST validate the address it chooses before migrating".
	var validated *analyze.Path
	for _, p := range cl.Paths {
		if isPref(p.Server) && p.ChallengedByClient && p.ClientValidatedFromServer {
			validated = p
		}
	}
	c.add("client-validated-preferred", Base, validated != nil, "client paths to the preferred address: %s", pathList(cl.Paths, isPref))

	// 3. §9.5: "an endpoint MUST NOT reuse a connection ID when sending to
	// more than one destination address."
	toOriginal, toPref := map[string]bool{}, map[string]bool{}
	var validatedAt time.Time
	for _, p := range cl.Packets {
		if p.Dir != analyze.FromClient {
			if p.Dir == analyze.FromServer && isPref(p.Src) && validatedAt.IsZero() && validated != nil && p.Has(wire.FrameTypePathResponse) {
				validatedAt = p.Time
			}
			continue
		}
		if isPref(p.Dst) {
			toPref[string(p.DCID)] = true
		} else {
			toOriginal[string(p.DCID)] = true
		}
	}
	var reused []string
	for cid := range toPref {
		if toOriginal[cid] {
			reused = append(reused, fmt.Sprintf("%x", cid))
		}
	}
	slices.Sort(reused)
	c.add("new-cid-for-preferred", Base, len(toPref) > 0 && len(reused) == 0, "%d DCIDs towards the preferred address, %d of them also used towards the original: %s",
		len(toPref), len(reused), orDefault(strings.Join(reused, " "), "none"))

	// 4. §9.6.2: "The server MUST probe on the path toward the client from
	// its preferred address."
	var probed *analyze.Path
	for _, p := range sv.Paths {
		if isPref(p.Server) && p.ChallengedByServer && p.Validated {
			probed = p
		}
	}
	c.add("server-validated-from-preferred", Base, probed != nil, "server paths from the preferred address: %s", pathList(sv.Paths, isPref))

	// 5. §9.6.1: "As soon as path validation succeeds, the client SHOULD
	// begin sending all future packets to the new server address"; the
	// server then sends its data from there (§9.6.2).
	clientMoved, serverData := 0, 0
	for _, p := range cl.Packets {
		switch {
		case p.Dir == analyze.FromClient && isPref(p.Dst) && !validatedAt.IsZero() && !p.Time.Before(validatedAt) && nonProbing(p):
			clientMoved++
		case p.Dir == analyze.FromServer && isPref(p.Src) && p.Has(wire.FrameTypeStream):
			serverData++
		}
	}
	c.add("moved-to-preferred", Base, clientMoved > 0 && serverData > 0, "after validation: %d non-probing client packets to the preferred address, %d server packets with STREAM data from it",
		clientMoved, serverData)

	// Extra, §9.6.2: "The server MUST send non-probing packets from its
	// original address until it receives a non-probing packet from the
	// client at its preferred address and until the server has validated
	// the new path." On the server trace: no STREAM data from the
	// preferred address before both.
	if serverData > 0 {
		var clientNonProbing, serverValidated time.Time
		challenges := map[string]bool{}
		for _, p := range sv.Packets {
			if p.Dir == analyze.FromServer && isPref(p.Src) {
				for _, f := range p.Frames {
					if f.Type == wire.FrameTypePathChallenge {
						challenges[string(f.Data)] = true
					}
				}
			}
			if p.Dir == analyze.FromClient && isPref(p.Dst) {
				if clientNonProbing.IsZero() && nonProbing(p) {
					clientNonProbing = p.Time
				}
				for _, f := range p.Frames {
					if f.Type == wire.FrameTypePathResponse && challenges[string(f.Data)] && serverValidated.IsZero() {
						serverValidated = p.Time
					}
				}
			}
		}
		var early int
		for _, p := range sv.Packets {
			if p.Dir == analyze.FromServer && isPref(p.Src) && p.Has(wire.FrameTypeStream) &&
				(clientNonProbing.IsZero() || serverValidated.IsZero() || p.Time.Before(clientNonProbing) || p.Time.Before(serverValidated)) {
				early++
			}
		}
		c.add("server-moved-after-validation", Extra, early == 0, "%d server STREAM packets from the preferred address before the client's first non-probing packet there (%s) and the server's validation (%s)",
			early, stamp(clientNonProbing, sv.First), stamp(serverValidated, sv.First))
	}

	// Compat: the established runner derives paths from the client's
	// side and so needs the client's own address to change, which RFC
	// 9000 does not ask of a client moving to a preferred address.
	srcs := map[netip.AddrPort]bool{}
	for _, p := range cl.Packets {
		if p.Dir == analyze.FromClient && p.Type == wire.PacketType1RTT {
			srcs[p.Src] = true
		}
	}
	c.add("client-address-changed-compat", Compat, len(srcs) > 1, "%d client addresses on the client trace", len(srcs))
}

// nonProbing reports whether a decrypted packet carries a frame other than
// PATH_CHALLENGE, PATH_RESPONSE, NEW_CONNECTION_ID and PADDING (RFC 9000
// §9.1).
func nonProbing(p *analyze.Packet) bool {
	return p.Decrypted && slices.ContainsFunc(p.Frames, func(f analyze.Frame) bool { return !f.Type.Probing() })
}

// pathList describes the paths whose server address passes keep.
func pathList(ps []*analyze.Path, keep func(netip.AddrPort) bool) string {
	var out []string
	for _, p := range ps {
		if keep(p.Server) {
			out = append(out, fmt.Sprintf("%s→%s (client challenged %v, answered from there %v; server challenged %v, answered %v)",
				p.Client, p.Server, p.ChallengedByClient, p.ClientValidatedFromServer, p.ChallengedByServer, p.Validated))
		}
	}
	return orDefault(strings.Join(out, "; "), "none")
}

// stamp is t as an offset from base, or "never".
func stamp(t, base time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return t.Sub(base).Round(time.Millisecond).String()
}
