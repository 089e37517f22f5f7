package rawquic

import "github.com/quiver-quic/quiver/quic/wire"

// Credit raises the raw client's flow-control limits as it reads, as
// any receiver does (RFC 9000 §4.2: "receivers [...] send MAX_STREAM_DATA
// or MAX_DATA frames to increase the flow control limits"). The raw client
// reads every byte the moment it arrives, so once the sender has used half
// of a window the limit moves to what was read plus a whole window again.
// The frames ride with the client's next acknowledgment. Only a client
// with the tester's default transport parameters grants credit: a scenario
// that sets its own limits is probing how the server honours them.
type Credit struct {
	on            bool
	streamWindow  uint64
	connWindow    uint64
	connRead      uint64
	connGranted   uint64
	streamGranted map[uint64]uint64
	queue         []wire.Frame
}

// NewCredit grants credit from the windows of the client's transport
// parameters tp.
func NewCredit(tp *wire.TransportParameters) Credit {
	return Credit{
		on:            true,
		streamWindow:  tp.InitialMaxStreamDataBidiLocal,
		connWindow:    tp.InitialMaxData,
		connGranted:   tp.InitialMaxData,
		streamGranted: map[uint64]uint64{},
	}
}

// Consumed notes that stream id's contiguous data reached n after delta
// new bytes, and queues the limits that move.
func (c *Credit) Consumed(s *Stream, id, n, delta uint64) {
	if !c.on {
		return
	}
	c.connRead += delta
	if c.connRead+c.connWindow/2 > c.connGranted {
		c.connGranted = c.connRead + c.connWindow
		c.queue = append(c.queue, &wire.MaxDataFrame{Maximum: c.connGranted})
	}
	if s.Fin {
		return // the final size is known: no more credit is needed
	}
	g, ok := c.streamGranted[id]
	if !ok {
		g = c.streamWindow
	}
	if n+c.streamWindow/2 > g {
		g = n + c.streamWindow
		c.queue = append(c.queue, &wire.MaxStreamDataFrame{StreamID: id, Maximum: g})
	}
	c.streamGranted[id] = g
}

// WithAck appends the queued limits to frames when frames carry an
// acknowledgment, so that deliberately crafted packets stay as they were.
func (c *Credit) WithAck(frames []wire.Frame) []wire.Frame {
	if len(c.queue) == 0 {
		return frames
	}
	for _, f := range frames {
		if a, ok := f.(*wire.AckFrame); ok && len(a.Ranges) > 0 {
			out := append(append([]wire.Frame(nil), frames...), c.queue...)
			c.queue = nil
			return out
		}
	}
	return frames
}
