package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/quiver-quic/quiver/observatory"
	"github.com/quiver-quic/quiver/observatory/facts"
	"github.com/quiver-quic/quiver/observatory/results"
	"github.com/quiver-quic/quiver/observatory/store"
	"github.com/quiver-quic/quiver/observatory/sweep"
)

// trackSweep builds an implementation at each released version asked for,
// runs the suite against each and stores one run per version, in release
// order; then it lists the changes along the series.
func trackSweep(ctx context.Context, env *cmdEnv, o *trackOpts, args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("%w: track sweep takes no arguments (--impl, --versions or --since)", errUsage)
	}
	if o.impl == "" {
		return fmt.Errorf("%w: track sweep needs --impl (quic-go or x/net)", errUsage)
	}
	im, err := sweep.FindImpl(o.impl)
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	listed := splitList(o.versions)
	if (len(listed) == 0) == (o.since == "") {
		return fmt.Errorf("%w: track sweep needs either --versions v1,v2,… or --since VERSION", errUsage)
	}
	role := o.role
	if role == "" {
		role = sweep.RoleServer
	}
	if role != sweep.RoleServer && role != sweep.RoleClient {
		return fmt.Errorf("%w: --role is server or client, not %q", errUsage, role)
	}
	var scenarios []string
	if role == sweep.RoleClient {
		scenarios, err = selectClientScenarios(scenarioPatterns(o.scenarios))
	} else {
		scenarios, err = selectScenarios(scenarioPatterns(o.scenarios))
	}
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	all, err := sweepVersions(ctx, im.Module)
	if err != nil {
		return err
	}
	for _, v := range listed {
		// A release the proxy does not list may still be there by name.
		if !slices.Contains(all, v) && sweepExists(ctx, im.Module, v) {
			all = append(all, v)
		}
	}
	slices.SortFunc(all, results.CompareVersions)
	versions, err := sweep.Choose(all, listed, o.since)
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	adapter, err := adapterDir()
	if err != nil && im.Name == "quic-go" {
		return err
	}
	st, err := openStore(ctx, o.db, true)
	if err != nil {
		return err
	}
	defer st.Close()
	cache := o.cache
	if cache == "" {
		cache = sweep.DefaultCacheDir()
	}
	target := sweep.TargetNameFor(im, role)
	fmt.Fprintf(env.stdout, "sweeping %s (%s) over %d versions (%s … %s), %d scenarios each; builds cached in %s\n\n",
		im.Name, role, len(versions), versions[0], versions[len(versions)-1], len(scenarios), cache)
	s := &sweep.Sweep{
		Impl: im, Role: role, Versions: versions, Scenarios: scenarios,
		Builder: &sweep.Builder{CacheDir: cache, AdapterDir: adapter},
		Runner: &observatory.Runner{
			Store: st, Run: suiteRun, ToolVersion: version, ArtifactsDir: o.artifacts,
			Timeout: o.timeout, Parallel: o.parallel, Progress: campaignProgress(env.stderr),
		},
		Version: sweepLine(env),
	}
	outcomes, err := s.Run(ctx)
	endCampaignProgress(env.stderr)
	var built int
	for _, oc := range outcomes {
		if oc.Run.ID != 0 {
			built++
		}
	}
	fmt.Fprintf(env.stdout, "\n%d of %d versions tested\n", built, len(outcomes))
	if built > 0 {
		cells, cerr := st.Cells(context.WithoutCancel(ctx), store.Filter{Target: target})
		if cerr != nil {
			return errors.Join(err, cerr)
		}
		fmt.Fprintf(env.stdout, "\nchanges along %q:\n", target)
		if werr := results.WriteChanges(env.stdout, results.DetectChanges(cells, o.window)); werr != nil {
			return errors.Join(err, werr)
		}
		fcells, ferr := st.FactCells(context.WithoutCancel(ctx), store.FactFilter{Target: target})
		if ferr != nil {
			return errors.Join(err, ferr)
		}
		fmt.Fprintln(env.stdout)
		if werr := facts.WriteChanges(env.stdout, facts.DetectChanges(fcells)); werr != nil {
			return errors.Join(err, werr)
		}
	}
	return err
}

// sweepVersions lists a module's released versions and sweepExists checks
// one that is not listed; tests replace them.
var (
	sweepVersions = sweep.ListVersions
	sweepExists   = sweep.Exists
	// selectClientScenarios expands patterns into client-facing scenarios.
	selectClientScenarios = func(p []string) ([]string, error) { return sweep.SelectScenarios(sweep.RoleClient, p) }
)

// sweepLine prints one line per version as it ends, and what it is doing
// on a terminal meanwhile.
func sweepLine(env *cmdEnv) func(sweep.Outcome) {

	return func(oc sweep.Outcome) {
		if oc.Stage != "done" {
			if isTerminal(env.stderr) {
				fmt.Fprintf(env.stderr, "\r%s: %s…\x1b[K", oc.Version, oc.Stage)
			}
			return
		}
		endCampaignProgress(env.stderr)
		build := "built"
		if oc.Build.Cached {
			build = "cached"
		}
		switch {
		case oc.Err != nil && oc.Run.ID == 0:
			fmt.Fprintf(env.stdout, "%-9s %s\n", oc.Version, oneLine(oc.Err.Error()))
		default:
			tags := ""
			if len(oc.Build.Tags) > 0 {
				tags = " [" + strings.Join(oc.Build.Tags, " ") + "]"
			}
			fmt.Fprintf(env.stdout, "%-9s run %-4d %-6s %s%s\n", oc.Version, oc.Run.ID, build, results.Tally(oc.Counts), tags)
			if oc.Err != nil {
				fmt.Fprintf(env.stdout, "          %s\n", oneLine(oc.Err.Error()))
			}
		}
	}
}

// oneLine keeps the first line of a (compiler's) message.
func oneLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return printableName(s)
}

// adapterDir finds peers/quicgo by walking up from the working directory.
func adapterDir() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		d := filepath.Join(dir, "peers", "quicgo")
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("cannot find peers/quicgo (the quic-go adapter): run quiver track sweep inside the Quiver repository")
		}
		dir = parent
	}
}
