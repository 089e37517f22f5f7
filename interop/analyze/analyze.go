package analyze

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"sort"

	"github.com/quiver-quic/quiver/keylog"
	"github.com/quiver-quic/quiver/pcap"
	"github.com/quiver-quic/quiver/quic/protect"
	"github.com/quiver-quic/quiver/quic/wire"
)

// Options tune an analysis.
type Options struct {
	// KeyLog holds key log entries besides those embedded in the capture;
	// entries given here win over embedded ones with the same label and
	// client random.
	KeyLog []keylog.Entry
	// ServerAddrs are the server's addresses as the capture shows them.
	// When empty, the destination of the first Initial packet is taken as
	// the server, and further server addresses are learnt from connection
	// IDs.
	ServerAddrs []netip.AddrPort
}

// AnalyzeFile analyzes the capture at path, with the key logs of the
// optional keylogFiles added to the secrets embedded in the capture.
func AnalyzeFile(path string, keylogFiles ...string) (*Trace, error) {
	c, err := pcap.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var opts Options
	for _, f := range keylogFiles {
		fh, err := os.Open(f)
		if err != nil {
			return nil, err
		}
		entries, err := keylog.Parse(fh)
		fh.Close()
		if err != nil {
			return nil, fmt.Errorf("key log %s: %w", f, err)
		}
		opts.KeyLog = append(opts.KeyLog, entries...)
	}
	return Analyze(c, opts)
}

// AnalyzeBytes analyzes a capture held in memory.
func AnalyzeBytes(b []byte, opts Options) (*Trace, error) {
	c, err := pcap.ReadAll(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	return Analyze(c, opts)
}

// Analyze decrypts and decodes every QUIC packet of a capture. Malformed
// input never makes it fail: packets it cannot read are recorded with the
// reason. It returns an error only when the embedded key log is unreadable
// and no other key log was given.
func Analyze(c *pcap.Capture, opts Options) (*Trace, error) {
	a := &analyzer{
		t:           &Trace{},
		keys:        map[string]map[string][]byte{},
		serverCIDs:  map[string]*Conn{},
		clientCIDs:  map[string]*Conn{},
		initialCIDs: map[string]*Conn{},
		byClient:    map[netip.AddrPort]*Conn{},
		serverAddrs: map[netip.AddrPort]bool{},
		serverLens:  map[int]bool{},
		clientLens:  map[int]bool{},
	}
	entries := opts.KeyLog
	var kerr error
	if len(c.Secrets) > 0 {
		embedded, err := keylog.Parse(bytes.NewReader(c.Secrets))
		if err != nil {
			kerr = fmt.Errorf("embedded key log: %w", err)
		}
		entries = keylog.Merge(entries, embedded)
	}
	for _, e := range entries {
		m := a.keys[e.Label]
		if m == nil {
			m = map[string][]byte{}
			a.keys[e.Label] = m
		}
		m[string(e.ClientRandom)] = e.Secret
	}
	a.t.KeyLogEntries = len(entries)
	if kerr != nil && len(opts.KeyLog) == 0 && len(entries) == 0 {
		return nil, kerr
	}
	for _, s := range opts.ServerAddrs {
		a.addServer(s)
	}
	// Captures are not always in time order: an emulated link writes a
	// datagram when it handles it, which can be after a later-stamped one.
	// The analysis follows the wire, so it goes by timestamp.
	order := make([]int, len(c.Packets))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(i, j int) bool { return c.Packets[order[i]].Time.Before(c.Packets[order[j]].Time) })
	for _, i := range order {
		a.datagram(i, &c.Packets[i])
	}
	for _, cn := range a.t.Conns {
		cn.finish()
	}
	return a.t, nil
}

// analyzer is the state of one analysis.
type analyzer struct {
	t    *Trace
	keys map[string]map[string][]byte // label -> client random -> secret

	// Connection lookup. serverCIDs are the CIDs the server chose (the
	// DCIDs of client packets), clientCIDs the CIDs the client chose,
	// initialCIDs the client-chosen DCIDs of first Initials.
	serverCIDs, clientCIDs, initialCIDs map[string]*Conn
	serverLens, clientLens              map[int]bool
	// byClient finds the connection of a zero-length client CID by the
	// client's address.
	byClient    map[netip.AddrPort]*Conn
	serverAddrs map[netip.AddrPort]bool

	parser  wire.Parser
	scratch []byte
}

func (a *analyzer) addServer(s netip.AddrPort) {
	s = netip.AddrPortFrom(s.Addr().Unmap(), s.Port())
	if !a.serverAddrs[s] {
		a.serverAddrs[s] = true
		a.t.ServerAddrs = append(a.t.ServerAddrs, s)
	}
}

// Packet number spaces and encryption levels.
const (
	spaceInitial = iota
	spaceHandshake
	spaceApp
)

