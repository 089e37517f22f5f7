package bench

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/quiver-quic/quiver/peers"
	"github.com/quiver-quic/quiver/quic"
)

// Pair is a server implementation and a client implementation.
type Pair struct {
	Server string `json:"server"`
	Client string `json:"client"`
}

// String returns "SERVER<-CLIENT", as the --pairs flag takes it.
func (p Pair) String() string { return p.Server + "<-" + p.Client }

// ParsePairs reads "server<-client,…" (also "server:client").
func ParsePairs(s string) ([]Pair, error) {
	var out []Pair
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		srv, cli, ok := strings.Cut(f, "<-")
		if !ok {
			srv, cli, ok = strings.Cut(f, ":")
		}
		if !ok {
			return nil, fmt.Errorf("pair %q: want server<-client", f)
		}
		si, err := lookupImpl(srv)
		if err != nil {
			return nil, err
		}
		ci, err := lookupImpl(cli)
		if err != nil {
			return nil, err
		}
		out = append(out, Pair{Server: si.name, Client: ci.name})
	}
	return out, nil
}

// SelfPairs pairs each named implementation with itself.
func SelfPairs(names []string) ([]Pair, error) {
	var out []Pair
	for _, n := range names {
		im, err := lookupImpl(n)
		if err != nil {
			return nil, err
		}
		out = append(out, Pair{Server: im.name, Client: im.name})
	}
	return out, nil
}

// Config is one configuration of a sweep.
type Config struct {
	Name  string `json:"name"`
	Knobs Knobs  `json:"knobs"`
	// Rmem, when positive, sets net.core.rmem_default and rmem_max (bytes)
	// for the runs of this configuration; the old values come back after.
	Rmem int `json:"rmem,omitempty"`
	// Topology is "loopback" (default), "veth": a namespace pair joined
	// by a veth pair, shaped with tbf at Rate bit/s when Rate > 0, or
	// "relay": loopback through a netem.Relay emulating Path.
	Topology string        `json:"topology,omitempty"`
	Rate     int64         `json:"rate_bps,omitempty"`
	Path     *EmulatedPath `json:"path,omitempty"`
	// MTU and Offload set the veth pair's MTU (0: 1,500) and interface
	// offloads (an OffloadSets name; "": the veth default).
	MTU     int    `json:"mtu,omitempty"`
	Offload string `json:"offload,omitempty"`
	// Pin places the endpoints on CPUs (a PinModes name; "": unpinned).
	Pin string `json:"pin,omitempty"`
}

// Options is what a goodput or handshake measurement runs.
type Options struct {
	Pairs   []Pair   `json:"pairs"`
	Configs []Config `json:"configs"`
	// Size is the file size in bytes (goodput).
	Size int64 `json:"size"`
	// Runs is the number of repetitions of every pair and configuration.
	Runs int `json:"runs"`
	// ALPN is the application protocol asked for; pairs that cannot speak
	// it use one they share (ngtcp2 speaks only h3).
	ALPN string `json:"alpn"`
	// Handshakes and Parallel size a handshake measurement.
	Handshakes int `json:"handshakes,omitempty"`
	Parallel   int `json:"parallel,omitempty"`
	// Profile asks Go endpoints for a CPU profile per run, classified by
	// ClassifyProfile.
	Profile bool `json:"profile,omitempty"`
	// Dir is the working folder for files; default a fresh folder on
	// tmpfs (/dev/shm) so that disk speed does not enter the timing.
	Dir string `json:"-"`
	// Keep keeps the working folder (profiles, downloads) afterwards.
	Keep bool `json:"-"`
	Bins Bins `json:"-"`
	// RunTimeout bounds one run (default 2 minutes).
	RunTimeout time.Duration `json:"-"`
	// Progress, when set, receives one line per run.
	Progress io.Writer `json:"-"`
	// Command is the command line, recorded in every output.
	Command string `json:"-"`
}

