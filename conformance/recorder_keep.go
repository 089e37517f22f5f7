package conformance

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/quiver-quic/quiver/quic/wire"
)

// What the recorder keeps of a scenario's packets, so that a download of
// any size costs bounded memory (issue 19). The first keepFullPerGroup
// packets of each group (one connection, one direction) are kept in full,
// whatever they carry. After that a bulk packet, one that carries only
// STREAM data, ACK frames from the tester and PADDING, in the same key
// phase, path and ECN mark as the group's previous packet and less than
// bulkGap after it, is counted and summarised (bulkSummary) instead; any
// other packet is still kept, up to keepOtherPerScenario of them. The record only grows: kept packets keep
// their order and their index, so the marks judges take (len of a
// snapshot) stay valid.
//
// Every packet the recorder does not keep leaves a ledgerEntry (its
// packet number, space, path, first byte, size, ack-eliciting flag, and
// for the tester's own packets the largest number its ACK frames cover),
// so that the run-wide checks on packet numbers (inv-pn-monotonic,
// inv-pn-length-sufficient, inv-ack-only-received) and
// ack-not-for-ack-only still see every packet of every connection.
//
// A verdict that rests on the record could change with what was dropped:
// a fail judged while the record was summarised becomes inconclusive with
// that reason (keptEvidenceChecks), unless the scenario said its judge
// does not read the record (T.ownEvidence) or reads only packets that are
// never summarised (T.judgesUnsummarised). A scenario whose judge needs
// every packet asks for it (T.keepEverything).
const (
	keepFullPerGroup     = 2000
	keepOtherPerScenario = 10000
	// bulkGap: a packet that comes this long after the group's previous
	// one is not bulk (the first packet after a blackhole or a stall is
	// what judges look for).
	bulkGap = 100 * time.Millisecond
)

// groupKey names one group of packets: a connection and a direction.
type groupKey struct {
	conn int
	sent bool
}

// groupState is what the recorder tracks per group to decide what to keep.
type groupState struct {
	seen  int
	last  time.Duration // when the previous packet was recorded
	phase int           // key phase of the previous packet (KeyPhase*2 + Key Phase bit)
	path  int
	ecn   uint8
	bulk  *bulkSummary
}

// bulkSummary describes the bulk packets of a group that were not kept.
type bulkSummary struct {
	packets     int
	bytes       int
	first, last time.Duration
	frames      map[string]int
}

// ledgerEntry is what remains of a packet the recorder did not keep.
type ledgerEntry struct {
	before     int32 // index of the kept packet it precedes
	conn       int32
	pn         uint64
	ackLargest uint64 // the largest number the tester's ACK frames covered
	at         time.Duration
	size       int32
	space      int8
	path       int8
	firstByte  byte
	sent       bool
	hasAck     bool
	// ackEliciting is the packet's own flag (a sent bulk packet with
	// STREAM data is ack-eliciting, one with ACK frames only is not).
	ackEliciting bool
	// ackOther is set on a received packet with ACK frames (an "other"
	// packet past keepOtherPerScenario): its ranges are lost.
	ackOther bool
}

// keepState is the recorder's keeping policy and what it dropped.
type keepState struct {
	keepAll   bool
	groups    map[groupKey]*groupState
	otherKept int
	dropped   int
	// otherDropped counts the packets that were not bulk but went past
	// keepOtherPerScenario.
	otherDropped int
	ledger       []ledgerEntry
	// datagramsDropped counts the short-header datagrams past
	// keepDatagramBytes whose full record was not kept (they went to the
	// capture all the same); dgrams holds what remains of each, addrs the
	// addresses they name.
	datagramsDropped int
	dgrams           []dgramEntry
	addrs            []netip.AddrPort
	// readAfterDrop is set when a judge read the record (snapshot, wait,
	// mark) after a packet had been dropped.
	readAfterDrop bool
}

// keepEverything makes the recorder keep every packet of the scenario:
// for judges that read every packet of a long transfer (rec-burst-limit).
// Call it before the traffic starts.
func (t *T) keepEverything() {
	t.rec.mu.Lock()
	t.rec.keep.keepAll = true
	t.rec.mu.Unlock()
}

