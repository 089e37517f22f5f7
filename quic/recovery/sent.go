package recovery

import "time"

// SentPacket is what loss detection remembers about one sent packet
// (RFC 9002 Appendix A.1.1).
//
// Meta is opaque to this package. The engine stores there whatever lets it
// find the frames the packet carried (typically an index into its own table
// of frame descriptors, or a packed offset/length into a ring of frame
// records), so that it can retransmit them when the packet is declared lost
// and release them when it is acknowledged. Keeping it a plain integer keeps
// the history free of pointers the garbage collector must scan and makes
// recording a packet allocation-free.
type SentPacket struct {
	// TimeSent is set by LossDetector.OnPacketSent to its now argument.
	TimeSent     time.Time
	PacketNumber int64
	Meta         uint64
	// Size is sent_bytes: "The number of bytes sent in the packet, not
	// including UDP or IP overhead, but including QUIC framing overhead."
	Size uint16
	// AckEliciting is set when the packet contains a frame other than ACK,
	// PADDING or CONNECTION_CLOSE (RFC 9002 §2).
	AckEliciting bool
	// InFlight is set when the packet counts toward bytes in flight: it
	// is ack-eliciting or contains PADDING (RFC 9002 §2).
	InFlight bool
	// PMTUProbe marks a DPLPMTUD probe: it counts toward bytes in flight
	// like any packet (RFC 9000 §14.4: "PMTU probes consume congestion
	// window"), but its loss is no congestion signal (§14.4: "Loss of a
	// QUIC packet that is carried in a PMTU probe is therefore not a
	// reliable indication of congestion and SHOULD NOT trigger a
	// congestion control reaction"), nor evidence of persistent
	// congestion.
	PMTUProbe bool
	// OtherPath marks a packet sent on a path being validated (a lone
	// PATH_CHALLENGE or PATH_RESPONSE): it counts in flight, but its loss
	// says nothing of congestion on the path in use.
	OtherPath bool

	state slotState
}

// slotState is the life of one history slot.
type slotState uint8

const (
	// slotSkipped marks a packet number the engine never used, e.g. one
	// skipped on purpose to detect optimistic ACKs (RFC 9000 §21.4).
	slotSkipped slotState = iota
	slotSent
	slotAcked
	slotLost
)

// sentHistory holds the sent packets of one packet number space in a ring
// indexed by packet number: slot (head+pn-base) mod len holds packet pn.
// Packet numbers only grow, so appending is O(1), looking a packet up is
// O(1), and acknowledged or lost packets at the front are dropped by moving
// head. The ring grows by doubling and is never shrunk, so a connection in
// steady state does not allocate.
type sentHistory struct {
	slots []SentPacket // len is zero or a power of two
	head  int          // index of the slot holding base
	n     int          // slots in use: packet numbers base .. base+n-1
	base  int64
}

// last returns the largest packet number in the ring; valid when n > 0.
func (h *sentHistory) last() int64 { return h.base + int64(h.n) - 1 }

// at returns the slot of pn, which must lie in [base, last()].
func (h *sentHistory) at(pn int64) *SentPacket {
	return &h.slots[(h.head+int(pn-h.base))&(len(h.slots)-1)]
}

// push appends p. Its packet number must be larger than any before; the
// packet numbers skipped in between are recorded as such.
func (h *sentHistory) push(p SentPacket) {
	if h.n == 0 {
		h.base = p.PacketNumber
		h.head = 0
	}
	for h.base+int64(h.n) < p.PacketNumber {
		h.append(SentPacket{PacketNumber: h.base + int64(h.n), state: slotSkipped})
	}
	p.state = slotSent
	h.append(p)
}

func (h *sentHistory) append(p SentPacket) {
	if h.n == len(h.slots) {
		h.grow()
	}
	h.slots[(h.head+h.n)&(len(h.slots)-1)] = p
	h.n++
}

func (h *sentHistory) grow() {
	size := max(2*len(h.slots), 4) // small while idle; doubles under load
	slots := make([]SentPacket, size)
	for i := 0; i < h.n; i++ {
		slots[i] = h.slots[(h.head+i)&(len(h.slots)-1)]
	}
	h.slots = slots
	h.head = 0
}

// trim drops the slots at the front that no longer hold a packet waiting
// for its fate.
func (h *sentHistory) trim() {
	mask := len(h.slots) - 1
	for h.n > 0 && h.slots[h.head].state != slotSent {
		h.head = (h.head + 1) & mask
		h.base++
		h.n--
	}
}

// clear forgets every packet but keeps the storage.
func (h *sentHistory) clear() {
	h.n = 0
	h.head = 0
}
