package qpack

import "testing"

// TestStaticMatch checks the map lookup against a scan of the table: the
// exact index is the first entry with the field's name and value, the
// name index the first with its name (RFC 9204 Appendix A).
func TestStaticMatch(t *testing.T) {
	scan := func(f HeaderField) (exact, name int) {
		exact, name = -1, -1
		for i, s := range staticTable {
			if s.Name != f.Name {
				continue
			}
			if name < 0 {
				name = i
			}
			if exact < 0 && s.Value == f.Value {
				exact = i
			}
		}
		return exact, name
	}
	fields := []HeaderField{{":method", "PATCH"}, {"x-unknown", ""}, {"content-type", "application/x-rpc"}, {"", ""}}
	for _, s := range staticTable {
		fields = append(fields, s, HeaderField{s.Name, s.Value + "x"})
	}
	for _, f := range fields {
		e, n := staticMatch(f)
		we, wn := scan(f)
		if e != we || n != wn {
			t.Errorf("staticMatch(%q: %q) = %d, %d; the table's scan gives %d, %d", f.Name, f.Value, e, n, we, wn)
		}
	}
}
