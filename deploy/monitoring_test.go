package deploy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metricsql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/alternayte/queuebox/shared/connect/kafka"
	"github.com/alternayte/queuebox/shared/connect/nats"
	"github.com/alternayte/queuebox/shared/connect/rabbitmq"
	"github.com/alternayte/queuebox/shared/connect/webhook"
	"github.com/alternayte/queuebox/shared/emf"
	"github.com/alternayte/queuebox/shared/metrics"
	"github.com/alternayte/queuebox/shared/retention"
	"github.com/alternayte/queuebox/shared/specdocs"
)

// The monitoring files and the pages they answer to, relative to this package.
const (
	rulesFile     = "prometheus/alerts.yml"
	rulesTestFile = "prometheus/alerts_test.yml"
	dashboardFile = "grafana/queuebox.json"
	alarmsFile    = "cloudwatch/alarms.yaml"
	monitoringDoc = "../docs/monitoring.md"
	// The spec documents, read with specdocs (a test that compares with them is skipped when
	// they are absent).
	monitoringPage = "20-monitoring.md"
	metricsPage    = "28-metrics.md"
	emfSource      = "../shared/emf/emf.go"
	// runbookBase is where every runbook link of the rules and the alarms points: a section of
	// docs/monitoring.md on the repository's default branch.
	runbookBase = "https://github.com/alternayte/queuebox/blob/main/docs/monitoring.md#"
)

// promtool returns the path of promtool: $QUEUEBOX_PROMTOOL_DIR/usr/bin/promtool (default
// directory /var/tmp/queuebox-promtool, where scripts/ensure-promtool.sh unpacks Debian's
// package), else promtool on the PATH. Without it the test fails and says how to get it.
func promtool(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("QUEUEBOX_PROMTOOL_DIR")
	if dir == "" {
		dir = "/var/tmp/queuebox-promtool"
	}
	if p := filepath.Join(dir, "usr", "bin", "promtool"); fileIsExecutable(p) {
		return p
	}
	if p, err := exec.LookPath("promtool"); err == nil {
		return p
	}
	t.Fatalf("promtool is not in %s/usr/bin nor on the PATH: run ./scripts/ensure-promtool.sh "+
		"(make services and make test run it) to unpack it from Debian's prometheus package", dir)
	return ""
}

func fileIsExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// runPromtool runs promtool with args in dir and returns its combined output; a non-zero exit
// fails the test with that output.
func runPromtool(t *testing.T, dir string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, promtool(t), args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "promtool %s:\n%s", strings.Join(args, " "), out)
	return string(out)
}

// alertRule is one alerting rule of alerts.yml.
type alertRule struct {
	Alert       string            `yaml:"alert"`
	Record      string            `yaml:"record"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

func loadAlertRules(t *testing.T) []alertRule {
	t.Helper()
	var file struct {
		Groups []struct {
			Name  string      `yaml:"name"`
			Rules []alertRule `yaml:"rules"`
		} `yaml:"groups"`
	}
	data, err := os.ReadFile(rulesFile)
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(data, &file), rulesFile)
	var rules []alertRule
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			require.NotEmpty(t, r.Alert, "%s: group %s has a rule that is not an alert (record %q)", rulesFile, g.Name, r.Record)
			rules = append(rules, r)
		}
	}
	require.NotEmpty(t, rules, rulesFile)
	return rules
}

func TestAlertRulesPassPromtool(t *testing.T) {
	out := runPromtool(t, "prometheus", "check", "rules", filepath.Base(rulesFile))
	assert.Contains(t, out, "SUCCESS")
	out = runPromtool(t, "prometheus", "test", "rules", filepath.Base(rulesTestFile))
	assert.Contains(t, out, "SUCCESS")
}

// TestEveryAlertFiresInTheRuleTests checks that alerts_test.yml expects each alert of
// alerts.yml to fire at least once, so that `promtool test rules` passing means every alert
// can fire; and that it names no alert that the rules do not have.
func TestEveryAlertFiresInTheRuleTests(t *testing.T) {
	var file struct {
		RuleFiles []string `yaml:"rule_files"`
		Tests     []struct {
			Name          string `yaml:"name"`
			AlertRuleTest []struct {
				AlertName string `yaml:"alertname"`
				ExpAlerts []any  `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	data, err := os.ReadFile(rulesTestFile)
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(data, &file), rulesTestFile)
	assert.Equal(t, []string{filepath.Base(rulesFile)}, file.RuleFiles)

	fired := map[string]bool{}
	quiet := map[string]bool{}
	for _, tc := range file.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fired[a.AlertName] = true
			} else {
				quiet[a.AlertName] = true
			}
		}
	}
	names := map[string]bool{}
	for _, r := range loadAlertRules(t) {
		names[r.Alert] = true
		assert.True(t, fired[r.Alert], "%s: no test of %s expects alert %s to fire", rulesTestFile, rulesFile, r.Alert)
	}
	for n := range fired {
		assert.True(t, names[n], "%s expects alert %s, which %s does not have", rulesTestFile, n, rulesFile)
	}
	for n := range quiet {
		assert.True(t, names[n], "%s checks alert %s, which %s does not have", rulesTestFile, n, rulesFile)
	}
	t.Logf("%d alerts, each fired by a test; %d of them also checked quiet", len(names), len(quiet))
}

