package conformance

import (
	"crypto/tls"
	"fmt"
	"strings"
	"time"

	"github.com/quiver-quic/quiver/conformance/rawquic"
	"github.com/quiver-quic/quiver/quic/protect"
	"github.com/quiver-quic/quiver/quic/wire"
)

// Close detection beyond what the tester's client decrypted on its own.
// A server may close at any level it holds keys for (RFC 9000 §10.2.3),
// and the tester's client may not have processed that packet: the engine
// drops datagrams once its connection is gone and buffers packets it has
// no keys for yet; the raw client only opens the levels it is at. Every
// datagram the target sent on a connection is kept (rawIn), and
// recoverCloses opens each packet with every key the tester holds for
// its level (Initial keys from the connection ID, the others from the
// key log), records a CONNECTION_CLOSE it finds, and counts the packets
// that no key of the tester's opens.

// maxRawIn bounds the datagrams kept per connection.
const maxRawIn = 256

// inDatagram is one datagram the target sent on a connection.
type inDatagram struct {
	at time.Time
	b  []byte
}

// keepRaw keeps a received datagram for recoverCloses.
func (c *connTrace) keepRaw(at time.Time, b []byte) {
	c.r.mu.Lock()
	defer c.r.mu.Unlock()
	if len(c.rawIn) < maxRawIn {
		c.rawIn = append(c.rawIn, inDatagram{at: at, b: append([]byte(nil), b...)})
	}
}

// unopened is a packet of the target that no key of the tester's opens.
type unopened struct {
	at    time.Time
	ptype string
	size  int
}

// recoverCloses opens the target's datagrams on trace received at or
// after since with every key the tester holds, and records each
// CONNECTION_CLOSE found in a packet that was not recorded yet. It
// returns the long-header Handshake and the 1-RTT packets that nothing
// opened: possibly a close at a level the tester has no keys for.
func (t *T) recoverCloses(trace *connTrace, since time.Time) []unopened {
	ps := t.rec.snapshot()
	var odcid []byte
	cidLen := 8
	var version uint32 = 1
	seen := map[[2]uint64]bool{}
	largest := [3]uint64{}
	for _, p := range ps {
		if p.conn != trace.id {
			continue
		}
		if p.sent {
			if p.space == spaceInitial {
				odcid = p.dcid
				cidLen = len(p.scid)
				if p.ev.Version != 0 {
					version = p.ev.Version
				}
			}
			continue
		}
		if p.space >= 0 && p.space <= 2 {
			seen[[2]uint64{uint64(p.space), p.pn}] = true
			largest[p.space] = max(largest[p.space], p.pn)
		}
	}
	trace.r.mu.Lock()
	raw := append([]inDatagram(nil), trace.rawIn...)
	log := trace.r.keylog.String()
	trace.r.mu.Unlock()
	var missing []unopened
	for _, d := range raw {
		if d.at.Before(since) {
			continue
		}
		for rest := d.b; len(rest) > 0; {
			h, err := wire.ParseHeader(rest, cidLen)
			if err != nil || h.PacketLen <= 0 || h.PacketLen > len(rest) || h.Type == wire.PacketTypeRetry || h.Type == wire.PacketTypeVersionNegotiation {
				break
			}
			pkt := append([]byte(nil), rest[:h.PacketLen]...)
			rest = rest[h.PacketLen:]
			sp := rawquic.SpaceOf(h.Type)
			if sp < 0 || h.Type == wire.PacketType0RTT {
				continue
			}
			v := version
			if h.Long {
				v = uint32(h.Version)
			}
			opened := false
			for _, k := range serverKeys(log, v, h.Type, odcid) {
				p := append([]byte(nil), pkt...)
				pnLen, err := k.HeaderProtector().Remove(p, h.PNOffset, h.Long)
				if err != nil {
					continue
				}
				pn := wire.DecodePacketNumber(largest[sp], wire.ReadPacketNumber(p[h.PNOffset:], pnLen), pnLen*8)
				hdrEnd := h.PNOffset + pnLen
				payload, err := k.Open(nil, p[:hdrEnd], p[hdrEnd:], pn)
				if err != nil {
					continue
				}
				opened = true
				if seen[[2]uint64{uint64(sp), pn}] {
					break
				}
				if frames, _ := decodeFrames(payload); hasClose(frames) {
					seen[[2]uint64{uint64(sp), pn}] = true
					rec := trace.recordMeta(false, d.at, h.Type, v, sp, pn, h.DCID, h.SCID, len(pkt), len(d.b), payload, pktMeta{firstByte: p[0]})
					rec.ev.Frames = append(rec.ev.Frames, "(opened by the tester from the raw datagram and its key log; the client had not processed it)")
				}
				break
			}
			if !opened && sp > spaceInitial {
				missing = append(missing, unopened{at: d.at, ptype: packetTypeName(h.Type), size: len(pkt)})
			}
		}
	}
	return missing
}

