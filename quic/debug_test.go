package quic

import (
	"fmt"
	"os"
)

// debugf prints when QUIVER_DEBUG is set; tests only.
func init() {
	if os.Getenv("QUIVER_DEBUG") != "" {
		debugHook = func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
	}
}
