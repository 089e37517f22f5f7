package quic

import (
	"testing"

	"github.com/quiver-quic/quiver/quic/streams"
)

// TestStreamLookupCache checks the one-entry cache in front of the stream
// map: it answers for the last stream found, never for another id, and
// forgets a stream the map forgets.
func TestStreamLookupCache(t *testing.T) {
	s := &streamsState{c: &Conn{isClient: true}, m: map[int64]*Stream{},
		limits: streams.NewStreamLimits(streams.StreamLimitsConfig{Client: true, MaxBidi: 10, MaxUni: 10})}
	a, b := &Stream{id: 0}, &Stream{id: 4}
	s.m[0], s.m[4] = a, b
	if s.lookup(0) != a || s.last != a {
		t.Fatal("lookup(0) did not find and cache stream 0")
	}
	if s.lookup(4) != b || s.lookup(0) != a {
		t.Fatal("the cache answered for another id")
	}
	if s.lookup(8) != nil || s.last != a {
		t.Fatal("a missing id was found or replaced the cache")
	}
	s.maybeForgetLocked(a) // neither part open: forgotten
	if s.lookup(0) != nil {
		t.Fatal("lookup found a forgotten stream")
	}
}
