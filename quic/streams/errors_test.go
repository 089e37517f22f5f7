package streams

import (
	"strings"
	"testing"
)

func TestErrorString(t *testing.T) {
	r := NewRecvStream(RecvConfig{Window: 10}, nil)
	err := r.OnStreamFrame(0, make([]byte, 11), false)
	if err == nil || !strings.HasPrefix(err.Error(), "FLOW_CONTROL_ERROR (0x3): ") || !strings.Contains(err.Error(), "RFC 9000 §19.10") {
		t.Fatalf("error %q does not name the code and the rule", err)
	}
	if s := (&Error{Code: 0x1234}).Error(); !strings.Contains(s, "0x1234") {
		t.Fatalf("unknown code: %q", s)
	}
}

func TestStateNames(t *testing.T) {
	if SendResetRecvd.String() != "Reset Recvd" || RecvSizeKnown.String() != "Size Known" ||
		SendState(99).String() != "SendState(99)" || RecvState(99).String() != "RecvState(99)" {
		t.Fatal("state names do not follow RFC 9000 §3")
	}
}
