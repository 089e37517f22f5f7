package streams

import "time"

// creditWindow decides when a receiver advertises more flow-control credit
// and how much, for one stream (MAX_STREAM_DATA) or the connection
// (MAX_DATA). It is the shared core of RecvStream and ConnFlow.
//
// RFC 9000 §4.2: "A receiver can use an autotuning mechanism to tune the
// frequency and amount of advertised additional credit based on a round-trip
// time estimate and the rate at which the receiving application consumes
// data". The limit is raised to consumed+window once half the window has been
// consumed; the window doubles (up to maxWindow) when the data consumed since
// the previous update implies the whole window lasts less than two RTTs, so
// flow control rather than the network would limit the sender.
type creditWindow struct {
	limit     uint64 // largest limit advertised
	consumed  uint64 // bytes the application has consumed (or that were discarded)
	window    uint64 // current window size
	maxWindow uint64 // auto-tuning never grows the window past this

	epochStart    time.Time // when the previous update was issued
	epochConsumed uint64    // consumed at epochStart
	resend        bool      // the frame carrying limit was lost
}

func (w *creditWindow) init(window, maxWindow uint64) {
	window = min(window, maxVarint)
	w.limit = window
	w.window = window
	w.maxWindow = max(window, min(maxWindow, maxVarint))
}

// due reports whether an update should be sent now: a lost update needs
// repeating, or less than half the window remains.
func (w *creditWindow) due() bool {
	if w.resend {
		return true
	}
	if w.limit >= maxVarint {
		return false
	}
	return w.limit-w.consumed <= w.window/2
}

// next returns the limit to advertise and records it as sent, if due.
func (w *creditWindow) next(now time.Time, rtt time.Duration) (uint64, bool) {
	if !w.due() {
		return 0, false
	}
	if w.resend && w.limit-w.consumed > w.window/2 {
		w.resend = false
		return w.limit, true
	}
	w.resend = false
	w.tune(now, rtt)
	l := min(w.consumed+w.window, maxVarint)
	if l <= w.limit {
		// RFC 9000 §4.1: "it is not an error to advertise a smaller
		// limit, but the smaller limit has no effect". Send the current one.
		return w.limit, true
	}
	w.limit = l
	return l, true
}

// tune grows the window if the previous one was consumed too fast.
func (w *creditWindow) tune(now time.Time, rtt time.Duration) {
	prev, prevConsumed := w.epochStart, w.epochConsumed
	w.epochStart, w.epochConsumed = now, w.consumed
	if prev.IsZero() || rtt <= 0 || w.window >= w.maxWindow {
		return
	}
	d := w.consumed - prevConsumed
	elapsed := now.Sub(prev)
	if d == 0 {
		return
	}
	// The window lasts window/d * elapsed at the recent rate; grow it when
	// that is under two RTTs. Floats avoid overflow for large windows.
	if float64(w.window)*float64(elapsed) < 2*float64(rtt)*float64(d) {
		w.grow(w.window * 2)
	}
}

// grow raises the window to n, capped at maxWindow. It never shrinks.
func (w *creditWindow) grow(n uint64) {
	w.window = max(w.window, min(n, w.maxWindow))
}

// lost requests that limit be advertised again if it is still current.
func (w *creditWindow) lost(limit uint64) {
	if limit == w.limit {
		w.resend = true
	}
}
