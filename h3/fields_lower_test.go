package h3

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestLowerName checks the cached lower-casing of field names (RFC 9114
// §4.2: "Characters in field names MUST be converted to lowercase prior to
// their encoding"), their canonical form for net/http, and that the cache
// stays bounded however many distinct names pass.
func TestLowerName(t *testing.T) {
	for _, k := range []string{"Content-Type", "content-type", "X-ABC-d", "Quiver-Md-Key", ""} {
		for range 2 { // uncached, then cached
			if got, want := lowerName(k), strings.ToLower(k); got != want {
				t.Errorf("lowerName(%q) = %q, want %q", k, got, want)
			}
			if got, want := canonicalName(strings.ToLower(k)), http.CanonicalHeaderKey(k); got != want {
				t.Errorf("canonicalName(%q) = %q, want %q", strings.ToLower(k), got, want)
			}
		}
	}
	for i := range 2 * maxCachedNames {
		k := fmt.Sprintf("X-Name-%d", i)
		if got := lowerName(k); got != strings.ToLower(k) {
			t.Fatalf("lowerName(%q) = %q", k, got)
		}
	}
	if n := lowerNames.Len(); n > maxCachedNames {
		t.Errorf("the cache holds %d names, over its bound of %d", n, maxCachedNames)
	}
}
