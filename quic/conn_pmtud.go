package quic

import (
	"time"

	"github.com/quiver-quic/quiver/qlog"
	"github.com/quiver-quic/quiver/quic/recovery"
	"github.com/quiver-quic/quiver/quic/wire"
)

// DPLPMTUD (RFC 9000 §14.3, RFC 8899) on the connection's path.
//
// RFC 9000 §14.3: "Endpoints SHOULD set the initial value of BASE_PLPMTU
// ... to be consistent with QUIC's smallest allowed maximum datagram size"
// and "A QUIC sender can therefore enter the DPLPMTUD BASE state ... when
// the QUIC connection handshake has been completed." The search sends
// PING+PADDING probes (§14.4: "Endpoints could limit the content of PMTU
// probes to PING and PADDING frames"), first at the largest size allowed
// (the common answer, found in one round trip), then by binary search.
// A size fails after MAX_PROBES lost probes (RFC 8899 §5.1.2).

const (
	// pmtudMaxProbes is RFC 8899 §5.1.2 MAX_PROBES: "The default value of
	// MAX_PROBES is 3."
	pmtudMaxProbes = 3
	// pmtudRaiseInterval is RFC 8899 §5.1.1 PMTU_RAISE_TIMER: "The
	// default value is 600 seconds". After a search ends below the
	// largest size, the sender probes again this long later.
	pmtudRaiseInterval = 600 * time.Second
	// pmtudBlackHoleLosses is how many packets larger than the base size,
	// each sent after the last such packet that was acknowledged, must be
	// lost before the path is taken for a black hole (RFC 8899 §4.3:
	// "Black-hole detection").
	pmtudBlackHoleLosses = 3
)

// pmtudState is the search state of one path. Its methods take now and
// return what changed; the connection acts on it.
type pmtudState struct {
	enabled bool
	started bool
	base    int // BASE_PLPMTU
	cur     int // PLPMTU: the largest datagram sent outside probes
	max     int // MAX_PLPMTU, within the peer's max_udp_payload_size

	searching bool
	lo, hi    int  // lo works; hi is the largest size not known to fail
	triedHi   bool // a probe of hi failed once: binary search from now on
	// probeSize and probePN describe the probe in flight (size 0: none).
	probeSize   int
	probePN     uint64
	probeLosses int // PROBE_COUNT: losses at the size being probed
	raiseAt     time.Time

	// Black hole detection: the largest acknowledged packet larger than
	// base, and the losses of such packets sent after it.
	ackedBig    bool
	ackedBigPN  uint64
	lostBig     int
	blackHoles  int
	probesSent  int
	probesLost  int
	searchesRun int
}

// init sets the sizes; the search starts with start.
func (s *pmtudState) init(enabled bool, base, max int) {
	*s = pmtudState{enabled: enabled, base: base, cur: base, max: max}
}

// start enters the search once the handshake is confirmed, with max
// lowered to what the peer accepts.
func (s *pmtudState) start(now time.Time, peerMax int) {
	if s.started {
		return
	}
	s.started = true
	if peerMax > 0 {
		s.max = max(min(s.max, peerMax), s.base)
	}
	if s.enabled {
		s.search(now)
	}
}

// search begins a search from the current size up to max.
func (s *pmtudState) search(now time.Time) {
	s.raiseAt = time.Time{}
	if s.cur >= s.max {
		s.searching = false
		return
	}
	s.searching = true
	s.lo, s.hi, s.triedHi = s.cur, s.max, false
	s.probeSize, s.probeLosses = 0, 0
	s.searchesRun++
}

// candidate is the next size to probe.
func (s *pmtudState) candidate() int {
	if !s.triedHi {
		return s.hi
	}
	return (s.lo + s.hi + 1) / 2
}

