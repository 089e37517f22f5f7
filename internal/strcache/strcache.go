// Package strcache holds a bounded map of strings shared by every encoder
// and decoder of a process: HTTP/3 header sections repeat the same names
// and values (an RPC's path, content type, authority), and converting them
// again for every message (Huffman coding, lower-casing, canonical
// names) was a measurable share of an HTTP/3 RPC's CPU and allocations
// (docs/highway.md).
package strcache

import "sync"

// Cache maps strings to another form of them. Once it holds MaxEntries it
// keeps what it has, so a peer sending ever new strings cannot grow it,
// only miss it. Keys longer than MaxKeyLen bytes (when MaxKeyLen > 0) are
// neither looked up nor kept. It is safe for concurrent use; the zero
// value with its bounds set is ready.
type Cache struct {
	MaxEntries int
	MaxKeyLen  int // 0: no bound on a key's length

	mu sync.RWMutex
	m  map[string]string
}

func (c *Cache) keyTooLong(n int) bool { return c.MaxKeyLen > 0 && n > c.MaxKeyLen }

// Get looks k up; the conversion of k to a string in the map index does
// not allocate.
func (c *Cache) Get(k []byte) (string, bool) {
	if c.keyTooLong(len(k)) {
		return "", false
	}
	c.mu.RLock()
	v, ok := c.m[string(k)]
	c.mu.RUnlock()
	return v, ok
}

// GetString is Get for a string key.
func (c *Cache) GetString(k string) (string, bool) {
	if c.keyTooLong(len(k)) {
		return "", false
	}
	c.mu.RLock()
	v, ok := c.m[k]
	c.mu.RUnlock()
	return v, ok
}

// Put keeps v for k while the cache has room.
func (c *Cache) Put(k []byte, v string) {
	if !c.keyTooLong(len(k)) {
		c.PutString(string(k), v)
	}
}

// PutString is Put for a string key.
func (c *Cache) PutString(k, v string) {
	if c.keyTooLong(len(k)) {
		return
	}
	c.mu.Lock()
	if c.m == nil {
		c.m = make(map[string]string)
	}
	if len(c.m) < c.MaxEntries {
		c.m[k] = v
	}
	c.mu.Unlock()
}

// Convert returns convert(k), from the cache when it is there.
func (c *Cache) Convert(k string, convert func(string) string) string {
	if v, ok := c.GetString(k); ok {
		return v
	}
	v := convert(k)
	c.PutString(k, v)
	return v
}

// Len reports how many strings the cache holds.
func (c *Cache) Len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.m)
}