// connState is the analyzer's per-connection decryption state.
type connState struct {
	// initialDCIDs are the DCIDs Initial keys may derive from: the
	// original one, then each Retry's SCID.
	initialDCIDs [][]byte
	initKeys     map[initKeyID]*protect.Keys
	version      wire.Version // negotiated, from the server's long headers

	hs      [2]*protect.Keys
	zeroRTT *protect.Keys
	app     [2]*appKeys

	largest [3][2]uint64
	crypto  [2][2]cryptoStream // Initial and Handshake, per direction

	random []byte
	suite  uint16

	sawRetry      bool
	preRetryMaxPN uint64
	retryTokens   [][]byte
	retrySCIDs    [][]byte

	validated     bool
	compatBudget  int
	compatSent    int
	compatDone    bool
	paths         map[[2]netip.AddrPort]*Path
	challenges    map[[8]byte]*Path // server challenges by data
	clientChall   map[[8]byte]*Path // client challenges by data
	streamBytes   [2]uint64
	serverPackets map[*Path]int
	srvChallenges map[[8]byte]bool
	cliResponses  map[[8]byte]bool
}

type initKeyID struct {
	version wire.Version
	dcid    string
	dir     Direction
}

// appKeys follows the 1-RTT keys of one direction across key updates.
type appKeys struct {
	gens []*protect.Keys
	cur  int
}

func (k *appKeys) gen(i int) *protect.Keys {
	for len(k.gens) <= i {
		n, err := k.gens[len(k.gens)-1].Next()
		if err != nil {
			return nil
		}
		k.gens = append(k.gens, n)
	}
	return k.gens[i]
}

func newConn(a *analyzer, odcid []byte) *Conn {
	c := &Conn{Index: len(a.t.Conns), ODCID: clone(odcid)}
	c.st = &connState{
		initialDCIDs:  [][]byte{clone(odcid)},
		initKeys:      map[initKeyID]*protect.Keys{},
		paths:         map[[2]netip.AddrPort]*Path{},
		challenges:    map[[8]byte]*Path{},
		clientChall:   map[[8]byte]*Path{},
		serverPackets: map[*Path]int{},
		srvChallenges: map[[8]byte]bool{},
		cliResponses:  map[[8]byte]bool{},
	}
	for s := range c.st.largest {
		c.st.largest[s] = [2]uint64{wire.NoPacketNumber, wire.NoPacketNumber}
	}
	c.FrameCounts = [2]map[string]int{{}, {}}
	c.StreamStarts = [2]map[uint64]byte{{}, {}}
	a.t.Conns = append(a.t.Conns, c)
	a.initialCIDs[string(odcid)] = c
	return c
}

func (c *Conn) finish() {
	slices.Sort(c.ClientVersions)
	slices.Sort(c.ServerVersions)
	c.ServerChallenges = len(c.st.srvChallenges)
	for d := range c.st.srvChallenges {
		if !c.st.cliResponses[d] {
			c.UnansweredChallenges++
		}
	}
}

func addVersion(vs *[]wire.Version, v wire.Version) {
	if !slices.Contains(*vs, v) {
		*vs = append(*vs, v)
	}
}

func (a *analyzer) addCID(c *Conn, fromServer bool, cid []byte) {
	if fromServer {
		if _, ok := a.serverCIDs[string(cid)]; !ok {
			a.serverCIDs[string(cid)] = c
			a.serverLens[len(cid)] = true
			c.ServerCIDs = append(c.ServerCIDs, clone(cid))
		}
		return
	}
	if len(cid) == 0 {
		a.clientLens[0] = true
		if len(c.ClientCIDs) == 0 {
			c.ClientCIDs = append(c.ClientCIDs, HexBytes{})
		}
		return
	}
	if _, ok := a.clientCIDs[string(cid)]; !ok {
		a.clientCIDs[string(cid)] = c
		a.clientLens[len(cid)] = true
		c.ClientCIDs = append(c.ClientCIDs, clone(cid))
	}
}

// direction decides who sent a datagram: by the server addresses known so
// far, else by the connection IDs it carries, else (for the very first
// Initial) by the rule that the client speaks first.
func (a *analyzer) direction(p *pcap.Packet) (Direction, bool) {
	src := netip.AddrPortFrom(p.Src.Addr().Unmap(), p.Src.Port())
	dst := netip.AddrPortFrom(p.Dst.Addr().Unmap(), p.Dst.Port())
	switch {
	case a.serverAddrs[src]:
		return FromServer, true
	case a.serverAddrs[dst]:
		return FromClient, true
	}
	b := p.Payload
	if len(b) == 0 {
		return 0, false
	}
	if wire.IsLongHeader(b) {
		h, err := wire.ParseHeader(b, 0)
		if err != nil && !errors.Is(err, wire.ErrUnsupportedVersion) {
			return 0, false
		}
		if a.serverCIDs[string(h.DCID)] != nil || a.initialCIDs[string(h.DCID)] != nil {
			a.addServer(dst)
			return FromClient, true
		}
		if len(h.DCID) > 0 && a.clientCIDs[string(h.DCID)] != nil {
			a.addServer(src)
			return FromServer, true
		}
		if len(a.serverAddrs) == 0 && (h.Type == wire.PacketTypeInitial || errors.Is(err, wire.ErrUnsupportedVersion)) {
			a.addServer(dst)
			return FromClient, true
		}
		return 0, false
	}
	if a.lookupShort(b, a.serverLens, a.serverCIDs, netip.AddrPort{}) != nil {
		a.addServer(dst)
		return FromClient, true
	}
	if a.lookupShort(b, a.clientLens, a.clientCIDs, dst) != nil {
		a.addServer(src)
		return FromServer, true
	}
	return 0, false
}

