package quic

import (
	"testing"

	"github.com/quiver-quic/quiver/internal/leakcheck"
)

// TestMain fails the test binary if tests leave goroutines behind: a
// connection loop or endpoint reader that outlives its Close is a leak in
// any long-running user of the engine.
func TestMain(m *testing.M) { leakcheck.Main(m) }
