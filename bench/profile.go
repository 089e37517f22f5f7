package bench

import (
	"os"
	"slices"
	"strings"

	"github.com/google/pprof/profile"
)

// Split is how an endpoint's CPU profile divides between the study's
// categories, as fractions of all samples.
type Split struct {
	// PacketIO: send and receive system calls and the runtime's network
	// poller (the kernel work under a system call is charged to it).
	PacketIO float64 `json:"packet_io"`
	// Crypto: AEAD and header protection (crypto/..., x/crypto).
	Crypto float64 `json:"crypto"`
	// Protocol: the QUIC (or TLS record and HTTP) logic of the
	// implementation: frames, streams, ACKs, recovery, congestion control.
	Protocol float64 `json:"protocol"`
	// Other: the Go runtime (GC, scheduler, allocation not attributable
	// to the above), file I/O and everything else.
	Other float64 `json:"other"`
	// Samples is the number of profile samples (at pprof's 100 Hz, one
	// per 10 ms of CPU) the split rests on.
	Samples int64 `json:"samples"`
}

// category of one function name, or "" when it says nothing by itself
// (runtime helpers such as memmove take the category of their caller).
func category(fn string) string {
	switch {
	case strings.HasPrefix(fn, "syscall."), strings.HasPrefix(fn, "internal/runtime/syscall."),
		strings.HasPrefix(fn, "golang.org/x/sys/unix."), strings.HasPrefix(fn, "internal/poll."),
		strings.HasPrefix(fn, "runtime.netpoll"), strings.HasPrefix(fn, "net.(*UDPConn)"),
		strings.HasPrefix(fn, "golang.org/x/net/ipv4."), strings.HasPrefix(fn, "golang.org/x/net/ipv6."),
		strings.HasPrefix(fn, "golang.org/x/net/internal/socket."):
		return "io"
	case strings.HasPrefix(fn, "crypto/tls."):
		// The TLS record layer is TCP+TLS's protocol logic; the AEAD
		// and handshake primitives under it are crypto.
		return "protocol"
	case strings.HasPrefix(fn, "crypto/"), strings.HasPrefix(fn, "golang.org/x/crypto/"),
		strings.HasPrefix(fn, "vendor/golang.org/x/crypto/"):
		return "crypto"
	case strings.HasPrefix(fn, "github.com/quiver-quic/quiver/"), strings.HasPrefix(fn, "github.com/quic-go/"),
		strings.HasPrefix(fn, "golang.org/x/net/quic"), strings.HasPrefix(fn, "golang.org/x/net/internal/quic"),
		strings.HasPrefix(fn, "net/http."), strings.HasPrefix(fn, "bufio."):
		return "protocol"
	case strings.HasPrefix(fn, "runtime.gc"), strings.HasPrefix(fn, "runtime.schedule"),
		strings.HasPrefix(fn, "runtime.findRunnable"), strings.HasPrefix(fn, "runtime.mcall"),
		strings.HasPrefix(fn, "runtime.bgsweep"), strings.HasPrefix(fn, "runtime.bgscavenge"),
		strings.HasPrefix(fn, "os."), strings.HasPrefix(fn, "main."):
		return "other"
	}
	return ""
}

// ClassifyProfile splits a pprof CPU profile into the categories of Split.
// Each sample goes to the category of the frame nearest its leaf that has
// one, so that a memmove called by an AEAD counts as crypto and one called
// by the stream layer as protocol; samples with no such frame (the
// runtime on its own: GC workers, the scheduler) are Other.
func ClassifyProfile(p *profile.Profile) Split {
	var sp Split
	counts := map[string]int64{}
	var total int64
	for _, s := range p.Sample {
		if len(s.Value) == 0 {
			continue
		}
		v := s.Value[0]
		cat := "other"
	stack:
		for _, loc := range s.Location {
			// Inlined frames come first within a location, leaf first.
			for _, ln := range loc.Line {
				if ln.Function == nil {
					continue
				}
				if c := category(ln.Function.Name); c != "" {
					cat = c
					break stack
				}
			}
		}
		counts[cat] += v
		total += v
		sp.Samples += v
	}
	if total == 0 {
		return sp
	}
	sp.PacketIO = float64(counts["io"]) / float64(total)
	sp.Crypto = float64(counts["crypto"]) / float64(total)
	sp.Protocol = float64(counts["protocol"]) / float64(total)
	sp.Other = float64(counts["other"]) / float64(total)
	return sp
}

// classifyFiles reads and classifies the profiles by role; unreadable ones
// are left out.
func classifyFiles(files map[string]string) map[string]Split {
	out := map[string]Split{}
	for role, path := range files {
		f, err := os.Open(path)
		if err != nil {
			continue
		}
		p, err := profile.Parse(f)
		f.Close()
		if err != nil {
			continue
		}
		out[role] = ClassifyProfile(p)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// medianSplit takes the median of each category over runs.
func medianSplit(sps []Split) Split {
	pick := func(f func(Split) float64) float64 {
		xs := make([]float64, len(sps))
		for i, s := range sps {
			xs[i] = f(s)
		}
		slices.Sort(xs)
		return median(xs)
	}
	var n int64
	for _, s := range sps {
		n += s.Samples
	}
	return Split{
		PacketIO: pick(func(s Split) float64 { return s.PacketIO }),
		Crypto:   pick(func(s Split) float64 { return s.Crypto }),
		Protocol: pick(func(s Split) float64 { return s.Protocol }),
		Other:    pick(func(s Split) float64 { return s.Other }),
		Samples:  n,
	}
}
