package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// watchOutput collects output and signals when a line holding want is
// written.
type watchOutput struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	want string
	seen chan struct{}
}

func (w *watchOutput) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if w.seen != nil && strings.Contains(w.buf.String(), w.want) {
		close(w.seen)
		w.seen = nil
	}
	return len(p), nil
}

func (w *watchOutput) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

func TestTrackWatch(t *testing.T) {
	fakeTrackSuite(t)
	dir := t.TempDir()
	db := filepath.Join(dir, "q.db")
	targets := filepath.Join(dir, "targets.json")
	b, _ := json.Marshal(map[string]any{"targets": []map[string]any{{"name": "alpha", "address": "127.0.0.1:4433", "version": "v1"}}})
	if err := os.WriteFile(targets, b, 0o644); err != nil {
		t.Fatal(err)
	}
	out := &watchOutput{want: "done schedule/", seen: make(chan struct{})}
	seen := out.seen
	var errb bytes.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	code := make(chan int, 1)
	go func() {
		code <- run(ctx, []string{"track", "watch", "--db", db, "--artifacts", "", "--every", "24h", targets}, out, &errb)
	}()
	<-seen
	cancel()
	if c := <-code; c != 0 {
		t.Fatalf("track watch: exit %d\n%s\n%s", c, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), "start schedule/"+targets+"/") || !strings.Contains(errb.String(), "every 24h0m0s") {
		t.Errorf("track watch output:\n%s\n%s", out.String(), errb.String())
	}
	lst, _, c := quiver(t, "track", "list", "--db", db)
	if c != 0 || !strings.Contains(lst, targets) {
		t.Errorf("track list after watch: exit %d\n%s", c, lst)
	}
	for _, bad := range [][]string{
		{"track", "watch", "--db", db},
		{"track", "watch", "--db", db, "--every", "0s", targets},
		{"track", "watch", "--db", db, "--impl", "nosuch", targets},
		{"track", "watch", "--db", db, targets, targets},
	} {
		if _, errs, c := quiver(t, bad...); c != 2 {
			t.Errorf("%v: exit %d, want 2 (usage)\n%s", bad, c, errs)
		}
	}
}