// Run is one measured repetition.
type Run struct {
	Config string `json:"config"`
	Pair
	ALPN string `json:"alpn"`
	Iter int    `json:"iter"`
	// Bytes is the file size (goodput) and Handshakes the number of
	// handshakes (handshake runs).
	Bytes      int64 `json:"bytes,omitempty"`
	Handshakes int   `json:"handshakes,omitempty"`
	// Wall is the client's wall time: from process start to exit for a
	// download (as the study measured), the client's own timing of the
	// handshake loop for handshakes.
	Wall        time.Duration `json:"wall_ns"`
	GoodputMbps float64       `json:"goodput_mbps,omitempty"`
	HandshakesS float64       `json:"handshakes_per_s,omitempty"`
	ServerCPU   Usage         `json:"server_cpu"`
	ClientCPU   Usage         `json:"client_cpu"`
	// UDP is the change of the kernel's UDP counters in the client's
	// network namespace (on loopback: both endpoints').
	UDP UDPCounters `json:"udp"`
	// Profiles maps "server" and "client" to the CPU split of their
	// profile, when one was taken.
	Profiles map[string]Split `json:"profiles,omitempty"`
	// Link is what the relay saw, on the relay topology.
	Link *LinkStats `json:"link,omitempty"`
	// Cipher is the TLS 1.3 suite the handshake chose, as the bench's own
	// endpoints report it ("" when neither end is one of them).
	Cipher string `json:"cipher,omitempty"`
	// Acks is what the data receiver counted of its ACKs, when it is the
	// bench's Quiver client (ACK ratio configurations).
	Acks *AckStats `json:"acks,omitempty"`
	// CPUTrace is the endpoints' CPU second by second, with the
	// machine-wide softirq and interrupt CPU.
	CPUTrace *CPUTrace `json:"cpu_trace,omitempty"`
	// Err is why the run failed; failed runs are kept and excluded from
	// the statistics.
	Err string `json:"error,omitempty"`
}

// CPUPerGB returns the CPU seconds per 10^9 bytes of an endpoint's usage.
func (r Run) CPUPerGB(u Usage) float64 {
	if r.Bytes == 0 {
		return 0
	}
	return u.Total().Seconds() / (float64(r.Bytes) / 1e9)
}

// Note records a configuration that was not run, and why.
type Note struct {
	Config string `json:"config"`
	Pair
	Reason string `json:"reason"`
}

// Result is a whole measurement.
type Result struct {
	Kind        string    `json:"kind"` // goodput or handshakes
	Command     string    `json:"command"`
	Started     time.Time `json:"started"`
	Host        HostInfo  `json:"host"`
	Options     Options   `json:"options"`
	Runs        []Run     `json:"runs"`
	Unsupported []Note    `json:"unsupported,omitempty"`
	Summaries   []Summary `json:"summaries"`
}

// cell is one pair in one configuration.
type cell struct {
	cfg      Config
	pair     Pair
	srv, cli *impl
	alpn     string
}

// workspace holds the files every run shares.
type workspace struct {
	dir, root, cert, key, file string
	size                       int64
	owned                      bool
}

func newWorkspace(o *Options) (*workspace, error) {
	w := &workspace{dir: o.Dir}
	if w.dir == "" {
		base := ""
		if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
			base = "/dev/shm"
		}
		d, err := os.MkdirTemp(base, "quiver-bench-")
		if err != nil {
			return nil, err
		}
		w.dir, w.owned = d, true
	}
	w.root = filepath.Join(w.dir, "www")
	if err := os.MkdirAll(w.root, 0o755); err != nil {
		return nil, err
	}
	var err error
	if w.cert, w.key, err = peers.WriteSelfSignedCert(w.dir); err != nil {
		return nil, err
	}
	w.size = o.Size
	w.file = fmt.Sprintf("data-%d.bin", o.Size)
	if o.Size > 0 {
		if err := writeRandomFile(filepath.Join(w.root, w.file), o.Size); err != nil {
			return nil, err
		}
	} else {
		w.file = "hello.txt"
		if err := os.WriteFile(filepath.Join(w.root, w.file), []byte("hello\n"), 0o644); err != nil {
			return nil, err
		}
	}
	// Namespaced endpoints run as root in other namespaces, but the files
	// must stay readable for peers that drop privileges.
	return w, os.Chmod(w.dir, 0o755)
}

func (w *workspace) close(keep bool) {
	if w.owned && !keep {
		os.RemoveAll(w.dir)
	}
}

// writeRandomFile writes size random bytes: incompressible, as the study's
// files were.
func writeRandomFile(path string, size int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	buf := make([]byte, 1<<20)
	for left := size; left > 0; {
		n := min(left, int64(len(buf)))
		rand.Read(buf[:n])
		if _, err := f.Write(buf[:n]); err != nil {
			f.Close()
			return err
		}
		left -= n
	}
	return f.Close()
}

