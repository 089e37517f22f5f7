package quic

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// hookMethods are the named points of Hooks.
var hookMethods = map[string]bool{
	"Policy": true, "EditTransportParameters": true, "HandshakeData": true, "SkipNextPacketNumber": true,
	"PacketSealing": true, "DatagramOut": true, "DatagramIn": true, "PacketReceived": true,
}

// unguardedHookCalls returns the positions of calls X.hooks.M(...) (M a
// Hooks method) in f that no `X.hooks != nil` check guards: the call must
// sit in the body of an if statement whose condition requires the check
// (as a conjunct), or on the right of an && whose left side does.
func unguardedHookCalls(fset *token.FileSet, f *ast.File) []string {
	var bad []string
	var stack []ast.Node
	ast.Inspect(f, func(n ast.Node) bool {
		if n == nil {
			stack = stack[:len(stack)-1]
			return true
		}
		stack = append(stack, n)
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok || !hookMethods[sel.Sel.Name] {
			return true
		}
		recv := hooksField(sel.X)
		if recv == "" {
			return true
		}
		if !guarded(stack, recv) {
			bad = append(bad, fset.Position(call.Pos()).String())
		}
		return true
	})
	return bad
}

// hooksField returns the text of e when it is a selector X.hooks.
func hooksField(e ast.Expr) string {
	sel, ok := e.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != "hooks" {
		return ""
	}
	return exprString(sel)
}

func exprString(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		return exprString(e.X) + "." + e.Sel.Name
	}
	return "?"
}

// requiresNonNil reports whether cond being true implies recv != nil.
func requiresNonNil(cond ast.Expr, recv string) bool {
	switch e := cond.(type) {
	case *ast.ParenExpr:
		return requiresNonNil(e.X, recv)
	case *ast.BinaryExpr:
		switch e.Op {
		case token.LAND:
			return requiresNonNil(e.X, recv) || requiresNonNil(e.Y, recv)
		case token.NEQ:
			id, ok := e.Y.(*ast.Ident)
			return ok && id.Name == "nil" && exprString(e.X) == recv
		}
	}
	return false
}

// guarded walks the ancestors of the call (the last node of stack).
func guarded(stack []ast.Node, recv string) bool {
	for i := len(stack) - 2; i >= 0; i-- {
		child := stack[i+1]
		switch p := stack[i].(type) {
		case *ast.IfStmt:
			if child == p.Body && requiresNonNil(p.Cond, recv) {
				return true
			}
		case *ast.BinaryExpr:
			if p.Op == token.LAND && child == p.Y && requiresNonNil(p.X, recv) {
				return true
			}
		case *ast.FuncLit, *ast.FuncDecl:
			return false // a check outside a closure says nothing of when it runs
		}
	}
	return false
}

// TestHooksCalledOnlyBehindNilCheck: production code reaches the hooks
// only through Conn.hooks, and every call sits behind its nil check, so
// that a connection without hooks runs one branch per named point and
// nothing else. It also checks the checker on code that breaks the rule.
func TestHooksCalledOnlyBehindNilCheck(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	calls := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, pos := range unguardedHookCalls(fset, f) {
			t.Errorf("%s: hook call without a nil check of the hooks", pos)
		}
		calls += strings.Count(string(src), ".hooks.")
		// The configuration's hooks are read in one place only (conn_loop.go).
		if n := strings.Count(string(src), "cfg.Probe") + strings.Count(string(src), "config.Probe"); n > 0 && name != "conn_loop.go" {
			t.Errorf("%s reads Config.Probe %d times; only the connection's start may", name, n)
		}
	}
	if calls < len(hookMethods) {
		t.Errorf("found %d hook calls, want at least one per named point (%d)", calls, len(hookMethods))
	}

	const bad = `package quic
func (c *Conn) a() { c.hooks.PacketReceived(PacketInfo{}) }
func (c *Conn) b() { if c.hooks == nil || c.hooks.DatagramIn(nil) {} }
func (c *Conn) c() { if c.hooks != nil { go func() { c.hooks.PacketSealing(PacketInfo{}) }() } }
func (c *Conn) d() { if c.hooks != nil || x { c.hooks.PacketReceived(PacketInfo{}) } }
func (c *Conn) ok() {
	if c.hooks != nil && c.hooks.DatagramIn(nil) {}
	if c.hooks != nil && x { c.hooks.PacketReceived(PacketInfo{}) }
}
`
	f, err := parser.ParseFile(fset, "bad.go", bad, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := unguardedHookCalls(fset, f); len(got) != 4 {
		t.Errorf("checker found %d unguarded calls in the bad example, want 4: %v", len(got), got)
	}
}

// TestHooksNilProbe: a nil *Probe in Config.Probe is no hooks at all.
func TestHooksNilProbe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newMemNet(10 * time.Millisecond)
		scfg, ccfg := testServerConfig(t, "hq-interop"), testClientConfig(t, "hq-interop")
		var none *Probe
		scfg.Probe, ccfg.Probe = none, none
		sep, cep, c, err := pair(t, n, scfg, ccfg)
		defer sep.Close()
		defer cep.Close()
		if err != nil {
			t.Fatal(err)
		}
		if c.hooks != nil {
			t.Errorf("a nil *Probe gave the connection hooks %#v", c.hooks)
		}
		if err := fetch(t.Context(), c, 5000); err != nil {
			t.Fatal(err)
		}
		c.Close(0, "")
	})
}

// countingHooks implements three points over NoHooks.
type countingHooks struct {
	NoHooks
	intercept              bool
	received, sealed, outs atomic.Int64
}

func (h *countingHooks) Policy() Policy            { return Policy{InterceptDatagrams: h.intercept} }
func (h *countingHooks) PacketReceived(PacketInfo) { h.received.Add(1) }
func (h *countingHooks) PacketSealing(PacketInfo)  { h.sealed.Add(1) }
func (h *countingHooks) DatagramOut(b []byte, ecn uint8) ([][]byte, uint8) {
	h.outs.Add(1)
	return [][]byte{b}, ecn
}

// TestHooksEmbeddedNoHooks: a Hooks that embeds NoHooks sees the points
// it implements, the others keep their no-op defaults, and DatagramOut
// runs only when its Policy asks for it.
func TestHooksEmbeddedNoHooks(t *testing.T) {
	for _, intercept := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			n := newMemNet(10 * time.Millisecond)
			h := &countingHooks{intercept: intercept}
			ccfg := testClientConfig(t, "hq-interop")
			ccfg.Probe = h
			sep, cep, c, err := pair(t, n, testServerConfig(t, "hq-interop"), ccfg)
			defer sep.Close()
			defer cep.Close()
			if err != nil {
				t.Fatal(err)
			}
			if err := fetch(t.Context(), c, 50000); err != nil {
				t.Fatal(err)
			}
			st := c.Stats()
			c.Close(0, "")
			if got := h.received.Load(); got == 0 || got > int64(st.DatagramsReceived)*3 {
				t.Errorf("intercept %v: PacketReceived ran %d times for %d datagrams received", intercept, got, st.DatagramsReceived)
			}
			if got := h.sealed.Load(); got < int64(st.DatagramsSent) {
				t.Errorf("intercept %v: PacketSealing ran %d times for %d datagrams sent", intercept, got, st.DatagramsSent)
			}
			if got := h.outs.Load(); intercept != (got > 0) || intercept && got < int64(st.DatagramsSent) {
				t.Errorf("intercept %v: DatagramOut ran %d times for %d datagrams sent", intercept, got, st.DatagramsSent)
			}
		})
	}
}
