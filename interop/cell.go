package interop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/quiver-quic/quiver/interop/analyze"
	"github.com/quiver-quic/quiver/keylog"
	"github.com/quiver-quic/quiver/netem"
	"github.com/quiver-quic/quiver/pcap"
	"github.com/quiver-quic/quiver/peers"
	"github.com/quiver-quic/quiver/quic/wire"
)

// Results of a cell, as the established result file spells them.
const (
	Succeeded   = "succeeded"
	FailedRes   = "failed"
	Unsupported = "unsupported"
)

// CellResult is one cell of the matrix: the extension record of §8.3.
type CellResult struct {
	Result       string  `json:"result"`
	CompatResult string  `json:"compat_result,omitempty"`
	Reason       string  `json:"reason,omitempty"`
	Detail       string  `json:"detail,omitempty"`
	DurationS    float64 `json:"duration_s"`
	Exit         struct {
		Client *int   `json:"client"`
		Server string `json:"server,omitempty"`
	} `json:"exit"`
	Scenario   *LinkRecord            `json:"scenario,omitempty"`
	Handshakes analyze.HandshakeCount `json:"handshakes"`
	Checks     []Check                `json:"checks,omitempty"`
	// Artifacts is the cell's log folder, relative to the run folder.
	Artifacts string `json:"artifacts,omitempty"`
	// Paths are the files a viewer links to, relative to the run folder.
	Paths    *CellPaths                 `json:"paths,omitempty"`
	Analyzer map[string]analyze.Summary `json:"analyzer,omitempty"`
	VNProbe  *VNProbe                   `json:"vn_probe,omitempty"`

	// Measurement fields (Quiver's extensions of result.json).
	Unit    string        `json:"unit,omitempty"`
	Method  string        `json:"method,omitempty"`
	Values  []Measurement `json:"values,omitempty"`
	NOK     int           `json:"n_ok,omitempty"`
	NTotal  int           `json:"n_total,omitempty"`
	Mean    float64       `json:"mean,omitempty"`
	Stdev   float64       `json:"stdev,omitempty"`
	Median  float64       `json:"median,omitempty"`
	Min     float64       `json:"min,omitempty"`
	Max     float64       `json:"max,omitempty"`
	Details string        `json:"details,omitempty"`
}

// Measurement is one repetition of a measurement.
type Measurement struct {
	Value      float64 `json:"value"`
	Status     string  `json:"status"`
	TraceSpan  float64 `json:"trace_span_kbps"`
	DataSpan   float64 `json:"data_span_kbps"`
	WallClock  float64 `json:"wall_clock_mbps"`
	Artifacts  string  `json:"artifacts"`
	ResultNote string  `json:"note,omitempty"`
	// Cross is the competing TCP flow of a crosstraffic repetition.
	Cross *CrossRecord `json:"cross_traffic,omitempty"`
}

// CellPaths are the artifacts of a cell, relative to the run folder.
type CellPaths struct {
	Output      string   `json:"output"`
	ServerLog   string   `json:"server_log,omitempty"`
	ClientLog   string   `json:"client_log,omitempty"`
	ClientTrace string   `json:"client_trace,omitempty"`
	ServerTrace string   `json:"server_trace,omitempty"`
	Link        string   `json:"link,omitempty"`
	KeyLogs     []string `json:"keylogs,omitempty"`
	Qlogs       []string `json:"qlogs,omitempty"`
}

