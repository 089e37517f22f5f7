package conformance

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/big"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing/fstest"
	"time"

	"github.com/quiver-quic/quiver/conformance/rawquic"
	"github.com/quiver-quic/quiver/h3"
	"github.com/quiver-quic/quiver/qlog"
	"github.com/quiver-quic/quiver/quic"
	"github.com/quiver-quic/quiver/quic/protect"
	"github.com/quiver-quic/quiver/quic/wire"
)

// ClientTarget describes a client under test (docs/conformance-model.md, Target profile, client
// command): how to make it fetch URLs from a server Quiver runs.
type ClientTarget struct {
	Name string `json:"name"`
	// Command is a shell command template. Placeholders: {url} (the first
	// URL), {urls} (every URL, space-separated), {addr}, {host}, {port}
	// (the server), {ca} (a PEM file with the trust anchor of the server's
	// certificate), {keylog} (a file for the client's TLS secrets) and
	// {outdir} (where the client saves the files it downloads, under their
	// URL base names; when the template has no {outdir}, the client's
	// standard output is taken as the download of the first URL).
	Command string `json:"command,omitempty"`
	// ALPN is the application protocol the client speaks: hq-interop or
	// h3. The tester's server accepts both and follows the client's offer;
	// this only decides the needs c-h3.
	ALPN string `json:"alpn,omitempty"`
	// Launch, when set, runs the client instead of Command (tests, and
	// Quiver's own client in process).
	Launch func(ctx context.Context, l Launch) error `json:"-"`
	// ResumeCommand is a template like Command for a client that fetches
	// {urls} over several connections in turn: the first URL on the first
	// connection, the others on a second (or one each after the first)
	// that resumes the session of the one before, sends its requests in
	// 0-RTT when the ticket allows and presents any NEW_TOKEN token it
	// got. Empty when the client cannot: the scenarios that need
	// resumption, 0-RTT or tokens are then unsupported.
	ResumeCommand string `json:"resume_command,omitempty"`
}

// Launch is one run of the client under test.
type Launch struct {
	URLs   []string
	Addr   string // host:port of the tester's server
	CAFile string // PEM trust anchor of the server's certificate
	Keylog string
	OutDir string
	ALPN   string
}

// Needs tags of client-facing scenarios (docs/scenarios.md, Client-facing).
const (
	NeedCAny = "c-any"
	NeedCH3  = "c-h3"
)

// Resources the tester's server offers.
const (
	smallResource = "small.txt"
	largeResource = "large.bin"
	holdResource  = "hold.txt" // never answered: keeps a request open
)

var (
	smallBody = bytes.Repeat([]byte("quiver conformance small resource\n"), 120)
	largeBody = func() []byte {
		b := make([]byte, 1<<20)
		for i := range b {
			b[i] = byte(i*7 + i>>10)
		}
		return b
	}()
)

// testerCA is the trust anchor given to clients, and the server
// certificates it issues: one for localhost, one for another name.
type testerCA struct {
	pemFile string // written once per run under os.TempDir
	good    tls.Certificate
	wrong   tls.Certificate
}

var (
	caOnce sync.Once
	caVal  *testerCA
	caErr  error
)

func getCA() (*testerCA, error) {
	caOnce.Do(func() { caVal, caErr = newTesterCA() })
	return caVal, caErr
}

// ServeOptions shape the tester's server in one client-facing run.
type serveOptions struct {
	Label string
	// Probe carries the misbehaving hooks; recording is wired around them.
	Probe quic.Probe
	// Config edits the server configuration.
	Config func(*quic.Config)
	// In sees every datagram from the client before the engine and says
	// whether to drop it; reply lets it answer on its own (Version
	// Negotiation, Retry).
	In func(d []byte, reply func([]byte)) (drop bool)
	// Out sees every datagram the engine sends and returns the ones to
	// send instead.
	Out func(d []byte) [][]byte
	// WrongName serves a certificate for a name other than localhost.
	WrongName bool
	// NoALPN completes the handshake without selecting any ALPN.
	NoALPN bool
	// Manual leaves the accepted connection to the scenario: no HTTP
	// server runs on it.
	Manual bool
	// Preferred offers a second local port as the server's preferred
	// address (RFC 9000 §9.6) and serves there too.
	Preferred bool
	// RealSocket gives the engine the UDP socket itself, so that it can
	// set and read ECN codepoints; In, Out and the raw record of the
	// client's datagrams are then unavailable.
	RealSocket bool
}