// ownEvidence says that the scenario's fails rest on what its judge
// logged of every packet itself (a Probe callback), not on the record:
// they stand even when the recorder summarised packets.
func (t *T) ownEvidence() {
	t.mu.Lock()
	t.ownLog = true
	t.mu.Unlock()
}

// judgesUnsummarised says that the scenario's judge reads only packets
// the recorder never summarises (packets with frames other than STREAM,
// PADDING and the tester's ACKs, the first on a new path, in a new key
// phase or after a silence), so that its fails stand while bulk packets
// were summarised, as long as no other packet was dropped.
func (t *T) judgesUnsummarised() {
	t.mu.Lock()
	t.unsummarised = true
	t.mu.Unlock()
}

// phaseOf is the key phase a packet shows: the raw client's phase count
// and the Key Phase bit of the unprotected first byte.
func phaseOf(p *packet) int {
	ph := p.ev.KeyPhase * 2
	if p.space == 2 && p.firstByte&0x80 == 0 {
		ph += int(p.firstByte>>2) & 1
	}
	return ph
}

// isBulk reports whether p carries only bulk data: STREAM frames without
// FIN, PADDING, and ACK frames in the tester's own packets.
func isBulk(p *packet) bool {
	if p.space != 2 || p.unparsed != "" || len(p.frames) == 0 || p.ev.Frames != nil {
		return false
	}
	stream := false
	for _, f := range p.frames {
		switch f := f.(type) {
		case *wire.StreamFrame:
			if f.Fin {
				return false
			}
			stream = true
		case *wire.PaddingFrame:
		case *wire.AckFrame:
			if !p.sent {
				return false
			}
		default:
			return false
		}
	}
	return stream || p.sent
}

// keepPacketLocked decides whether p joins the record; a packet that does
// not is summarised and leaves a ledger entry. r.mu is held.
func (r *recorder) keepPacketLocked(p *packet) bool {
	k := &r.keep
	if k.groups == nil {
		k.groups = map[groupKey]*groupState{}
	}
	g := k.groups[groupKey{p.conn, p.sent}]
	if g == nil {
		g = &groupState{}
		k.groups[groupKey{p.conn, p.sent}] = g
	}
	ph := phaseOf(p)
	same := g.seen > 0 && ph == g.phase && p.path == g.path && p.ecn == g.ecn && p.ev.Time-g.last < bulkGap
	g.seen++
	g.phase, g.path, g.ecn, g.last = ph, p.path, p.ecn, p.ev.Time
	switch {
	case k.keepAll || g.seen <= keepFullPerGroup:
		return true
	case same && isBulk(p):
		if g.bulk == nil {
			g.bulk = &bulkSummary{first: p.ev.Time, frames: map[string]int{}}
		}
		g.bulk.packets++
		g.bulk.bytes += p.ev.Size
		g.bulk.last = p.ev.Time
		for _, f := range p.frames {
			g.bulk.frames[f.Type().String()]++
		}
	case k.otherKept < keepOtherPerScenario:
		k.otherKept++
		return true
	default:
		k.otherDropped++
	}
	k.dropped++
	e := ledgerEntry{before: int32(len(r.packets)), conn: int32(p.conn), pn: p.pn, at: p.ev.Time, size: int32(p.ev.Size),
		space: int8(p.space), path: int8(p.path), firstByte: p.firstByte, sent: p.sent, ackEliciting: p.ackEliciting}
	for _, f := range p.frames {
		if a, ok := f.(*wire.AckFrame); ok && len(a.Ranges) > 0 {
			if p.sent {
				e.ackLargest = max(e.ackLargest, largestIn(a))
				e.hasAck = true
			} else {
				e.ackOther = true
			}
		}
	}
	k.ledger = append(k.ledger, e)
	return false
}

// dgramPrefix is how much of a short-header datagram a dgramEntry keeps:
// the first byte and the longest Destination Connection ID.
const dgramPrefix = 21

// dgramEntry is what remains of a datagram whose record was not kept.
type dgramEntry struct {
	before      int32 // index of the kept record it precedes
	size        int32
	at          time.Duration
	local, peer uint8 // indexes into keepState.addrs
	sent        bool
	n           uint8
	prefix      [dgramPrefix]byte
}

