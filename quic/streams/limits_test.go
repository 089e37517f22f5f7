package streams

import "testing"

func TestStreamIDs(t *testing.T) {
	tests := []struct {
		id           uint64
		bidi, client bool
		num          uint64
	}{
		{0, true, true, 0},
		{1, true, false, 0},
		{2, false, true, 0},
		{3, false, false, 0},
		{4, true, true, 1},
		{15, false, false, 3},
		{maxVarint, false, false, 1<<60 - 1},
	}
	for _, tt := range tests {
		if IsBidi(tt.id) != tt.bidi || IsClientInitiated(tt.id) != tt.client || StreamNum(tt.id) != tt.num {
			t.Errorf("id %d: bidi %v client %v num %d", tt.id, IsBidi(tt.id), IsClientInitiated(tt.id), StreamNum(tt.id))
		}
		if got := StreamID(tt.num, tt.bidi, tt.client); got != tt.id {
			t.Errorf("StreamID(%d, %v, %v) = %d, want %d", tt.num, tt.bidi, tt.client, got, tt.id)
		}
	}
}

func TestStreamLimitsOpenNext(t *testing.T) {
	l := NewStreamLimits(StreamLimitsConfig{Client: false, PeerMaxBidi: 2})
	for _, want := range []uint64{1, 5} {
		if id, ok := l.OpenNext(true); !ok || id != want {
			t.Fatalf("OpenNext = %d, %v; want %d", id, ok, want)
		}
	}
	if _, ok := l.OpenNext(true); ok {
		t.Fatal("opened beyond the peer's limit (RFC 9000 §4.6 MUST NOT)")
	}
	if _, ok := l.OpenNext(false); ok {
		t.Fatal("opened a uni stream with a limit of 0")
	}
	if n, ok := l.NextStreamsBlocked(true); !ok || n != 2 {
		t.Fatalf("NextStreamsBlocked = %d, %v", n, ok)
	}
	if _, ok := l.NextStreamsBlocked(true); ok {
		t.Fatal("STREAMS_BLOCKED repeated")
	}
	l.OnStreamsBlockedLost(true, 2)
	if _, ok := l.NextStreamsBlocked(true); !ok {
		t.Fatal("lost STREAMS_BLOCKED not repeated")
	}
	if n, ok := l.NextStreamsBlocked(false); !ok || n != 0 {
		t.Fatalf("uni NextStreamsBlocked = %d, %v", n, ok)
	}
	if up, err := l.OnMaxStreams(true, 1); up || err != nil {
		t.Fatal("MAX_STREAMS decrease applied (RFC 9000 §4.6 MUST be ignored)")
	}
	_, err := l.OnMaxStreams(true, MaxStreams+1)
	wantCode(t, err, FrameEncodingError)
	wantCode(t, l.SetPeerLimits(0, MaxStreams+1), TransportParameterError)
	if up, err := l.OnMaxStreams(true, 3); !up || err != nil {
		t.Fatal(err)
	}
	if id, ok := l.OpenNext(true); !ok || id != 9 {
		t.Fatalf("OpenNext = %d, %v after MAX_STREAMS", id, ok)
	}
	if err := l.SetPeerLimits(0, MaxStreams); err != nil {
		t.Fatal(err)
	}
	if id, ok := l.OpenNext(false); !ok || id != 3 {
		t.Fatalf("OpenNext(uni) = %d, %v", id, ok)
	}
}

