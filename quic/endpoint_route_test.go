package quic

import (
	"net/netip"
	"testing"
)

// TestLookupCache checks that the reader's remembered route follows
// register, unregister and forget.
func TestLookupCache(t *testing.T) {
	e := &Endpoint{conns: map[string]*Conn{}, all: map[*Conn]struct{}{}, resetTokens: map[[16]byte]*Conn{}, byAddr: map[netip.AddrPort]*Conn{}}
	c1, c2 := &Conn{}, &Conn{}
	cid := []byte{1, 2, 3, 4, 5, 6, 7, 8}
	e.register(cid, c1)
	if e.lookup(cid) != c1 || e.lookup(cid) != c1 {
		t.Fatal("lookup did not find the registered connection")
	}
	e.register(cid, c2)
	if e.lookup(cid) != c2 {
		t.Fatal("lookup kept the old connection after the route changed")
	}
	if e.lookup([]byte{9, 9, 9, 9, 9, 9, 9, 9}) != nil {
		t.Fatal("lookup of an unknown CID found a connection")
	}
	e.unregister(cid, c2)
	if e.lookup(cid) != nil {
		t.Fatal("lookup found a connection after unregister")
	}
	e.register(cid, c1)
	e.lookup(cid)
	e.forget(c1)
	if e.lookup(cid) != nil {
		t.Fatal("lookup found a connection after forget")
	}
}