// lookupShort finds the connection of a short-header packet by trying the
// connection ID lengths in use, longest first.
func (a *analyzer) lookupShort(b []byte, lens map[int]bool, m map[string]*Conn, client netip.AddrPort) *Conn {
	ls := make([]int, 0, len(lens))
	for l := range lens {
		ls = append(ls, l)
	}
	sort.Sort(sort.Reverse(sort.IntSlice(ls)))
	for _, l := range ls {
		if l == 0 {
			if c := a.byClient[client]; c != nil {
				return c
			}
			continue
		}
		if len(b) >= 1+l {
			if c := m[string(b[1:1+l])]; c != nil {
				return c
			}
		}
	}
	return nil
}

// cidLen returns the DCID length of the connection for a short header.
func cidLen(c *Conn, dir Direction, b []byte) int {
	cids := c.ClientCIDs
	if dir == FromClient {
		cids = c.ServerCIDs
	}
	best := -1
	for _, cid := range cids {
		if len(b) >= 1+len(cid) && bytes.Equal(b[1:1+len(cid)], cid) && len(cid) > best {
			best = len(cid)
		}
	}
	if best < 0 {
		return 0
	}
	return best
}

func (a *analyzer) datagram(i int, p *pcap.Packet) {
	a.t.Datagrams++
	dir, ok := a.direction(p)
	b := p.Payload
	if !ok {
		a.record(&Packet{Datagram: i, Time: p.Time, Src: p.Src, Dst: p.Dst, Size: len(b), Conn: -1,
			TypeName: "unknown", Error: "no connection"}, nil)
		return
	}
	var first *Conn
	var kinds packetKinds
	for len(b) > 0 {
		if allZero(b) {
			break // padding after the last coalesced packet
		}
		pk, c, n := a.packet(i, p, dir, b)
		a.record(pk, c)
		if first == nil && c != nil {
			first = c
		}
		if c != nil && c == first {
			kinds.add(pk, c)
		}
		if n <= 0 || n > len(b) {
			break
		}
		b = b[n:]
	}
	if first != nil {
		// A client with zero-length connection IDs is found by its
		// address, which changes with NAT rebinding or migration: the
		// latest address it sent from is where the server's packets go.
		if dir == FromClient && a.clientLens[0] && slices.ContainsFunc(first.ClientCIDs, func(c HexBytes) bool { return len(c) == 0 }) {
			a.byClient[p.Src] = first
		}
		a.account(first, dir, p, &kinds)
	}
}

func allZero(b []byte) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}

// packetKinds summarises what a datagram carried for the address
// validation walks.
type packetKinds struct {
	handshake      bool // a Handshake packet
	serverCID      bool // a long header to a server-chosen CID of 8+ bytes
	initial        int  // number of Initial packets
	longPackets    int
	pathChallenges [][8]byte
	pathResponses  [][8]byte
	nonProbing     bool
}

func (k *packetKinds) add(p *Packet, c *Conn) {
	switch p.Type {
	case wire.PacketTypeHandshake:
		k.handshake = true
	case wire.PacketTypeInitial:
		k.initial++
	}
	if p.Type.IsLong() {
		k.longPackets++
		if p.Dir == FromClient && len(p.DCID) >= 8 && slices.ContainsFunc(c.ServerCIDs, func(s HexBytes) bool { return bytes.Equal(s, p.DCID) }) &&
			!slices.ContainsFunc(c.st.retrySCIDs, func(s []byte) bool { return bytes.Equal(s, p.DCID) }) {
			k.serverCID = true
		}
	}
	for _, f := range p.Frames {
		switch f.Type {
		case wire.FrameTypePathChallenge:
			k.pathChallenges = append(k.pathChallenges, [8]byte(f.Data))
		case wire.FrameTypePathResponse:
			k.pathResponses = append(k.pathResponses, [8]byte(f.Data))
		}
		if !f.Type.Probing() {
			k.nonProbing = true
		}
	}
}

func (a *analyzer) record(pk *Packet, c *Conn) {
	if c == nil {
		pk.Conn = -1
		a.t.Unattributed++
	} else {
		pk.Conn = c.Index
		c.Packets = append(c.Packets, pk)
		if c.First.IsZero() {
			c.First = pk.Time
		}
		c.Last = pk.Time
	}
	if !pk.Decrypted && pk.Type != wire.PacketTypeRetry && pk.Type != wire.PacketTypeVersionNegotiation {
		a.t.Undecryptable++
	}
	pk.TypeName = typeName(pk.Type)
	a.t.Packets = append(a.t.Packets, pk)
}

func typeName(t wire.PacketType) string {
	switch t {
	case wire.PacketTypeInitial:
		return "initial"
	case wire.PacketType0RTT:
		return "0rtt"
	case wire.PacketTypeHandshake:
		return "handshake"
	case wire.PacketTypeRetry:
		return "retry"
	case wire.PacketTypeVersionNegotiation:
		return "version_negotiation"
	case wire.PacketType1RTT:
		return "1rtt"
	}
	return "unknown"
}