// TestAlertRulesCoverSpecMonitoring checks the rules against the table "What to alert on" of
// spec/20: every PromQL condition of the table is in the expression of a rule, and a
// condition that holds "for N minutes" is a rule with `for: Nm`. A row without a metric (the
// readiness probe) is left to docs/monitoring.md, which must say where it is watched.
func TestAlertRulesCoverSpecMonitoring(t *testing.T) {
	rules := loadAlertRules(t)
	page := specdocs.Read(t, monitoringPage)
	section := specSection(t, page, "## What to alert on")
	rows := tableRows(section)
	require.NotEmpty(t, rows, "no table under What to alert on in %s", monitoringPage)

	doc := readFile(t, monitoringDoc)
	covered := 0
	for _, row := range rows {
		if len(row) < 2 || row[0] == "Alert" || strings.Trim(row[0], "- ") == "" {
			continue
		}
		conds := promqlConditions(row[1])
		if len(conds) == 0 {
			assert.Contains(t, doc, row[0], "%s: the alert %q of spec/20 has no metric; docs/monitoring.md must say how to watch it", monitoringDoc, row[0])
			t.Logf("spec/20 %q has no metric condition; docs/monitoring.md covers it", row[0])
			continue
		}
		for _, c := range conds {
			var match *alertRule
			for i := range rules {
				if strings.Contains(normalizeSpace(rules[i].Expr), normalizeSpace(c.expr)) {
					match = &rules[i]
					break
				}
			}
			if !assert.NotNil(t, match, "spec/20 %q: no rule of %s has the condition %s", row[0], rulesFile, c.expr) {
				continue
			}
			covered++
			if c.forMinutes > 0 {
				assert.Equal(t, fmt.Sprintf("%dm", c.forMinutes), match.For, "spec/20 %q: rule %s must hold for %d minutes", row[0], match.Alert, c.forMinutes)
			}
		}
	}
	assert.GreaterOrEqual(t, covered, 9, "the conditions of spec/20 found in the rules")
}

// promqlCondition is one PromQL expression of a condition cell of spec/20, with the minutes of
// "for N minutes" that follow it, if any.
type promqlCondition struct {
	expr       string
	forMinutes int
}

var (
	backticked = regexp.MustCompile("`([^`]+)`")
	forMinutes = regexp.MustCompile(`^\s*for (\d+) minutes?`)
	familyName = regexp.MustCompile(`\b(queuebox|hikaricp)_[a-z0-9_]+`)
)

// promqlConditions returns the backticked expressions of a cell that name a metric.
func promqlConditions(cell string) []promqlCondition {
	var out []promqlCondition
	locs := backticked.FindAllStringSubmatchIndex(cell, -1)
	for i, l := range locs {
		expr := cell[l[2]:l[3]]
		if !familyName.MatchString(expr) {
			continue
		}
		next := len(cell)
		if i+1 < len(locs) {
			next = locs[i+1][0]
		}
		c := promqlCondition{expr: expr}
		if m := forMinutes.FindStringSubmatch(cell[l[1]:next]); m != nil {
			c.forMinutes, _ = strconv.Atoi(m[1])
		}
		out = append(out, c)
	}
	return out
}

// TestAlertRulesLinkTheRunbook checks that every rule has a severity, a summary, a
// description and a runbook_url that points at a section of docs/monitoring.md that exists.
func TestAlertRulesLinkTheRunbook(t *testing.T) {
	anchors := markdownAnchors(readFile(t, monitoringDoc))
	for _, r := range loadAlertRules(t) {
		assert.Contains(t, []string{"page", "warning"}, r.Labels["severity"], "%s: severity", r.Alert)
		assert.NotEmpty(t, r.Annotations["summary"], "%s: summary", r.Alert)
		assert.NotEmpty(t, r.Annotations["description"], "%s: description", r.Alert)
		assertRunbookLink(t, anchors, r.Alert, r.Annotations["runbook_url"])
	}
}

