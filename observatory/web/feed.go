package web

import (
	"cmp"
	"encoding/xml"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/quiver-quic/quiver/observatory/facts"
	"github.com/quiver-quic/quiver/observatory/results"
)

// feedEntries is how many changes the Atom feed carries, newest first.
const feedEntries = 200

// Atom (RFC 4287) documents.
type atomFeed struct {
	XMLName xml.Name    `xml:"http://www.w3.org/2005/Atom feed"`
	ID      string      `xml:"id"`
	Title   string      `xml:"title"`
	Updated string      `xml:"updated"`
	Links   []atomLink  `xml:"link"`
	Author  atomAuthor  `xml:"author"`
	Entries []atomEntry `xml:"entry"`
}

type atomLink struct {
	Rel  string `xml:"rel,attr,omitempty"`
	Href string `xml:"href,attr"`
}

type atomAuthor struct {
	Name string `xml:"name"`
}

type atomEntry struct {
	ID       string       `xml:"id"`
	Title    string       `xml:"title"`
	Updated  string       `xml:"updated"`
	Link     atomLink     `xml:"link"`
	Category atomCategory `xml:"category"`
	Summary  string       `xml:"summary"`
}

type atomCategory struct {
	Term string `xml:"term,attr"`
}

// feedEntry is one change of either sort, for ordering.
type feedEntry struct {
	at    time.Time
	run   int64
	entry atomEntry
}

func who(impl, target, version string, run int64) string {
	s := cmp.Or(impl, target)
	if version != "" {
		return s + " " + version
	}
	return fmt.Sprintf("%s run %d", s, run)
}

// verdictEntry turns a verdict change into an entry. Its id names the
// result the change ends at, which never changes, so a reader sees each
// change once.
func verdictEntry(base string, c results.Change) feedEntry {
	title := fmt.Sprintf("%s: %s %s", who(c.To.Target.Implementation, c.Target, c.To.Target.Version, c.To.RunID), c.Scenario, c.Kind.Describe())
	summary := fmt.Sprintf("%s (%s) → %s (%s) on target %s. %s", c.From.Verdict, cmp.Or(c.From.Target.Version, fmt.Sprint("run ", c.From.RunID)),
		c.To.Verdict, cmp.Or(c.To.Target.Version, fmt.Sprint("run ", c.To.RunID)), c.Target, c.To.Sentence)
	if c.Kind == results.Flapping {
		summary = fmt.Sprintf("%d verdict changes in the last results of %s on target %s.", c.Count, c.Scenario, c.Target)
	}
	return feedEntry{at: c.To.Time, run: c.To.RunID, entry: atomEntry{
		ID:    fmt.Sprintf("tag:quiver,2026:change:%s:%d:%d", c.Kind, c.From.ID, c.To.ID),
		Title: title, Updated: c.To.Time.UTC().Format(time.RFC3339), Link: atomLink{Href: fmt.Sprintf("%s/results/%d", base, c.To.ID)},
		Category: atomCategory{Term: string(c.Kind)}, Summary: summary,
	}}
}

func factEntry(base string, c facts.Change) feedEntry {
	return feedEntry{at: c.Time, run: c.ToRun, entry: atomEntry{
		ID:    fmt.Sprintf("tag:quiver,2026:fact:%s:%d:%d:%s", c.Kind, c.FromResult, c.ToResult, c.Key),
		Title: c.String(), Updated: c.Time.UTC().Format(time.RFC3339), Link: atomLink{Href: fmt.Sprintf("%s/results/%d", base, c.ToResult)},
		Category: atomCategory{Term: "fact-" + c.Kind},
		Summary:  fmt.Sprintf("%s on target %s, seen by %v (from run %d to run %d).", c.String(), c.Target, c.Scenarios, c.FromRun, c.ToRun),
	}}
}

// feed serves every change, verdicts and facts, as an Atom feed, newest
// first (?target=NAME for one target).
func (a *App) feed(w http.ResponseWriter, r *http.Request) {
	securityHeaders(w)
	ch, fch, err := a.allChanges(r, r.URL.Query().Get("target"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	base := scheme + "://" + r.Host
	var es []feedEntry
	for _, c := range ch {
		es = append(es, verdictEntry(base, c))
	}
	for _, c := range fch {
		es = append(es, factEntry(base, c))
	}
	slices.SortStableFunc(es, func(x, y feedEntry) int { return cmp.Or(y.at.Compare(x.at), cmp.Compare(y.run, x.run)) })
	if len(es) > feedEntries {
		es = es[:feedEntries]
	}
	f := atomFeed{
		ID: "tag:quiver,2026:observatory", Title: "Quiver observatory: changes",
		Links:  []atomLink{{Rel: "self", Href: base + r.URL.RequestURI()}, {Href: base + "/changes"}},
		Author: atomAuthor{Name: "quiver observatory"},
	}
	f.Updated = time.Unix(0, 0).UTC().Format(time.RFC3339)
	if len(es) > 0 {
		f.Updated = es[0].at.UTC().Format(time.RFC3339)
	}
	for _, e := range es {
		f.Entries = append(f.Entries, e.entry)
	}
	w.Header().Set("Content-Type", "application/atom+xml; charset=utf-8")
	fmt.Fprint(w, xml.Header)
	e := xml.NewEncoder(w)
	e.Indent("", "  ")
	e.Encode(f)
}