// probeDue returns the size of the probe to send now, if one is due.
func (s *pmtudState) probeDue(now time.Time) (int, bool) {
	if !s.enabled || !s.started || s.probeSize != 0 {
		return 0, false
	}
	if !s.searching {
		// RFC 8899 §5.2: in SEARCH_COMPLETE, "When the PMTU_RAISE_TIMER
		// expires, the PL ... re-enters the SEARCHING state".
		if s.raiseAt.IsZero() || now.Before(s.raiseAt) {
			return 0, false
		}
		s.search(now)
		if !s.searching {
			return 0, false
		}
	}
	return s.candidate(), true
}

// deadline is when the raise timer fires (zero: none).
func (s *pmtudState) deadline() time.Time {
	if !s.enabled || s.searching {
		return time.Time{}
	}
	return s.raiseAt
}

func (s *pmtudState) onProbeSent(pn uint64, size int) {
	s.probeSize, s.probePN = size, pn
	s.probesSent++
}

// onProbeAcked takes a probe's acknowledgment: the path carries size.
// It reports whether the size in use changed.
func (s *pmtudState) onProbeAcked(now time.Time, pn uint64, size int) bool {
	if s.probeSize == 0 || pn != s.probePN {
		return false // a probe from before a reset
	}
	s.probeSize, s.probeLosses = 0, 0
	changed := false
	if size > s.cur {
		s.cur, changed = size, true
	}
	s.lo = max(s.lo, size)
	if s.lo >= s.hi {
		s.complete(now)
	}
	return changed
}

// onProbeLost takes a probe's loss, which is no congestion signal (RFC
// 9000 §14.4). After MAX_PROBES losses the size is taken to fail.
func (s *pmtudState) onProbeLost(now time.Time, pn uint64, size int) {
	s.probesLost++
	if s.probeSize == 0 || pn != s.probePN {
		return
	}
	s.probeSize = 0
	s.probeLosses++
	if s.probeLosses < pmtudMaxProbes {
		return
	}
	s.probeLosses = 0
	s.hi, s.triedHi = size-1, true
	if s.lo >= s.hi {
		s.complete(now)
	}
}

// complete ends a search (RFC 8899 SEARCH_COMPLETE); the raise timer
// brings the next one when the path may carry more.
func (s *pmtudState) complete(now time.Time) {
	s.searching = false
	if s.cur < s.max {
		s.raiseAt = now.Add(pmtudRaiseInterval)
	}
}

// onPacketAcked notes the acknowledgment of an ordinary packet.
func (s *pmtudState) onPacketAcked(pn uint64, size int) {
	if size <= s.base {
		return
	}
	if !s.ackedBig || pn > s.ackedBigPN {
		s.ackedBig, s.ackedBigPN = true, pn
	}
	s.lostBig = 0
}

// onPacketLost notes the loss of an ordinary packet and reports a black
// hole: packets larger than the base size keep getting lost while none
// sent after the last acknowledged one arrives. Congestion losses are
// followed by acknowledgments of later large packets and do not count.
// On a black hole the size falls back to base (RFC 8899 §5.2: "the PL
// ... enters the BASE state") and a search starts at once, first at the
// old size: if the losses were congestion after all, one round trip
// restores it.
func (s *pmtudState) onPacketLost(now time.Time, pn uint64, size int) bool {
	if !s.enabled || size <= s.base || s.cur <= s.base {
		return false
	}
	if s.ackedBig && pn <= s.ackedBigPN {
		return false
	}
	s.lostBig++
	if s.lostBig < pmtudBlackHoleLosses {
		return false
	}
	old := s.cur
	s.blackHoles++
	s.lostBig = 0
	s.cur = s.base
	s.search(now)
	s.hi = min(old, s.max)
	return true
}

// reset starts over on a new path (RFC 9000 §14: "Each pair of local and
// remote addresses could have a different PMTU").
func (s *pmtudState) reset(now time.Time) bool {
	if !s.started || s.cur == s.base && !s.searching {
		return false
	}
	changed := s.cur != s.base
	s.cur = s.base
	s.ackedBig, s.lostBig = false, 0
	if s.enabled {
		s.search(now)
	}
	return changed
}

