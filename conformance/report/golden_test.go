package report

import (
	"bytes"
	"flag"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/quiver-quic/quiver/conformance"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// TestGolden renders sampleReport with each writer and compares the bytes
// with testdata/sample.{txt,json,xml,grid.md}, which were written by the
// writers before they left package conformance.
func TestGolden(t *testing.T) {
	rep := sampleReport()
	for _, c := range []struct {
		file  string
		write func(io.Writer, *conformance.Report) error
	}{
		{"sample.txt", WriteTable},
		{"sample.json", WriteJSON},
		{"sample.xml", WriteJUnit},
		{"sample.grid.md", func(w io.Writer, r *conformance.Report) error {
			return WriteGrid(w, []GridColumn{{"x", r}, {"empty", &conformance.Report{}}})
		}},
	} {
		var buf bytes.Buffer
		if err := c.write(&buf, rep); err != nil {
			t.Fatalf("%s: %v", c.file, err)
		}
		path := filepath.Join("testdata", c.file)
		if *update {
			if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf.Bytes(), want) {
			t.Errorf("%s differs from the golden file:\n%s", c.file, buf.String())
		}
	}
}

// TestTableMarksConfirmed: the table says which fail a re-run alone
// confirmed and which verdict a first run had when the re-run did not
// reproduce it (docs/conformance-model.md, Verdicts rule 7).
func TestTableMarksConfirmed(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteTable(&buf, sampleReport()); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"FAIL (confirmed)", "PASS (first run FAIL)"} {
		if !bytes.Contains(buf.Bytes(), []byte(want)) {
			t.Errorf("table lacks %q:\n%s", want, buf.String())
		}
	}
}