func TestStreamLimitsOnPeerStream(t *testing.T) {
	tests := []struct {
		name   string
		client bool
		id     uint64
		part   Part
		want   IDRange
		code   uint64
	}{
		{"server: first client bidi", false, 0, PartRecv, IDRange{0, 0, 1}, 0},
		{"server: implicit open", false, 8, PartRecv, IDRange{0, 8, 3}, 0},
		{"server: client uni", false, 6, PartRecv, IDRange{2, 6, 2}, 0},
		{"server: last allowed bidi", false, 4 * 9, PartRecv, IDRange{0, 36, 10}, 0},
		{"server: beyond bidi limit", false, 4 * 10, PartRecv, IDRange{}, StreamLimitError},
		{"server: beyond uni limit", false, 4*3 + 2, PartRecv, IDRange{}, StreamLimitError},
		{"server: STOP_SENDING on client uni", false, 2, PartSend, IDRange{}, StreamStateError},
		{"server: MAX_STREAM_DATA opens client bidi", false, 4, PartSend, IDRange{0, 4, 2}, 0},
		{"server: own bidi not opened", false, 13, PartRecv, IDRange{}, StreamStateError},
		{"server: own bidi opened", false, 5, PartRecv, IDRange{}, 0},
		{"server: own bidi not yet opened", false, 9, PartSend, IDRange{}, StreamStateError},
		{"server: STREAM on own uni", false, 3, PartRecv, IDRange{}, StreamStateError},
		{"server: STOP_SENDING on own uni", false, 3, PartSend, IDRange{}, 0},
		{"client: server bidi", true, 5, PartRecv, IDRange{1, 5, 2}, 0},
		{"client: own bidi not opened", true, 8, PartRecv, IDRange{}, StreamStateError},
		{"client: own bidi opened", true, 4, PartRecv, IDRange{}, 0},
		{"id beyond 2^62", true, 1 << 62, PartRecv, IDRange{}, FrameEncodingError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := NewStreamLimits(StreamLimitsConfig{Client: tt.client, MaxBidi: 10, MaxUni: 3, PeerMaxBidi: 5, PeerMaxUni: 5})
			// We have opened two bidi and one uni stream.
			l.OpenNext(true)
			l.OpenNext(true)
			l.OpenNext(false)
			got, err := l.OnPeerStream(tt.id, tt.part)
			wantCode(t, err, tt.code)
			if got != tt.want {
				t.Fatalf("OnPeerStream(%d) = %+v, want %+v", tt.id, got, tt.want)
			}
			if err == nil && tt.want.Count > 0 {
				// §3.2: lower streams are opened once; repeating is a no-op.
				if again, err := l.OnPeerStream(tt.want.First, tt.part); err != nil || again.Count != 0 {
					t.Fatalf("second OnPeerStream = %+v, %v", again, err)
				}
			}
		})
	}
}

func TestStreamLimitsMaxStreamsCredit(t *testing.T) {
	l := NewStreamLimits(StreamLimitsConfig{MaxBidi: 4})
	open := func(id uint64) {
		t.Helper()
		if _, err := l.OnPeerStream(id, PartRecv); err != nil {
			t.Fatal(err)
		}
	}
	open(12) // streams 0, 4, 8, 12: the peer has used all 4
	if l.WantsMaxStreams(true) {
		t.Fatal("credit before any stream closed")
	}
	l.OnPeerStreamClosed(true)
	n, ok := l.NextMaxStreams(true)
	if !ok || n != 5 {
		t.Fatalf("NextMaxStreams = %d, %v; want 5", n, ok)
	}
	open(16)
	l.OnPeerStreamClosed(true)
	l.OnPeerStreamClosed(true)
	l.OnPeerStreamClosed(true)
	l.OnPeerStreamClosed(true)
	l.OnPeerStreamClosed(true) // more closes than opens are ignored
	if n, ok := l.NextMaxStreams(true); !ok || n != 9 {
		t.Fatalf("NextMaxStreams = %d, %v; want 9 (5 closed + 4 concurrent)", n, ok)
	}
	if _, ok := l.NextMaxStreams(true); ok {
		t.Fatal("MAX_STREAMS repeated")
	}
	l.OnMaxStreamsLost(true, 5) // stale
	if l.WantsMaxStreams(true) {
		t.Fatal("stale loss queued MAX_STREAMS")
	}
	l.OnMaxStreamsLost(true, 9)
	if n, ok := l.NextMaxStreams(true); !ok || n != 9 {
		t.Fatalf("resend = %d, %v", n, ok)
	}
	// Concurrency: up to 4 open at once.
	open(4 * 8)
	if _, err := l.OnPeerStream(4*9, PartRecv); err == nil {
		t.Fatal("stream 9 accepted with a limit of 9 streams")
	}
}

func TestStreamLimitsMaxStreamsCap(t *testing.T) {
	l := NewStreamLimits(StreamLimitsConfig{MaxUni: MaxStreams + 5})
	if l.MaxStreams(false) != MaxStreams {
		t.Fatalf("limit %d above 2^60", l.MaxStreams(false))
	}
	if _, err := l.OnPeerStream(maxVarint-1, PartRecv); err != nil { // client uni, number 2^60-1
		t.Fatal(err)
	}
	l.OnPeerStreamClosed(false)
	if _, ok := l.NextMaxStreams(false); ok {
		t.Fatal("MAX_STREAMS beyond 2^60")
	}
}