func hasClose(frames []wire.Frame) bool {
	for _, f := range frames {
		if _, ok := f.(*wire.ConnectionCloseFrame); ok {
			return true
		}
	}
	return false
}

// serverKeys returns the keys that may protect the target's packets of
// type pt: the server's Initial keys from the client's Destination
// Connection ID, the others from the key log (every secret of the
// scenario, every cipher suite that fits its length, and for 1-RTT the
// next key phase too).
func serverKeys(log string, version uint32, pt wire.PacketType, dcid []byte) []*protect.Keys {
	var out []*protect.Keys
	if pt == wire.PacketTypeInitial {
		if _, sk, err := protect.NewInitialKeys(version, dcid); err == nil && dcid != nil {
			out = append(out, sk)
		}
		return out
	}
	label := "SERVER_TRAFFIC_SECRET_0"
	if pt == wire.PacketTypeHandshake {
		label = "SERVER_HANDSHAKE_TRAFFIC_SECRET"
	}
	return append(out, keylogKeys(log, label, version, pt)...)
}

// unopenedSentence says what arrived that the tester could not open, for
// an inconclusive verdict: "closed at a level the tester has no keys for"
// is as far as the wire lets it go.
func unopenedSentence(who string, us []unopened) string {
	n := map[string]int{}
	var order []string
	for _, u := range us {
		if n[u.ptype] == 0 {
			order = append(order, u.ptype)
		}
		n[u.ptype]++
	}
	var parts []string
	for _, pt := range order {
		parts = append(parts, fmt.Sprintf("%d %s", n[pt], pt))
	}
	return fmt.Sprintf(
		"The %s sent %s packet(s) that no key the tester holds opens: it may have closed at a level the tester has no keys for, so whether it closed cannot be told.",
		who,
		strings.Join(parts, " and "),
	)
}

// unopenedEvents renders unopened packets as evidence.
func unopenedEvents(start time.Time, us []unopened) []PacketEvent {
	var out []PacketEvent
	for _, u := range lastNUnopened(us, 3) {
		out = append(out, PacketEvent{Time: u.at.Sub(start), Direction: "received", Role: Response, PacketType: u.ptype, Number: -1, Size: u.size,
			Frames: []string{"(not opened: the tester holds no key for this level)"}})
	}
	return out
}

func lastNUnopened(us []unopened, n int) []unopened {
	if len(us) > n {
		return us[len(us)-n:]
	}
	return us
}

// markTime is when the packet at recorder index mark was recorded, or now
// when nothing was recorded since.
func (t *T) markTime(mark int) time.Time {
	ps := t.rec.snapshot()
	if mark >= 0 && mark < len(ps) {
		return ps[mark].at
	}
	return time.Now()
}

// keylogKeys derives the packet protection keys of every key log line with
// label: each TLS 1.3 suite the secret's length allows, and for 1-RTT the
// next key phase too.
func keylogKeys(log, label string, version uint32, pt wire.PacketType) []*protect.Keys {
	var out []*protect.Keys
	for _, line := range strings.Split(log, "\n") {
		f := strings.Fields(line)
		if len(f) != 3 || f[0] != label {
			continue
		}
		secret, err := hexDecode(f[2])
		if err != nil {
			continue
		}
		suites := []uint16{tls.TLS_AES_128_GCM_SHA256, tls.TLS_CHACHA20_POLY1305_SHA256}
		if len(secret) == 48 {
			suites = []uint16{tls.TLS_AES_256_GCM_SHA384}
		}
		for _, suite := range suites {
			k, err := protect.NewKeys(version, suite, secret)
			if err != nil {
				continue
			}
			out = append(out, k)
			if pt == wire.PacketType1RTT {
				if next, err := k.Next(); err == nil {
					out = append(out, next)
				}
			}
		}
	}
	return out
}
