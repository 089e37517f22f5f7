package conformance

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// catalogueIDs reads testdata/catalogue-ids.txt: every scenario ID of the
// catalogue, in order (docs/scenarios.md describes those registered).
func catalogueIDs() ([]string, error) {
	b, err := os.ReadFile(filepath.Join("testdata", "catalogue-ids.txt"))
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line != "" && !strings.HasPrefix(line, "#") {
			ids = append(ids, line)
		}
	}
	return ids, nil
}

var updateDocs = flag.Bool("update", false, "rewrite docs/scenarios.md from the registry")

// TestScenariosDoc checks that docs/scenarios.md is exactly what
// WriteCatalogue writes from the registry (go test ./conformance -run
// TestScenariosDoc -update rewrites it).
func TestScenariosDoc(t *testing.T) {
	var b bytes.Buffer
	if err := WriteCatalogue(&b); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("..", "docs", "scenarios.md")
	if *updateDocs {
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	old, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(old, b.Bytes()) {
		t.Fatalf(
			"docs/scenarios.md is stale: regenerate it with `go run ./cmd/quiver scenarios --markdown > docs/scenarios.md` (or go test ./conformance -run TestScenariosDoc -update)",
		)
	}
	for _, s := range Scenarios() {
		if !bytes.Contains(old, []byte("### `"+s.ID+"`")) {
			t.Errorf("%s missing from docs/scenarios.md", s.ID)
		}
	}
}

// readUnregistered reads testdata/unregistered.txt: the catalogue IDs the
// suite does not implement yet, one per line, each with the reason after
// a '#'.
func readUnregistered(t *testing.T) map[string]string {
	b, err := os.ReadFile(filepath.Join("testdata", "unregistered.txt"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		id, why, _ := strings.Cut(line, "#")
		out[strings.TrimSpace(id)] = strings.TrimSpace(why)
	}
	return out
}

// TestCatalogueCoverage compares the catalogue's IDs with the registry:
// every registered scenario must be in the catalogue, and the catalogue
// IDs missing from the registry must be exactly those listed, with a
// reason, in testdata/unregistered.txt. A scenario added or a gap closed
// without updating the list fails, so the gap stays visible.
func TestCatalogueCoverage(t *testing.T) {
	unreg := readUnregistered(t)
	for id, why := range unreg {
		if Lookup(id) != nil {
			t.Errorf("%s is registered but listed in testdata/unregistered.txt; remove it from the list", id)
		}
		if why == "" {
			t.Errorf("%s: testdata/unregistered.txt gives no reason", id)
		}
	}
	ids, err := catalogueIDs()
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) < 300 {
		t.Fatalf("read only %d IDs from testdata/catalogue-ids.txt", len(ids))
	}
	inCat := map[string]bool{}
	for _, id := range ids {
		inCat[id] = true
	}
	for _, s := range Scenarios() {
		if !inCat[s.ID] {
			t.Errorf("%s is registered but not in the catalogue", s.ID)
		}
	}
	var missing []string
	byFamily := map[string]int{}
	for _, id := range ids {
		if Lookup(id) != nil {
			continue
		}
		missing = append(missing, id)
		if _, listed := unreg[id]; !listed {
			t.Errorf("catalogue scenario %s is neither registered nor listed in testdata/unregistered.txt", id)
		}
	}
	for id := range unreg {
		if !inCat[id] {
			t.Errorf("%s is listed in testdata/unregistered.txt but is not a catalogue ID", id)
		}
	}
	slices.Sort(missing)
	for _, id := range missing {
		byFamily[familyOfID(id)]++
	}
	t.Logf("catalogue: %d IDs, registered: %d, missing: %d %v", len(ids), len(ids)-len(missing), len(missing), byFamily)
	for _, id := range missing {
		t.Logf("  missing %s: %s", id, unreg[id])
	}
}

// familyOfID names an ID's family by its prefix, for the summary only.
func familyOfID(id string) string {
	p, _, _ := strings.Cut(id, "-")
	return p
}
