package quic

// debugHook, when set by a test, receives engine trace lines.
var debugHook func(format string, args ...any)

func debugf(format string, args ...any) {
	if debugHook != nil {
		debugHook(format, args...)
	}
}