// assertRunbookLink checks that text holds a runbook link into docs/monitoring.md whose
// anchor is a heading of that page.
func assertRunbookLink(t *testing.T, anchors map[string]bool, what, text string) {
	t.Helper()
	i := strings.Index(text, runbookBase)
	if !assert.GreaterOrEqual(t, i, 0, "%s: no link to %s... in %q", what, runbookBase, text) {
		return
	}
	anchor := text[i+len(runbookBase):]
	if end := strings.IndexAny(anchor, " \t\n\"')"); end >= 0 {
		anchor = anchor[:end]
	}
	assert.True(t, anchors[anchor], "%s: docs/monitoring.md has no heading for #%s", what, anchor)
}

// markdownAnchors returns the anchors that GitHub gives the headings of a Markdown page: lower
// case, punctuation dropped, spaces as hyphens, a repeat suffixed -1, -2, ...
func markdownAnchors(page string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	inFence := false
	for _, line := range strings.Split(page, "\n") {
		if strings.HasPrefix(line, "```") {
			inFence = !inFence
			continue
		}
		if inFence || !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(title) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9'):
				b.WriteRune(r)
			}
		}
		slug := b.String()
		if n := seen[slug]; n > 0 {
			out[fmt.Sprintf("%s-%d", slug, n)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	return out
}

// specFamilies returns the metric families of spec/28's tables, with their types, and the
// names a query may use for them: the family, and for a summary its _sum and _count series.
func specFamilies(t *testing.T) (types map[string]string, names map[string]bool) {
	t.Helper()
	row := regexp.MustCompile("(?m)^\\| `([a-zA-Z_:][a-zA-Z0-9_:]*)` +\\| (gauge|counter|summary|histogram) ")
	types = map[string]string{}
	names = map[string]bool{}
	for _, m := range row.FindAllStringSubmatch(specdocs.Read(t, metricsPage), -1) {
		types[m[1]] = m[2]
		names[m[1]] = true
		if m[2] == "summary" {
			names[m[1]+"_sum"] = true
			names[m[1]+"_count"] = true
		}
	}
	require.GreaterOrEqual(t, len(types), 20, "the metric tables of %s", metricsPage)
	return types, names
}

// grafanaVariable is how a dashboard expression names a template variable.
var grafanaVariable = regexp.MustCompile(`\$\{?([A-Za-z_][A-Za-z0-9_]*)(?::[a-z]+)?\}?`)

// grafanaPlaceholder is the label value that substituteGrafanaVariables puts for a variable.
const grafanaPlaceholder = "grafana_variable"

// substituteGrafanaVariables replaces the template variables of a dashboard expression with
// values that PromQL parses: an interval for the $__*interval and $__range variables, a
// label value for the others.
func substituteGrafanaVariables(expr string) string {
	return grafanaVariable.ReplaceAllStringFunc(expr, func(v string) string {
		name := grafanaVariable.FindStringSubmatch(v)[1]
		switch name {
		case "__rate_interval", "__interval", "__range":
			return "5m"
		default:
			return grafanaPlaceholder
		}
	})
}

// metricNames parses a PromQL expression and returns the metric names it selects.
func metricNames(expr string) ([]string, error) {
	e, err := metricsql.Parse(expr)
	if err != nil {
		return nil, fmt.Errorf("parsing %q: %w", expr, err)
	}
	seen := map[string]bool{}
	metricsql.VisitAll(e, func(x metricsql.Expr) {
		me, ok := x.(*metricsql.MetricExpr)
		if !ok {
			return
		}
		for _, lfs := range me.LabelFilterss {
			for _, lf := range lfs {
				if lf.Label == "__name__" && !lf.IsRegexp && !lf.IsNegative {
					seen[lf.Value] = true
				}
			}
		}
	})
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	return names, nil
}

// labelMatcher is an exact label matcher of a selector: family{label="value"}.
type labelMatcher struct{ family, label, value string }

// exactMatchers parses a PromQL expression and returns its exact, positive label matchers
// (label="value"), the metric name excluded.
func exactMatchers(expr string) ([]labelMatcher, error) {
	e, err := metricsql.Parse(expr)
	if err != nil {
		return nil, fmt.Errorf("parsing %q: %w", expr, err)
	}
	var out []labelMatcher
	metricsql.VisitAll(e, func(x metricsql.Expr) {
		me, ok := x.(*metricsql.MetricExpr)
		if !ok {
			return
		}
		for _, lfs := range me.LabelFilterss {
			family := ""
			for _, lf := range lfs {
				if lf.Label == "__name__" {
					family = lf.Value
				}
			}
			for _, lf := range lfs {
				if lf.Label != "__name__" && !lf.IsRegexp && !lf.IsNegative {
					out = append(out, labelMatcher{family: family, label: lf.Label, value: lf.Value})
				}
			}
		}
	})
	return out, nil
}

// specTags returns the Tags cell of each metric family row of spec/28.
func specTags(t *testing.T) map[string]string {
	t.Helper()
	row := regexp.MustCompile("(?m)^\\| `([a-zA-Z_:][a-zA-Z0-9_:]*)` +\\| [a-z]+ +\\| ([^|]*)\\|")
	out := map[string]string{}
	for _, m := range row.FindAllStringSubmatch(specdocs.Read(t, metricsPage), -1) {
		out[m[1]] = strings.TrimSpace(m[2])
	}
	return out
}

// scrapedQuantiles returns the quantile label values that the service's summaries carry, from
// a registry of shared/metrics that has observed one value of each summary.
func scrapedQuantiles(t *testing.T) map[string]bool {
	t.Helper()
	r := metrics.New("test")
	r.PublishDuration(webhook.Type, time.Second)
	r.ProcessingDuration(time.Second)
	r.Cleanup(retention.TableOutbox, 1, time.Second, time.Now())
	families, err := r.Prometheus().Gather()
	require.NoError(t, err)
	out := map[string]bool{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			for _, q := range m.GetSummary().GetQuantile() {
				out[strconv.FormatFloat(q.GetQuantile(), 'g', -1, 64)] = true
			}
		}
	}
	require.NotEmpty(t, out, "the quantiles of the summaries of shared/metrics")
	return out
}