// cells expands pairs × configurations, noting the unsupported ones.
func cells(o *Options, ws *workspace) ([]cell, []Note, error) {
	var out []cell
	var notes []Note
	for _, cfg := range o.Configs {
		for _, p := range o.Pairs {
			srv, err := lookupImpl(p.Server)
			if err != nil {
				return nil, nil, err
			}
			cli, err := lookupImpl(p.Client)
			if err != nil {
				return nil, nil, err
			}
			c := cell{cfg: cfg, pair: Pair{srv.name, cli.name}, srv: srv, cli: cli}
			if c.alpn, err = pairALPN(srv, cli, o.ALPN); err == nil {
				err = c.check(o, ws)
			}
			if err != nil {
				if errors.Is(err, errUnsupported) || errors.Is(err, peers.ErrNotInstalled) {
					notes = append(notes, Note{Config: cfg.Name, Pair: c.pair, Reason: err.Error()})
					continue
				}
				return nil, nil, err
			}
			out = append(out, c)
		}
	}
	return out, notes, nil
}

// check builds the cell's command lines once, to find unsupported knobs
// and missing binaries before anything runs.
func (c *cell) check(o *Options, ws *workspace) error {
	s := &site{bins: o.Bins, cert: ws.cert, key: ws.key, root: ws.root, host: "127.0.0.1", port: 1, out: ws.dir, file: ws.file, alpn: c.alpn, knobs: c.cfg.Knobs}
	srv, err := c.srv.server(s)
	if err != nil {
		return fmt.Errorf("%s server: %w", c.srv.name, err)
	}
	var cli cmdSpec
	if o.Handshakes > 0 {
		if c.cli.hsClient == nil {
			return fmt.Errorf("%s has no handshake client: %w", c.cli.name, errUnsupported)
		}
		cli, err = c.cli.hsClient(s, 1, 1)
	} else {
		cli, err = c.cli.client(s)
	}
	if err != nil {
		return fmt.Errorf("%s client: %w", c.cli.name, err)
	}
	for _, path := range []string{srv.Path, cli.Path} {
		if st, err := os.Stat(path); err != nil || st.IsDir() {
			return fmt.Errorf("%s: %w (install with %s)", path, peers.ErrNotInstalled, peers.InstallCommand)
		}
	}
	if c.cfg.Topology == "veth" && os.Geteuid() != 0 {
		return fmt.Errorf("veth namespaces need root: %w", errUnsupported)
	}
	if c.cfg.Knobs.AckRatio != 0 && (c.srv.name != "quiver" || c.cli.name != "quiver") {
		return fmt.Errorf("ACK frequency policies: only Quiver implements the sender: %w", errUnsupported)
	}
	if c.cfg.Topology == "relay" && c.cfg.Path == nil {
		return fmt.Errorf("relay topology without a path")
	}
	return nil
}

// measure runs every cell Runs times, alternating: each round visits every
// cell once, starting one cell later than the round before, so that slow
// drifts in the machine's load hit every configuration alike.
func measure(ctx context.Context, o *Options, kind string) (*Result, error) {
	if o.Runs <= 0 {
		o.Runs = 1
	}
	if o.RunTimeout <= 0 {
		o.RunTimeout = 2 * time.Minute
	}
	if len(o.Configs) == 0 {
		o.Configs = []Config{{Name: "default"}}
	}
	res := &Result{Kind: kind, Command: o.Command, Started: time.Now().UTC(), Host: hostInfo(), Options: *o}
	ws, err := newWorkspace(o)
	if err != nil {
		return nil, err
	}
	defer ws.close(o.Keep)
	cs, notes, err := cells(o, ws)
	if err != nil {
		return nil, err
	}
	res.Unsupported = notes
	if len(cs) == 0 {
		return res, errors.New("nothing to run: every pair and configuration is unsupported or not installed")
	}
	env, err := newEnvironment(ctx, cs)
	if err != nil {
		return nil, err
	}
	defer env.restore()
	total := o.Runs * len(cs)
	for iter := range o.Runs {
		for k := range cs {
			c := &cs[(k+iter)%len(cs)]
			if err := ctx.Err(); err != nil {
				return res, err
			}
			if err := env.apply(c.cfg); err != nil {
				return res, err
			}
			var r Run
			if kind == "handshakes" {
				r = runHandshakes(ctx, o, ws, env, c, iter)
			} else {
				r = runTransfer(ctx, o, ws, env, c, iter)
			}
			res.Runs = append(res.Runs, r)
			if o.Progress != nil {
				fmt.Fprintf(o.Progress, "[%d/%d] %s\n", len(res.Runs), total, r.line())
			}
		}
	}
	res.Summaries = summarize(res)
	return res, nil
}

