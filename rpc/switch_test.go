package rpc

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// multiServer serves the test handlers on several transports at once.
type multiServer struct {
	srv    *Server
	svc    *testService
	ls     map[string]Listener
	served chan error
}

func startMulti(t *testing.T, names ...string) *multiServer {
	m := &multiServer{ls: map[string]Listener{}, served: make(chan error, len(names))}
	m.srv, m.svc = newTestServer(t)
	all := map[string]kit{}
	for _, k := range kits(t) {
		all[k.name] = k
	}
	for _, n := range names {
		l := all[n].listen(t, "")
		m.ls[n] = l
		go func() { m.served <- m.srv.Serve(l) }()
	}
	t.Cleanup(func() {
		m.srv.Close()
		for range names {
			if err := <-m.served; err != nil {
				t.Errorf("Serve: %v", err)
			}
		}
	})
	return m
}

func (m *multiServer) dial(t *testing.T, name string) Transport {
	for _, k := range kits(t) {
		if k.name == name {
			return k.dial(m.ls[name].Addr())
		}
	}
	t.Fatalf("no transport %q", name)
	return nil
}

// load runs workers that call until stop is closed and counts outcomes.
func load(ctx context.Context, c *Client, workers int, stop <-chan struct{}, opts ...CallOption) (calls, failed *atomic.Int64, firstErr chan error, wait func()) {
	calls, failed = new(atomic.Int64), new(atomic.Int64)
	firstErr = make(chan error, 1)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				msg := fmt.Sprintf("w%d-%d", w, i)
				resp, err := Call[echoReq, echoResp](ctx, c, "Echo.Echo", &echoReq{Msg: msg}, opts...)
				if err == nil && resp.Msg != msg {
					err = fmt.Errorf("answer %q to %q", resp.Msg, msg)
				}
				calls.Add(1)
				if err != nil {
					failed.Add(1)
					select {
					case firstErr <- err:
					default:
					}
				}
			}
		}()
	}
	return calls, failed, firstErr, wg.Wait
}

// TestSwitchUnderLoad swaps transports 100 times while 16 workers call
// without pause: no call may fail, and every swap must move new calls.
func TestSwitchUnderLoad(t *testing.T) {
	names := []string{"tcp", "unix", "udp", "http2"}
	m := startMulti(t, names...)
	c := NewClient(m.dial(t, "tcp"))
	defer c.Close()
	ctx := testCtx(t)
	stop := make(chan struct{})
	calls, failed, firstErr, wait := load(ctx, c, 16, stop)
	for i := range 100 {
		name := names[(i+1)%len(names)]
		if err := c.Switch(ctx, m.dial(t, name)); err != nil {
			t.Fatalf("switch %d to %s: %v", i, name, err)
		}
		if got := c.Transport().Name(); got != name {
			t.Fatalf("after switch %d the client uses %s, want %s", i, got, name)
		}
	}
	close(stop)
	wait()
	if n := failed.Load(); n > 0 {
		t.Fatalf("%d of %d calls failed across 100 switches; first: %v", n, calls.Load(), <-firstErr)
	}
	if calls.Load() < 100 {
		t.Fatalf("only %d calls ran during 100 switches", calls.Load())
	}
	t.Logf("%d calls, 0 failed, across 100 switches", calls.Load())
}

// TestSwitchRetriesIdempotent cuts the old transport while calls are still
// running on it: the idempotent ones must be retried on the new transport.
func TestSwitchRetriesIdempotent(t *testing.T) {
	m := startMulti(t, "tcp", "unix")
	c := NewClient(m.dial(t, "tcp"))
	defer c.Close()
	ctx := testCtx(t)
	// A call parked in the Wait handler holds the old transport busy.
	parked := make(chan error, 1)
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	go func() {
		_, err := Call[echoReq, echoResp](wctx, c, "Echo.Wait", &echoReq{})
		parked <- err
	}()
	<-m.svc.started
	<-m.svc.deadline
	stop := make(chan struct{})
	calls, failed, firstErr, wait := load(ctx, c, 8, stop, Idempotent())
	for i := range 20 {
		tr := m.dial(t, []string{"unix", "tcp"}[i%2])
		if err := tr.Connect(ctx); err != nil {
			t.Fatal(err)
		}
		// The short context makes Switch close the old transport with
		// calls in flight.
		sctx, cancel := context.WithTimeout(ctx, time.Millisecond)
		c.Switch(sctx, tr)
		cancel()
	}
	close(stop)
	wait()
	if n := failed.Load(); n > 0 {
		t.Fatalf("%d of %d idempotent calls failed; first: %v", n, calls.Load(), <-firstErr)
	}
	// The parked call was not idempotent: it fails with Unavailable when
	// its transport is closed under it, rather than running twice.
	if err := <-parked; CodeOf(err) != Unavailable {
		t.Errorf("parked non-idempotent call = %v, want Unavailable", err)
	}
}