// TestExpressionLabelsMatchSpecMetrics checks every exact label matcher of the rules and the
// dashboard: the label is a tag of the family in spec/28 (job and instance come from the
// scrape), a value that spec/28 enumerates for it is one of those values, and a quantile is
// one that the service's summaries carry.
func TestExpressionLabelsMatchSpecMetrics(t *testing.T) {
	tags := specTags(t)
	types, _ := specFamilies(t)
	quantiles := scrapedQuantiles(t)
	var exprs []string
	for _, r := range loadAlertRules(t) {
		exprs = append(exprs, r.Expr)
	}
	for _, e := range loadDashboard(t).exprs() {
		exprs = append(exprs, substituteGrafanaVariables(e.expr))
	}
	checked := 0
	for _, expr := range exprs {
		ms, err := exactMatchers(expr)
		require.NoError(t, err)
		for _, m := range ms {
			if m.label == "job" || m.label == "instance" || m.value == grafanaPlaceholder {
				continue
			}
			checked++
			family := strings.TrimSuffix(strings.TrimSuffix(m.family, "_sum"), "_count")
			if m.label == "quantile" {
				assert.Equal(t, "summary", types[family], "%q: quantile on %s, which is not a summary", expr, m.family)
				assert.True(t, quantiles[m.value], "%q: quantile %q is not one the service exports (%v)", expr, m.value, sortedSetKeys(quantiles))
				continue
			}
			cell, ok := tags[family]
			if !assert.True(t, ok, "%q: %s has no row in spec/28", expr, m.family) {
				continue
			}
			assert.Contains(t, cell, "`"+m.label+"`", "%q: %s has no tag %s in spec/28", expr, m.family, m.label)
			if strings.ContainsAny(cell, "=:") {
				assert.Regexp(t, `\b`+regexp.QuoteMeta(m.value)+`\b`, cell, "%q: spec/28 lists no value %q for %s of %s", expr, m.value, m.label, m.family)
			}
		}
	}
	assert.GreaterOrEqual(t, checked, 5, "the exact label matchers checked")
}

// dashboard is the part of a Grafana dashboard that the checks read.
type dashboard struct {
	Title      string `json:"title"`
	UID        string `json:"uid"`
	Templating struct {
		List []struct {
			Name       string `json:"name"`
			Type       string `json:"type"`
			Definition string `json:"definition"`
			Query      any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
	Panels []dashboardPanel `json:"panels"`
}

type dashboardPanel struct {
	ID         int                      `json:"id"`
	Type       string                   `json:"type"`
	Title      string                   `json:"title"`
	Repeat     string                   `json:"repeat"`
	Datasource map[string]any           `json:"datasource"`
	GridPos    struct{ X, Y, W, H int } `json:"gridPos"`
	Panels     []dashboardPanel         `json:"panels"`
	Targets    []struct {
		Expr       string         `json:"expr"`
		Datasource map[string]any `json:"datasource"`
	} `json:"targets"`
}

func loadDashboard(t *testing.T) dashboard {
	t.Helper()
	var d dashboard
	data, err := os.ReadFile(dashboardFile)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &d), dashboardFile)
	return d
}

