package netem

import (
	"fmt"
	"io"
	"net/netip"
	"sync"
	"time"

	"github.com/quiver-quic/quiver/pcap"
)

// An EventKind says where on the link a datagram was seen.
type EventKind uint8

const (
	// Sent means the datagram entered the link on its sending side, before any
	// impairment.
	Sent EventKind = iota + 1
	// Delivered means a copy left the link on its receiving side, after the
	// impairments (possibly corrupted).
	Delivered
	// Dropped means the link, the NAT or the receiver discarded the datagram.
	Dropped
)

// String returns "sent", "delivered" or "dropped".
func (k EventKind) String() string {
	switch k {
	case Sent:
		return "sent"
	case Delivered:
		return "delivered"
	case Dropped:
		return "dropped"
	}
	return "unknown"
}

// A Direction names the side a datagram travels towards. The Relay knows
// which side is the client; the in-process Network does not, and leaves
// it zero.
type Direction uint8

// Directions: unknown (the in-process Network), towards the server and
// towards the client.
const (
	DirUnknown Direction = iota
	ToServer
	ToClient
)

// An Event reports one datagram seen by a Network or a Relay.
type Event struct {
	Time  time.Time
	Kind  EventKind
	Dir   Direction
	Cause DropCause // for Dropped
	// Src and Dst are the addresses on the wire at that point: for Sent, as
	// the sender wrote them; for Delivered, as the receiver sees them (after
	// NAT, or from the relay's socket).
	Src, Dst netip.AddrPort
	// Payload is only valid during the call; copy it to keep it.
	Payload []byte
	// ECN is the IP header's ECN codepoint (NotECT, ECT0, ECT1, CE) as
	// the relay read it; the in-process Network carries none.
	ECN uint8
}

// A CaptureFunc receives every Event. Calls are serialised, so it need not
// be safe for concurrent use, but it must not call back into the Network
// or Relay that calls it.
type CaptureFunc func(Event)

// A DatagramWriter stores datagrams with their time and addresses, as the
// pcap package's pcapng writer does.
type DatagramWriter interface {
	WriteDatagram(t time.Time, src, dst netip.AddrPort, payload []byte) error
}

// A TraceWriter writes the events that keep accepts to a DatagramWriter.
// Its Capture method is a CaptureFunc. A trace of one side of the link
// keeps, as the interop runner's client and server traces do, that side's
// datagrams before impairment and the other side's after it.
type TraceWriter struct {
	w    DatagramWriter
	keep func(Event) bool

	mu  sync.Mutex
	err error
}

// NewTraceWriter returns a TraceWriter for w. A nil keep keeps every Sent
// event: the traffic as offered, before the link.
func NewTraceWriter(w DatagramWriter, keep func(Event) bool) *TraceWriter {
	if keep == nil {
		keep = func(e Event) bool { return e.Kind == Sent }
	}
	return &TraceWriter{w: w, keep: keep}
}

// NewPcapTrace starts a pcapng capture on w of the events keep accepts
// (nil: every Sent event). Close the TraceWriter to finish the file; w
// itself is left open.
func NewPcapTrace(w io.Writer, keep func(Event) bool) (*TraceWriter, error) {
	pw, err := pcap.NewWriter(w)
	if err != nil {
		return nil, fmt.Errorf("netem: start pcapng trace: %w", err)
	}
	return NewTraceWriter(pw, keep), nil
}

// Close finishes the underlying writer if it has a Close method (the pcap
// writer does) and returns the first error of the trace.
func (t *TraceWriter) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if c, ok := t.w.(io.Closer); ok {
		if err := c.Close(); t.err == nil {
			t.err = err
		}
	}
	return t.err
}

// Capture writes e if the filter keeps it. After the first write error it
// writes nothing more; Err reports that error.
func (t *TraceWriter) Capture(e Event) {
	if !t.keep(e) {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err == nil {
		t.err = t.w.WriteDatagram(e.Time, e.Src, e.Dst, e.Payload)
	}
}

// Err returns the first write error.
func (t *TraceWriter) Err() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.err
}

// ClientTrace keeps what a capture next to the client shows: client
// datagrams as sent and server datagrams as delivered. Only the Relay sets
// the direction it relies on.
func ClientTrace(e Event) bool {
	return e.Dir == ToServer && e.Kind == Sent || e.Dir == ToClient && e.Kind == Delivered
}

// ServerTrace keeps what a capture next to the server shows.
func ServerTrace(e Event) bool {
	return e.Dir == ToClient && e.Kind == Sent || e.Dir == ToServer && e.Kind == Delivered
}

// EndpointTrace keeps what a capture on the endpoint at addr shows: what it
// sent and what was delivered to it.
func EndpointTrace(addr netip.AddrPort) func(Event) bool {
	return func(e Event) bool {
		return e.Kind == Sent && e.Src == addr || e.Kind == Delivered && e.Dst == addr
	}
}

// Tee returns a CaptureFunc that calls each non-nil f in turn, e.g. a
// client trace, a server trace and a test's own recorder.
func Tee(fs ...CaptureFunc) CaptureFunc {
	return func(e Event) {
		for _, f := range fs {
			if f != nil {
				f(e)
			}
		}
	}
}
