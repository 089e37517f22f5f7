package web

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// browser starts Debian's headless Chromium with a fresh profile, or skips
// (fails under QUIVER_REQUIRE_PEERS=1) when it is not installed.
func browser(t *testing.T) context.Context {
	t.Helper()
	path := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		if os.Getenv("QUIVER_REQUIRE_PEERS") == "1" {
			t.Fatal("chromium is not installed and QUIVER_REQUIRE_PEERS=1; install it with: apt-get install chromium")
		}
		t.Skip("chromium is not installed (apt-get install chromium)")
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 60*time.Second)
	t.Cleanup(func() {
		cancelTimeout()
		cancelCtx()
		cancelAlloc() // waits for the browser to exit
	})
	return ctx
}

func TestBrowser(t *testing.T) {
	f := newFixture(t)
	srv := newServer(t, f)
	ctx := browser(t)

	// The grid renders, with the hostile target as a column, and a
	// screenshot of it is a real PNG.
	if err := chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/"),
		chromedp.WaitVisible(chromedp.CSS("table.grid")),
	); err != nil {
		t.Fatal(err)
	}
	title, err := chromedp.Run(ctx, chromedp.Title())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(title, "Targets × scenarios") {
		t.Errorf("grid title %q", title)
	}
	headers, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("table.grid thead th")].map(e => e.textContent)`))
	if err != nil {
		t.Fatal(err)
	}
	if !containsString(headers, hostile) {
		t.Errorf("grid headers %q lack the hostile target's name as text", headers)
	}
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(shot, []byte("\x89PNG\r\n\x1a\n")) {
		t.Fatalf("screenshot is not a PNG (%d bytes)", len(shot))
	}
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() < 100 || b.Dy() < 100 {
		t.Errorf("screenshot is %v", b)
	}
	if dir := os.Getenv("QUIVER_SCREENSHOT_DIR"); dir != "" {
		os.WriteFile(dir+"/dashboard-grid.png", shot, 0o644)
	}

	// The Benchmarks panel stands beside the grid, to its right at this
	// window width, and lists the newest run first with a drawn chart:
	// bars of positive width, one per row of that run.
	type box struct{ Left, Top, Right, Bottom float64 }
	boxes, err := chromedp.Run(ctx, chromedp.Evaluate[[]box](`["table.grid", "#benchmarks"].map(s => {
		const r = document.querySelector(s).getBoundingClientRect();
		return {Left: r.left, Top: r.top, Right: r.right, Bottom: r.bottom};
	})`))
	if err != nil {
		t.Fatal(err)
	}
	if len(boxes) != 2 || boxes[1].Left < boxes[0].Right || boxes[1].Top > boxes[0].Bottom {
		t.Errorf("benchmarks panel at %+v is not beside the grid at %+v", boxes[1], boxes[0])
	}
	panel, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#benchmarks table.bench-runs tbody tr")].map(e => e.textContent)`))
	if err != nil {
		t.Fatal(err)
	}
	if len(panel) != 2 || !strings.Contains(panel[0], "sweep-gso") || !strings.Contains(panel[1], "goodput") || !strings.Contains(panel[1], "3717") {
		t.Errorf("benchmark rows %q, want the sweep then the goodput run", panel)
	}
	bars, err := chromedp.Run(ctx, chromedp.Evaluate[[]float64](`[...document.querySelectorAll("#benchmarks svg.bars rect.bar")].map(e => e.getBoundingClientRect().width)`))
	if err != nil {
		t.Fatal(err)
	}
	if len(bars) != 2 || !(bars[0] > bars[1] && bars[1] > 0) {
		t.Errorf("chart bars of widths %v, want two, quiver's (1602) longer than quic-go's (1017)", bars)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#benchmarks a[href^="/bench/"]`)), chromedp.WaitVisible(chromedp.CSS("table.bench-summary"))); err != nil {
		t.Fatal(err)
	}
	cmd, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#command")))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(cmd, "quiver bench sweep") || !strings.Contains(cmd, hostile) {
		t.Errorf("benchmark page command %q, want the sweep's command with its markup as text", cmd)
	}
	if dir := os.Getenv("QUIVER_SCREENSHOT_DIR"); dir != "" {
		if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#benchmarks"))); err == nil {
			if shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)); err == nil {
				os.WriteFile(dir+"/dashboard-benchmarks.png", shot, 0o644)
			}
		}
	}

	// Every page shows target markup as text: the DOM holds no script or
	// img element from it, and the script did not run.
	for _, page := range []string{"/", "/results/" + itoa(f.hostileID), "/target?name=" + urlq(hostile), "/changes", "/adoption", "/runs/1", "/bench", "/bench/" + itoa(f.benchIDs[1])} {
		if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+page), chromedp.WaitReady(chromedp.CSS("main"))); err != nil {
			t.Fatalf("%s: %v", page, err)
		}
		counts, err := chromedp.Run(ctx, chromedp.Evaluate[[]int](`[document.querySelectorAll("script").length, document.querySelectorAll("img").length]`))
		if err != nil {
			t.Fatalf("%s: %v", page, err)
		}
		if counts[0] != 0 || counts[1] != 0 {
			t.Errorf("%s: the DOM has %d script and %d img elements; target markup was injected", page, counts[0], counts[1])
		}
		title, err := chromedp.Run(ctx, chromedp.Title())
		if err != nil {
			t.Fatalf("%s: %v", page, err)
		}
		if title == "pwned" {
			t.Errorf("%s: the target's script ran (title %q)", page, title)
		}
		if strings.HasPrefix(page, "/results/") {
			reason, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#reason")))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(reason, `<script>document.title="pwned"</script>`) {
				t.Errorf("%s: reason shown as %q, want the markup as text", page, reason)
			}
		}
	}
}

func containsString(ss []string, want string) bool {
	for _, s := range ss {
		if strings.Contains(s, want) {
			return true
		}
	}
	return false
}