// testServer is the tester acting as the server for one client run.
type testServer struct {
	t     *T
	ep    *quic.Endpoint
	tap   *tapConn
	trace *connTrace
	addr  netip.AddrPort
	// prefAddr is the preferred address offered, when serveOptions.Preferred.
	prefAddr netip.AddrPort
	conns    chan *quic.Conn
	hold     chan struct{}

	mu           sync.Mutex
	inbound      []rawDatagram
	odcid        []byte
	odcidVersion wire.Version
	version      wire.Version // of the client's latest long-header packet
}

// rawDatagram is a datagram from the client, with the header of its first
// packet read without keys.
type rawDatagram struct {
	at     time.Time
	size   int
	b      []byte
	header wire.Header
	err    error
	local  netip.AddrPort // the tester's socket it arrived on
}

// tapConn wraps the server's socket so the scenario sees and shapes every
// datagram.
type tapConn struct {
	net.PacketConn
	s     *testServer
	o     *serveOptions
	local netip.AddrPort // the socket's address (the server's, or its preferred one)
}

func (c *tapConn) ReadFrom(p []byte) (int, net.Addr, error) {
	for {
		n, from, err := c.PacketConn.ReadFrom(p)
		if err != nil {
			return n, from, err
		}
		d := append([]byte(nil), p[:n]...)
		ua, _ := from.(*net.UDPAddr)
		var peer netip.AddrPort
		if ua != nil {
			peer = ua.AddrPort()
		}
		c.s.noteInbound(d, c.local, peer)
		if c.o.In != nil {
			reply := func(b []byte) {
				c.s.t.rec.addDatagram(datagramRec{at: time.Now(), sent: true, local: c.local, peer: peer, b: append([]byte(nil), b...)})
				c.PacketConn.WriteTo(b, from)
			}
			if c.o.In(d, reply) {
				continue
			}
		}
		return n, from, nil
	}
}

func (c *tapConn) WriteTo(p []byte, to net.Addr) (int, error) {
	out := [][]byte{p}
	if c.o.Out != nil {
		out = c.o.Out(append([]byte(nil), p...))
	}
	var peer netip.AddrPort
	if ua, ok := to.(*net.UDPAddr); ok {
		peer = ua.AddrPort()
	}
	for _, d := range out {
		c.s.t.rec.addDatagram(datagramRec{at: time.Now(), sent: true, local: c.local, peer: peer, b: append([]byte(nil), d...)})
		if _, err := c.PacketConn.WriteTo(d, to); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

func (s *testServer) noteInbound(d []byte, local, peer netip.AddrPort) {
	now := time.Now()
	h, err := wire.ParseHeader(d, 8)
	s.t.rec.addDatagram(datagramRec{at: now, sent: false, local: local, peer: peer, b: d})
	s.trace.setAddrs(s.addr, peer)
	s.mu.Lock()
	defer s.mu.Unlock()
	// A client that starts again in another version after a Version
	// Negotiation packet makes a new first Initial.
	if err == nil && h.Type == wire.PacketTypeInitial && (s.odcid == nil || h.Version != s.odcidVersion) {
		s.odcid = append([]byte(nil), h.DCID...)
		s.odcidVersion = h.Version
	}
	if err == nil && h.Long && h.Version != 0 {
		s.version = h.Version
	}
	s.inbound = append(s.inbound, rawDatagram{at: now, size: len(d), b: d, header: h, err: err, local: local})
	s.mu.Unlock()
	s.closeFromRaw(now, d)
	s.t.rec.mu.Lock()
	s.t.rec.notifyLocked()
	s.t.rec.mu.Unlock()
	s.mu.Lock()
}

// rawIn returns the client's datagrams so far.
func (s *testServer) rawIn() []rawDatagram {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]rawDatagram(nil), s.inbound...)
}