// addrIndexLocked returns a's index in r.keep.addrs, adding it.
func (r *recorder) addrIndexLocked(a netip.AddrPort) uint8 {
	for i, x := range r.keep.addrs {
		if x == a {
			return uint8(i)
		}
	}
	if len(r.keep.addrs) == 256 {
		return 255 // more addresses than any scenario uses: the last stands
	}
	r.keep.addrs = append(r.keep.addrs, a)
	return uint8(len(r.keep.addrs) - 1)
}

// keepDatagramLocked reports whether d's record is kept: every datagram
// until keepDatagramBytes have been kept whole, every long-header one,
// and all of them when the scenario keeps everything. Of the others a
// dgramEntry remains (time, size, addresses, first bytes). r.mu is held.
func (r *recorder) keepDatagramLocked(d *datagramRec) bool {
	if r.keep.keepAll || r.keptBytes+len(d.b) <= keepDatagramBytes || len(d.b) == 0 || d.b[0]&0x80 != 0 {
		return true
	}
	r.keep.datagramsDropped++
	e := dgramEntry{before: int32(len(r.datagrams)), size: int32(len(d.b)), at: d.at.Sub(r.start),
		local: r.addrIndexLocked(d.local), peer: r.addrIndexLocked(d.peer), sent: d.sent}
	e.n = uint8(copy(e.prefix[:], d.b))
	r.keep.dgrams = append(r.keep.dgrams, e)
	return false
}

// allDatagramsLocked returns every datagram of the scenario in order: the
// kept records, and for the others a record with their first bytes only
// (truncated). The records must not be changed. r.mu is held.
func (r *recorder) allDatagramsLocked() []datagramRec {
	k := &r.keep
	if len(k.dgrams) == 0 {
		return r.datagrams
	}
	out := make([]datagramRec, 0, len(r.datagrams)+len(k.dgrams))
	j := 0
	for i := 0; i <= len(r.datagrams); i++ {
		for ; j < len(k.dgrams) && int(k.dgrams[j].before) <= i; j++ {
			e := &k.dgrams[j]
			out = append(out, datagramRec{at: r.start.Add(e.at), sent: e.sent, local: k.addrs[e.local], peer: k.addrs[e.peer],
				b: e.prefix[:e.n:e.n], size: int(e.size), truncated: true})
		}
		if i < len(r.datagrams) {
			out = append(out, r.datagrams[i])
		}
	}
	return out
}

// seen returns how many packets connection conn sent (sent) or received
// in all, kept or summarised: the count a sentence gives.
func (r *recorder) seen(conn int, sent bool) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if g := r.keep.groups[groupKey{conn, sent}]; g != nil {
		return g.seen
	}
	return 0
}

// droppedSince returns how many packets connection conn received on path
// after the record's index mark that the recorder summarised.
func (r *recorder) droppedSince(conn, path, mark int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, e := range r.keep.ledger {
		if int(e.conn) == conn && !e.sent && int(e.path) == path && int(e.before) >= mark {
			n++
		}
	}
	return n
}

// record returns connection conn's record with its ledger.
func (t *T) record(conn int) connRecord {
	rs := t.records()
	if conn < 0 || conn >= len(rs) {
		return connRecord{}
	}
	return rs[conn]
}

// noteReadLocked notes that the record is read; r.mu is held.
func (r *recorder) noteReadLocked() {
	if r.keep.dropped > 0 {
		r.keep.readAfterDrop = true
	}
}

// summary describes what the recorder did not keep, for a fact; "" when
// it kept every packet.
func (r *recorder) summary() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := &r.keep
	if k.dropped == 0 && k.datagramsDropped == 0 {
		return ""
	}
	keys := make([]groupKey, 0, len(k.groups))
	for g := range k.groups {
		keys = append(keys, g)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].conn != keys[j].conn {
			return keys[i].conn < keys[j].conn
		}
		return keys[i].sent && !keys[j].sent
	})
	var parts []string
	for _, key := range keys {
		b := k.groups[key].bulk
		if b == nil {
			continue
		}
		dir := "received"
		if key.sent {
			dir = "sent"
		}
		var fs []string
		types := make([]string, 0, len(b.frames))
		for ft := range b.frames {
			types = append(types, ft)
		}
		slices.Sort(types)
		for _, ft := range types {
			fs = append(fs, fmt.Sprintf("%s ×%d", ft, b.frames[ft]))
		}
		parts = append(parts, fmt.Sprintf("connection %d %s %d bulk packets (%d bytes, %v to %v: %s)", key.conn, dir, b.packets, b.bytes,
			b.first.Round(time.Millisecond), b.last.Round(time.Millisecond), strings.Join(fs, ", ")))
	}
	s := fmt.Sprintf("the record kept %d packets and summarised %d", len(r.packets), k.dropped)
	if len(parts) > 0 {
		s += ": " + strings.Join(parts, "; ")
	}
	if k.datagramsDropped > 0 {
		s += fmt.Sprintf("; of %d short-header datagrams past the first %d bytes only the first bytes were kept", k.datagramsDropped, keepDatagramBytes)
	}
	return s
}