// packet reads the packet at the start of b and returns it, its connection
// and its length within the datagram.
func (a *analyzer) packet(i int, p *pcap.Packet, dir Direction, b []byte) (*Packet, *Conn, int) {
	pk := &Packet{Datagram: i, Time: p.Time, Dir: dir, Src: p.Src, Dst: p.Dst}
	if !wire.IsLongHeader(b) {
		return a.shortPacket(pk, dir, b)
	}
	h, err := wire.ParseHeader(b, 0)
	pk.Version, pk.DCID, pk.SCID = h.Version, clone(h.DCID), clone(h.SCID)
	if errors.Is(err, wire.ErrUnsupportedVersion) {
		// An unknown version: only the invariant fields can be read
		// (RFC 8999). A client greasing the version starts this way.
		pk.Size = len(b)
		pk.Error = "unsupported version " + h.Version.String()
		var c *Conn
		if dir == FromClient {
			c = a.initialCIDs[string(h.DCID)]
		}
		return pk, c, len(b)
	}
	if err != nil {
		pk.Size = len(b)
		pk.Error = "header: " + err.Error()
		return pk, nil, len(b)
	}
	pk.Type, pk.Size, pk.Token = h.Type, h.PacketLen, clone(h.Token)
	switch h.Type {
	case wire.PacketTypeVersionNegotiation:
		return a.versionNegotiation(pk, h, b)
	case wire.PacketTypeRetry:
		return a.retry(pk, b)
	}
	c := a.lookupLong(pk, dir, h)
	raw := b[:h.PacketLen]
	if c == nil {
		if dir == FromClient && h.Type == wire.PacketTypeInitial {
			if c = a.newInitial(pk, h, raw); c != nil {
				return pk, c, h.PacketLen
			}
		}
		pk.Error = "no connection"
		return pk, nil, h.PacketLen
	}
	a.longSeen(c, pk, dir, h)
	a.openLong(c, pk, dir, h, raw)
	return pk, c, h.PacketLen
}

// lookupLong finds the connection of a long-header packet.
func (a *analyzer) lookupLong(pk *Packet, dir Direction, h wire.Header) *Conn {
	if dir == FromClient {
		if c := a.serverCIDs[string(h.DCID)]; c != nil {
			return c
		}
		if c := a.initialCIDs[string(h.DCID)]; c != nil {
			return c
		}
		return nil
	}
	if len(h.DCID) == 0 {
		return a.byClient[pk.Dst]
	}
	return a.clientCIDs[string(h.DCID)]
}

// longSeen records the header facts of a long-header packet.
func (a *analyzer) longSeen(c *Conn, pk *Packet, dir Direction, h wire.Header) {
	if dir == FromClient {
		addVersion(&c.ClientVersions, h.Version)
		a.addCID(c, false, h.SCID)
		if len(h.SCID) == 0 {
			a.byClient[pk.Src] = c
		}
		if c.Client == (netip.AddrPort{}) {
			c.Client, c.Server = pk.Src, pk.Dst
		}
		return
	}
	addVersion(&c.ServerVersions, h.Version)
	c.st.version = h.Version
	a.addCID(c, true, h.SCID)
	if h.Type == wire.PacketTypeInitial && !slices.ContainsFunc(c.ServerInitialSCIDs, func(s HexBytes) bool { return bytes.Equal(s, h.SCID) }) {
		c.ServerInitialSCIDs = append(c.ServerInitialSCIDs, clone(h.SCID))
	}
}

// newInitial starts a connection at a client Initial with an unknown DCID,
// if the DCID's Initial keys open it (a corrupted header does not start a
// phantom connection).
func (a *analyzer) newInitial(pk *Packet, h wire.Header, raw []byte) *Conn {
	ck, _, err := protect.NewInitialKeys(uint32(h.Version), h.DCID)
	if err != nil {
		return nil
	}
	pn, kp, plain, ok := a.open(raw, h.PNOffset, true, ck, wire.NoPacketNumber)
	if !ok {
		return nil
	}
	c := newConn(a, h.DCID)
	a.longSeen(c, pk, FromClient, h)
	c.st.initKeys[initKeyID{h.Version, string(h.DCID), FromClient}] = ck
	a.decrypted(c, pk, FromClient, spaceInitial, pn, kp, plain)
	return c
}

// initialKeys returns the Initial keys of one direction for each DCID the
// connection's Initial keys may derive from, most recent first.
func (a *analyzer) initialKeys(c *Conn, v wire.Version, dir Direction) []*protect.Keys {
	var out []*protect.Keys
	for i := len(c.st.initialDCIDs) - 1; i >= 0; i-- {
		d := c.st.initialDCIDs[i]
		id := initKeyID{v, string(d), dir}
		k, ok := c.st.initKeys[id]
		if !ok {
			ck, sk, err := protect.NewInitialKeys(uint32(v), d)
			if err == nil {
				c.st.initKeys[initKeyID{v, string(d), FromClient}] = ck
				c.st.initKeys[initKeyID{v, string(d), FromServer}] = sk
				k = ck
				if dir == FromServer {
					k = sk
				}
			} else {
				c.st.initKeys[id] = nil
			}
		}
		if k != nil {
			out = append(out, k)
		}
	}
	return out
}

var allSuites = []uint16{tls.TLS_AES_128_GCM_SHA256, tls.TLS_AES_256_GCM_SHA384, tls.TLS_CHACHA20_POLY1305_SHA256}

