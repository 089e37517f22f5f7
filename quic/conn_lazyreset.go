package quic

import "github.com/quiver-quic/quiver/quic/streams"

// A RESET_STREAM that answers STOP_SENDING is in no hurry: the peer has
// said it reads nothing more, and sent at once it costs a datagram of its
// own, and the peer an ACK, per exchange (a request-response protocol whose
// server stops the client's side when it answers: the RPC's QUIC
// transport). RFC 9000 §3.5: "An endpoint that receives a STOP_SENDING
// frame MUST send a RESET_STREAM frame if the stream is in the "Ready" or
// "Send" state", with no deadline. The reset waits while an ACK of the
// application space is pending, whose packet (at most max_ack_delay later,
// RFC 9000 §13.2.1) or any earlier one carries it; without a pending ACK
// it goes at once.

// queueResetReplyLocked queues st's RESET_STREAM in reply to STOP_SENDING:
// lazily when st has nothing else queued, at once when the connection's
// Policy says ResetReplyAtOnce (every Probe does). c.mu is held.
func (c *Conn) queueResetReplyLocked(st *Stream) {
	if st.queued || st.lazy || c.policy.ResetReplyAtOnce {
		c.queueSendLocked(st)
		return
	}
	if st.send.State() != streams.SendResetSent {
		return // the stream was already done: nothing to send
	}
	st.lazy = true
	c.streams.lazyReset = append(c.streams.lazyReset, st)
	c.wake() // the loop decides whether an ACK will carry it
}

// queueLazyResetsLocked moves the waiting resets into the send queue.
// c.mu is held.
func (c *Conn) queueLazyResetsLocked() {
	s := &c.streams
	for i, st := range s.lazyReset {
		st.lazy = false
		c.queueSendLocked(st)
		s.lazyReset[i] = nil
	}
	s.lazyReset = s.lazyReset[:0]
}

// releaseLazyResets queues the waiting resets for this turn unless an ACK
// of the application space is pending, whose packet will carry them.
func (c *Conn) releaseLazyResets() {
	// Only the loop changes lazyReset (onStopSending and the functions
	// here run on it), so its length can be read without c.mu.
	if len(c.streams.lazyReset) == 0 {
		return
	}
	if !c.spaces[appSpace].acks.deadline().IsZero() && !c.closing.active() {
		return
	}
	c.mu.Lock()
	c.queueLazyResetsLocked()
	c.mu.Unlock()
}