func (r Run) line() string {
	if r.Err != "" {
		return fmt.Sprintf("%s %s: FAILED: %s", r.Config, r.Pair, firstLine(r.Err))
	}
	if r.Handshakes > 0 {
		return fmt.Sprintf("%s %s: %.0f handshakes/s", r.Config, r.Pair, r.HandshakesS)
	}
	return fmt.Sprintf("%s %s: %.0f Mbit/s, CPU %.2f+%.2f s/GB, %d socket drops", r.Config, r.Pair, r.GoodputMbps,
		r.CPUPerGB(r.ServerCPU), r.CPUPerGB(r.ClientCPU), r.UDP.RcvbufErrors)
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

// freePort returns a port that was free a moment ago on loopback.
func freePort(proto string) (int, error) {
	if proto == "tcp" {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		defer l.Close()
		return l.Addr().(*net.TCPAddr).Port, nil
	}
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).Port, nil
}

// newSite prepares the command-line values of one run.
func newSite(o *Options, ws *workspace, env *environment, c *cell, iter int) (*site, string, error) {
	runDir := filepath.Join(ws.dir, fmt.Sprintf("run-%s-%s-%s-%d", safeName(c.cfg.Name), safeName(c.pair.Server), safeName(c.pair.Client), iter))
	if err := os.MkdirAll(filepath.Join(runDir, "out"), 0o755); err != nil {
		return nil, "", err
	}
	port, err := freePort(c.srv.proto)
	if err != nil {
		return nil, "", err
	}
	s := &site{bins: o.Bins, cert: ws.cert, key: ws.key, root: ws.root, host: "127.0.0.1", port: port,
		out: filepath.Join(runDir, "out"), file: ws.file, alpn: c.alpn, knobs: c.cfg.Knobs}
	if c.cfg.Topology == "veth" {
		s.host, s.serverNS, s.clientNS = serverIP, nsServer, nsClient
	}
	return s, runDir, nil
}

func safeName(s string) string {
	return strings.NewReplacer("/", "", " ", "_", "<-", "-", "=", "").Replace(s)
}

// startServer starts a cell's server and waits for its socket.
func startServer(ctx context.Context, c *cell, s *site) (*proc, error) {
	spec, err := c.srv.server(s)
	if err != nil {
		return nil, err
	}
	spec = pinned(spec, c.cfg.Pin, "server")
	p, err := start(spec)
	if err != nil {
		return nil, err
	}
	if err := p.waitListening(ctx, c.srv.proto, s.port, 10*time.Second); err != nil {
		p.stop()
		return nil, err
	}
	return p, nil
}

// startRun prepares a run's site and starts its server, with CPU profile
// files for the Go endpoints when asked; the site is left ready for the
// client (its profile file set). The returned cleanup removes the run's
// downloads.
func startRun(ctx context.Context, o *Options, ws *workspace, env *environment, c *cell, iter int) (s *site, srv *proc, profiles map[string]string, cleanup func(), err error) {
	s, runDir, err := newSite(o, ws, env, c, iter)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	cleanup = func() { os.RemoveAll(filepath.Join(runDir, "out")) }
	profiles = map[string]string{}
	if o.Profile && c.srv.goProfile {
		s.profile = filepath.Join(runDir, "server.pprof")
		profiles["server"] = s.profile
	}
	if srv, err = startServer(ctx, c, s); err != nil {
		cleanup()
		return nil, nil, nil, nil, err
	}
	s.profile = ""
	if o.Profile && c.cli.goProfile {
		s.profile = filepath.Join(runDir, "client.pprof")
		profiles["client"] = s.profile
	}
	return s, srv, profiles, cleanup, nil
}