// keptEvidenceChecks turns the fails of a scenario whose judge read a
// record with dropped packets into inconclusive checks: the packets the
// recorder summarised might have changed the verdict.
func (t *T) keptEvidenceChecks(checks []CheckResult) []CheckResult {
	t.rec.mu.Lock()
	dropped, other, read := t.rec.keep.dropped, t.rec.keep.otherDropped, t.rec.keep.readAfterDrop
	t.rec.mu.Unlock()
	t.mu.Lock()
	own, unsummarised := t.ownLog, t.unsummarised
	t.mu.Unlock()
	if dropped == 0 || !read || own || unsummarised && other == 0 {
		return checks
	}
	for i := range checks {
		if checks[i].Verdict != Fail {
			continue
		}
		checks[i].Verdict = Inconclusive
		checks[i].Sentence += fmt.Sprintf(
			" (Not a fail: the tester's record kept the first packets of each connection in full but summarised %d later bulk packets, which the judge could not see; the evidence it rests on is incomplete.)",
			dropped,
		)
	}
	return checks
}

// ledgerFor returns the ledger entries of connection conn, each with its
// before index counted among the connection's own kept packets. ps is the
// record.
func ledgerFor(ledger []ledgerEntry, ps []*packet, conns int) [][]ledgerEntry {
	out := make([][]ledgerEntry, conns)
	kept := make([]int32, conns) // kept packets of each connection so far
	i := 0
	for _, e := range ledger {
		for ; i < int(e.before) && i < len(ps); i++ {
			if c := ps[i].conn; c >= 0 && c < conns {
				kept[c]++
			}
		}
		if e.conn < 0 || int(e.conn) >= conns {
			continue
		}
		e.before = kept[e.conn]
		out[e.conn] = append(out[e.conn], e)
	}
	return out
}

// pktView is one packet of a connection as the run-wide checks read it:
// a kept packet, or a ledger entry.
type pktView struct {
	p *packet
	e *ledgerEntry
}

func (v pktView) sent() bool {
	if v.p != nil {
		return v.p.sent
	}
	return v.e.sent
}

func (v pktView) space() int {
	if v.p != nil {
		return v.p.space
	}
	return int(v.e.space)
}

func (v pktView) pn() uint64 {
	if v.p != nil {
		return v.p.pn
	}
	return v.e.pn
}

func (v pktView) path() int {
	if v.p != nil {
		return v.p.path
	}
	return int(v.e.path)
}

// packet returns the kept packet, or one built from the ledger entry for
// the evidence (its frames were not kept).
func (v pktView) packet() *packet {
	if v.p != nil {
		return v.p
	}
	e := v.e
	p := &packet{conn: int(e.conn), sent: e.sent, space: int(e.space), pn: e.pn, firstByte: e.firstByte, path: int(e.path)}
	p.ev = PacketEvent{Time: e.at, Direction: "received", PacketType: "1RTT", Number: int64(e.pn), Size: int(e.size),
		Frames: []string{"(frames not kept: a bulk packet the recorder summarised)"}}
	if e.sent {
		p.ev.Direction = "sent"
	}
	return p
}

// walk calls fn on every packet of the connection in order, kept or in
// the ledger, until fn returns false.
func (c connRecord) walk(fn func(v pktView) bool) {
	j := 0
	for i, p := range c.packets {
		for ; j < len(c.ledger) && int(c.ledger[j].before) <= i; j++ {
			if !fn(pktView{e: &c.ledger[j]}) {
				return
			}
		}
		if !fn(pktView{p: p}) {
			return
		}
	}
	for ; j < len(c.ledger); j++ {
		if !fn(pktView{e: &c.ledger[j]}) {
			return
		}
	}
}