// pmtudInit configures DPLPMTUD from the connection's Config.
func (c *Conn) pmtudInit() {
	cfg := c.config
	c.pmtud.init(!cfg.DisablePathMTUDiscovery, cfg.initialPacketSize(), cfg.maxPacketSize())
}

// pmtudStart runs when the handshake is confirmed.
func (c *Conn) pmtudStart(now time.Time) {
	peerMax := 0
	if c.havePeerTP {
		peerMax = int(min(c.peerParams.tp.MaxUDPPayloadSize, uint64(maxPacketSizeLimit)))
	}
	c.pmtud.start(now, peerMax)
	c.pmtudChanged(now, 0)
}

// pmtudChanged publishes the size in use after a change from old (0: the
// first value).
func (c *Conn) pmtudChanged(now time.Time, old int) {
	cur := c.pmtud.cur
	c.mu.Lock()
	c.info.MaxDatagramSize = cur
	c.mu.Unlock()
	if old != 0 {
		c.loss.cc.SetMaxDatagramSize(cur)
		c.loss.pacer.p.SetMaxDatagramSize(cur)
	}
	if c.qlogOn() {
		c.qlog.Record(now, qlog.MTUUpdated{Old: uint32(old), New: uint32(cur), Done: !c.pmtud.searching})
	}
}

// pmtudReset starts the search over on a new path.
func (c *Conn) pmtudReset(now time.Time) {
	old := c.pmtud.cur
	if c.pmtud.reset(now) {
		c.pmtudChanged(now, old)
	}
}

// pmtudOnAcked and pmtudOnLost feed every acknowledged or lost 1-RTT
// packet to the search and to black hole detection.
func (c *Conn) pmtudOnAcked(now time.Time, p recovery.SentPacket) {
	if p.OtherPath {
		return
	}
	if p.PMTUProbe {
		old := c.pmtud.cur
		if c.pmtud.onProbeAcked(now, uint64(p.PacketNumber), int(p.Size)) {
			c.pmtudChanged(now, old)
		}
		return
	}
	c.pmtud.onPacketAcked(uint64(p.PacketNumber), int(p.Size))
}

func (c *Conn) pmtudOnLost(now time.Time, p recovery.SentPacket) {
	if p.OtherPath {
		return
	}
	if p.PMTUProbe {
		c.pmtud.onProbeLost(now, uint64(p.PacketNumber), int(p.Size))
		return
	}
	old := c.pmtud.cur
	if c.pmtud.onPacketLost(now, uint64(p.PacketNumber), int(p.Size)) {
		debugf("pmtud: black hole at %d bytes, back to %d", old, c.pmtud.cur)
		c.pmtudChanged(now, old)
	}
}

// pmtudProbeDue returns the size of a probe to send now. Probes wait for
// a validated path and room in the congestion window (RFC 9000 §14.4:
// "PMTU probes consume congestion window").
func (c *Conn) pmtudProbeDue(now time.Time) (int, bool) {
	if !c.handshakeConfirmed || c.closing.active() || c.appKeys.Write() == nil {
		return 0, false
	}
	if !c.isClient && !c.addrValidated || c.cids.challengePending {
		return 0, false
	}
	if !c.loss.ld.CanSend() {
		return 0, false
	}
	return c.pmtud.probeDue(now)
}

// buildPMTUProbe seals a 1-RTT packet of PING and PADDING filling a
// datagram of size bytes, recorded for loss detection as a probe.
func (c *Conn) buildPMTUProbe(now time.Time, size int) []byte {
	pn := c.spaces[appSpace].nextPN
	b := c.buildLonePacket(now, c.peerCID, []byte{byte(wire.FrameTypePing)}, size, loneProbe)
	if b != nil {
		c.pmtud.onProbeSent(pn, len(b))
	}
	return b
}
