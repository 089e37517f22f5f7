package web

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quiver-quic/quiver/observatory/facts"
	"github.com/quiver-quic/quiver/observatory/store"
)

// releaseStore is a store holding a sweep of four quic-go releases: the
// datagram frame size grows at v0.41.0, ECN marks arrive at v0.40.1, and a
// PATH_CHALLENGE probe stops being answered at v0.51.0.
func releaseStore(t *testing.T) (store.Store, []int64) {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "q.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	type row struct{ scenario, verdict, sentence, facts string }
	releases := []struct {
		version string
		rows    []row
	}{
		{"v0.37.5", []row{{"hs-v1-basic", "pass", "ok", `[{"key":"tp","value":{"max_datagram_frame_size":"44b0"}}]`},
			{"ecn-server-marks", "fail", "no marks", `[{"key":"ecn.marking","value":"not-ECT 17, ECT(1) 0, ECT(0) 0, CE 0"}]`},
			{"pkt-duplicate-packet", "pass", "dup ignored", `[]`}}},
		{"v0.40.1", []row{{"hs-v1-basic", "pass", "ok", `[{"key":"tp","value":{"max_datagram_frame_size":"44b0"}}]`},
			{"ecn-server-marks", "pass", "marks", `[{"key":"ecn.marking","value":"not-ECT 3, ECT(1) 0, ECT(0) 14, CE 0"}]`},
			{"pkt-duplicate-packet", "pass", "dup ignored", `[]`}}},
		{"v0.41.0", []row{{"hs-v1-basic", "pass", "ok", `[{"key":"tp","value":{"max_datagram_frame_size":"7fff"}}]`},
			{"ecn-server-marks", "pass", "marks", `[{"key":"ecn.marking","value":"not-ECT 2, ECT(1) 0, ECT(0) 15, CE 0"}]`},
			{"pkt-duplicate-packet", "pass", "dup ignored", `[]`}}},
		{"v0.51.0", []row{{"hs-v1-basic", "pass", "ok", `[{"key":"tp","value":{"max_datagram_frame_size":"7fff"}}]`},
			{"ecn-server-marks", "pass", "marks", `[{"key":"ecn.marking","value":"not-ECT 3, ECT(1) 0, ECT(0) 14, CE 0"}]`},
			{"pkt-duplicate-packet", "inconclusive", "No PATH_RESPONSE to the probe.", `[]`}}},
	}
	var ids []int64
	for i, rel := range releases {
		run, err := st.CreateRun(ctx, store.NewRun{Campaign: "sweep quic-go " + rel.version, ToolVersion: "test", Started: time.Date(2026, 12, 1, i, 0, 0, 0, time.UTC)})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rel.rows {
			ev := fmt.Sprintf(`{"scenario":%q,"verdict":%q,"facts":%s}`, r.scenario, r.verdict, r.facts)
			fs, err := facts.FromEvidence([]byte(ev))
			if err != nil {
				t.Fatal(err)
			}
			id, err := st.AddResult(ctx, store.Record{RunID: run.ID, ToolVersion: "test", Scenario: r.scenario, Verdict: r.verdict,
				Target:   store.Target{Name: "quic-go releases", Implementation: "quic-go", Version: rel.version},
				Sentence: r.sentence, Evidence: json.RawMessage(ev), Facts: fs, Time: run.Started})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		if err := st.FinishRun(ctx, run.ID, run.Started.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	return st, ids
}

func releaseServer(t *testing.T) (*httptest.Server, []int64) {
	st, ids := releaseStore(t)
	app, err := New(st, "")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	app.RegisterOnMux(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	t.Cleanup(http.DefaultClient.CloseIdleConnections)
	return srv, ids
}

func TestAPIChanges(t *testing.T) {
	srv, _ := releaseServer(t)
	resp, body := get(t, srv.URL+"/api/changes?target=quic-go+releases")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET /api/changes: %s %s", resp.Status, resp.Header.Get("Content-Type"))
	}
	var doc struct {
		Changes []struct {
			Kind     string `json:"kind"`
			Scenario string `json:"scenario"`
			To       struct {
				Sentence string       `json:"sentence"`
				Target   store.Target `json:"target"`
			} `json:"to"`
		} `json:"changes"`
		FactChanges []facts.Change `json:"fact_changes"`
	}
	if err := json.Unmarshal([]byte(body), &doc); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range doc.Changes {
		got = append(got, c.Kind+" "+c.Scenario+" "+c.To.Target.Version+" "+c.To.Sentence)
	}
	for _, c := range doc.FactChanges {
		got = append(got, c.String())
	}
	want := []string{
		"arrived ecn-server-marks v0.40.1 marks",
		"unobservable pkt-duplicate-packet v0.51.0 No PATH_RESPONSE to the probe.",
		"quic-go v0.40.1: ecn.marking not-ECT → not-ECT+ECT(0)",
		"quic-go v0.41.0: tp.max_datagram_frame_size 1200 → 16383 bytes",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("/api/changes:\n%q\nwant\n%q", got, want)
	}
	if _, body := get(t, srv.URL+"/api/changes?target=nobody"); body != "{\n  \"changes\": [],\n  \"fact_changes\": []\n}\n" {
		t.Errorf("/api/changes of an unknown target: %q", body)
	}
}

func TestFeed(t *testing.T) {
	srv, _ := releaseServer(t)
	resp, body := get(t, srv.URL+"/feed.atom")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/atom+xml; charset=utf-8" {
		t.Fatalf("GET /feed.atom: %s %s", resp.Status, resp.Header.Get("Content-Type"))
	}
	var f atomFeed
	if err := xml.Unmarshal([]byte(body), &f); err != nil {
		t.Fatalf("feed is not XML: %v\n%s", err, body)
	}
	var titles []string
	ids := map[string]bool{}
	for _, e := range f.Entries {
		titles = append(titles, e.Title)
		if ids[e.ID] || !strings.HasPrefix(e.ID, "tag:quiver,2026:") || !strings.HasPrefix(e.Link.Href, srv.URL+"/results/") {
			t.Errorf("entry %+v: id repeated or malformed, or link outside the dashboard", e)
		}
		ids[e.ID] = true
	}
	// Newest first: v0.51.0, then v0.41.0, then the two of v0.40.1.
	want := []string{
		"quic-go v0.51.0: pkt-duplicate-packet became unobservable",
		"quic-go v0.41.0: tp.max_datagram_frame_size 1200 → 16383 bytes",
		"quic-go v0.40.1: ecn-server-marks arrived",
		"quic-go v0.40.1: ecn.marking not-ECT → not-ECT+ECT(0)",
	}
	if fmt.Sprint(titles) != fmt.Sprint(want) {
		t.Errorf("feed titles:\n%q\nwant\n%q", titles, want)
	}
	if !strings.Contains(body, "No PATH_RESPONSE to the probe.") || f.Updated != "2026-12-01T03:00:00Z" {
		t.Errorf("feed lacks the reason or is not updated at the newest change (%s):\n%s", f.Updated, body)
	}
	// The same store gives the same ids: a reader sees each change once.
	_, again := get(t, srv.URL+"/feed.atom")
	if again != body {
		t.Error("the feed changed between two reads of an unchanged store")
	}
}