// originalDCID is the Destination Connection ID of the client's first
// Initial.
func (s *testServer) originalDCID() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.odcid
}

// serve starts the tester's server for one client run.
func (t *T) serve(ctx context.Context, o serveOptions) *testServer {
	ca, err := getCA()
	if err != nil {
		t.Errorf("certificates: %v", err)
	}
	uc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Inconclusive(fmt.Sprintf("The tester cannot open a UDP socket for its server: %v.", err))
	}
	s := &testServer{t: t, conns: make(chan *quic.Conn, 8), hold: make(chan struct{})}
	s.addr = uc.LocalAddr().(*net.UDPAddr).AddrPort()
	s.trace = t.rec.newConn(o.Label)
	s.trace.setAddrs(s.addr, netip.AddrPort{})
	s.tap = &tapConn{PacketConn: uc, s: s, o: &o, local: s.addr}
	cert := ca.good
	if o.WrongName {
		cert = ca.wrong
	}
	protos := []string{h3.ALPNHQInterop, h3.ALPNH3}
	if o.NoALPN {
		protos = nil
	}
	cfg := &quic.Config{
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: protos},
		KeyLog:    t.rec,
	}
	if t.dir != "" {
		dir := t.dir
		cfg.Tracer = func(odcid []byte, isClient bool) qlog.Recorder {
			w, err := qlog.NewFileWriter(dir, odcid, qlog.VantageServer)
			if err != nil {
				return nil
			}
			t.cleanup(func() { w.Close() })
			return w
		}
	}
	user := o.Probe
	p := o.Probe
	var firstSent time.Time
	var mu sync.Mutex
	p.OnPacketSent = func(pi quic.PacketInfo) {
		now := time.Now()
		mu.Lock()
		if firstSent.IsZero() {
			firstSent = now
		}
		mu.Unlock()
		s.trace.record(true, now, pi.Type, versionOf(pi.Type), pi.Space, pi.PacketNumber, pi.DCID, pi.SCID, pi.Size, pi.DatagramSize, pi.Payload)
		if user.OnPacketSent != nil {
			user.OnPacketSent(pi)
		}
	}
	p.OnPacketReceived = func(pi quic.PacketInfo) {
		now := time.Now()
		mu.Lock()
		if !firstSent.IsZero() && pi.Space == spaceHandshake {
			t.noteRTT(now.Sub(firstSent))
		}
		mu.Unlock()
		s.trace.record(false, now, pi.Type, versionOf(pi.Type), pi.Space, pi.PacketNumber, pi.DCID, pi.SCID, pi.Size, pi.DatagramSize, pi.Payload)
		if user.OnPacketReceived != nil {
			user.OnPacketReceived(pi)
		}
	}
	cfg.Probe = &p
	var pref *tapConn
	if o.Preferred {
		uc2, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			uc.Close()
			t.Inconclusive(fmt.Sprintf("The tester cannot open a UDP socket for its preferred address: %v.", err))
		}
		s.prefAddr = uc2.LocalAddr().(*net.UDPAddr).AddrPort()
		pref = &tapConn{PacketConn: uc2, s: s, o: &o, local: s.prefAddr}
		cfg.PreferredAddress = &quic.PreferredAddress{IPv4: s.prefAddr}
	}
	if o.Config != nil {
		o.Config(cfg)
	}
	var pc net.PacketConn = s.tap
	if o.RealSocket {
		pc = uc
	}
	ep, err := quic.NewEndpoint(pc, cfg)
	if err != nil {
		uc.Close()
		if pref != nil {
			pref.Close()
		}
		t.Errorf("server endpoint: %v", err)
	}
	if pref != nil {
		if err := ep.ServePreferredAddress(pref, s.prefAddr); err != nil {
			t.Errorf("preferred address: %v", err)
		}
	}
	s.ep = ep
	sctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	root := fstest.MapFS{
		smallResource: {Data: smallBody},
		largeResource: {Data: largeBody},
	}
	files := holdFS{MapFS: root, hold: s.hold}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ep.Accept(sctx)
			if err != nil {
				return
			}
			select {
			case s.conns <- c:
			default:
			}
			if o.Manual {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				a := h3Adapter{c}
				if c.ALPN() == h3.ALPNH3 {
					srv := &h3.Server{Handler: h3.FileHandler(files), ShutdownGrace: 100 * time.Millisecond}
					srv.ServeConn(sctx, a)
				} else {
					h3.ServeHQ(sctx, a, files)
				}
			}()
		}
	}()
	t.cleanup(func() {
		close(s.hold)
		cancel()
		done := make(chan struct{})
		go func() { ep.Close(); wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(3 * time.Second):
		}
	})
	return s
}

