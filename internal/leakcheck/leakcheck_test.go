package leakcheck

import (
	"testing"
	"time"
)

func TestFindsLeak(t *testing.T) {
	stop := make(chan struct{})
	go func() { <-stop }()
	if leaks := Find(50 * time.Millisecond); len(leaks) == 0 {
		t.Error("a goroutine blocked on a channel was not reported")
	}
	close(stop)
	if leaks := Find(2 * time.Second); len(leaks) != 0 {
		t.Errorf("goroutine reported after it ended: %v", leaks)
	}
}