// runTransfer measures one download.
func runTransfer(ctx context.Context, o *Options, ws *workspace, env *environment, c *cell, iter int) (r Run) {
	r = Run{Config: c.cfg.Name, Pair: c.pair, ALPN: c.alpn, Iter: iter, Bytes: ws.size}
	ctx, cancel := context.WithTimeout(ctx, o.RunTimeout)
	defer cancel()
	s, srv, profiles, cleanup, err := startRun(ctx, o, ws, env, c, iter)
	if err != nil {
		r.Err = err.Error()
		return r
	}
	defer cleanup()
	var stopRelay func() LinkStats
	if c.cfg.Topology == "relay" {
		if stopRelay, err = startRelay(ctx, c.cfg.Path, s, uint64(iter)+1); err != nil {
			srv.stop()
			r.Err = err.Error()
			return r
		}
	}
	spec, err := c.cli.client(s)
	spec = pinned(spec, c.cfg.Pin, "client")
	if err != nil {
		srv.stop()
		if stopRelay != nil {
			stopRelay()
		}
		r.Err = err.Error()
		return r
	}
	before := env.udp(s.clientNS)
	begin := time.Now()
	cli, err := start(spec)
	var tr *cpuTracer
	if err == nil {
		tr = traceCPU(srv.p.Pid(), cli.p.Pid())
		r.ClientCPU, err = cli.wait(ctx)
	}
	r.Wall = time.Since(begin)
	if tr != nil {
		r.CPUTrace = tr.finish()
	}
	if stopRelay != nil {
		ls := stopRelay()
		r.Link = &ls
	}
	var serr error
	r.ServerCPU, serr = srv.stop()
	r.UDP = env.udp(s.clientNS).sub(before)
	if err == nil {
		err = serr
	}
	if cli != nil {
		r.Cipher = reportedCipher(cli.out.String(), srv.out.String())
		if a, ok := parseAckStats(cli.out.String()); ok {
			r.Acks = &a
		}
	}
	if err == nil {
		err = checkCipher(c.cfg.Knobs.Cipher, r.Cipher)
	}
	if err == nil {
		err = checkSize(filepath.Join(s.out, ws.file), ws.size)
	}
	if err != nil {
		r.Err = err.Error()
		return r
	}
	r.GoodputMbps = float64(ws.size) * 8 / r.Wall.Seconds() / 1e6
	r.Profiles = classifyFiles(profiles)
	return r
}

// reportedCipher finds the suite an endpoint printed (CipherLine).
func reportedCipher(outputs ...string) string {
	for _, out := range outputs {
		for _, l := range strings.Split(out, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(l), CipherLine); ok {
				return strings.TrimSpace(v)
			}
		}
	}
	return ""
}

// checkCipher fails a run whose handshake chose another suite than the
// configuration asked for: a sweep point is never measured under another
// cipher's name.
func checkCipher(want, got string) error {
	if want == "" || got == "" {
		return nil
	}
	id, err := quic.ParseTLS13Suite(strings.TrimSuffix(want, "-noaesni"))
	if err != nil {
		return err
	}
	if name := tls.CipherSuiteName(id); name != got {
		return fmt.Errorf("cipher %s asked for, but the handshake chose %s", name, got)
	}
	return nil
}

func checkSize(path string, want int64) error {
	st, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("download missing: %w", err)
	}
	if st.Size() != want {
		return fmt.Errorf("download %s has %d bytes, want %d", path, st.Size(), want)
	}
	return nil
}

// HostInfo records what the numbers depend on.
type HostInfo struct {
	Kernel     string `json:"kernel"`
	CPU        string `json:"cpu"`
	CPUs       int    `json:"cpus"`
	GoVersion  string `json:"go_version"`
	RmemDef    string `json:"rmem_default"`
	RmemMax    string `json:"rmem_max"`
	Contended  bool   `json:"contended"`
	GOMAXPROCS int    `json:"gomaxprocs"`
}

// CurrentHost describes this machine as every result records it.
func CurrentHost() HostInfo { return hostInfo() }

// String is the host on one line.
func (h HostInfo) String() string {
	s := fmt.Sprintf("%s, %d CPUs, Linux %s, %s", h.CPU, h.CPUs, h.Kernel, h.GoVersion)
	if h.Contended {
		s += ", contended"
	}
	return s
}

func hostInfo() HostInfo {
	h := HostInfo{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), GOMAXPROCS: runtime.GOMAXPROCS(0)}
	h.Kernel = readTrim("/proc/sys/kernel/osrelease")
	h.RmemDef = readTrim("/proc/sys/net/core/rmem_default")
	h.RmemMax = readTrim("/proc/sys/net/core/rmem_max")
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				h.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	// Two endpoints on two cores leave nothing for anything else.
	h.Contended = h.CPUs <= 2
	return h
}

func readTrim(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
