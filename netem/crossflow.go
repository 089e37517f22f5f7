package netem

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A TCPFlow is a bulk TCP transfer between two namespaces: the cross
// traffic of the interop runner's crosstraffic measurement
// (docs/interop-results.md),
// a sender that writes as fast as its congestion controller lets it and a
// receiver that reads and counts.
type TCPFlow struct {
	// CC is the congestion controller the sender asked for with
	// TCP_CONGESTION.
	CC string

	ln     net.Listener
	sender net.Conn
	cancel context.CancelFunc
	wg     sync.WaitGroup
	start  time.Time

	mu       sync.Mutex
	received int64
	end      time.Time
	err      error
	waiters  []flowWaiter
	done     bool // the receiver has returned
}

// A flowWaiter is closed once the receiver has read at least n bytes, or
// when the receiver ends.
type flowWaiter struct {
	n  int64
	ch chan struct{}
}

// StartTCPFlow listens on to in namespace toNS, connects from from's
// address in namespace fromNS with congestion controller cc (e.g.
// "cubic"), and sends until Stop. The flow crosses the router, so it
// needs NamespaceConfig.Forward.
func (n *Namespaces) StartTCPFlow(ctx context.Context, fromNS string, from netip.Addr, toNS string, to netip.AddrPort, cc string) (*TCPFlow, error) {
	f := &TCPFlow{CC: cc}
	var err error
	derr := n.Do(toNS, func() error {
		f.ln, err = net.Listen("tcp4", to.String())
		return nil
	})
	if err = errors.Join(derr, err); err != nil {
		return nil, fmt.Errorf("netem: cross traffic: %w", err)
	}
	d := net.Dialer{
		LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(from, 0)),
		Timeout:   5 * time.Second,
		Control: func(_, _ string, c syscall.RawConn) error {
			var serr error
			if err := c.Control(func(fd uintptr) {
				serr = unix.SetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION, cc)
			}); err != nil {
				return err
			}
			if serr != nil {
				return fmt.Errorf("TCP_CONGESTION %s: %w", cc, serr)
			}
			return nil
		},
	}
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := f.ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	derr = n.Do(fromNS, func() error {
		f.sender, err = d.DialContext(ctx, "tcp4", to.String())
		return nil
	})
	if err = errors.Join(derr, err); err != nil {
		f.ln.Close()
		<-accepted
		return nil, fmt.Errorf("netem: cross traffic: %w", err)
	}
	recv, ok := <-accepted
	if !ok {
		f.ln.Close()
		f.sender.Close()
		return nil, errors.New("netem: cross traffic: the receiver did not accept")
	}
	ctx, f.cancel = context.WithCancel(ctx)
	f.start = time.Now()
	f.wg.Add(2)
	go func() { // the sender
		defer f.wg.Done()
		buf := make([]byte, 64<<10)
		for ctx.Err() == nil {
			if _, err := f.sender.Write(buf); err != nil {
				if ctx.Err() == nil {
					f.setErr(err)
				}
				return
			}
		}
	}()
	go func() { // the receiver
		defer f.wg.Done()
		buf := make([]byte, 64<<10)
		for {
			k, err := recv.Read(buf)
			f.mu.Lock()
			f.received += int64(k)
			f.end = time.Now()
			f.wakeLocked(err != nil)
			f.mu.Unlock()
			if err != nil {
				if err != io.EOF && ctx.Err() == nil {
					f.setErr(err)
				}
				recv.Close()
				return
			}
		}
	}()
	context.AfterFunc(ctx, func() {
		// Closing both ends unblocks the reader and the writer.
		f.sender.Close()
		recv.Close()
	})
	return f, nil
}

func (f *TCPFlow) setErr(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err == nil {
		f.err = err
	}
}

// wakeLocked closes the waiters whose count has been reached, or all of
// them when the receiver has ended.
func (f *TCPFlow) wakeLocked(ended bool) {
	f.done = f.done || ended
	kept := f.waiters[:0]
	for _, w := range f.waiters {
		if f.done || f.received >= w.n {
			close(w.ch)
		} else {
			kept = append(kept, w)
		}
	}
	f.waiters = kept
}

// WaitReceived blocks until the receiver has read at least n bytes, the
// flow ends, or ctx is done; it returns the bytes read so far and, when
// fewer than n, why.
func (f *TCPFlow) WaitReceived(ctx context.Context, n int64) (int64, error) {
	f.mu.Lock()
	w := flowWaiter{n: n, ch: make(chan struct{})}
	f.waiters = append(f.waiters, w)
	f.wakeLocked(false)
	f.mu.Unlock()
	select {
	case <-w.ch:
	case <-ctx.Done():
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.received >= n:
		return f.received, nil
	case f.err != nil:
		return f.received, f.err
	case f.done:
		return f.received, errors.New("netem: cross traffic: the flow ended early")
	}
	return f.received, ctx.Err()
}

// Received returns the bytes the receiver has read so far.
func (f *TCPFlow) Received() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.received
}

// Stop ends the flow and returns the bytes received, the goodput in bit/s
// over the flow's life, and the first error either end met.
func (f *TCPFlow) Stop() (received int64, bps float64, err error) {
	f.cancel()
	f.wg.Wait()
	f.ln.Close()
	f.mu.Lock()
	defer f.mu.Unlock()
	if d := f.end.Sub(f.start); d > 0 {
		bps = float64(8*f.received) / d.Seconds()
	}
	return f.received, bps, f.err
}
