package sweep

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/quiver-quic/quiver/conformance"
	"github.com/quiver-quic/quiver/observatory"
	"github.com/quiver-quic/quiver/peers"
)

// Roles a sweep tests a release in: its server against the server-facing
// suite, or its client against the client-facing suite (Quiver serves, the
// release's client downloads).
const (
	RoleServer = "server"
	RoleClient = "client"
)

// TargetNameFor is the name a sweep's results are stored under for one
// role: "quic-go releases" for the servers (TargetName), "quic-go clients"
// for the clients, so that each role has its own history.
func TargetNameFor(im Impl, role string) string {
	if role == RoleClient {
		return im.Name + " clients"
	}
	return TargetName(im)
}

// clientALPN is the protocol the swept clients speak: every release's
// client speaks hq-interop (x/net's speaks nothing else).
const clientALPN = peers.ALPNHQ

// ClientTarget is the client-facing suite's target for one build of a
// release: the manifest's client command line with the build's binary,
// written as the suite's command template. A client whose adapter has the
// zerortt test case (a second connection that resumes the first, with
// 0-RTT) gets the resume command too.
func ClientTarget(pim peers.Impl, name, binary string) (conformance.ClientTarget, error) {
	if pim.Client == nil {
		return conformance.ClientTarget{}, fmt.Errorf("%s has no client in the manifest", pim.Name)
	}
	tc := pim.DefaultCase
	if tc == "" {
		tc = "handshake"
	}
	ct := conformance.ClientTarget{Name: name, ALPN: clientALPN, Command: clientCommand(pim, binary, tc)}
	if slices.Contains(pim.ClientCases, "zerortt") {
		ct.ResumeCommand = clientCommand(pim, binary, "zerortt")
	}
	return ct, nil
}

// clientCommand writes the manifest's client command (peers.Command, whose
// placeholders are {OUT} {URLS} {CA} …) as a conformance command template
// ({outdir} {urls} {ca} …), for the endpoint test case tc. The key log and
// the CA are always given; qlog is not asked for.
func clientCommand(pim peers.Impl, binary, tc string) string {
	c := pim.Client
	fill := strings.NewReplacer(
		"{ADDR}", "{addr}", "{HOST}", "{host}", "{PORT}", "{port}",
		"{OUT}", "{outdir}", "{CA}", "{ca}", "{KEYLOG}", "{keylog}",
		"{ALPN}", clientALPN, "{TESTCASE}", tc, "{QLOGDIR}", "",
		"{CERT}", "", "{KEY}", "", "{ROOT}", "",
	)
	conds := map[string]bool{"keylog": true, "ca": true, "alpn": true}
	env := maps.Clone(c.Env)
	var args []string
	for _, a := range c.Args {
		switch a {
		case "{URLS}":
			args = append(args, "{urls}")
		case "{OPTS}":
			for _, k := range slices.Sorted(maps.Keys(c.When)) {
				if !conds[k] {
					continue
				}
				x := c.When[k]
				for _, xa := range x.Args {
					args = append(args, fill.Replace(xa))
				}
				maps.Copy(env, x.Env)
			}
		default:
			args = append(args, fill.Replace(a))
		}
	}
	var words []string
	for _, k := range slices.Sorted(maps.Keys(env)) {
		v := fill.Replace(env[k])
		if v == "" {
			continue
		}
		words = append(words, k+"="+templateWord(v))
	}
	words = append(words, shellQuote(binary))
	for _, a := range args {
		words = append(words, templateWord(a))
	}
	return strings.Join(words, " ")
}

// templateWord quotes a literal argument for the shell; a placeholder of
// the suite's template stays as it is (the suite quotes what it fills in).
func templateWord(s string) string {
	switch s {
	case "{urls}", "{url}", "{outdir}", "{ca}", "{keylog}", "{addr}", "{host}", "{port}":
		return s
	}
	return shellQuote(s)
}

func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// clientRun runs the client-facing suite on ct; it stands in for the
// Runner's RunFunc, whose target only names where the results go.
func clientRun(ct conformance.ClientTarget) observatory.RunFunc {
	return func(ctx context.Context, t conformance.Target, opts conformance.Options) (*conformance.Report, error) {
		opts.Revive = nil
		rep, err := conformance.RunClient(ctx, ct, opts)
		if err != nil {
			return nil, err
		}
		rep.Target.Implementation, rep.Target.Version = t.Implementation, t.Version
		return rep, nil
	}
}

// SelectScenarios expands patterns into the scenario IDs of role.
func SelectScenarios(role string, patterns []string) ([]string, error) {
	r := conformance.ServerRole
	if role == RoleClient {
		r = conformance.ClientRole
	}
	scs, err := conformance.Select(r, patterns)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(scs))
	for i, s := range scs {
		ids[i] = s.ID
	}
	return ids, nil
}
