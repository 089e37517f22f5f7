package qlog

import (
	"sync"
	"time"
)

// Recorder receives events. Record must not retain ev beyond the call
// unless the implementation documents otherwise (MemoryRecorder keeps it),
// and must be cheap: it is called from the connection's loop.
type Recorder interface {
	// Enabled reports whether events are wanted at all, so the engine can
	// skip building them.
	Enabled() bool
	// Record records ev as happening at now.
	Record(now time.Time, ev Event)
}

// Discard is a Recorder that is never enabled and drops every event.
var Discard Recorder = discard{}

type discard struct{}

func (discard) Enabled() bool           { return false }
func (discard) Record(time.Time, Event) {}

// Tee returns a Recorder that records to every enabled recorder in rs, for
// example a file Writer and a test's MemoryRecorder at once. Nil entries are
// ignored.
func Tee(rs ...Recorder) Recorder {
	var t tee
	for _, r := range rs {
		if r != nil {
			t = append(t, r)
		}
	}
	return t
}

type tee []Recorder

func (t tee) Enabled() bool {
	for _, r := range t {
		if r.Enabled() {
			return true
		}
	}
	return false
}

func (t tee) Record(now time.Time, ev Event) {
	for _, r := range t {
		if r.Enabled() {
			r.Record(now, ev)
		}
	}
}

// Recorded is an event kept by a MemoryRecorder with the time it happened.
type Recorded struct {
	Time  time.Time
	Event Event
}

// MemoryRecorder keeps every event in memory so that tests can assert on
// what the engine did. It retains the events as given, so callers must not
// modify an event (or slices inside it) after recording it. It is safe for
// concurrent use. The zero value is ready to use.
type MemoryRecorder struct {
	mu     sync.Mutex
	events []Recorded
}

// Enabled reports true.
func (m *MemoryRecorder) Enabled() bool { return true }

// Record appends ev.
func (m *MemoryRecorder) Record(now time.Time, ev Event) {
	m.mu.Lock()
	m.events = append(m.events, Recorded{now, ev})
	m.mu.Unlock()
}

// Events returns a copy of the events recorded so far, in order.
func (m *MemoryRecorder) Events() []Recorded {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Recorded(nil), m.events...)
}

// Named returns the events with the given name, in order.
func (m *MemoryRecorder) Named(name string) []Recorded {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Recorded
	for _, r := range m.events {
		if r.Event.Name() == name {
			out = append(out, r)
		}
	}
	return out
}

// Reset forgets every recorded event.
func (m *MemoryRecorder) Reset() {
	m.mu.Lock()
	m.events = nil
	m.mu.Unlock()
}

// EventsOf returns the recorded events of type T, in order, for example
// EventsOf[PacketSent](rec). Events recorded as pointers are not matched.
func EventsOf[T Event](m *MemoryRecorder) []T {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []T
	for _, r := range m.events {
		if v, ok := r.Event.(T); ok {
			out = append(out, v)
		}
	}
	return out
}