// secretKeys derives keys from a key log secret, with the connection's
// cipher suite when the ServerHello told it, else with every suite.
func (a *analyzer) secretKeys(c *Conn, v wire.Version, label string) []*protect.Keys {
	if c.st.random == nil {
		return nil
	}
	secret := a.keys[label][string(c.st.random)]
	if secret == nil {
		return nil
	}
	suites := allSuites
	if c.st.suite != 0 {
		suites = []uint16{c.st.suite}
	}
	var out []*protect.Keys
	for _, s := range suites {
		if k, err := protect.NewKeys(uint32(v), s, secret); err == nil {
			out = append(out, k)
		}
	}
	return out
}

func (a *analyzer) openLong(c *Conn, pk *Packet, dir Direction, h wire.Header, raw []byte) {
	var cands []*protect.Keys
	space := spaceInitial
	switch h.Type {
	case wire.PacketTypeInitial:
		cands = a.initialKeys(c, h.Version, dir)
	case wire.PacketTypeHandshake:
		space = spaceHandshake
		if c.st.hs[dir] != nil {
			cands = []*protect.Keys{c.st.hs[dir]}
		} else {
			label := keylog.ClientHandshakeTrafficSecret
			if dir == FromServer {
				label = keylog.ServerHandshakeTrafficSecret
			}
			cands = a.secretKeys(c, h.Version, label)
		}
	case wire.PacketType0RTT:
		space = spaceApp
		if dir == FromClient {
			c.ZeroRTTPackets++
			c.ZeroRTTBytes += h.PacketLen
		}
		if c.st.zeroRTT != nil {
			cands = []*protect.Keys{c.st.zeroRTT}
		} else {
			cands = a.secretKeys(c, h.Version, keylog.ClientEarlyTrafficSecret)
		}
	}
	if h.Type == wire.PacketTypeHandshake && dir == FromClient {
		c.ClientHandshakePackets++
		if c.FirstClientHandshake.IsZero() {
			c.FirstClientHandshake = pk.Time
		}
	}
	if len(cands) == 0 {
		pk.Error = "no keys"
		return
	}
	for _, k := range cands {
		pn, kp, plain, ok := a.open(raw, h.PNOffset, true, k, c.st.largest[space][dir])
		if !ok {
			continue
		}
		switch h.Type {
		case wire.PacketTypeHandshake:
			c.st.hs[dir] = k
			if c.st.suite == 0 {
				c.st.suite = k.Suite()
			}
		case wire.PacketType0RTT:
			c.st.zeroRTT = k
		}
		a.decrypted(c, pk, dir, space, pn, kp, plain)
		return
	}
	pk.Error = "authentication failed"
}

// open removes header protection and opens a copy of raw with k.
func (a *analyzer) open(raw []byte, pnOffset int, long bool, k *protect.Keys, largest uint64) (pn uint64, kp uint8, plain []byte, ok bool) {
	if k == nil {
		return 0, 0, nil, false
	}
	a.scratch = append(a.scratch[:0], raw...)
	pkt := a.scratch
	pnLen, err := k.HeaderProtector().Remove(pkt, pnOffset, long)
	if err != nil || pnOffset+pnLen > len(pkt) {
		return 0, 0, nil, false
	}
	trunc := wire.ReadPacketNumber(pkt[pnOffset:], pnLen)
	pn = wire.DecodePacketNumber(largest, trunc, pnLen*8)
	if !long && wire.KeyPhase(pkt[0]) {
		kp = 1
	}
	plain, err = k.OpenPacket(pkt, pnOffset+pnLen, pn)
	if err != nil {
		return 0, 0, nil, false
	}
	return pn, kp, plain, true
}

// shortPacket reads a 1-RTT packet.
func (a *analyzer) shortPacket(pk *Packet, dir Direction, b []byte) (*Packet, *Conn, int) {
	pk.Type, pk.Size = wire.PacketType1RTT, len(b)
	var c *Conn
	if dir == FromClient {
		c = a.lookupShort(b, a.serverLens, a.serverCIDs, netip.AddrPort{})
	} else {
		c = a.lookupShort(b, a.clientLens, a.clientCIDs, pk.Dst)
	}
	if c == nil {
		pk.Error = "no connection"
		return pk, nil, len(b)
	}
	l := cidLen(c, dir, b)
	h, err := wire.ParseHeader(b, l)
	if err != nil {
		pk.Error = "header: " + err.Error()
		return pk, c, len(b)
	}
	pk.DCID = clone(h.DCID)
	if dir == FromClient {
		c.Client1RTT = c.Client1RTT || c.ClientHandshakePackets > 0
	}
	ak := c.st.app[dir]
	if ak == nil {
		label := keylog.ClientTrafficSecret0
		if dir == FromServer {
			label = keylog.ServerTrafficSecret0
		}
		v := c.st.version
		if v == 0 && len(c.ClientVersions) > 0 {
			v = c.ClientVersions[0]
		}
		for _, k := range a.secretKeys(c, v, label) {
			if _, _, _, ok := a.open(b, h.PNOffset, false, k, c.st.largest[spaceApp][dir]); ok {
				ak = &appKeys{gens: []*protect.Keys{k}}
				c.st.app[dir] = ak
				if c.st.suite == 0 {
					c.st.suite = k.Suite()
				}
				break
			}
		}
		if ak == nil {
			pk.Error = "no keys"
			if a.keys[label][string(c.st.random)] != nil {
				pk.Error = "authentication failed"
			}
			return pk, c, len(b)
		}
	}
	largest := c.st.largest[spaceApp][dir]
	// The key phase bit is under header protection, which key updates do
	// not change (RFC 9001 §6.1), so generation 0's protector reads it.
	_, kp, _, _ := a.peekKeyPhase(b, h.PNOffset, ak.gens[0])
	order := []int{ak.cur}
	if int(kp) != ak.cur%2 {
		order = []int{ak.cur + 1, ak.cur - 1}
	}
	for _, g := range order {
		if g < 0 {
			continue
		}
		k := ak.gen(g)
		pn, kp2, plain, ok := a.open(b, h.PNOffset, false, k, largest)
		if !ok {
			continue
		}
		if g > ak.cur {
			ak.cur = g
			kpStats := &c.KeyPhases[dir]
			kpStats.Generations = g
			if g == 1 {
				kpStats.FirstUpdate = pk.Time
				kpStats.FirstUpdateBytes = c.st.streamBytes[dir]
			}
		}
		pk.Generation = g
		a.decrypted(c, pk, dir, spaceApp, pn, kp2, plain)
		c.KeyPhases[dir].Packets[kp2&1]++
		return pk, c, len(b)
	}
	pk.Error = "authentication failed"
	return pk, c, len(b)
}