// dashboardExpr is a PromQL expression of a panel, with the row it is under.
type dashboardExpr struct {
	row, panel, expr string
}

// exprs returns the expression of every target of every panel, the panels of collapsed rows
// included, in order.
func (d dashboard) exprs() []dashboardExpr {
	var out []dashboardExpr
	row := ""
	var walk func(ps []dashboardPanel)
	walk = func(ps []dashboardPanel) {
		for _, p := range ps {
			if p.Type == "row" {
				row = p.Title
				walk(p.Panels)
				continue
			}
			for _, tg := range p.Targets {
				if strings.TrimSpace(tg.Expr) != "" {
					out = append(out, dashboardExpr{row: row, panel: p.Title, expr: tg.Expr})
				}
			}
		}
	}
	walk(d.Panels)
	return out
}

// labelValuesQuery is a Grafana variable query of the Prometheus data source.
var labelValuesQuery = regexp.MustCompile(`^label_values\((.+),\s*([a-zA-Z_][a-zA-Z0-9_]*)\)$`)

// variableSelectors returns the series selectors of the dashboard's label_values variables.
func (d dashboard) variableSelectors(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		m := labelValuesQuery.FindStringSubmatch(strings.TrimSpace(v.Definition))
		require.NotNil(t, m, "variable %s: the query %q is not label_values(selector, label)", v.Name, v.Definition)
		out[v.Name] = m[1]
	}
	return out
}

// TestMonitoringExpressionsNameOnlySpecMetrics parses every expression of the rules, of the
// dashboard's panels and of its variables, and checks that each selects only metric families
// of spec/28 (a summary's _sum and _count included).
func TestMonitoringExpressionsNameOnlySpecMetrics(t *testing.T) {
	_, allowed := specFamilies(t)
	check := func(where, expr string) {
		names, err := metricNames(expr)
		if !assert.NoError(t, err, where) {
			return
		}
		assert.NotEmpty(t, names, "%s: %q selects no metric", where, expr)
		for _, n := range names {
			assert.True(t, allowed[n], "%s: %s is not a metric family of spec/28-metrics.md", where, n)
		}
	}
	for _, r := range loadAlertRules(t) {
		check(rulesFile+" "+r.Alert, r.Expr)
	}
	d := loadDashboard(t)
	exprs := d.exprs()
	require.NotEmpty(t, exprs, dashboardFile)
	for _, e := range exprs {
		check(fmt.Sprintf("%s panel %q", dashboardFile, e.panel), substituteGrafanaVariables(e.expr))
	}
	for name, sel := range d.variableSelectors(t) {
		check(fmt.Sprintf("%s variable %s", dashboardFile, name), substituteGrafanaVariables(sel))
	}
}

// TestDashboardExpressionsParseInPromtool writes every expression of the dashboard (variables
// substituted) as a recording rule and lets promtool parse the file, so the dashboard is held
// to Prometheus's own parser as the rules are.
func TestDashboardExpressionsParseInPromtool(t *testing.T) {
	d := loadDashboard(t)
	type rule struct {
		Record string `yaml:"record"`
		Expr   string `yaml:"expr"`
	}
	var rules []rule
	for i, e := range d.exprs() {
		rules = append(rules, rule{Record: fmt.Sprintf("dashboard_expr_%d", i+1), Expr: substituteGrafanaVariables(e.expr)})
	}
	for name, sel := range d.variableSelectors(t) {
		rules = append(rules, rule{Record: "dashboard_variable_" + name, Expr: substituteGrafanaVariables(sel)})
	}
	file := map[string]any{"groups": []map[string]any{{"name": "dashboard", "rules": rules}}}
	data, err := yaml.Marshal(file)
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "dashboard.yml"), data, 0o600))
	out := runPromtool(t, dir, "check", "rules", "dashboard.yml")
	assert.Contains(t, out, fmt.Sprintf("SUCCESS: %d rules found", len(rules)))
}

