package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/alternayte/queuebox/shared/emf"
	"github.com/alternayte/queuebox/shared/metrics"
)

// emfSource is the file of the EMF recorder, from the repository's root.
const emfSource = "shared/emf/emf.go"

// emfMetric is a metric that the EMF recorder writes.
type emfMetric struct {
	unit string     // Count, Seconds or None
	dims [][]string // the dimension names of each call that writes it
}

// metricsPage is docs/reference/metrics.md.
func metricsPage(root string) (string, error) {
	written, err := emfMetrics(filepath.Join(root, filepath.FromSlash(emfSource)))
	if err != nil {
		return "", err
	}
	families := metrics.Families()
	var b md
	b.line("# Metrics")
	b.line("")
	b.text(generatedNote)
	b.line("")
	b.line("`queuebox serve` and the capture node answer `GET /metrics` in the Prometheus text format, on the")
	b.line("management port (`server.managementPort`), or on the data port when no management port is set.")
	b.line("A family with labels shows from its first sample: a destination that never published has no")
	b.line("series yet. The `hikaricp_connections` families describe the database connection pool, with the")
	b.line(fmt.Sprintf("pool's name as the label `pool` (`%s` for QueueBox's own pool).", metrics.PoolName))
	b.line("")
	b.line(fmt.Sprintf("A summary carries the quantiles %s over a window of %s, and comes with a gauge of the same",
		quantiles(families), humanDuration(metrics.Window)))
	b.line("name and `_max` that holds the largest value of that window.")
	b.line("")
	b.line("The Lambda functions have no scrape: each writes what it measured during an invocation to its log as")
	b.line(fmt.Sprintf("CloudWatch Embedded Metric Format lines, in the namespace `%s`, with each label as a dimension of", emf.DefaultNamespace))
	b.line("the same name. The column **Lambda** gives the unit of what they write: a counter's increase during the")
	b.line("invocation (`Count`), every observed value of a summary (`Seconds`), or a gauge's last value.")
	b.line("")
	rows := make([][]string, 0, len(families))
	for _, f := range families {
		labels := make([]string, len(f.Labels))
		for i, l := range f.Labels {
			labels[i] = code(l)
		}
		rows = append(rows, []string{code(f.Name), f.Type, strings.Join(labels, ", "), f.Help, lambdaCell(f, written)})
	}
	b.table([]string{"Metric", "Type", "Labels", "Description", "Lambda"}, rows)
	b.line("")
	if extra := emfOnly(families, written); len(extra) > 0 {
		b.line("The Lambda functions also write " + joinAnd(extra) + ", which the scrape does not show.")
		b.line("")
	}
	b.line(fmt.Sprintf("This page lists %d metric families.", len(families)))
	return b.String(), nil
}

// quantiles names the quantiles of the summaries, which share them.
func quantiles(families []metrics.Family) string {
	for _, f := range families {
		if len(f.Quantiles) > 0 {
			qs := make([]string, len(f.Quantiles))
			for i, q := range f.Quantiles {
				qs[i] = strconv.FormatFloat(q, 'g', -1, 64)
			}
			return joinAnd(qs)
		}
	}
	return ""
}

// lambdaCell says what the Lambda functions write of the family f: its unit, and its
// dimensions when they differ from the labels; "no" when they write nothing of it.
func lambdaCell(f metrics.Family, written map[string]emfMetric) string {
	m, ok := written[f.Name]
	if strings.HasSuffix(f.Name, "_max") && !ok {
		if base, found := written[strings.TrimSuffix(f.Name, "_max")]; found && base.unit == string(emf.Seconds) {
			return "from the values of " + code(strings.TrimSuffix(f.Name, "_max"))
		}
	}
	if !ok {
		return "no"
	}
	cell := code(m.unit)
	want := slices.Sorted(slices.Values(f.Labels))
	for _, d := range m.dims {
		if !slices.Equal(slices.Sorted(slices.Values(d)), want) {
			cell += fmt.Sprintf(" (dimensions %s)", strings.Join(d, ", "))
		}
	}
	return cell
}