// peekKeyPhase removes header protection from a copy of b to read the key
// phase bit.
func (a *analyzer) peekKeyPhase(b []byte, pnOffset int, k *protect.Keys) (int, uint8, bool, error) {
	a.scratch = append(a.scratch[:0], b...)
	n, err := k.HeaderProtector().Remove(a.scratch, pnOffset, false)
	if err != nil {
		return 0, 0, false, err
	}
	var kp uint8
	if wire.KeyPhase(a.scratch[0]) {
		kp = 1
	}
	return n, kp, true, nil
}

func (a *analyzer) versionNegotiation(pk *Packet, h wire.Header, b []byte) (*Packet, *Conn, int) {
	pk.Decrypted = true
	vn := VersionNegotiation{Time: pk.Time, Dir: pk.Dir, DCID: clone(h.DCID), SCID: clone(h.SCID), Conn: -1}
	for v := range h.Versions.All() {
		vn.Versions = append(vn.Versions, v)
	}
	// The VN's DCID echoes the client's SCID and its SCID the client's
	// DCID (RFC 9000 §17.2.1).
	c := a.initialCIDs[string(h.SCID)]
	if c == nil && len(h.DCID) > 0 {
		c = a.clientCIDs[string(h.DCID)]
	}
	if c != nil {
		vn.Conn = c.Index
		c.VersionNegotiations = append(c.VersionNegotiations, vn)
	}
	a.t.VersionNegotiations = append(a.t.VersionNegotiations, vn)
	return pk, c, len(b)
}

func (a *analyzer) retry(pk *Packet, b []byte) (*Packet, *Conn, int) {
	r, err := wire.ParseRetry(b)
	if err != nil {
		pk.Error = "retry: " + err.Error()
		return pk, nil, len(b)
	}
	pk.Decrypted = true
	pk.Size = len(b)
	var c *Conn
	if len(r.DCID) == 0 {
		c = a.byClient[pk.Dst]
	} else {
		c = a.clientCIDs[string(r.DCID)]
	}
	if c == nil {
		pk.Error = "no connection"
		return pk, nil, len(b)
	}
	addVersion(&c.ServerVersions, r.Version)
	rt := Retry{Time: pk.Time, Version: r.Version, SCID: clone(r.SCID), Token: clone(r.Token)}
	rt.TagValid = protect.VerifyRetry(uint32(r.Version), c.ODCID, b) == nil
	c.Retries = append(c.Retries, rt)
	if !c.st.sawRetry {
		c.st.sawRetry = true
		c.st.preRetryMaxPN = c.st.largest[spaceInitial][FromClient]
	}
	c.st.retryTokens = append(c.st.retryTokens, clone(r.Token))
	c.st.retrySCIDs = append(c.st.retrySCIDs, clone(r.SCID))
	c.st.initialDCIDs = append(c.st.initialDCIDs, clone(r.SCID))
	// The client addresses its next Initials to the Retry's SCID; it is a
	// server-chosen ID, but Retry does not start the handshake.
	if _, ok := a.serverCIDs[string(r.SCID)]; !ok {
		a.serverCIDs[string(r.SCID)] = c
		a.serverLens[len(r.SCID)] = true
	}
	return pk, c, len(b)
}

// decrypted records a decrypted packet's number and frames.
func (a *analyzer) decrypted(c *Conn, pk *Packet, dir Direction, space int, pn uint64, kp uint8, plain []byte) {
	pk.Decrypted, pk.PN, pk.KeyPhase = true, pn, kp
	if l := c.st.largest[space][dir]; l == wire.NoPacketNumber || pn > l {
		c.st.largest[space][dir] = pn
	}
	if pk.Type == wire.PacketTypeInitial && dir == FromClient && c.st.sawRetry {
		if slices.ContainsFunc(c.st.retryTokens, func(t []byte) bool { return len(t) > 0 && bytes.Equal(t, pk.Token) }) {
			c.RetryTokenReused = true
			if c.st.preRetryMaxPN == wire.NoPacketNumber || pn > c.st.preRetryMaxPN {
				c.RetryPNsContinue = true
			}
			if slices.ContainsFunc(c.st.retrySCIDs, func(s []byte) bool { return bytes.Equal(s, pk.DCID) }) {
				c.RetryDCID = true
			}
		}
	}
	for len(plain) > 0 {
		f, n, err := a.parser.Parse(plain)
		if err != nil {
			pk.Error = "frame: " + err.Error()
			return
		}
		plain = plain[n:]
		fs := a.frame(c, pk, dir, space, f)
		pk.Frames = append(pk.Frames, fs)
		c.FrameCounts[dir][fs.Name]++
	}
}