// TestDashboardIsWellFormed checks what Grafana needs to import the dashboard as it is: a
// uid, a Prometheus data source variable that every panel and target uses, panel ids that
// are unique, and every panel inside the 24 columns of the grid.
func TestDashboardIsWellFormed(t *testing.T) {
	d := loadDashboard(t)
	assert.NotEmpty(t, d.UID, "uid")
	assert.NotEmpty(t, d.Title, "title")
	var dsVar bool
	for _, v := range d.Templating.List {
		if v.Name == "datasource" && v.Type == "datasource" {
			dsVar = assert.Equal(t, "prometheus", v.Query, "the data source variable's type")
		}
	}
	assert.True(t, dsVar, "%s: no datasource variable", dashboardFile)
	ds := map[string]any{"type": "prometheus", "uid": "${datasource}"}

	ids := map[int]string{}
	var walk func(ps []dashboardPanel)
	walk = func(ps []dashboardPanel) {
		for _, p := range ps {
			if prev, dup := ids[p.ID]; dup || p.ID <= 0 {
				assert.Fail(t, "panel id", "panel %q has id %d, which %q has too (or is not positive)", p.Title, p.ID, prev)
			}
			ids[p.ID] = p.Title
			g := p.GridPos
			assert.True(t, g.W > 0 && g.H > 0 && g.X >= 0 && g.X+g.W <= 24, "panel %q: gridPos %+v", p.Title, g)
			if p.Type == "row" {
				walk(p.Panels)
				continue
			}
			assert.Equal(t, ds, p.Datasource, "panel %q: data source", p.Title)
			assert.NotEmpty(t, p.Targets, "panel %q has no query", p.Title)
			for _, tg := range p.Targets {
				assert.Equal(t, ds, tg.Datasource, "panel %q: the data source of a query", p.Title)
			}
		}
	}
	walk(d.Panels)
}

// TestDashboardAnswersSpecQuestions checks the dashboard against the section "Dashboards" of
// spec/20: a row for each of its four questions, every metric that the section names in a
// panel, and per-destination and per-source rows that Grafana repeats for each value of the
// destination and source variables.
func TestDashboardAnswersSpecQuestions(t *testing.T) {
	d := loadDashboard(t)
	section := specSection(t, specdocs.Read(t, monitoringPage), "## Dashboards")

	var rowTitles []string
	repeats := map[string]dashboardPanel{}
	for _, p := range d.Panels {
		if p.Type == "row" {
			rowTitles = append(rowTitles, p.Title)
			if p.Repeat != "" {
				repeats[p.Repeat] = p
			}
		}
	}
	questions := 0
	for _, row := range tableRows(section) {
		if len(row) < 2 || !strings.HasSuffix(row[0], "?") {
			continue
		}
		questions++
		assert.Contains(t, rowTitles, row[0], "%s: no row for the question of spec/20", dashboardFile)
	}
	assert.Equal(t, 4, questions, "the questions of spec/20's dashboard table")

	used := map[string]bool{}
	for _, e := range d.exprs() {
		names, err := metricNames(substituteGrafanaVariables(e.expr))
		require.NoError(t, err)
		for _, n := range names {
			used[n] = true
		}
	}
	wanted := familyName.FindAllString(strings.Join(backtickedText(section), " "), -1)
	require.NotEmpty(t, wanted)
	for _, n := range wanted {
		assert.True(t, used[n], "%s: no panel shows %s, which spec/20's dashboard section names", dashboardFile, n)
	}

	vars := map[string]bool{}
	for _, v := range d.Templating.List {
		vars[v.Name] = true
	}
	for _, v := range []string{"destination", "source"} {
		assert.True(t, vars[v], "%s: no template variable %s", dashboardFile, v)
		row, ok := repeats[v]
		if !assert.True(t, ok, "%s: no row repeated for each %s", dashboardFile, v) {
			continue
		}
		require.NotEmpty(t, row.Panels, "the row repeated for each %s", v)
		for _, p := range row.Panels {
			for _, tg := range p.Targets {
				assert.Contains(t, tg.Expr, v+`="$`+v+`"`, "panel %q of the row of each %s", p.Title, v)
			}
		}
	}
}

// emfMetric is a metric that the EMF recorder writes, with the dimension sets it writes it
// with (each sorted and joined by commas).
type emfMetrics map[string]map[string]bool

