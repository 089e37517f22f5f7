package h3

import "testing"

// BenchmarkFieldNames converts the names of a typical RPC's header
// section to lower case and back to their canonical form, from the caches.
func BenchmarkFieldNames(b *testing.B) {
	names := []string{"Content-Type", "Quiver-Timeout", "User-Agent", "Grpc-Status", "X-Request-Id"}
	b.ReportAllocs()
	for b.Loop() {
		for _, k := range names {
			canonicalName(lowerName(k))
		}
	}
}
