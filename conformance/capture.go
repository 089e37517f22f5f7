package conformance

import (
	"bytes"
	"net/netip"
	"os"
	"path/filepath"
	"slices"

	"github.com/quiver-quic/quiver/pcap"
	"github.com/quiver-quic/quiver/quic/wire"
)

// defaultLocal stands in for a tester address the capture never learnt
// (a handshake that failed before the socket was known).
var defaultLocal = netip.MustParseAddrPort("127.0.0.1:0")

// What the recorder keeps of the datagrams it sees. Every datagram goes to
// the scenario's capture (streamed to a spool file on disk when artifacts
// are kept), but in memory, once keepDatagramBytes have been kept whole,
// a short-header datagram keeps only its first keepDatagramPrefix bytes
// and its size: a download of any size then costs bounded memory, and
// every long-header datagram (the handshake, Retry, Version Negotiation,
// coalesced packets) stays whole for the judges that parse them.
const (
	keepDatagramBytes  = 2 << 20
	keepDatagramPrefix = 64
)

// startCapture starts the scenario's pcapng in dir: packets wait in a
// spool file until the key log is known (see pcap.Options.Spool).
func (r *recorder) startCapture(dir string) {
	f, err := os.Create(filepath.Join(dir, "capture.pcapng"))
	if err != nil {
		return
	}
	spool, err := os.CreateTemp(dir, "capture-*.spool")
	if err != nil {
		f.Close()
		return
	}
	w, err := pcap.NewWriterOptions(f, pcap.Options{SecretsFirst: true, Spool: spool})
	if err != nil {
		f.Close()
		spool.Close()
		os.Remove(spool.Name())
		return
	}
	r.mu.Lock()
	r.capFile, r.capSpool, r.capture = f, spool, w
	r.mu.Unlock()
}

// captureLocked writes d to the capture; r.mu is held.
func (r *recorder) captureLocked(d datagramRec) {
	if r.capture == nil {
		return
	}
	local := d.local
	if !local.IsValid() {
		local = defaultLocal
	}
	src, dst := local, d.peer
	if !d.sent {
		src, dst = d.peer, local
	}
	r.capture.WriteDatagram(d.at, src, dst, d.b)
}

// keepLocked trims d to what memory keeps of it; r.mu is held.
func (r *recorder) keepLocked(d *datagramRec) {
	d.size = len(d.b)
	if r.keptBytes+len(d.b) <= keepDatagramBytes || len(d.b) == 0 || d.b[0]&0x80 != 0 {
		r.keptBytes += len(d.b)
		return
	}
	d.b = append([]byte(nil), d.b[:min(len(d.b), keepDatagramPrefix)]...)
	d.truncated = true
}

// finishCapture writes the key log into the capture and completes it; it
// reports whether the file is whole.
func (r *recorder) finishCapture(keylog []byte) bool {
	r.mu.Lock()
	w := r.capture
	r.capture = nil
	r.mu.Unlock()
	if w == nil {
		return false
	}
	w.WriteSecrets(keylog)
	err := w.Close()
	r.endCapture()
	return err == nil
}

// endCapture closes the capture's files (an abandoned scenario leaves an
// incomplete capture) and removes the spool.
func (r *recorder) endCapture() {
	r.mu.Lock()
	f, spool := r.capFile, r.capSpool
	r.capFile, r.capSpool, r.capture = nil, nil, nil
	r.mu.Unlock()
	if f != nil {
		f.Close()
	}
	if spool != nil {
		spool.Close()
		os.Remove(spool.Name())
	}
}

// keepStreamOffset is how much of each stream recorded packets keep: a
// STREAM frame that starts further out keeps its offset, length and FIN but
// not its bytes (a zero slice of the same length stands in for them). The
// judges read headers, control streams and small responses, all in the
// first bytes of their streams; the raw client reassembles streams itself
// (rawquic.Stream) before its packets are compacted.
const keepStreamOffset = 64 << 10

