package conformance

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// catalogueID matches a scenario heading of the catalogue:
// **`scenario-id`** · needs …
var catalogueID = regexp.MustCompile("^\\*\\*`([a-z0-9]+(?:-[a-z0-9]+)*)`\\*\\*")

// cataloguePath finds the catalogue (conformance-scenarios.md): the file
// named by QUIVER_CATALOGUE, or the project's design folder beside the
// repository (../shared/design, as the README's specification links),
// looked for in each folder above, so that worktrees find it too.
func cataloguePath() string {
	if p := os.Getenv("QUIVER_CATALOGUE"); p != "" {
		return p
	}
	dir, err := filepath.Abs("..")
	if err != nil {
		return ""
	}
	for {
		p := filepath.Join(dir, "shared", "design", "conformance-scenarios.md")
		if _, err := os.Stat(p); err == nil {
			return p
		}
		up := filepath.Dir(dir)
		if up == dir {
			return p
		}
		dir = up
	}
}

// parseCatalogueIDs returns the scenario IDs of the catalogue, in order.
func parseCatalogueIDs(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var ids []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m := catalogueID.FindStringSubmatch(sc.Text()); m != nil {
			ids = append(ids, m[1])
		}
	}
	return ids, sc.Err()
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
	path := cataloguePath()
	ids, err := parseCatalogueIDs(path)
	if err != nil {
		t.Skipf("catalogue not found (%v); set QUIVER_CATALOGUE to conformance-scenarios.md", err)
	}
	if len(ids) < 300 {
		t.Fatalf("parsed only %d IDs from %s; the heading format changed?", len(ids), path)
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
