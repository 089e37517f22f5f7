package netem

import (
	"hash/fnv"
	"net/netip"
	"slices"
	"time"
)

// Rebind is a NAT rebinding schedule on the client side of a path: at each
// rebinding, the address the server sees for the client changes to a fresh
// port (and, with Addr, a fresh address), and server datagrams sent to the
// old mapping are dropped. The client never sees the translation.
//
// Times count from t0, the client's first datagram through the NAT.
// Rebindings are applied lazily, when traffic next crosses the NAT, which
// is indistinguishable from outside: a mapping only shows in datagrams.
type Rebind struct {
	// At lists rebinding times.
	At []time.Duration
	// First and Every add a periodic schedule: at First, then every Every
	// (Every 0: only once). Both zero: no periodic schedule. With First
	// zero, the first rebinding is at Every. The interop rebind-port
	// scenario is First 1 s, Every 5 s.
	First, Every time.Duration
	// Addr also changes the address: within the same /24 for IPv4, or the
	// same /112 for IPv6, as a NAT pool would.
	Addr bool
}

// count returns how many rebindings have happened at since after t0.
func (r *Rebind) count(since time.Duration) int {
	n := 0
	for _, at := range r.At {
		if since >= at {
			n++
		}
	}
	first := r.First
	if first == 0 {
		first = r.Every
	}
	if first > 0 && since >= first {
		n++
		if r.Every > 0 {
			n += int((since - first) / r.Every)
		}
	}
	return n
}

// nat is one client's NAT mapping history. mappings[i] is the external
// address after i rebindings; mappings[0] is the client's own address, so
// the NAT is transparent until the first rebinding.
type nat struct {
	client   netip.AddrPort
	schedule Rebind
	rng      interface{ Uint64() uint64 }
	epoch    time.Time
	started  bool
	manual   int // rebindings asked for by hand
	mappings []netip.AddrPort
	times    []time.Time // when each mapping after the first was made
}

// current brings the mapping up to date at now and returns its index. used
// reports whether an address is taken, so that fresh mappings never collide.
func (t *nat) current(now time.Time, used func(netip.AddrPort) bool) int {
	if !t.started {
		t.epoch, t.started = now, true
	}
	want := t.schedule.count(now.Sub(t.epoch)) + t.manual
	for len(t.mappings)-1 < want {
		t.mappings = append(t.mappings, t.fresh(used))
		t.times = append(t.times, now)
	}
	return len(t.mappings) - 1
}

// fresh draws an unused external address.
func (t *nat) fresh(used func(netip.AddrPort) bool) netip.AddrPort {
	for {
		r := t.rng.Uint64()
		port := uint16(1024 + r%(65536-1024))
		addr := t.client.Addr()
		if t.schedule.Addr {
			b := addr.AsSlice()
			if addr.Is4() {
				b[3] = byte(1 + (r>>16)%254)
			} else {
				b[14], b[15] = byte(r>>16), byte(r>>24)
			}
			addr, _ = netip.AddrFromSlice(b)
		}
		ap := netip.AddrPortFrom(addr, port)
		if !used(ap) && !slices.Contains(t.mappings, ap) {
			return ap
		}
	}
}

// seedFor derives a per-object seed from a run seed and addresses, so that
// each direction and NAT has its own random stream, independent of the
// order in which they were created.
func seedFor(seed uint64, addrs ...netip.AddrPort) uint64 {
	h := fnv.New64a()
	var b [8]byte
	for i := range b {
		b[i] = byte(seed >> (8 * i))
	}
	h.Write(b[:])
	for _, a := range addrs {
		h.Write([]byte(a.String()))
		h.Write([]byte{0})
	}
	return h.Sum64()
}