// emittedEMFMetrics reads shared/emf/emf.go and returns every metric that the Recorder writes
// through its add, set and observe methods, with the names of the dimensions of each call, so
// that the alarms are checked against the code rather than a list.
func emittedEMFMetrics(t *testing.T) emfMetrics {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, emfSource, nil, 0)
	require.NoError(t, err)
	// The position of the first dimension argument of each writing method.
	firstDim := map[string]int{"add": 2, "set": 3, "observe": 2}
	out := emfMetrics{}
	for _, decl := range f.Decls {
		fn, ok := decl.(*ast.FuncDecl)
		if !ok || fn.Body == nil {
			continue
		}
		// Dimensions that the function builds into a variable first: t := dim{"table", table}.
		vars := map[string]string{}
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			if as, ok := n.(*ast.AssignStmt); ok && len(as.Lhs) == len(as.Rhs) {
				for i, rhs := range as.Rhs {
					if name, ok := dimName(rhs); ok {
						if id, ok := as.Lhs[i].(*ast.Ident); ok {
							vars[id.Name] = name
						}
					}
				}
			}
			return true
		})
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			first, ok := firstDim[sel.Sel.Name]
			if !ok || len(call.Args) < first {
				return true
			}
			lit, ok := call.Args[0].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			name, err := strconv.Unquote(lit.Value)
			require.NoError(t, err)
			var dims []string
			for _, a := range call.Args[first:] {
				d, ok := dimName(a)
				if !ok {
					if id, isIdent := a.(*ast.Ident); isIdent {
						d, ok = vars[id.Name]
					}
				}
				require.True(t, ok, "%s: a dimension of %s that this test cannot read", fset.Position(a.Pos()), name)
				dims = append(dims, d)
			}
			sort.Strings(dims)
			if out[name] == nil {
				out[name] = map[string]bool{}
			}
			out[name][strings.Join(dims, ",")] = true
			return true
		})
	}
	require.GreaterOrEqual(t, len(out), 15, "the metrics that %s writes", emfSource)
	return out
}