func versionOf(pt wire.PacketType) uint32 {
	if pt.IsLong() {
		return quic.Version1
	}
	return 0
}

// url is the URL of a resource on the server.
func (s *testServer) url(name string) string {
	return fmt.Sprintf("https://127.0.0.1:%d/%s", s.addr.Port(), name)
}

// accepted waits for the first connection the server accepts (the
// handshake completed), or returns nil after d.
func (s *testServer) accepted(ctx context.Context, d time.Duration) *quic.Conn {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case c := <-s.conns:
		s.conns <- c
		return c
	case <-timer.C:
	case <-ctx.Done():
	}
	return nil
}

// holdFS serves the resources, and blocks reads of holdResource until the
// scenario ends, so the request stream stays open.
type holdFS struct {
	fstest.MapFS
	hold chan struct{}
}

func (h holdFS) Open(name string) (fs.File, error) {
	if name == holdResource {
		return &heldFile{hold: h.hold}, nil
	}
	return h.MapFS.Open(name)
}

type heldFile struct{ hold chan struct{} }

func (f *heldFile) Stat() (fs.FileInfo, error) {
	return fstest.MapFS{holdResource: {Data: []byte("x")}}.Stat(holdResource)
}
func (f *heldFile) Read([]byte) (int, error) { <-f.hold; return 0, io.ErrUnexpectedEOF }
func (f *heldFile) Close() error             { return nil }

// clientRun is one launch of the client under test.
type clientRun struct {
	done   chan struct{}
	err    error
	outDir string
	urls   []string
	stdout *bytes.Buffer
	noOut  bool // the template has no {outdir}: stdout is the download
}

// launch starts the client under test against s, fetching the named
// resources. It returns at once; wait for the end with clientRun.wait.
func (t *T) launch(ctx context.Context, s *testServer, names ...string) *clientRun {
	return t.launchWith(ctx, s, false, names...)
}

// launchResume starts the client's resume command (ClientTarget.
// ResumeCommand) against s, or ends the scenario as unsupported.
func (t *T) launchResume(ctx context.Context, s *testServer, names ...string) *clientRun {
	if t.profile.Client == nil || t.profile.Client.ResumeCommand == "" {
		t.Unsupported("The client target gives no resume command, so the client cannot be asked to resume a session, send 0-RTT or reuse a token.")
	}
	return t.launchWith(ctx, s, true, names...)
}

func (t *T) launchWith(ctx context.Context, s *testServer, resume bool, names ...string) *clientRun {
	ct := t.profile.Client
	if ct == nil {
		t.Errorf("client-facing scenario without a client target")
	}
	ca, _ := getCA()
	dir, err := os.MkdirTemp("", "quiver-client-")
	if err != nil {
		t.Errorf("client folder: %v", err)
	}
	t.cleanup(func() { os.RemoveAll(dir) })
	out := filepath.Join(dir, "out")
	os.MkdirAll(out, 0o755)
	l := Launch{Addr: s.addr.String(), CAFile: ca.pemFile, Keylog: filepath.Join(dir, "keys.log"), OutDir: out, ALPN: ct.ALPN}
	for _, n := range names {
		l.URLs = append(l.URLs, s.url(n))
	}
	cr := &clientRun{done: make(chan struct{}), outDir: out, urls: l.URLs, stdout: &bytes.Buffer{}}
	cctx, cancel := context.WithCancel(ctx)
	t.cleanup(func() { cancel(); <-cr.done })
	go func() {
		defer close(cr.done)
		if ct.Launch != nil && !resume {
			cr.err = ct.Launch(cctx, l)
			return
		}
		command := ct.Command
		if resume {
			command = ct.ResumeCommand
		}
		cr.noOut = !strings.Contains(command, "{outdir}")
		cr.err = runCommand(cctx, expandCommand(command, l), cr.stdout)
	}()
	return cr
}

