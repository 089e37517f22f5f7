package web

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// screenshotDir is where the browser tests keep their screenshots:
// $QUIVER_SCREENSHOT_DIR, or the test's own temporary folder.
func screenshotDir(t *testing.T) string {
	if d := os.Getenv("QUIVER_SCREENSHOT_DIR"); d != "" {
		return d
	}
	return t.TempDir()
}

// TestBrowserHistory walks the pages a researcher reads a sweep with: the
// grid grouped by area with the totals on top, the adoption heatmap, what
// changed in a release, and a result's previous and next results.
func TestBrowserHistory(t *testing.T) {
	srv, ids := releaseServer(t)
	ctx := browser(t)
	dir := screenshotDir(t)
	shoot := func(name string) {
		t.Helper()
		shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), shot, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	eval := func(js string) []string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](js))
		if err != nil {
			t.Fatalf("%s: %v", js, err)
		}
		return v
	}

	// The grid: totals right under the target names, then one block of
	// rows per area.
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS("table.grid"))); err != nil {
		t.Fatal(err)
	}
	rows := eval(`[...document.querySelectorAll("table.grid tr")].map(r => r.innerText.replace(/\s+/g, " ").trim())`)
	if len(rows) < 4 || !strings.HasPrefix(rows[1], "passing 2 / 3 2 pass, 1 inconclusive") || !strings.HasPrefix(strings.ToLower(rows[2]), "ecn (1)") {
		t.Errorf("grid rows %q: want the totals (2 of 3 passing in v0.51.0) second, then the ECN area", rows)
	}
	areas := eval(`[...document.querySelectorAll("table.grid tr.area-head")].map(r => r.textContent.trim())`)
	if fmt.Sprint(areas) != "[ECN (1) handshake (1) packets (1)]" {
		t.Errorf("grid areas %q", areas)
	}
	recent := eval(`[...document.querySelectorAll("ul.fact-list li")].map(e => e.innerText)`)
	if len(recent) != 2 || !strings.HasPrefix(recent[0], "quic-go v0.41.0: tp.max_datagram_frame_size 1200 → 16383 bytes") {
		t.Errorf("recent fact changes on the grid %q, newest first", recent)
	}
	shoot("grid-by-area.png")

	// Adoption: one heatmap cell per scenario × release, in release
	// order, each coloured by its verdict.
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/adoption"), chromedp.WaitVisible(chromedp.CSS("table.heatmap"))); err != nil {
		t.Fatal(err)
	}
	heads := eval(`[...document.querySelector("table.heatmap").querySelectorAll("th.ver")].map(e => e.textContent.trim())`)
	if fmt.Sprint(heads) != "[v0.37.5 v0.40.1 v0.41.0 v0.51.0]" {
		t.Errorf("heatmap columns %q", heads)
	}
	dup := eval(`[...document.querySelector("table.heatmap").querySelectorAll("tr")]
		.filter(r => r.textContent.includes("pkt-duplicate-packet"))[0]
		.querySelectorAll("td.hm").values().map(td => td.className).toArray()`)
	if fmt.Sprint(dup) != "[hm v-pass hm v-pass hm v-pass hm v-inconclusive]" {
		t.Errorf("pkt-duplicate-packet heatmap cells %q", dup)
	}
	shoot("adoption-heatmap.png")

	// A column head opens what changed in that release, with links to the
	// releases either side.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`th.ver a[href*="v0.41.0"]`)), chromedp.WaitVisible(chromedp.CSS("#next-release"))); err != nil {
		t.Fatal(err)
	}
	title, _ := chromedp.Run(ctx, chromedp.Title())
	facts := eval(`[...document.querySelectorAll("table.fact-changes tbody tr")].map(r => r.innerText.replace(/\s+/g, " ").trim())`)
	if !strings.Contains(title, "What changed in quic-go v0.41.0") || len(facts) != 1 ||
		!strings.Contains(facts[0], "tp.max_datagram_frame_size 1200 v0.40.1 16383 bytes") {
		t.Errorf("release page %q: fact changes %q", title, facts)
	}
	shoot("release-v0.41.0.png")
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#next-release")), chromedp.WaitVisible(chromedp.CSS("#prev-release"))); err != nil {
		t.Fatal(err)
	}
	verdicts := eval(`[...document.querySelectorAll("main table tbody tr")].map(r => r.innerText.replace(/\s+/g, " ").trim())`)
	if len(verdicts) != 1 || !strings.Contains(verdicts[0], "became unobservable") || !strings.Contains(verdicts[0], "No PATH_RESPONSE to the probe.") {
		t.Errorf("v0.51.0 changes %q, want pkt-duplicate-packet becoming unobservable, with its reason", verdicts)
	}

	// A result links to the one before and after it.
	mid := ids[3*2] // hs-v1-basic of v0.41.0
	if err := chromedp.Do(ctx, chromedp.Navigate(fmt.Sprintf("%s/results/%d", srv.URL, mid)), chromedp.WaitVisible(chromedp.CSS("#prev-result"))); err != nil {
		t.Fatal(err)
	}
	nav := eval(`[document.querySelector("#prev-result").getAttribute("href"), document.querySelector("#next-result").getAttribute("href")]`)
	if want := []string{fmt.Sprintf("/results/%d", ids[3]), fmt.Sprintf("/results/%d", ids[9])}; fmt.Sprint(nav) != fmt.Sprint(want) {
		t.Errorf("previous/next links %q, want %q", nav, want)
	}
	typed := eval(`[...document.querySelectorAll("table.facts tbody tr")].map(r => r.innerText.replace(/\s+/g, " ").trim())`)
	if fmt.Sprint(typed) != "[tp.grease int 0 tp.max_datagram_frame_size int 16383 bytes]" {
		t.Errorf("typed facts %q", typed)
	}
	shoot("result-prev-next.png")
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#next-result")), chromedp.WaitVisible(chromedp.CSS("#prev-result"))); err != nil {
		t.Fatal(err)
	}
	if last := eval(`[document.querySelector(".history-nav").textContent]`); !strings.Contains(last[0], "latest result") {
		t.Errorf("the newest result's navigation %q", last)
	}
	t.Logf("screenshots in %s", dir)
}
