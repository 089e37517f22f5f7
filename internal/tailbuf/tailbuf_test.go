package tailbuf

import "testing"

func TestKeepsTail(t *testing.T) {
	b := &Buffer{Max: 5}
	b.Write([]byte("abc"))
	b.Write([]byte("defg"))
	if got := b.String(); got != "cdefg" {
		t.Errorf("kept %q, want %q", got, "cdefg")
	}
}