// LinkRecord is sim/link.json: the scenario as applied and what the link
// did to the datagrams.
type LinkRecord struct {
	Name   string `json:"name"`
	Engine string `json:"engine"`
	Seed   uint64 `json:"seed"`
	// Server is the server's address and Relay the relay's client-facing
	// one: the server side of the server trace and of the client trace.
	Server netip.AddrPort `json:"server"`
	Relay  netip.AddrPort `json:"relay"`
	// Alternates are the server's further addresses the link answers for
	// (a preferred address), as the server and the client see them.
	Alternates    []netip.AddrPort  `json:"alternates,omitempty"`
	ToServer      netem.Link        `json:"to_server"`
	ToClient      netem.Link        `json:"to_client"`
	Rebind        netem.Rebind      `json:"rebind"`
	T0            time.Time         `json:"t0,omitzero"`
	Rebindings    []netem.Rebinding `json:"rebindings,omitempty"`
	StatsToServer netem.Stats       `json:"stats_to_server"`
	StatsToClient netem.Stats       `json:"stats_to_client"`
	// Namespaces names the client, router and server namespaces of the
	// ns engine.
	Namespaces []string `json:"namespaces,omitempty"`
	// KernelRateToClient is the router's tbf rate towards the client
	// (bit/s), when the bottleneck is the kernel's.
	KernelRateToClient int64 `json:"kernel_rate_to_client,omitempty"`
	// CrossTraffic is the competing TCP flow, if the scenario has one.
	CrossTraffic *CrossRecord `json:"cross_traffic,omitempty"`
	// EffectiveLoss is the loss rate the burst cap leaves of the nominal
	// one.
	EffectiveLoss    float64 `json:"effective_loss,omitempty"`
	EffectiveCorrupt float64 `json:"effective_corrupt,omitempty"`
}

// VNProbe is the server part of versionnegotiation: the answer to a
// datagram with a reserved version.
type VNProbe struct {
	Answered bool     `json:"answered"`
	Valid    bool     `json:"valid"`
	Versions []string `json:"versions,omitempty"`
	Detail   string   `json:"detail,omitempty"`
}

// drainTimeout bounds the wait, after the client exits, for the
// datagrams still in flight towards the server.
const drainTimeout = 5 * time.Second

// Runner runs cells. Its zero value is not usable; set Dir.
type Runner struct {
	// Dir is the run folder; cells go to Dir/<server>_<client>/<test>.
	Dir string
	// Seed is the run seed; every file and impairment derives from it.
	Seed uint64
	// Strict makes failed extra checks fail the test.
	Strict bool
	// Probe sends the version-negotiation probe to each server.
	Probe bool
	// Engine is the link engine: EngineAuto (the default), EngineProxy
	// or EngineNS.
	Engine string

	mu    sync.Mutex
	certs map[[2]int]string
}