// emfOnly returns the metrics that the EMF recorder writes and no family of the registry is.
func emfOnly(families []metrics.Family, written map[string]emfMetric) []string {
	var out []string
	for name := range written {
		if !slices.ContainsFunc(families, func(f metrics.Family) bool { return f.Name == name }) {
			out = append(out, code(name))
		}
	}
	slices.Sort(out)
	return out
}

// emfMetrics reads the EMF recorder's source and returns every metric that it writes through
// its add, set and observe methods, with the unit and the dimension names of each call.
func emfMetrics(path string) (map[string]emfMetric, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, 0)
	if err != nil {
		return nil, fmt.Errorf("parsing %s: %w", emfSource, err)
	}
	out := map[string]emfMetric{}
	for _, decl := range f.Decls {
		fn, ok := decl.(*ast.FuncDecl)
		if !ok || fn.Body == nil {
			continue
		}
		if err := emfCalls(fset, fn.Body, out); err != nil {
			return nil, err
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s writes no metric that the generator can read", emfSource)
	}
	return out, nil
}

// emfCalls adds the metrics that the calls of body write to out.
func emfCalls(fset *token.FileSet, body *ast.BlockStmt, out map[string]emfMetric) error {
	// The position of the first dimension of each writing method, and its unit (set's is its
	// second argument).
	firstDim := map[string]int{"add": 2, "set": 3, "observe": 2}
	unit := map[string]string{"add": string(emf.Count), "observe": string(emf.Seconds)}
	vars := dimVars(body)
	var failed error
	ast.Inspect(body, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || failed != nil {
			return failed == nil
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		first, known := firstDim[selName(sel)]
		if !ok || !known || len(call.Args) < first {
			return true
		}
		lit, ok := call.Args[0].(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return true
		}
		name, _ := strconv.Unquote(lit.Value)
		m := out[name]
		m.unit = unit[sel.Sel.Name]
		if sel.Sel.Name == "set" {
			if id, ok := call.Args[1].(*ast.Ident); ok {
				m.unit = id.Name
			}
		}
		var dims []string
		for _, a := range call.Args[first:] {
			d, ok := dimName(a)
			if id, isIdent := a.(*ast.Ident); !ok && isIdent {
				d, ok = vars[id.Name]
			}
			if !ok {
				failed = fmt.Errorf("%s: a dimension of %s that the generator cannot read", fset.Position(a.Pos()), name)
				return false
			}
			dims = append(dims, d)
		}
		m.dims = append(m.dims, dims)
		out[name] = m
		return true
	})
	return failed
}

// selName returns the method name of a selector, or "".
func selName(sel *ast.SelectorExpr) string {
	if sel == nil {
		return ""
	}
	return sel.Sel.Name
}

// dimVars returns the dimensions that body builds into a variable first: t := dim{"table", t}.
func dimVars(body *ast.BlockStmt) map[string]string {
	vars := map[string]string{}
	ast.Inspect(body, func(n ast.Node) bool {
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
	return vars
}

// dimName returns the dimension name of a dim{"name", value} literal.
func dimName(e ast.Expr) (string, bool) {
	cl, ok := e.(*ast.CompositeLit)
	if !ok || len(cl.Elts) != 2 {
		return "", false
	}
	if id, ok := cl.Type.(*ast.Ident); !ok || id.Name != "dim" {
		return "", false
	}
	lit, ok := cl.Elts[0].(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	name, err := strconv.Unquote(lit.Value)
	return name, err == nil
}

// humanDuration writes a whole number of minutes or seconds in words.
func humanDuration(d time.Duration) string {
	if d%time.Minute == 0 {
		return fmt.Sprintf("%d minutes", int(d/time.Minute))
	}
	return fmt.Sprintf("%d seconds", int(d/time.Second))
}