// wait waits up to d for the client to exit; it reports whether it did.
func (cr *clientRun) wait(ctx context.Context, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-cr.done:
		return true
	case <-timer.C:
	case <-ctx.Done():
	}
	return false
}

// exited reports whether the client has exited.
func (cr *clientRun) exited() bool {
	select {
	case <-cr.done:
		return true
	default:
		return false
	}
}

// downloaded reports whether the resource arrived intact.
func (cr *clientRun) downloaded(name string) bool {
	want := map[string][]byte{smallResource: smallBody, largeResource: largeBody}[name]
	var got []byte
	if cr.noOut {
		if !cr.exited() {
			return false
		}
		got = cr.stdout.Bytes()
	} else {
		b, err := os.ReadFile(filepath.Join(cr.outDir, name))
		if err != nil {
			return false
		}
		got = b
	}
	return want != nil && bytes.Equal(got, want)
}

// expandCommand fills in a command template; values are shell-quoted.
func expandCommand(tmpl string, l Launch) string {
	host, port, _ := net.SplitHostPort(l.Addr)
	q := shellQuote
	var urls []string
	for _, u := range l.URLs {
		urls = append(urls, q(u))
	}
	first := ""
	if len(l.URLs) > 0 {
		first = l.URLs[0]
	}
	r := strings.NewReplacer(
		"{url}", q(first), "{urls}", strings.Join(urls, " "),
		"{addr}", q(l.Addr), "{host}", q(host), "{port}", q(port),
		"{ca}", q(l.CAFile), "{keylog}", q(l.Keylog), "{outdir}", q(l.OutDir),
	)
	return r.Replace(tmpl)
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// runCommand runs a shell command in its own process group, killed as a
// whole when ctx ends.
func runCommand(ctx context.Context, command string, stdout io.Writer) error {
	cmd := exec.Command("/bin/sh", "-c", command)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Stdout = &limitedWriter{w: stdout, n: 64 << 20}
	var stderr bytes.Buffer
	cmd.Stderr = &limitedWriter{w: &stderr, n: 1 << 16}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start client: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("client: %w: %s", err, lastLine(stderr.String()))
		}
		return nil
	case <-ctx.Done():
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		return fmt.Errorf("client stopped by the tester: %w", ctx.Err())
	}
}

