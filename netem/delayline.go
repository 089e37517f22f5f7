package netem

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A DelayLine gives traffic that the router forwards in the kernel (the
// TCP cross flow) a one-way delay in user space, since the hosts have no
// netem qdisc: policy routing in the router sends the chosen packets into
// one TUN device, the line holds each for Delay and writes it into a
// second TUN device, and the kernel forwards it on from there, to the
// router's shaped egress like any other packet.
type DelayLine struct {
	Delay time.Duration

	in, out *os.File
	q       *timedQueue[[]byte]
	wg      sync.WaitGroup

	mu      sync.Mutex
	packets uint64
	lost    uint64
}

// tunTable is the routing table that leads into the delay line.
const tunTable = "101"

// DelayTCP delays every TCP packet that crosses the router, in both
// directions, by delay. It needs NamespaceConfig.Forward. The line lives
// until Close or the namespaces' removal.
func (n *Namespaces) DelayTCP(ctx context.Context, delay time.Duration) (_ *DelayLine, err error) {
	tin, tout := n.Router+"i", n.Router+"o"
	if len(tin) > 15 {
		return nil, fmt.Errorf("netem: delay line: interface name %q too long", tin)
	}
	l := &DelayLine{Delay: delay}
	defer func() {
		if err != nil {
			l.Close()
		}
	}()
	if err := n.Do(n.Router, func() error {
		var err error
		if l.in, err = openTUN(tin); err == nil {
			l.out, err = openTUN(tout)
		}
		return err
	}); err != nil {
		return nil, err
	}
	run := func(args ...string) {
		if err == nil {
			err = ipCmd(ctx, args...)
		}
	}
	r := n.Router
	run("ip", "-n", r, "link", "set", tin, "up")
	run("ip", "-n", r, "link", "set", tout, "up")
	// Packets come back in on the second device with addresses that
	// route elsewhere: reverse-path filtering would drop them.
	for _, dev := range []string{"all", "default", tout} {
		run("ip", "netns", "exec", r, "sysctl", "-q", "-w", "net.ipv4.conf."+dev+".rp_filter=0")
	}
	run("ip", "-n", r, "route", "add", "default", "dev", tin, "table", tunTable)
	for _, dev := range []string{n.RouterToClient, n.RouterToServer} {
		run("ip", "-n", r, "rule", "add", "iif", dev, "ipproto", "tcp", "lookup", tunTable)
	}
	if err != nil {
		return nil, err
	}
	l.q = newTimedBatchQueue(func(_ time.Time, ps [][]byte) {
		for _, p := range ps {
			if _, err := l.out.Write(p); err != nil {
				l.mu.Lock()
				l.lost++
				l.mu.Unlock()
			}
		}
	})
	l.wg.Add(1)
	go l.read()
	return l, nil
}

// openTUN creates TUN device name (no packet information header) in the
// calling thread's network namespace.
func openTUN(name string) (*os.File, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("netem: delay line: open /dev/net/tun: %w", err)
	}
	var req [unix.IFNAMSIZ + 64]byte
	copy(req[:], name)
	*(*uint16)(unsafe.Pointer(&req[unix.IFNAMSIZ])) = unix.IFF_TUN | unix.IFF_NO_PI
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.TUNSETIFF, uintptr(unsafe.Pointer(&req[0]))); errno != 0 {
		unix.Close(fd)
		return nil, fmt.Errorf("netem: delay line: create %s: %w", name, errno)
	}
	// Non-blocking, so that reads go through the runtime's poller and
	// Close ends them.
	return os.NewFile(uintptr(fd), "tun:"+name), nil
}

func (l *DelayLine) read() {
	defer l.wg.Done()
	buf := make([]byte, 65536)
	for {
		k, err := l.in.Read(buf)
		if err != nil {
			if errors.Is(err, os.ErrClosed) {
				return
			}
			continue
		}
		l.mu.Lock()
		l.packets++
		l.mu.Unlock()
		l.q.push(time.Now().Add(l.Delay), append([]byte(nil), buf[:k]...))
	}
}

// Packets returns how many packets the line has carried and how many it
// could not write back.
func (l *DelayLine) Packets() (carried, lost uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.packets, l.lost
}

// Close stops the line and closes its devices (which removes them).
func (l *DelayLine) Close() error {
	if l.q != nil {
		l.q.stop()
	}
	var errs []error
	for _, f := range []*os.File{l.in, l.out} {
		if f != nil {
			errs = append(errs, f.Close())
		}
	}
	l.wg.Wait()
	return errors.Join(errs...)
}
