package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/quiver-quic/quiver/observatory"
	"github.com/quiver-quic/quiver/observatory/queue"
	"github.com/quiver-quic/quiver/observatory/store"
	"github.com/quiver-quic/quiver/observatory/sweep"
	"github.com/quiver-quic/quiver/observatory/watch"
)

// trackWatch runs the watcher: the campaign of a targets file once per
// --every, and a sweep of each new release of the --impl implementations
// (from --since on; by default from the newest release listed now). On
// SQLite it ticks in this process; on PostgreSQL the ticks are River
// periodic jobs that any number of watch processes share.
func trackWatch(ctx context.Context, env *cmdEnv, o *trackOpts, args []string) error {
	file := o.targets
	switch {
	case len(args) == 1 && file == "":
		file = args[0]
	case len(args) > 1 || (len(args) == 1 && file != ""):
		return fmt.Errorf("%w: track watch takes at most one targets file", errUsage)
	}
	if file == "" && o.impl == "" {
		return fmt.Errorf("%w: track watch needs a targets file, --impl IMPL (releases to sweep), or both", errUsage)
	}
	if o.every <= 0 {
		return fmt.Errorf("%w: --every must be a positive duration", errUsage)
	}
	scenarios, err := selectScenarios(scenarioPatterns(o.scenarios))
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	var c observatory.Campaign
	if file != "" {
		targets, err := observatory.LoadTargets(file)
		if err != nil {
			return err
		}
		c = observatory.Campaign{Name: cmpOr(o.campaign, file), Targets: targets, Scenarios: scenarios}
	}
	proxy := watch.ProxyFromEnv(cmpOr(o.proxy, os.Getenv("GOPROXY")))
	var rels []watch.Release
	impls := map[string]sweep.Impl{}
	for _, name := range splitList(o.impl) {
		im, err := sweep.FindImpl(name)
		if err != nil {
			return fmt.Errorf("%w: %v", errUsage, err)
		}
		since := o.since
		if since == "" {
			vs, err := watch.ListVersions(ctx, nil, proxy, im.Module)
			if err != nil {
				return err
			}
			if len(vs) == 0 {
				return fmt.Errorf("%s lists no release of %s", proxy, im.Module)
			}
			since = vs[len(vs)-1]
		}
		impls[im.Name] = im
		rels = append(rels, watch.Release{Impl: im.Name, Module: im.Module, Since: since})
	}
	st, err := openStore(ctx, o.db, true)
	if err != nil {
		return err
	}
	defer st.Close()
	runner := func() *observatory.Runner {
		return &observatory.Runner{Store: st, Run: suiteRun, ToolVersion: version, ArtifactsDir: o.artifacts, Timeout: o.timeout, Parallel: o.parallel}
	}
	adapter, _ := adapterDir()
	cache := cmpOr(o.cache, sweep.DefaultCacheDir())
	w := &watch.Watcher{
		Store: st, Runner: runner(), Campaign: c, Every: o.every, Releases: rels, Proxy: proxy, ToolVersion: version,
		SweepRelease: func(ctx context.Context, rel watch.Release, v string, run store.Run) error {
			s := &sweep.Sweep{Impl: impls[rel.Impl], Scenarios: scenarios, Builder: &sweep.Builder{CacheDir: cache, AdapterDir: adapter}, Runner: runner()}
			_, err := s.RunInto(ctx, v, run)
			if errors.Is(err, sweep.ErrBuild) || errors.Is(err, sweep.ErrStart) {
				return watch.Permanent(err)
			}
			return err
		},
		Event: func(e watch.Event) {
			switch e.Kind {
			case "idle":
				return
			case "error", "failed":
				fmt.Fprintf(env.stdout, "%s  %s %s: %s\n", time.Now().UTC().Format(time.RFC3339), e.Kind, e.Key, oneLine(e.Err.Error()))
			default:
				fmt.Fprintf(env.stdout, "%s  %s %s (run %d, %d results)\n", time.Now().UTC().Format(time.RFC3339), e.Kind, cmpOr(e.Key, e.Version), e.Run.ID, e.Run.Results)
			}
		},
	}
	for _, r := range rels {
		fmt.Fprintf(env.stderr, "watching %s on %s from %s on\n", r.Module, proxy, r.Since)
	}
	if len(c.Targets) > 0 {
		fmt.Fprintf(env.stderr, "running %s (%d targets × %d scenarios) every %v\n", c.Name, len(c.Targets), len(c.Scenarios), o.every)
	}
	if store.IsPostgres(o.db) {
		pool, err := queue.Connect(ctx, o.db)
		if err != nil {
			return err
		}
		defer pool.Close()
		fmt.Fprintf(env.stderr, "ticks are River periodic jobs in %s; interrupt to stop\n", displayDB(o.db))
		return ignoreCancel((&watch.River{Watcher: w, Interval: o.every}).Run(ctx, pool))
	}
	t := time.NewTicker(o.every)
	defer t.Stop()
	return ignoreCancel(w.Run(ctx, t.C))
}

// ignoreCancel treats an interrupt as the normal end.
func ignoreCancel(err error) error {
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
