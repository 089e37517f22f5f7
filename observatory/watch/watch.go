// Package watch keeps the observatory measuring without anyone starting
// campaigns: a campaign over a targets file on a schedule, and a sweep of
// each new release of the watched implementations as soon as the Go module
// proxy lists it.
//
// Every campaign the watcher starts has a key ("schedule/NAME/SLOT",
// "release/IMPL/VERSION") claimed in the store (Store.ClaimCampaign), which
// gives the key one run, ever. A watcher killed in the middle of a
// campaign finds the key's unfinished run when it starts again and
// completes it: the results stored before the kill stay, the scenarios
// that have one are not run again, and no second run is made. On SQLite
// one process watches; on PostgreSQL the ticks are River periodic jobs
// (see River), so that any of several processes may run them.
package watch

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/quiver-quic/quiver/observatory"
	"github.com/quiver-quic/quiver/observatory/results"
	"github.com/quiver-quic/quiver/observatory/store"
)

// Release is an implementation whose releases are swept as they appear.
type Release struct {
	Impl   string // e.g. "quic-go"
	Module string // e.g. "github.com/quic-go/quic-go"
	// Since is the oldest release swept; older ones are never swept.
	Since string
}

// Event is what the watcher reports as it goes.
type Event struct {
	// Kind is "new-release" (a release with no campaign yet), "start",
	// "resume" (a keyed campaign whose run was cut short), "done",
	// "failed" (a release that cannot be swept: it will not be retried)
	// "error" (a tick that could not finish: it is retried next tick) or
	// "idle" (Run finished a tick and waits for the next).
	Kind    string
	Key     string
	Version string
	Run     store.Run
	Err     error
}

// permanent marks a failure that retrying will not fix.
type permanent struct{ err error }

func (p permanent) Error() string { return p.err.Error() }
func (p permanent) Unwrap() error { return p.err }

// Permanent wraps an error of SweepRelease that retrying will not fix (the
// release does not build, its server does not start): its campaign is
// closed with what it has instead of being retried on every tick.
func Permanent(err error) error { return permanent{err} }

// Watcher runs the scheduled campaign and sweeps new releases.
type Watcher struct {
	Store store.Store
	// Runner runs the scheduled campaign (its Store is Store).
	Runner *observatory.Runner
	// Campaign is the scheduled campaign; none without targets.
	Campaign observatory.Campaign
	// Every is the schedule: one campaign per slot of this length
	// (slots start at multiples of it since the Unix epoch).
	Every time.Duration
	// Releases are watched on the module proxy at Proxy.
	Releases []Release
	Proxy    string
	HTTP     *http.Client
	// SweepRelease builds one release, tests it and stores its results
	// in run (observatory/sweep's Sweep.RunInto for the real thing).
	SweepRelease func(ctx context.Context, rel Release, version string, run store.Run) error
	// ToolVersion goes into the runs the watcher creates.
	ToolVersion string
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Event, when set, is told what happens.
	Event func(Event)
}

func (w *Watcher) now() time.Time {
	if w.Now != nil {
		return w.Now()
	}
	return time.Now()
}

func (w *Watcher) event(e Event) {
	if w.Event != nil {
		w.Event(e)
	}
}

// Run ticks at once and then at each value from ticks, until ctx ends or
// ticks closes. A tick that fails is reported (Event "error") and the
// watcher goes on; the error returned is ctx's.
func (w *Watcher) Run(ctx context.Context, ticks <-chan time.Time) error {
	for {
		if err := w.Tick(ctx); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			w.event(Event{Kind: "error", Err: err})
		}
		w.event(Event{Kind: "idle"})
		select {
		case <-ctx.Done():
			return ctx.Err()
		case _, ok := <-ticks:
			if !ok {
				return nil
			}
		}
	}
}

// ScheduleKey is the key of the scheduled campaign's slot holding t.
func (w *Watcher) ScheduleKey(t time.Time) string {
	slot := t.UTC().Truncate(w.Every)
	return "schedule/" + w.Campaign.Name + "/" + slot.Format(time.RFC3339)
}