// frame summarises one frame and applies what it tells.
func (a *analyzer) frame(c *Conn, pk *Packet, dir Direction, space int, f wire.Frame) Frame {
	fs := Frame{Type: f.Type(), Name: f.Type().String(), First: -1}
	if f.Type().IsStream() {
		fs.Name = "STREAM"
	}
	switch f := f.(type) {
	case *wire.PaddingFrame:
		fs.Length = f.Length
	case *wire.AckFrame:
		fs.Largest = f.LargestAcked()
		fs.Ranges = slices.Clone(f.Ranges)
		if f.ECN {
			e := [3]uint64{f.ECT0, f.ECT1, f.ECNCE}
			fs.ECN = &e
			ec := &c.ECN[dir]
			if ec.Frames > 0 && (e[0] < ec.Last[0] || e[1] < ec.Last[1] || e[2] < ec.Last[2]) {
				ec.Decreased = true
			}
			ec.Frames++
			ec.Last = e
		}
	case *wire.CryptoFrame:
		fs.Offset, fs.Length = f.Offset, len(f.Data)
		if space <= spaceHandshake {
			c.st.crypto[space][dir].add(f.Offset, f.Data)
			a.tlsMessages(c, space, dir)
		}
		if space == spaceInitial && dir == FromClient && f.Offset == 0 {
			c.ClientHelloSends++
		}
		if space == spaceHandshake && dir == FromServer {
			c.ServerHandshakeCryptoMax = max(c.ServerHandshakeCryptoMax, f.Offset+uint64(len(f.Data)))
		}
	case *wire.StreamFrame:
		fs.StreamID, fs.Offset, fs.Length, fs.Fin = f.StreamID, f.Offset, len(f.Data), f.Fin
		if f.Offset == 0 && len(f.Data) > 0 {
			fs.First = int(f.Data[0])
			if _, ok := c.StreamStarts[dir][f.StreamID]; !ok {
				c.StreamStarts[dir][f.StreamID] = f.Data[0]
			}
		}
		n := uint64(len(f.Data))
		c.st.streamBytes[dir] += n
		switch {
		case pk.Type == wire.PacketType0RTT:
			c.ZeroRTTStreamBytes += n
		case dir == FromClient:
			c.ClientOneRTTStreamBytes += n
		default:
			c.ServerStreamBytes += n
		}
	case *wire.NewConnectionIDFrame:
		fs.Seq, fs.CID = f.SequenceNumber, clone(f.ConnectionID)
		a.addCID(c, dir == FromServer, f.ConnectionID)
	case *wire.RetireConnectionIDFrame:
		fs.Seq = f.SequenceNumber
	case *wire.PathChallengeFrame:
		fs.Data = clone(f.Data[:])
		if dir == FromServer {
			c.st.srvChallenges[f.Data] = true
		}
	case *wire.PathResponseFrame:
		fs.Data = clone(f.Data[:])
		if dir == FromClient {
			c.st.cliResponses[f.Data] = true
		}
	case *wire.HandshakeDoneFrame:
		if dir == FromServer && !c.FirstClientHandshake.IsZero() {
			c.HandshakeDone = true
		}
	case *wire.MaxDataFrame:
		fs.Max = f.Maximum
	case *wire.MaxStreamDataFrame:
		fs.StreamID, fs.Max = f.StreamID, f.Maximum
	case *wire.MaxStreamsFrame:
		fs.Max = f.Maximum
	case *wire.DataBlockedFrame:
		fs.Max = f.Limit
	case *wire.StreamDataBlockedFrame:
		fs.StreamID, fs.Max = f.StreamID, f.Limit
	case *wire.StreamsBlockedFrame:
		fs.Max = f.Limit
	case *wire.ResetStreamFrame:
		fs.StreamID, fs.ErrorCode = f.StreamID, f.ErrorCode
	case *wire.StopSendingFrame:
		fs.StreamID, fs.ErrorCode = f.StreamID, f.ErrorCode
	case *wire.ConnectionCloseFrame:
		fs.ErrorCode, fs.Reason = f.ErrorCode, string(f.Reason)
		c.Closes = append(c.Closes, Close{Dir: dir, Application: f.Application, Code: f.ErrorCode, Reason: string(f.Reason)})
	case *wire.NewTokenFrame:
		fs.Length = len(f.Token)
	case *wire.AckFrequencyFrame:
		fs.Seq = f.SequenceNumber
		fs.AckFrequency = &AckFrequencyFields{Threshold: f.AckElicitingThreshold, MaxAckDelay: f.RequestedMaxAckDelay, Reordering: f.ReorderingThreshold}
	case *wire.DatagramFrame:
		fs.Length = len(f.Data)
	}
	return fs
}

