package report

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/quiver-quic/quiver/conformance"
)

// WriteJSON writes the versioned JSON report (docs/conformance-report.md).
func WriteJSON(w io.Writer, r *conformance.Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// ReadJSON reads a report written by WriteJSON. A report of another schema
// is refused, so a grid never mixes meanings.
func ReadJSON(r io.Reader) (*conformance.Report, error) {
	var rep conformance.Report
	dec := json.NewDecoder(r)
	if err := dec.Decode(&rep); err != nil {
		return nil, fmt.Errorf("conformance report: %w", err)
	}
	if rep.Schema != conformance.SchemaVersion {
		return nil, fmt.Errorf("conformance report: schema %d, this Quiver reads schema %d", rep.Schema, conformance.SchemaVersion)
	}
	return &rep, nil
}