// certDir returns the certificate folder for a chain shape, made once.
func (r *Runner) certDir(chain, extra int) (string, error) {
	if chain == 0 {
		chain = 2
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.certs == nil {
		r.certs = map[[2]int]string{}
	}
	k := [2]int{chain, extra}
	if d, ok := r.certs[k]; ok {
		return d, nil
	}
	d := filepath.Join(r.Dir, "certs", fmt.Sprintf("chain%d-names%d", chain, extra))
	if err := writeCerts(d, chain, extra); err != nil {
		return "", fmt.Errorf("certificates: %w", err)
	}
	r.certs[k] = d
	return d, nil
}

// alpnFor is the application protocol a test case runs.
func alpnFor(tc *TestCase) string {
	if tc.Name == "http3" {
		return peers.ALPNH3
	}
	return peers.ALPNHQ
}

// supported says whether a pair can run a test case at all, and why not.
func supported(server, client peers.Impl, tc *TestCase) (bool, string) {
	alpn := alpnFor(tc)
	switch {
	case !server.Supports("server", tc.ServerCase):
		return false, fmt.Sprintf("%s server does not support TESTCASE=%s", server.Name, tc.ServerCase)
	case !client.Supports("client", tc.ClientCase):
		return false, fmt.Sprintf("%s client does not support TESTCASE=%s", client.Name, tc.ClientCase)
	case !slices.Contains(server.ALPNs, alpn):
		return false, fmt.Sprintf("%s server does not speak %s", server.Name, alpn)
	case !slices.Contains(client.ALPNs, alpn):
		return false, fmt.Sprintf("%s client does not speak %s", client.Name, alpn)
	}
	return true, ""
}

// RunCell runs one test case (or every repetition of a measurement) for a
// pair and judges it.
func (r *Runner) RunCell(ctx context.Context, server, client peers.Impl, tc *TestCase) *CellResult {
	rel := filepath.Join(server.Name+"_"+client.Name, tc.Name)
	rel = strings.ReplaceAll(rel, ":", "-")
	engine, why := r.engineFor(tc)
	if engine == "" {
		return &CellResult{Result: Unsupported, Reason: "environment", Detail: why}
	}
	if ok, why := supported(server, client, tc); !ok {
		return &CellResult{Result: Unsupported, Reason: "unsupported", Detail: why}
	}
	if tc.Judge == nil {
		return &CellResult{Result: Unsupported, Reason: "unsupported", Detail: "the runner has no checks for " + tc.Name + " yet"}
	}
	for _, im := range []struct {
		impl peers.Impl
		role string
	}{{server, "server"}, {client, "client"}} {
		if _, err := im.impl.Binary(im.role); err != nil {
			return &CellResult{Result: FailedRes, Reason: "setup", Detail: err.Error()}
		}
	}
	if !tc.Measurement {
		res, _ := r.runOnce(ctx, engine, server, client, tc, rel, r.Seed)
		return res
	}
	return r.measure(ctx, engine, server, client, tc, rel)
}

// measure runs the repetitions of a measurement (goodput, crosstraffic).
func (r *Runner) measure(ctx context.Context, engine string, server, client peers.Impl, tc *TestCase, rel string) *CellResult {
	out := &CellResult{Unit: "kbps", Method: "trace-span", Artifacts: rel}
	var vals []float64
	status := Succeeded
	for i := 1; i <= tc.Repetitions; i++ {
		res, cell := r.runOnce(ctx, engine, server, client, tc, filepath.Join(rel, strconv.Itoa(i)), r.Seed+uint64(i))
		m := Measurement{Status: res.Result, Artifacts: res.Artifacts}
		if res.Result == Succeeded && cell != nil {
			m.TraceSpan, m.DataSpan = goodput(cell)
			m.WallClock = float64(8*totalSize(cell.Files)) / res.DurationS / 1e6
			m.Value = m.TraceSpan
			if res.Scenario != nil {
				m.Cross = res.Scenario.CrossTraffic
			}
			vals = append(vals, m.Value)
		} else {
			m.ResultNote = res.Reason + ": " + res.Detail
			if status == Succeeded {
				status = res.Result
			}
		}
		out.Values = append(out.Values, m)
		out.DurationS += res.DurationS
		if ctx.Err() != nil {
			break
		}
	}
	out.NTotal, out.NOK = len(out.Values), len(vals)
	if len(vals) > 0 {
		out.Mean, out.Stdev = meanStdev(vals)
		s := slices.Sorted(slices.Values(vals))
		out.Min, out.Max, out.Median = s[0], s[len(s)-1], s[len(s)/2]
		if len(s)%2 == 0 {
			out.Median = (s[len(s)/2-1] + s[len(s)/2]) / 2
		}
	}
	out.Result = status
	if status == Succeeded {
		out.Details = fmt.Sprintf("%.0f (± %.0f) kbps", out.Mean, out.Stdev)
	}
	return out
}

func meanStdev(v []float64) (mean, sd float64) {
	for _, x := range v {
		mean += x
	}
	mean /= float64(len(v))
	if len(v) < 2 {
		return mean, 0
	}
	for _, x := range v {
		sd += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(sd / float64(len(v)-1))
}

func totalSize(fs []File) int64 {
	var n int64
	for _, f := range fs {
		n += f.Size
	}
	return n
}

// goodput computes §6.1's trace span (first to last server 1-RTT packet
// on the client trace) and data span (first to last server STREAM frame),
// in kbit/s.
func goodput(c *Cell) (traceSpan, dataSpan float64) {
	var t0, t1, d0, d1 time.Time
	for _, p := range c.ClientTrace.Packets {
		if p.Dir != analyze.FromServer || p.Type != wire.PacketType1RTT {
			continue
		}
		if t0.IsZero() {
			t0 = p.Time
		}
		t1 = p.Time
		if p.Has(wire.FrameTypeStream) {
			if d0.IsZero() {
				d0 = p.Time
			}
			d1 = p.Time
		}
	}
	bits := float64(8 * totalSize(c.Files))
	if d := t1.Sub(t0); d > 0 {
		traceSpan = bits / float64(d.Milliseconds())
	}
	if d := d1.Sub(d0); d > 0 {
		dataSpan = bits / float64(d.Milliseconds())
	}
	return traceSpan, dataSpan
}

// cellLog writes the runner's own log of a cell (output.txt).
type cellLog struct {
	w     io.Writer
	start time.Time
}

func (l *cellLog) printf(format string, args ...any) {
	fmt.Fprintf(l.w, "%8.3fs  %s\n", time.Since(l.start).Seconds(), fmt.Sprintf(format, args...))
}

// runOnce runs a pair through one test case once, in dir (relative to the
// run folder), and judges it.
func (r *Runner) runOnce(ctx context.Context, engine string, server, client peers.Impl, tc *TestCase, rel string, seed uint64) (*CellResult, *Cell) {
	res := &CellResult{Artifacts: rel}
	dir := filepath.Join(r.Dir, rel)
	start := time.Now()
	defer func() { res.DurationS = time.Since(start).Seconds() }()
	fail := func(reason string, err error) (*CellResult, *Cell) {
		res.Result, res.Reason, res.Detail = FailedRes, reason, err.Error()
		return res, nil
	}
	for _, d := range []string{"server/qlog", "client/qlog", "sim"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return fail("setup", err)
		}
	}
	out, err := os.Create(filepath.Join(dir, "output.txt"))
	if err != nil {
		return fail("setup", err)
	}
	defer out.Close()
	lg := &cellLog{w: out, start: start}
	lg.printf("%s: server %s, client %s, scenario %s, engine %s, seed %d", tc.Name, server.Name, client.Name, tc.Scenario.Name, engine, seed)
	res.Paths = &CellPaths{Output: filepath.Join(rel, "output.txt")}

	certs, err := r.certDir(tc.Certs, tc.ExtraNames)
	if err != nil {
		return fail("setup", err)
	}
	scratch, err := os.MkdirTemp("", "quiver-interop-")
	if err != nil {
		return fail("setup", err)
	}
	defer os.RemoveAll(scratch)
	www, downloads := filepath.Join(scratch, "www"), filepath.Join(scratch, "downloads")
	fs, err := writeFiles(www, seed, tc.Files(seed))
	if err != nil {
		return fail("setup", err)
	}
	if err := os.MkdirAll(downloads, 0o755); err != nil {
		return fail("setup", err)
	}
	timeout := tc.Timeout
	if timeout == 0 {
		timeout = 60 * time.Second
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	lk, err := setupLink(cctx, engine, tc)
	if err != nil {
		lg.printf("link: %v", err)
		return fail("setup", err)
	}
	defer lk.close()
	if lk.ns != nil {
		lg.printf("namespaces: client %s, router %s, server %s", lk.ns.Client, lk.ns.Router, lk.ns.Server)
	}

	serverKeys := filepath.Join(dir, "server", "keys.log")
	clientKeys := filepath.Join(dir, "client", "keys.log")
	srv, err := server.StartServer(cctx, peers.ServerOpts{
		Addr: lk.serverListen, Netns: lk.serverNS, CertFile: filepath.Join(certs, "cert.pem"), KeyFile: filepath.Join(certs, "priv.key"),
		Root: www, Retry: tc.ServerCase == "retry", TestCase: tc.ServerCase,
		KeylogFile: serverKeys, QlogDir: filepath.Join(dir, "server", "qlog"), LogDir: filepath.Join(dir, "server"),
	})
	if err != nil {
		lg.printf("server did not start: %v", err)
		if errors.Is(err, peers.ErrUnsupported) {
			res.Result, res.Reason, res.Detail = Unsupported, "exit", err.Error()
			return res, nil
		}
		return fail("setup", err)
	}
	serverStopped := false
	stopServer := func() {
		if serverStopped {
			return
		}
		serverStopped = true
		if err := srv.Stop(); err != nil {
			res.Exit.Server = err.Error()
			lg.printf("server: %v", err)
		}
	}
	defer stopServer()
	res.Paths.ServerLog = relPath(r.Dir, srv.LogFile)
	serverAddr, err := netip.ParseAddrPort(srv.Addr)
	if err != nil {
		return fail("setup", err)
	}
	lg.printf("server %s listening on %s", server.Name, serverAddr)
	if r.Probe {
		lk.doInRouter(func() { res.VNProbe = probeVN(cctx, serverAddr) })
		lg.printf("version negotiation probe: %+v", *res.VNProbe)
	}

	// The link: a relay whose capture hook writes the client and server
	// traces.
	left, leftFile, err := newTrace(filepath.Join(dir, "sim", "trace_node_left.pcap"))
	if err != nil {
		return fail("setup", err)
	}
	right, rightFile, err := newTrace(filepath.Join(dir, "sim", "trace_node_right.pcap"))
	if err != nil {
		leftFile.Close()
		return fail("setup", err)
	}
	lw, rw := netem.NewTraceWriter(left, netem.ClientTrace), netem.NewTraceWriter(right, netem.ServerTrace)
	rcfg := lk.relay
	if !rcfg.Listen.IsValid() {
		rcfg.Listen = netip.AddrPortFrom(serverAddr.Addr(), 0)
	}
	if tc.ServerCase == "connectionmigration" {
		alts, err := lk.preferredRoutes(cctx, srv, serverAddr)
		if err != nil {
			leftFile.Close()
			rightFile.Close()
			return fail("setup", err)
		}
		for _, a := range alts {
			lg.printf("server also listens on %s: the link answers for it (preferred address)", a.Server)
		}
		rcfg.Alternates = alts
	}
	rcfg.Server, rcfg.Rebind, rcfg.Seed, rcfg.Unarmed = serverAddr, tc.Scenario.Rebind, seed, true
	rcfg.ToServer, rcfg.ToClient = lk.scenarioLinks(tc.Scenario)
	rcfg.Capture = netem.Tee(lw.Capture, rw.Capture)
	relay, err := netem.NewRelay(rcfg)
	if err == nil {
		err = relay.Start(cctx)
	}
	if err != nil {
		leftFile.Close()
		rightFile.Close()
		return fail("setup", err)
	}
	if err := lk.startCross(cctx, tc.Scenario, lg); err != nil {
		relay.Stop()
		leftFile.Close()
		rightFile.Close()
		return fail("setup", err)
	}
	relay.Arm()
	relayAddr := relay.Addr()
	lg.printf("relay on %s, armed", relayAddr)
	// The server's addresses as each trace shows them: the relay's
	// client-facing ones on the client trace, the server's own on the
	// server trace.
	clientSide, serverSide := append([]netip.AddrPort{relayAddr}, relay.AlternateAddrs()...), []netip.AddrPort{serverAddr}
	for _, a := range rcfg.Alternates {
		serverSide = append(serverSide, a.Server)
	}

	var urls []string
	for _, f := range fs {
		urls = append(urls, "https://"+net.JoinHostPort(lk.urlHost, strconv.Itoa(int(relayAddr.Port())))+"/"+f.Name)
	}
	cres, cerr := client.RunClient(cctx, peers.ClientOpts{
		Netns: lk.clientNS,
		URLs:  urls, OutDir: downloads, TestCase: tc.ClientCase, KeylogFile: clientKeys,
		QlogDir: filepath.Join(dir, "client", "qlog"), CAFile: filepath.Join(certs, "ca.pem"), LogDir: filepath.Join(dir, "client"),
	})
	timedOut := errors.Is(cctx.Err(), context.DeadlineExceeded)
	if cres != nil {
		code := cres.ExitCode
		res.Exit.Client = &code
		res.Paths.ClientLog = relPath(r.Dir, cres.LogFile)
		lg.printf("client exited with %d after %v", code, cres.Duration.Round(time.Millisecond))
	} else if cerr != nil {
		lg.printf("client: %v", cerr)
	}
	// The client's last packets may still be in the emulated link (its
	// Finished and CONNECTION_CLOSE after a 0-RTT download, for one):
	// let them reach the server before it is stopped, as they would on a
	// real path. The bound covers a full queue on the slowest
	// link of the test cases.
	dctx, dcancel := context.WithTimeout(ctx, drainTimeout)
	if err := relay.Drain(dctx, netem.ToServer); err != nil {
		lg.printf("link to the server not drained within %v: %v", drainTimeout, err)
	}
	dcancel()
	cross := lk.stopCross(lg)
	stopServer()
	relay.Stop()
	ts, tcl := relay.Stats()
	t0, _ := relay.Epoch()
	link := &LinkRecord{Name: tc.Scenario.Name, Engine: engine, Seed: seed, Server: serverAddr, Relay: relayAddr, Alternates: serverSide[1:], ToServer: rcfg.ToServer, ToClient: rcfg.ToClient,
		Rebind: tc.Scenario.Rebind, T0: t0, Rebindings: relay.Rebindings(), StatsToServer: ts, StatsToClient: tcl, CrossTraffic: cross}
	if lk.ns != nil {
		link.Namespaces = []string{lk.ns.Client, lk.ns.Router, lk.ns.Server}
		if tc.Scenario.KernelBottleneck {
			link.KernelRateToClient = tc.Scenario.ToClient.Rate
		}
	}
	if l := tc.Scenario.ToServer; l.Loss > 0 {
		link.EffectiveLoss = netem.EffectiveLoss(l.Loss, l.MaxRun)
	}
	if l := tc.Scenario.ToServer; l.Corrupt > 0 {
		link.EffectiveCorrupt = netem.EffectiveLoss(l.Corrupt, l.MaxRun)
	}
	res.Scenario = link
	if b, err := json.MarshalIndent(link, "", "  "); err == nil {
		os.WriteFile(filepath.Join(dir, "sim", "link.json"), b, 0o644)
		res.Paths.Link = filepath.Join(rel, "sim", "link.json")
	}

	// Merge the key logs, the client's lines first, and embed them
	// at the head of both traces.
	merged, klValid := mergeKeyLogs(lg, clientKeys, serverKeys)
	for _, f := range []string{clientKeys, serverKeys} {
		if _, err := os.Stat(f); err == nil {
			res.Paths.KeyLogs = append(res.Paths.KeyLogs, relPath(r.Dir, f))
		}
	}
	for _, tw := range []struct {
		w *pcap.Writer
		f *os.File
	}{{left, leftFile}, {right, rightFile}} {
		if len(merged) > 0 {
			tw.w.WriteSecrets(keylog.Format(merged))
		}
		if err := tw.w.Close(); err != nil {
			lg.printf("trace: %v", err)
		}
		tw.f.Close()
	}
	res.Paths.ClientTrace = filepath.Join(rel, "sim", "trace_node_left.pcap")
	res.Paths.ServerTrace = filepath.Join(rel, "sim", "trace_node_right.pcap")
	res.Paths.Qlogs = qlogs(r.Dir, dir)

	switch {
	case timedOut:
		res.Result, res.Reason, res.Detail = FailedRes, "timeout", fmt.Sprintf("client did not finish within %v", timeout)
		lg.printf("timeout")
	case cres != nil && cres.ExitCode == 127 || errors.Is(cerr, peers.ErrUnsupported):
		res.Result, res.Reason, res.Detail = Unsupported, "exit", "client exited with 127"
	case cres == nil:
		return fail("setup", cerr)
	case cres.ExitCode != 0:
		res.Result, res.Reason, res.Detail = FailedRes, "exit", fmt.Sprintf("client exited with %d", cres.ExitCode)
	}

	cell := &Cell{Test: tc, Files: fs, Downloads: downloads, KeyLog: klValid, Link: link}
	cell.ClientTrace, err = analyzeTrace(filepath.Join(dir, "sim", "trace_node_left.pcap"), merged, clientSide)
	if err == nil {
		cell.ServerTrace, err = analyzeTrace(filepath.Join(dir, "sim", "trace_node_right.pcap"), merged, serverSide)
	}
	if err != nil {
		lg.printf("analyzer: %v", err)
		if res.Result == "" {
			return fail("analyzer", err)
		}
		return res, nil
	}
	res.Analyzer = map[string]analyze.Summary{"client_trace": cell.ClientTrace.Summary(), "server_trace": cell.ServerTrace.Summary()}
	res.Handshakes = res.Analyzer["server_trace"].Handshakes
	if res.Result != "" {
		return res, cell
	}
	if tc.KeyLog && !klValid {
		// A client whose exit status says nothing (x/net, gtlsclient)
		// may have failed outright; missing files are a failure, not a
		// missing key log.
		if ok, detail := compareDownloads(downloads, fs); !ok {
			res.Result, res.Reason, res.Detail = FailedRes, "checks", "files: "+detail
			return res, cell
		}
		res.Result, res.Reason, res.Detail = Unsupported, "keylog", "no valid key log (SERVER_HANDSHAKE_TRAFFIC_SECRET) from either endpoint"
		return res, cell
	}
	tc.Judge(cell)
	res.Checks = cell.Checks
	res.Result, res.CompatResult = cell.outcome(r.Strict)
	if res.Result == FailedRes {
		res.Reason = "checks"
		var failed []string
		for _, ch := range cell.Checks {
			if ch.Status == Failed && (ch.Class == Base || r.Strict && ch.Class == Extra) {
				failed = append(failed, ch.ID+": "+ch.Detail)
			}
		}
		res.Detail = strings.Join(failed, "; ")
	} else if cell.Environment != "" {
		res.Result, res.Reason, res.Detail = Unsupported, "environment", cell.Environment
	}
	for _, ch := range cell.Checks {
		lg.printf("check %-32s %-6s %-9s %s", ch.ID, ch.Class, ch.Status, ch.Detail)
	}
	lg.printf("result %s (compat %s)", res.Result, res.CompatResult)
	return res, cell
}

func relPath(base, p string) string {
	if p == "" {
		return ""
	}
	if r, err := filepath.Rel(base, p); err == nil {
		return r
	}
	return p
}

// qlogs lists the qlog files both endpoints wrote.
func qlogs(base, dir string) []string {
	var out []string
	for _, role := range []string{"server", "client"} {
		filepath.WalkDir(filepath.Join(dir, role, "qlog"), func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				out = append(out, relPath(base, p))
			}
			return nil
		})
	}
	return out
}

