package main

import (
	"io"
	"slices"
	"testing"

	"github.com/quic-go/quic-go"
)

func TestParseHQRequest(t *testing.T) {
	for req, want := range map[string]string{
		"GET /file\r\n":    "file",
		"GET /a/b.bin\r\n": "a/b.bin",
		"GET /file":        "file",
	} {
		got, err := parseHQRequest([]byte(req))
		if err != nil || got != want {
			t.Errorf("parseHQRequest(%q) = %q, %v; want %q", req, got, err, want)
		}
	}
	for _, req := range []string{"GET /../etc/passwd\r\n", "GET /\r\n", "POST /file\r\n", "GET file\r\n", "GET //etc/passwd\r\n"} {
		if got, err := parseHQRequest([]byte(req)); err == nil {
			t.Errorf("parseHQRequest(%q) = %q, want an error", req, got)
		}
	}
}

func TestParseVersions(t *testing.T) {
	got, err := parseVersions("v2, v1,0x709a50c4")
	want := []quicVersion{quic.Version2, quic.Version1, 0x709a50c4}
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("parseVersions = %v, %v; want %v", got, err, want)
	}
	if _, err := parseVersions("v3"); err == nil {
		t.Error("parseVersions(v3) succeeded")
	}
}

func TestUnknownTestCaseExits127(t *testing.T) {
	for _, role := range []string{"server", "client"} {
		t.Setenv("ROLE", role)
		t.Setenv("TESTCASE", "no-such-test")
		if code := run(nil, io.Discard); code != exitUnsupported {
			t.Errorf("%s: exit %d, want %d", role, code, exitUnsupported)
		}
	}
}