// Tick does one round: it completes keyed campaigns cut short before,
// runs the scheduled campaign of the current slot if it has not run, and
// sweeps each watched release that has no finished campaign.
func (w *Watcher) Tick(ctx context.Context) error {
	var errs []error
	if len(w.Campaign.Targets) > 0 && w.Every > 0 {
		if err := w.scheduled(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	for _, rel := range w.Releases {
		if err := w.releases(ctx, rel); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", rel.Impl, err))
		}
		if ctx.Err() != nil {
			break
		}
	}
	return errors.Join(errs...)
}

func (w *Watcher) scheduled(ctx context.Context) error {
	prefix := "schedule/" + w.Campaign.Name + "/"
	keys, err := w.Store.CampaignKeys(ctx, prefix)
	if err != nil {
		return err
	}
	current := w.ScheduleKey(w.now())
	// Slots cut short first, oldest first, then the current one.
	var todo []string
	for _, k := range slices.Sorted(mapKeys(keys)) {
		if keys[k].Finished.IsZero() && k != current {
			todo = append(todo, k)
		}
	}
	if r, ok := keys[current]; !ok || r.Finished.IsZero() {
		todo = append(todo, current)
	}
	for _, key := range todo {
		run, created, err := w.Store.ClaimCampaign(ctx, key, store.NewRun{Campaign: w.Campaign.Name, ToolVersion: w.ToolVersion, Started: w.now()})
		if err != nil {
			return err
		}
		if !run.Finished.IsZero() {
			continue
		}
		w.event(Event{Kind: startKind(created), Key: key, Run: run})
		run, err = w.Runner.RunCampaignIn(ctx, run, w.Campaign)
		if err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		w.event(Event{Kind: "done", Key: key, Run: run})
	}
	return nil
}

func startKind(created bool) string {
	if created {
		return "start"
	}
	return "resume"
}

// ReleaseKey is the key of a release's sweep.
func ReleaseKey(rel Release, version string) string { return "release/" + rel.Impl + "/" + version }

func (w *Watcher) releases(ctx context.Context, rel Release) error {
	if w.SweepRelease == nil {
		return errors.New("no way to sweep a release (SweepRelease is unset)")
	}
	versions, err := ListVersions(ctx, w.HTTP, w.Proxy, rel.Module)
	if err != nil {
		return err
	}
	keys, err := w.Store.CampaignKeys(ctx, "release/"+rel.Impl+"/")
	if err != nil {
		return err
	}
	var errs []error
	for _, v := range versions {
		if rel.Since != "" && results.CompareVersions(v, rel.Since) < 0 {
			continue
		}
		key := ReleaseKey(rel, v)
		have, ok := keys[key]
		if ok && !have.Finished.IsZero() {
			continue
		}
		if !ok {
			w.event(Event{Kind: "new-release", Key: key, Version: v})
		}
		run, created, err := w.Store.ClaimCampaign(ctx, key, store.NewRun{
			Campaign: "sweep " + rel.Impl + " " + v, ToolVersion: w.ToolVersion, Started: w.now(),
		})
		if err != nil {
			return err
		}
		if !run.Finished.IsZero() {
			continue
		}
		w.event(Event{Kind: startKind(created), Key: key, Version: v, Run: run})
		err = w.SweepRelease(ctx, rel, v, run)
		var p permanent
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.As(err, &p):
			// Closed with what it has: a release that does not build
			// will not build on the next tick either.
			if ferr := w.Store.FinishRun(context.WithoutCancel(ctx), run.ID, w.now()); ferr != nil {
				return ferr
			}
			w.event(Event{Kind: "failed", Key: key, Version: v, Run: run, Err: err})
			continue
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: %w", v, err))
			continue
		}
		if got, err := w.Store.Run(ctx, run.ID); err == nil {
			run = got
		}
		if run.Finished.IsZero() {
			if err := w.Store.FinishRun(ctx, run.ID, w.now()); err != nil {
				return err
			}
		}
		w.event(Event{Kind: "done", Key: key, Version: v, Run: run})
	}
	return errors.Join(errs...)
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}