func newTrace(path string) (*pcap.Writer, *os.File, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, nil, err
	}
	w, err := pcap.NewWriterOptions(f, pcap.Options{SecretsFirst: true})
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return w, f, nil
}

// mergeKeyLogs reads both key logs and merges them, the client's lines
// winning. valid reports a SERVER_HANDSHAKE_TRAFFIC_SECRET line.
func mergeKeyLogs(lg *cellLog, files ...string) (merged []keylog.Entry, valid bool) {
	var logs [][]keylog.Entry
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			continue
		}
		e, err := keylog.Parse(fh)
		fh.Close()
		if err != nil {
			lg.printf("key log %s: %v", filepath.Base(filepath.Dir(f)), err)
		}
		logs = append(logs, e)
	}
	merged = keylog.Merge(logs...)
	for _, e := range merged {
		if e.Label == keylog.ServerHandshakeTrafficSecret {
			valid = true
		}
	}
	return merged, valid
}

func analyzeTrace(path string, keys []keylog.Entry, server []netip.AddrPort) (*analyze.Trace, error) {
	c, err := pcap.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return analyze.Analyze(c, analyze.Options{KeyLog: keys, ServerAddrs: server})
}

// probeVN sends the readiness probe: a 1,200-byte datagram with a reserved
// version, and checks the Version Negotiation reply (RFC 9000 §6.1).
func probeVN(ctx context.Context, server netip.AddrPort) *VNProbe {
	out := &VNProbe{}
	conn, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(server))
	if err != nil {
		out.Detail = err.Error()
		return out
	}
	defer conn.Close()
	dcid := []byte{0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4}
	scid := []byte{0x5c, 0x1d, 5, 6, 7, 8}
	const grease = 0x1a2a3a4a
	h := wire.LongHeader{Version: grease, Type: wire.PacketTypeInitial, DCID: dcid, SCID: scid, Length: 1100, PNLen: 1}
	b, _, _ := h.Append(nil)
	b = append(b, make([]byte, 1200-len(b))...)
	deadline := time.Now().Add(3 * time.Second)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	conn.SetDeadline(deadline)
	buf := make([]byte, 2048)
	// Probe up to three times: the first datagram may race the server's
	// socket set-up, and loopback never loses otherwise.
	for range 3 {
		if _, err := conn.Write(b); err != nil {
			out.Detail = err.Error()
			return out
		}
		conn.SetReadDeadline(time.Now().Add(time.Second))
		n, err := conn.Read(buf)
		if err != nil {
			out.Detail = err.Error()
			if time.Now().After(deadline) {
				return out
			}
			continue
		}
		vn, err := wire.ParseVersionNegotiation(buf[:n])
		if err != nil {
			out.Detail = "reply is not Version Negotiation: " + err.Error()
			return out
		}
		out.Answered = true
		for v := range vn.Versions.All() {
			out.Versions = append(out.Versions, v.String())
		}
		out.Valid = string(vn.DCID) == string(scid) && string(vn.SCID) == string(dcid) &&
			vn.Versions.Contains(wire.Version1) && !vn.Versions.Contains(grease)
		out.Detail = ""
		return out
	}
	return out
}
