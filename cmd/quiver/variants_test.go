package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestVariantsCommand: an unknown variant or role is a usage error, and a
// one-scenario run against the retry variant compares it with the
// default and prints the table.
func TestVariantsCommand(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"variants", "--variants", "no-such"}, &out, &errb); code != 2 {
		t.Errorf("unknown variant: exit %d, want 2 (%s)", code, errb.String())
	}
	if code := run(context.Background(), []string{"variants", "--roles", "peer"}, &out, &errb); code != 2 {
		t.Errorf("unknown role: exit %d, want 2", code)
	}
	out.Reset()
	errb.Reset()
	args := []string{"variants", "--variants", "retry", "--roles", "server", "--server-scenarios", "retry-handshake", "--markdown"}
	if code := run(context.Background(), args, &out, &errb); code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errb.String())
	}
	for _, want := range []string{"server  retry", "0 false verdict(s)", "| retry | RequireRetry | RFC 9000 §8.1.2"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
