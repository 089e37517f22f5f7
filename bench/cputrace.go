package bench

import (
	"math"
	"os"
	"strconv"
	"strings"
	"time"
)

// CPUTrace is a run's CPU utilisation over time: each value is CPUs
// busy over one interval (1 = one core all the time, i.e. CPU seconds per
// second), rounded to 0.001. Runs sample every traceInterval, since a
// 100 MB transfer lasts about a second here. Server and Client are the endpoints' processes (user + system
// time of the process, /proc/PID/stat); SoftIRQ and IRQ are machine-wide,
// the softirq and hardware-interrupt time of every CPU of the sampling
// host (/proc/stat's "cpu" line), which no process owns: on loopback or a
// veth pair much of the packet path runs there. Only whole intervals are
// kept, from the client's start to its exit.
type CPUTrace struct {
	Interval time.Duration `json:"interval_ns"`
	Server   []float64     `json:"server_cpus"`
	Client   []float64     `json:"client_cpus"`
	// SoftIRQ and IRQ are absent where /proc/stat does not expose them.
	SoftIRQ []float64 `json:"host_softirq_cpus,omitempty"`
	IRQ     []float64 `json:"host_irq_cpus,omitempty"`
	// Host says whose /proc/stat SoftIRQ and IRQ are: "local", or the
	// client's agent.
	Host string `json:"host"`
}

// cpuPoint is one reading of cumulative CPU times.
type cpuPoint struct {
	server, client time.Duration
	softirq, irq   time.Duration
	hostOK         bool
}

func readCPUPoint(server, client int) (p cpuPoint, ok bool) {
	su, ss, ok1 := procCPU(server)
	cu, cs, ok2 := procCPU(client)
	p.server, p.client = su+ss, cu+cs
	p.irq, p.softirq, p.hostOK = hostIRQ()
	return p, ok1 && ok2
}

// perSecond turns a CPU-time difference over d into CPUs busy.
func perSecond(delta, d time.Duration) float64 {
	return math.Round(delta.Seconds()/d.Seconds()*1000) / 1000
}

// traceInterval is a local run's sampling interval: /proc's times count
// 10 ms ticks, so a quarter second reads utilisation to ±4 %.
const traceInterval = 250 * time.Millisecond

// cpuTracer samples two endpoints every traceInterval until finish.
type cpuTracer struct {
	stop  chan struct{}
	done  chan struct{}
	trace CPUTrace
}

// traceCPU starts sampling the server and client processes.
func traceCPU(server, client int) *cpuTracer {
	t := &cpuTracer{stop: make(chan struct{}), done: make(chan struct{}), trace: CPUTrace{Interval: traceInterval, Host: "local"}}
	go t.loop(server, client)
	return t
}

func (t *cpuTracer) loop(server, client int) {
	defer close(t.done)
	last, ok := readCPUPoint(server, client)
	if !ok {
		return
	}
	lastAt := time.Now()
	tick := time.NewTicker(t.trace.Interval)
	defer tick.Stop()
	for {
		select {
		case <-t.stop:
			return
		case <-tick.C:
		}
		p, ok := readCPUPoint(server, client)
		if !ok {
			return // an endpoint exited: the interval is not whole
		}
		now := time.Now()
		d := now.Sub(lastAt)
		t.trace.Server = append(t.trace.Server, perSecond(p.server-last.server, d))
		t.trace.Client = append(t.trace.Client, perSecond(p.client-last.client, d))
		if p.hostOK && last.hostOK {
			t.trace.SoftIRQ = append(t.trace.SoftIRQ, perSecond(p.softirq-last.softirq, d))
			t.trace.IRQ = append(t.trace.IRQ, perSecond(p.irq-last.irq, d))
		}
		last, lastAt = p, now
	}
}

// finish stops sampling and returns the trace (nil when no interval was
// whole).
func (t *cpuTracer) finish() *CPUTrace {
	close(t.stop)
	<-t.done
	if len(t.trace.Server) == 0 {
		return nil
	}
	return &t.trace
}

// hostIRQ reads the irq and softirq times of all CPUs (fields 6 and 7 of
// /proc/stat's "cpu" line).
func hostIRQ() (irq, softirq time.Duration, ok bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, false
	}
	return parseHostIRQ(string(b))
}

func parseHostIRQ(stat string) (irq, softirq time.Duration, ok bool) {
	line, _, _ := strings.Cut(stat, "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return 0, 0, false
	}
	i, err1 := strconv.ParseInt(f[6], 10, 64)
	s, err2 := strconv.ParseInt(f[7], 10, 64)
	if err1 != nil || err2 != nil || i < 0 || s < 0 {
		return 0, 0, false
	}
	return time.Duration(i) * clockTick, time.Duration(s) * clockTick, true
}

// remoteTrace builds a run's trace from its agents' cumulative samples,
// which each agent takes at its own interval from its endpoint's start;
// the machine-wide times are the client host's.
func remoteTrace(server, client []CPUSample, clientAgent string) *CPUTrace {
	if len(client) < 2 {
		return nil
	}
	n := len(client) - 1
	iv := ((client[n].T - client[0].T) / time.Duration(n)).Round(time.Millisecond)
	t := &CPUTrace{Interval: iv, Host: clientAgent}
	diffs := func(s []CPUSample, f func(CPUSample) time.Duration) []float64 {
		var out []float64
		for i := 1; i < len(s); i++ {
			out = append(out, perSecond(f(s[i])-f(s[i-1]), s[i].T-s[i-1].T))
		}
		return out
	}
	busy := func(s CPUSample) time.Duration { return s.User + s.System }
	// The server's samples that overlap the client's life: the server
	// started first, so its samples are taken on its own clock; keep
	// the last len(client) of them up to the client's end.
	t.Client = diffs(client, busy)
	sd := diffs(server, busy)
	if n := len(t.Client); len(sd) > n {
		sd = sd[len(sd)-n:]
	}
	t.Server = sd
	if client[0].HostOK {
		t.SoftIRQ = diffs(client, func(s CPUSample) time.Duration { return s.SoftIRQ })
		t.IRQ = diffs(client, func(s CPUSample) time.Duration { return s.IRQ })
	}
	return t
}