// dimName returns the dimension name of a dim{"name", value} literal.
func dimName(e ast.Expr) (string, bool) {
	cl, ok := e.(*ast.CompositeLit)
	if !ok || len(cl.Elts) == 0 {
		return "", false
	}
	if id, ok := cl.Type.(*ast.Ident); !ok || id.Name != "dim" {
		return "", false
	}
	lit, ok := cl.Elts[0].(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}

// alarmMetric is one metric that an alarm reads.
type alarmMetric struct {
	namespace any
	name      string
	dims      []string
}

// alarmMetrics returns the metrics of an AWS::CloudWatch::Alarm's properties: its MetricName,
// or the MetricStat of each entry of Metrics.
func alarmMetrics(props map[string]any) []alarmMetric {
	read := func(m map[string]any) alarmMetric {
		am := alarmMetric{namespace: m["Namespace"]}
		am.name, _ = m["MetricName"].(string)
		if ds, ok := m["Dimensions"].([]any); ok {
			for _, d := range ds {
				if dm, ok := d.(map[string]any); ok {
					n, _ := dm["Name"].(string)
					am.dims = append(am.dims, n)
				}
			}
		}
		sort.Strings(am.dims)
		return am
	}
	if _, ok := props["MetricName"]; ok {
		return []alarmMetric{read(props)}
	}
	var out []alarmMetric
	if ms, ok := props["Metrics"].([]any); ok {
		for _, m := range ms {
			mm, _ := m.(map[string]any)
			if stat := mapAt(mapAt(mm, "MetricStat"), "Metric"); stat != nil {
				out = append(out, read(stat))
			}
		}
	}
	return out
}

func loadAlarms(t *testing.T) (raw map[string]any, alarms map[string]map[string]any) {
	t.Helper()
	raw, err := parseCFN(readRepoFile(t, "deploy/"+alarmsFile))
	require.NoError(t, err, alarmsFile)
	alarms = map[string]map[string]any{}
	for id, r := range mapAt(raw, "Resources") {
		res, ok := r.(map[string]any)
		require.True(t, ok, "resource %s", id)
		require.Equal(t, "AWS::CloudWatch::Alarm", res["Type"], "resource %s", id)
		alarms[id] = mapAt(res, "Properties")
	}
	require.NotEmpty(t, alarms, alarmsFile)
	return raw, alarms
}

// TestCloudWatchAlarmsReadEMFMetrics checks that alarms.yaml parses, that each alarm reads in
// the namespace parameter (whose default is the recorder's) a metric that shared/emf writes,
// with exactly the dimensions it writes it with, and links its runbook section.
func TestCloudWatchAlarmsReadEMFMetrics(t *testing.T) {
	raw, alarms := loadAlarms(t)
	emitted := emittedEMFMetrics(t)
	anchors := markdownAnchors(readFile(t, monitoringDoc))

	ns := mapAt(mapAt(raw, "Parameters"), "Namespace")
	require.NotNil(t, ns, "%s: no Namespace parameter", alarmsFile)
	assert.Equal(t, emf.DefaultNamespace, ns["Default"], "%s: the default namespace", alarmsFile)

	for id, props := range alarms {
		ms := alarmMetrics(props)
		if !assert.NotEmpty(t, ms, "alarm %s reads no metric", id) {
			continue
		}
		for _, m := range ms {
			assert.Equal(t, map[string]any{"Ref": "Namespace"}, m.namespace, "alarm %s: the namespace of %s", id, m.name)
			sets, ok := emitted[m.name]
			if !assert.True(t, ok, "alarm %s: shared/emf does not write %s", id, m.name) {
				continue
			}
			assert.True(t, sets[strings.Join(m.dims, ",")], "alarm %s: shared/emf writes %s with the dimensions %v, not %v", id, m.name, sortedSetKeys(sets), m.dims)
		}
		desc := props["AlarmDescription"]
		if sub, ok := desc.(map[string]any); ok {
			desc = sub["Fn::Sub"]
		}
		text, _ := desc.(string)
		assertRunbookLink(t, anchors, "alarm "+id, text)
	}

	// The destination types that QueueboxDestinationSlow offers are the publishers' types.
	allowed, _ := mapAt(mapAt(raw, "Parameters"), "WatchedDestinationType")["AllowedValues"].([]any)
	var got []string
	for _, v := range allowed {
		got = append(got, fmt.Sprint(v))
	}
	want := []string{webhook.Type, rabbitmq.Type, kafka.Type, nats.Type}
	slices.Sort(got)
	slices.Sort(want)
	assert.Equal(t, want, got, "%s: the AllowedValues of WatchedDestinationType", alarmsFile)
}

// TestCloudWatchAlarmsMirrorPrometheusAlerts checks that each Prometheus alert has an alarm
// whose logical id starts with the alert's name, or is listed under QueueBox::NotCovered with
// a reason, and then names a family that the functions do not write; and that every alarm
// stands for an alert.
func TestCloudWatchAlarmsMirrorPrometheusAlerts(t *testing.T) {
	raw, alarms := loadAlarms(t)
	emitted := emittedEMFMetrics(t)
	notCovered := mapAt(mapAt(raw, "Metadata"), "QueueBox::NotCovered")
	rules := loadAlertRules(t)

	alerts := map[string]bool{}
	for _, r := range rules {
		alerts[r.Alert] = true
		var ids []string
		for id := range alarms {
			if strings.HasPrefix(id, r.Alert) {
				ids = append(ids, id)
			}
		}
		reason, skipped := notCovered[r.Alert]
		if skipped {
			assert.Empty(t, ids, "alert %s is listed as not covered but has alarms", r.Alert)
			assert.NotEmpty(t, reason, "alert %s: the reason it is not covered", r.Alert)
			names, err := metricNames(r.Expr)
			require.NoError(t, err)
			assert.True(t, slices.ContainsFunc(names, func(n string) bool { return emitted[n] == nil }),
				"alert %s is not covered, yet the functions write every metric it reads (%v)", r.Alert, names)
			continue
		}
		assert.NotEmpty(t, ids, "%s has no alarm for the Prometheus alert %s (nor a QueueBox::NotCovered reason)", alarmsFile, r.Alert)
	}
	for id := range alarms {
		assert.True(t, slices.ContainsFunc(slices.Collect(maps.Keys(alerts)), func(a string) bool { return strings.HasPrefix(id, a) }),
			"alarm %s does not start with the name of a Prometheus alert", id)
	}
	for a := range notCovered {
		assert.True(t, alerts[a], "QueueBox::NotCovered names %s, which is not an alert of %s", a, rulesFile)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(data)
}

// specSection returns the text of a page from the line that starts with heading to the next
// heading of the same level or higher.
func specSection(t *testing.T, page, heading string) string {
	t.Helper()
	i := strings.Index(page, "\n"+heading)
	require.GreaterOrEqual(t, i, 0, "no %q section", heading)
	rest := page[i+1:]
	level := strings.Count(strings.Fields(heading)[0], "#")
	re := regexp.MustCompile(`(?m)^#{1,` + strconv.Itoa(level) + `} `)
	if loc := re.FindStringIndex(rest[len(heading):]); loc != nil {
		return rest[:len(heading)+loc[0]]
	}
	return rest
}

// tableRows returns the cells of the Markdown table rows of a text, trimmed, separators
// excluded.
func tableRows(text string) [][]string {
	var rows [][]string
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "|") || strings.Trim(line, "|- ") == "" {
			continue
		}
		var cells []string
		for _, c := range strings.Split(strings.Trim(line, "|"), "|") {
			cells = append(cells, strings.TrimSpace(c))
		}
		rows = append(rows, cells)
	}
	return rows
}

func backtickedText(text string) []string {
	var out []string
	for _, m := range backticked.FindAllStringSubmatch(text, -1) {
		out = append(out, m[1])
	}
	return out
}

func normalizeSpace(s string) string { return strings.Join(strings.Fields(s), " ") }

func sortedSetKeys(m map[string]bool) []string {
	out := slices.Collect(maps.Keys(m))
	sort.Strings(out)
	return out
}