// zeroData stands in for the bytes of compacted STREAM frames.
var zeroData [64 << 10]byte

// compactFrames returns frames with the payload they point into released:
// every slice is copied, but for the bytes of STREAM frames past
// keepStreamOffset, which are dropped.
func compactFrames(frames []wire.Frame) []wire.Frame {
	out := make([]wire.Frame, len(frames))
	for i, f := range frames {
		switch f := f.(type) {
		case *wire.StreamFrame:
			c := *f
			if f.Offset >= keepStreamOffset && len(f.Data) <= len(zeroData) {
				c.Data = zeroData[:len(f.Data):len(f.Data)]
			} else {
				c.Data = bytes.Clone(f.Data)
			}
			out[i] = &c
		case *wire.CryptoFrame:
			c := *f
			c.Data = bytes.Clone(f.Data)
			out[i] = &c
		case *wire.DatagramFrame:
			c := *f
			c.Data = bytes.Clone(f.Data)
			out[i] = &c
		case *wire.NewTokenFrame:
			out[i] = &wire.NewTokenFrame{Token: bytes.Clone(f.Token)}
		case *wire.NewConnectionIDFrame:
			c := *f
			c.ConnectionID = bytes.Clone(f.ConnectionID)
			out[i] = &c
		case *wire.ConnectionCloseFrame:
			c := *f
			c.Reason = bytes.Clone(f.Reason)
			out[i] = &c
		case *wire.RawFrame:
			out[i] = &wire.RawFrame{Bytes: bytes.Clone(f.Bytes)}
		case *wire.AckFrame:
			c := *f
			c.Ranges = slices.Clone(f.Ranges)
			out[i] = &c
		default:
			out[i] = f
		}
	}
	return out
}

// compact releases the payload behind p's frames once the raw client has
// processed them (see compactFrames).
func (c *connTrace) compact(p *packet) {
	c.r.mu.Lock()
	defer c.r.mu.Unlock()
	p.frames = compactFrames(p.frames)
}

// cloneFrame copies a frame out of the Parser that returned it (a parsed
// frame lives in its Parser, which a recorded packet would keep alive);
// byte fields still point into the parsed payload.
func cloneFrame(f wire.Frame) wire.Frame {
	switch f := f.(type) {
	case *wire.PaddingFrame:
		c := *f
		return &c
	case *wire.PingFrame:
		return &wire.PingFrame{}
	case *wire.AckFrame:
		c := *f
		c.Ranges = slices.Clone(f.Ranges)
		return &c
	case *wire.ResetStreamFrame:
		c := *f
		return &c
	case *wire.StopSendingFrame:
		c := *f
		return &c
	case *wire.CryptoFrame:
		c := *f
		return &c
	case *wire.NewTokenFrame:
		c := *f
		return &c
	case *wire.StreamFrame:
		c := *f
		return &c
	case *wire.MaxDataFrame:
		c := *f
		return &c
	case *wire.MaxStreamDataFrame:
		c := *f
		return &c
	case *wire.MaxStreamsFrame:
		c := *f
		return &c
	case *wire.DataBlockedFrame:
		c := *f
		return &c
	case *wire.StreamDataBlockedFrame:
		c := *f
		return &c
	case *wire.StreamsBlockedFrame:
		c := *f
		return &c
	case *wire.NewConnectionIDFrame:
		c := *f
		return &c
	case *wire.RetireConnectionIDFrame:
		c := *f
		return &c
	case *wire.PathChallengeFrame:
		c := *f
		return &c
	case *wire.PathResponseFrame:
		c := *f
		return &c
	case *wire.ConnectionCloseFrame:
		c := *f
		return &c
	case *wire.HandshakeDoneFrame:
		return &wire.HandshakeDoneFrame{}
	case *wire.DatagramFrame:
		c := *f
		return &c
	case *wire.AckFrequencyFrame:
		c := *f
		return &c
	case *wire.ImmediateAckFrame:
		return &wire.ImmediateAckFrame{}
	}
	return f
}
