// Package pgtest gives tests a fresh PostgreSQL database each.
//
// The server comes from $QUIVER_PG_DSN (the Makefile sets it from
// scripts/start-postgres); when it is unset, the script is run from here. A
// test that cannot get a server is skipped, or fails when
// QUIVER_REQUIRE_PEERS=1 (as in CI).
package pgtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib"
)

var (
	once      sync.Once
	serverDSN string
	serverErr string
)

// server returns the DSN of the PostgreSQL server, starting it if needed.
func server() (string, string) {
	once.Do(func() {
		if d := os.Getenv("QUIVER_PG_DSN"); d != "" {
			serverDSN = d
			return
		}
		script, err := findScript()
		if err != nil {
			serverErr = err.Error()
			return
		}
		out, err := exec.Command(script).Output()
		if err != nil {
			msg := err.Error()
			if ee, ok := err.(*exec.ExitError); ok {
				msg += ": " + strings.TrimSpace(string(ee.Stderr))
			}
			serverErr = "scripts/start-postgres: " + msg
			return
		}
		serverDSN = strings.TrimSpace(string(out))
	})
	return serverDSN, serverErr
}

func findScript() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, "scripts", "start-postgres")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", os.ErrNotExist
		}
		dir = parent
	}
}

// DSN creates an empty database for the test and returns its URL. The
// database is dropped when the test ends.
func DSN(t testing.TB) string {
	t.Helper()
	dsn, why := server()
	if dsn == "" {
		if os.Getenv("QUIVER_REQUIRE_PEERS") == "1" {
			t.Fatalf("no PostgreSQL server and QUIVER_REQUIRE_PEERS=1: %s (set QUIVER_PG_DSN or install postgresql)", why)
		}
		t.Skipf("no PostgreSQL server: %s (set QUIVER_PG_DSN, or run scripts/start-postgres)", why)
	}
	admin, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	b := make([]byte, 6)
	rand.Read(b)
	name := "quiver_test_" + hex.EncodeToString(b)
	ctx := context.Background()
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create database on %s: %v", dsn, err)
	}
	t.Cleanup(func() {
		admin, err := sql.Open("pgx", dsn)
		if err != nil {
			t.Error(err)
			return
		}
		defer admin.Close()
		if _, err := admin.ExecContext(context.Background(), "DROP DATABASE "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("QUIVER_PG_DSN is not a URL: %v", err)
	}
	u.Path = "/" + name
	return u.String()
}