type limitedWriter struct {
	w io.Writer
	n int
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	if len(p) > l.n {
		l.w.Write(p[:l.n])
		l.n = 0
		return len(p), nil
	}
	l.n -= len(p)
	return l.w.Write(p)
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// clientTP returns the client's transport parameters from its ClientHello,
// once the engine has decrypted the client's Initial packets.
func (s *testServer) clientTP() *wire.TransportParameters {
	c := s.trace
	c.r.mu.Lock()
	defer c.r.mu.Unlock()
	for _, m := range tlsMessages(c.cryptoIn[0].Contiguous()) {
		if m[0] != 1 { // ClientHello
			continue
		}
		ext, ok := clientHelloExtension(m[4:], extQUICTransportParams)
		if !ok {
			return nil
		}
		tp, err := wire.ParseTransportParameters(ext, false)
		if err != nil {
			return nil
		}
		return tp
	}
	return nil
}

// clientHelloExtension finds an extension in a ClientHello body (RFC 8446
// §4.1.2).
func clientHelloExtension(b []byte, typ uint16) ([]byte, bool) {
	if len(b) < 2+32+1 {
		return nil, false
	}
	b = b[34:]
	sid := int(b[0])
	if len(b) < 1+sid+2 {
		return nil, false
	}
	b = b[1+sid:]
	cs := int(b[0])<<8 | int(b[1])
	if len(b) < 2+cs+1 {
		return nil, false
	}
	b = b[2+cs:]
	cm := int(b[0])
	if len(b) < 1+cm+2 {
		return nil, false
	}
	b = b[1+cm:]
	n := int(b[0])<<8 | int(b[1])
	b = b[2:]
	if n < len(b) {
		b = b[:n]
	}
	for len(b) >= 4 {
		t := uint16(b[0])<<8 | uint16(b[1])
		l := int(b[2])<<8 | int(b[3])
		if len(b) < 4+l {
			return nil, false
		}
		if t == typ {
			return b[4 : 4+l], true
		}
		b = b[4+l:]
	}
	return nil, false
}

// clientInitial is a client Initial packet decrypted by the tester from
// the raw datagram (before or without the engine).
type clientInitial struct {
	pn     uint64
	dcid   []byte
	scid   []byte
	token  []byte
	frames []wire.Frame
	size   int // datagram size
}

// openClientInitial decrypts the first packet of d when it is a client
// Initial protected with keys from its own Destination Connection ID (every
// Initial before the client has heard from the server, and after a Retry).
func openClientInitial(d []byte) (*clientInitial, bool) {
	h, err := wire.ParseHeader(d, 0)
	if err != nil || h.Type != wire.PacketTypeInitial {
		return nil, false
	}
	ck, _, err := protect.NewInitialKeys(uint32(h.Version), h.DCID)
	if err != nil {
		return nil, false
	}
	pkt := append([]byte(nil), d[:h.PacketLen]...)
	pnLen, err := ck.HeaderProtector().Remove(pkt, h.PNOffset, true)
	if err != nil {
		return nil, false
	}
	pn := wire.ReadPacketNumber(pkt[h.PNOffset:], pnLen)
	hdrEnd := h.PNOffset + pnLen
	payload, err := ck.Open(nil, pkt[:hdrEnd], pkt[hdrEnd:], pn)
	if err != nil {
		return nil, false
	}
	frames, _ := decodeFrames(payload)
	return &clientInitial{pn: pn, dcid: append([]byte(nil), h.DCID...), scid: append([]byte(nil), h.SCID...),
		token: append([]byte(nil), h.Token...), frames: frames, size: len(d)}, true
}

// cryptoData concatenates the CRYPTO frames of an Initial from offset 0.
func (ci *clientInitial) cryptoData() []byte {
	var b rawquic.CryptoBuffer
	for _, f := range ci.frames {
		if cf, ok := f.(*wire.CryptoFrame); ok {
			b.Add(cf.Offset, cf.Data)
		}
	}
	return b.Contiguous()
}

// errNoConnection is the sentence part for a client that never connected.
var errNoConnection = errors.New("the client never completed a handshake with the tester")

// newTesterCA builds a CA and two leaf certificates from it.
func newTesterCA() (*testerCA, error) {
	ca, caKey, err := newCert(nil, nil, "Quiver conformance CA", nil, true)
	if err != nil {
		return nil, err
	}
	caCert := ca.Leaf
	good, _, err := newCert(caCert, caKey, "localhost", []string{"localhost"}, false)
	if err != nil {
		return nil, err
	}
	wrong, _, err := newCert(caCert, caKey, "not-this-host.invalid", []string{"not-this-host.invalid"}, false)
	if err != nil {
		return nil, err
	}
	f, err := os.CreateTemp("", "quiver-ca-*.pem")
	if err != nil {
		return nil, err
	}
	pem.Encode(f, &pem.Block{Type: "CERTIFICATE", Bytes: caCert.Raw})
	if err := f.Close(); err != nil {
		return nil, err
	}
	return &testerCA{pemFile: f.Name(), good: good, wrong: wrong}, nil
}

// newCert issues a certificate: self-signed when parent is nil.
func newCert(parent *x509.Certificate, parentKey *ecdsa.PrivateKey, cn string, names []string, isCA bool) (tls.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		DNSNames:     names,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if cn == "localhost" {
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	}
	if isCA {
		tmpl.IsCA = true
		tmpl.BasicConstraintsValid = true
		tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
		tmpl.ExtKeyUsage = nil
	}
	signer, signerKey := tmpl, key
	if parent != nil {
		signer, signerKey = parent, parentKey
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signerKey)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, key, nil
}

// closeFromRaw decrypts the client's datagram d with the key log the
// tester's server wrote, and records any packet that carries a
// CONNECTION_CLOSE: the engine processes those without handing them to
// OnPacketReceived (HOOKS-NEEDED.md, item 1), and a verdict needs them.
func (s *testServer) closeFromRaw(at time.Time, d []byte) {
	s.openRaw(d, func(h wire.Header, space int, pn uint64, payload []byte, frames []wire.Frame) {
		for _, f := range frames {
			if _, ok := f.(*wire.ConnectionCloseFrame); ok {
				s.trace.record(false, at, h.Type, uint32(h.Version), space, pn, h.DCID, h.SCID, int(h.PacketLen), len(d), payload)
				break
			}
		}
	})
}

// openRaw decrypts each packet of the client's datagram d it has keys for
// (Initial keys from the first Destination Connection ID, the others from
// the key log; 0-RTT aside) and hands it to fn.
func (s *testServer) openRaw(d []byte, fn func(h wire.Header, space int, pn uint64, payload []byte, frames []wire.Frame)) {
	for rest := d; len(rest) > 0; {
		h, err := wire.ParseHeader(rest, 8)
		if err != nil {
			return
		}
		pkt := append([]byte(nil), rest[:h.PacketLen]...)
		rest = rest[h.PacketLen:]
		space := rawquic.SpaceOf(h.Type)
		if space < 0 || h.Type == wire.PacketType0RTT {
			continue
		}
		version := uint32(h.Version)
		if !h.Long {
			// Short headers carry no version: the connection's is that
			// of the client's latest long-header packet.
			s.mu.Lock()
			version = uint32(s.version)
			s.mu.Unlock()
		}
		for _, k := range s.clientKeys(version, h.Type) {
			p := append([]byte(nil), pkt...)
			pnLen, err := k.HeaderProtector().Remove(p, h.PNOffset, h.Long)
			if err != nil {
				continue
			}
			pn := wire.DecodePacketNumber(s.largestReceived(space), wire.ReadPacketNumber(p[h.PNOffset:], pnLen), pnLen*8)
			hdrEnd := h.PNOffset + pnLen
			payload, err := k.Open(nil, p[:hdrEnd], p[hdrEnd:], pn)
			if err != nil {
				continue
			}
			frames, _ := decodeFrames(payload)
			fn(h, space, pn, payload, frames)
			break
		}
	}
}

// largestReceived is the largest packet number the engine decrypted from
// the client in space, for packet number recovery.
func (s *testServer) largestReceived(space int) uint64 {
	var largest uint64
	for _, p := range s.t.rec.snapshot() {
		if !p.sent && p.conn == s.trace.id && p.space == space && p.pn > largest {
			largest = p.pn
		}
	}
	return largest
}

// clientKeys returns the candidate keys that protect the client's packets
// of type pt: Initial keys from the first Destination Connection ID, the
// others from the key log (every connection of the scenario, every cipher
// suite that fits the secret's length).
func (s *testServer) clientKeys(version uint32, pt wire.PacketType) []*protect.Keys {
	var out []*protect.Keys
	if pt == wire.PacketTypeInitial {
		if odcid := s.originalDCID(); odcid != nil {
			if ck, _, err := protect.NewInitialKeys(version, odcid); err == nil {
				out = append(out, ck)
			}
		}
		return out
	}
	label := "CLIENT_TRAFFIC_SECRET_0"
	if pt == wire.PacketTypeHandshake {
		label = "CLIENT_HANDSHAKE_TRAFFIC_SECRET"
	}
	s.t.rec.mu.Lock()
	log := s.t.rec.keylog.String()
	s.t.rec.mu.Unlock()
	return append(out, keylogKeys(log, label, version, pt)...)
}

func hexDecode(s string) ([]byte, error) { return hex.DecodeString(s) }