// tlsMessages parses the complete TLS messages of a CRYPTO stream.
func (a *analyzer) tlsMessages(c *Conn, space int, dir Direction) {
	s := &c.st.crypto[space][dir]
	for {
		typ, body, ok := s.next()
		if !ok {
			return
		}
		switch {
		case typ == tlsClientHello && space == spaceInitial && dir == FromClient:
			ch, ok := parseClientHello(body)
			if !ok {
				continue
			}
			c.ClientHelloSuites = append(c.ClientHelloSuites, ch.CipherSuites)
			if c.ClientHello == nil {
				c.ClientHello = ch
				c.st.random = ch.Random
				c.HandshakeKeys = a.keys[keylog.ServerHandshakeTrafficSecret][string(ch.Random)] != nil
				c.AppKeys = a.keys[keylog.ServerTrafficSecret0][string(ch.Random)] != nil
			}
		case typ == tlsServerHello && space == spaceInitial && dir == FromServer:
			if sh, ok := parseServerHello(body); ok {
				c.ServerHello = sh
				if sh.CipherSuite == tls.TLS_AES_128_GCM_SHA256 || sh.CipherSuite == tls.TLS_AES_256_GCM_SHA384 || sh.CipherSuite == tls.TLS_CHACHA20_POLY1305_SHA256 {
					c.st.suite = sh.CipherSuite
				}
			}
		case typ == tlsEncryptedExtensions && dir == FromServer:
			if ee, ok := parseEncryptedExtensions(body); ok {
				c.EncryptedExtensions = ee
				if tp := ee.TransportParameters; tp != nil && tp.HasPreferredAddress && len(tp.PreferredAddress.ConnectionID) > 0 {
					// The connection ID of sequence 1 comes in the
					// preferred_address, not in NEW_CONNECTION_ID (RFC 9000
					// §5.1.1): the client's packets to the preferred
					// address carry it.
					a.addCID(c, true, tp.PreferredAddress.ConnectionID)
				}
			}
		case (typ == tlsCertificate || typ == tlsCompressedCert) && dir == FromServer:
			c.ServerCertificate = true
		}
	}
}

// account runs the address validation walks over one datagram of a
// connection: the connection's anti-amplification limit before the
// handshake validates the client (amplificationlimit) and the per-path
// limits after a change of the client's 4-tuple (rebind-port).
func (a *analyzer) account(c *Conn, dir Direction, p *pcap.Packet, k *packetKinds) {
	st := c.st
	size := len(p.Payload)
	if p.Length > size {
		size = p.Length
	}
	am := &c.Amplification
	if dir == FromClient {
		if !st.validated {
			am.ClientBytes += size
			if k.handshake || k.serverCID {
				st.validated = true
				am.Validated = p.Time
			}
		}
		if !st.compatDone {
			st.compatBudget += 3 * size * min(k.initial, 1)
			if k.handshake {
				st.compatDone = true
			}
		}
	} else {
		if !st.validated {
			am.ServerBytes += size
			if am.ClientBytes > 0 {
				am.MaxRatio = max(am.MaxRatio, float64(am.ServerBytes)/float64(am.ClientBytes))
			}
			if am.ServerBytes > 3*am.ClientBytes {
				am.Exceeded = true
			}
		}
		if !st.compatDone {
			st.compatSent += size
			if st.compatBudget > 0 {
				am.CompatMaxRatio = max(am.CompatMaxRatio, 3*float64(st.compatSent)/float64(st.compatBudget))
			}
		}
	}

	// Paths are full 4-tuples, keyed by (client, server) as the capture
	// shows them.
	key := [2]netip.AddrPort{p.Src, p.Dst}
	if dir == FromServer {
		key = [2]netip.AddrPort{p.Dst, p.Src}
	}
	path := st.paths[key]
	if path == nil {
		if dir == FromServer {
			// A server datagram on a path the client never used: a
			// probe of an old or a preferred path; account it there
			// only once the client shows up.
			path = &Path{Client: key[0], Server: key[1], First: p.Time}
		} else {
			path = &Path{Client: key[0], Server: key[1], First: p.Time}
		}
		if len(c.Paths) == 0 {
			// The handshake validates the first path.
			path.Validated = true
		}
		st.paths[key] = path
		c.Paths = append(c.Paths, path)
	}
	if dir == FromClient {
		if !path.Validated {
			path.ClientBytes += size
		}
		for _, d := range k.pathResponses {
			if pp := st.challenges[d]; pp != nil {
				pp.Validated = true
			}
		}
		for _, d := range k.pathChallenges {
			path.ChallengedByClient = true
			st.clientChall[d] = path
		}
	} else {
		if !path.Validated {
			path.ServerBytes += size
			if path.ServerBytes > 3*path.ClientBytes {
				path.Exceeded = true
			}
		}
		st.serverPackets[path]++
		if len(k.pathChallenges) > 0 {
			path.ChallengedByServer = true
			if st.serverPackets[path] == 1 {
				path.FirstServerChallenge = true
			}
		}
		for _, d := range k.pathChallenges {
			st.challenges[d] = path
		}
		for _, d := range k.pathResponses {
			if pp := st.clientChall[d]; pp != nil {
				pp.ClientValidated = true
				if p.Src == pp.Server {
					pp.ClientValidatedFromServer = true
				}
			}
		}
	}
}
