package interop

import (
	"html/template"
	"os"
	"path/filepath"
	"sort"
)

// The matrix page: one table per test case, clients as rows and servers as
// columns, each cell linking to its artifacts. Everything that came from a
// peer (details, check texts) goes through html/template's escaping.
var matrixPage = template.Must(template.New("matrix").Funcs(template.FuncMap{
	"base": filepath.Base,
}).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>Quiver interop {{.R.LogDir}}</title>
<style>
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse;margin:0 0 1.5em}
th,td{border:1px solid #ccc;padding:.3em .5em;vertical-align:top;font-size:.9em}
th{background:#f4f4f4}
td.succeeded{background:#d9f2d9}td.failed{background:#f7d4d4}td.unsupported{background:#eee;color:#777}
td small{display:block;max-width:28em;color:#555}
a{color:#035}
</style></head><body>
<h1>Quiver interop run {{.R.LogDir}}</h1>
<p>Servers are columns, clients are rows. Engine: proxy (UDP relay on loopback). Seed {{.R.Quiver.Seed}}.
<a href="result.json">result.json</a></p>
{{range .Tests}}{{$t := .}}
<h2 id="{{.Abbr}}">{{.Name}} ({{.Abbr}})</h2>
<p>{{.Desc}}</p>
<table><tr><th>client \ server</th>{{range $.R.Servers}}<th>{{.}}</th>{{end}}</tr>
{{range $ci, $c := $.R.Clients}}<tr><th>{{$c}}</th>
{{range $si, $s := $.R.Servers}}{{with index $.Cells $ci $si $t.Abbr}}<td class="{{.Result}}"><b>{{.Result}}</b>{{if .Details}} {{.Details}}{{end}}
{{if .Reason}}<small>{{.Reason}}{{if .Detail}}: {{.Detail}}{{end}}</small>{{end}}
{{with .Paths}}<small><a href="{{.Output}}">log</a>{{if .ServerLog}} · <a href="{{.ServerLog}}">server</a>{{end}}{{if .ClientLog}} · <a href="{{.ClientLog}}">client</a>{{end}}{{if .ClientTrace}} · <a href="{{.ClientTrace}}">client trace</a> · <a href="{{.ServerTrace}}">server trace</a>{{end}}{{range .KeyLogs}} · <a href="{{.}}">keys</a>{{end}}{{range .Qlogs}} · <a href="{{.}}">qlog {{base .}}</a>{{end}}</small>{{end}}
{{range .Values}}<small>{{.Status}} {{printf "%.0f" .Value}} kbps · <a href="{{.Artifacts}}/output.txt">log</a></small>{{end}}
</td>{{else}}<td></td>{{end}}{{end}}</tr>
{{end}}</table>
{{end}}
</body></html>
`))

type pageTest struct{ Name, Abbr, Desc string }

func writeHTML(path string, r *Result) error {
	var tests []pageTest
	for abbr, d := range r.Tests {
		tests = append(tests, pageTest{Name: d.Name, Abbr: abbr, Desc: d.Desc})
	}
	order := map[string]int{}
	for i, tc := range Catalogue() {
		order[tc.Abbr] = i
	}
	sort.Slice(tests, func(i, j int) bool { return order[tests[i].Abbr] < order[tests[j].Abbr] })
	// cells[client][server] is the extension map of that pair.
	cells := make([][]map[string]*CellResult, len(r.Clients))
	for ci := range r.Clients {
		cells[ci] = make([]map[string]*CellResult, len(r.Servers))
		for si := range r.Servers {
			cells[ci][si] = r.Quiver.Cells[ci*len(r.Servers)+si]
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	err = matrixPage.Execute(f, map[string]any{"R": r, "Tests": tests, "Cells": cells})
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
