package strcache

import (
	"fmt"
	"strings"
	"testing"
)

// TestBounds checks that a cache returns what was put, stays within
// MaxEntries however many keys pass, and skips keys over MaxKeyLen.
func TestBounds(t *testing.T) {
	c := &Cache{MaxEntries: 8, MaxKeyLen: 10}
	for i := range 20 {
		k := fmt.Sprintf("k%d", i)
		if got := c.Convert(k, strings.ToUpper); got != strings.ToUpper(k) {
			t.Fatalf("Convert(%q) = %q", k, got)
		}
	}
	if n := c.Len(); n != 8 {
		t.Errorf("the cache holds %d strings, want its bound of 8", n)
	}
	if v, ok := c.Get([]byte("k3")); !ok || v != "K3" {
		t.Errorf("Get(k3) = %q, %v; want K3, true", v, ok)
	}
	if _, ok := c.GetString("k19"); ok {
		t.Errorf("k19 came after the cache was full but is in it")
	}
	long := &Cache{MaxEntries: 8, MaxKeyLen: 2}
	long.Put([]byte("abc"), "x")
	if _, ok := long.GetString("abc"); ok || long.Len() != 0 {
		t.Errorf("a key over MaxKeyLen was kept")
	}
}

// TestGetNoAlloc: a hit with a []byte key does not allocate.
func TestGetNoAlloc(t *testing.T) {
	c := &Cache{MaxEntries: 8}
	c.PutString("content-type", "x")
	k := []byte("content-type")
	if n := testing.AllocsPerRun(100, func() { c.Get(k) }); n != 0 {
		t.Errorf("Get allocates %v times per call, want 0", n)
	}
}
