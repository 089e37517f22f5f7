package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
)

func TestScenariosCommand(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"scenarios", "--role", "server", "hs-v1-*"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "hs-v1-basic ") || !strings.Contains(lines[0], "Handshake") {
		t.Fatalf("unexpected listing:\n%s", out.String())
	}
	out.Reset()
	if code := run(context.Background(), []string{"scenarios", "no-such-*"}, &out, &errb); code != 2 {
		t.Fatalf("a pattern matching nothing: exit %d, want 2", code)
	}
	out.Reset()
	if code := run(context.Background(), []string{"scenarios", "--markdown"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	doc, err := os.ReadFile("../../docs/scenarios.md")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(doc, out.Bytes()) {
		t.Fatal("quiver scenarios --markdown differs from docs/scenarios.md")
	}
}
