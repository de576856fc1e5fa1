package jsonata

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/transform"
)

// suiteDir is the copy of the official JSONata test suite (jsonata-js v2.2.2, MIT).
const suiteDir = "../../../testdata/jsonata-test-suite"

// suiteMinPassRate is the pass rate below which TestJSONataSuite fails.
const suiteMinPassRate = 0.99

// suiteCase is one case of the suite; TESTSUITE.md describes the format. Fields stay raw so that
// an absent field and a null one differ, as they do in the suite's own runner.
type suiteCase struct {
	name   string
	expr   string
	fields map[string]json.RawMessage
}

func (c suiteCase) has(k string) bool { _, ok := c.fields[k]; return ok }

func loadSuite(t testing.TB) (cases []suiteCase, datasets map[string]json.RawMessage) {
	t.Helper()
	datasets = map[string]json.RawMessage{}
	files, err := filepath.Glob(filepath.Join(suiteDir, "datasets", "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "the suite is missing from %s", suiteDir)
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		datasets[strings.TrimSuffix(filepath.Base(f), ".json")] = b
	}
	groups, err := os.ReadDir(filepath.Join(suiteDir, "groups"))
	require.NoError(t, err)
	for _, g := range groups {
		dir := filepath.Join(suiteDir, "groups", g.Name())
		names, err := filepath.Glob(filepath.Join(dir, "*.json"))
		require.NoError(t, err)
		sort.Strings(names)
		for _, f := range names {
			b, err := os.ReadFile(f)
			require.NoError(t, err)
			var list []map[string]json.RawMessage
			if bytes.HasPrefix(bytes.TrimSpace(b), []byte("[")) {
				require.NoError(t, json.Unmarshal(b, &list), f)
			} else {
				var one map[string]json.RawMessage
				require.NoError(t, json.Unmarshal(b, &one), f)
				list = append(list, one)
			}
			for i, fields := range list {
				c := suiteCase{name: g.Name() + "/" + filepath.Base(f), fields: fields}
				if len(list) > 1 {
					c.name += fmt.Sprintf("[%d]", i)
				}
				if raw, ok := fields["expr-file"]; ok {
					var file string
					require.NoError(t, json.Unmarshal(raw, &file))
					src, err := os.ReadFile(filepath.Join(dir, file))
					require.NoError(t, err)
					c.expr = string(src)
				} else {
					require.NoError(t, json.Unmarshal(fields["expr"], &c.expr), c.name)
				}
				cases = append(cases, c)
			}
		}
	}
	return cases, datasets
}

// runSuiteCase checks one case as the suite's own runner (test/run-test-suite.js) does, and
// returns nil when it passes.
func runSuiteCase(e *Engine, c suiteCase, datasets map[string]json.RawMessage) error {
	// Cases with timelimit and depth are time-boxed by the suite's runner, which throws U1001;
	// the others run unbounded there, so give them room here: tens of seconds, which goja
	// under the race detector on a busy machine may need for the heaviest ones.
	limits := transform.Limits{Timeout: 30 * time.Second, MaxDepth: 1_000_000}
	if c.has("timelimit") && c.has("depth") {
		var ms, depth int
		_ = json.Unmarshal(c.fields["timelimit"], &ms)
		_ = json.Unmarshal(c.fields["depth"], &depth)
		limits = transform.Limits{Timeout: time.Duration(ms) * time.Millisecond, MaxDepth: depth}
	}
	var wantCode string
	if c.has("code") {
		_ = json.Unmarshal(c.fields["code"], &wantCode)
	}
	var wantErr map[string]any
	if c.has("error") {
		_ = json.Unmarshal(c.fields["error"], &wantErr)
		wantCode, _ = wantErr["code"].(string)
	}

	x, err := e.Compile(c.expr, limits)
	if err != nil {
		return checkSuiteError(c, err, wantCode, wantErr)
	}

	var input json.RawMessage
	switch {
	case c.has("data"):
		input = c.fields["data"]
	case c.has("dataset") && string(c.fields["dataset"]) != "null":
		var name string
		_ = json.Unmarshal(c.fields["dataset"], &name)
		ds, ok := datasets[name]
		if !ok {
			return fmt.Errorf("unknown dataset %q", name)
		}
		input = ds
	}
	var vars transform.Vars
	if c.has("bindings") {
		if err := json.Unmarshal(c.fields["bindings"], &vars); err != nil {
			return fmt.Errorf("reading bindings: %w", err)
		}
	}
	out, err := x.Evaluate(context.Background(), input, vars)

	switch {
	case c.has("undefinedResult"):
		if errors.Is(err, transform.ErrNoResult) {
			return nil
		}
		return fmt.Errorf("want undefined, got %s (%v)", out, err)
	case c.has("result"):
		if err != nil {
			return fmt.Errorf("want %s, got error %v", c.fields["result"], err)
		}
		var got, want any
		if err := json.Unmarshal(out, &got); err != nil {
			return fmt.Errorf("result %s is not JSON: %w", out, err)
		}
		_ = json.Unmarshal(c.fields["result"], &want)
		if string(c.fields["unordered"]) == "true" {
			got, want = sortedJSON(got), sortedJSON(want)
		}
		if !reflect.DeepEqual(got, want) {
			return fmt.Errorf("want %s, got %s", c.fields["result"], out)
		}
		return nil
	case wantCode != "":
		if err == nil {
			return fmt.Errorf("want error %s, got %s", wantCode, out)
		}
		return checkSuiteError(c, err, wantCode, wantErr)
	default:
		return errors.New("the case has nothing to check")
	}
}

// checkSuiteError compares an error with the code (and, for an "error" case, the token and
// message) that the case expects. U1001 is the code of the suite runner's own time box: a
// timeout or a depth overflow of the engine matches it.
func checkSuiteError(c suiteCase, err error, wantCode string, wantErr map[string]any) error {
	var te *transform.Error
	if !errors.As(err, &te) {
		return fmt.Errorf("want error %s, got %v", wantCode, err)
	}
	if wantCode == "" {
		return fmt.Errorf("unexpected error %v", err)
	}
	if wantCode == "U1001" && (te.Kind == transform.KindTimeout || te.Kind == transform.KindDepth) {
		return nil
	}
	if te.Code != wantCode {
		return fmt.Errorf("want code %s, got %v", wantCode, err)
	}
	if c.has("token") {
		var tok string
		_ = json.Unmarshal(c.fields["token"], &tok)
		if te.Token != tok {
			return fmt.Errorf("want token %q, got %q", tok, te.Token)
		}
	}
	if tok, ok := wantErr["token"].(string); ok && te.Token != tok {
		return fmt.Errorf("want token %q, got %q", tok, te.Token)
	}
	if msg, ok := wantErr["message"].(string); ok && te.Message != msg {
		return fmt.Errorf("want message %q, got %q", msg, te.Message)
	}
	return nil
}

// sortedJSON orders the elements of a top-level array, for the cases marked "unordered".
func sortedJSON(v any) any {
	list, ok := v.([]any)
	if !ok {
		return v
	}
	keyed := make([]string, len(list))
	for i, x := range list {
		b, _ := json.Marshal(x)
		keyed[i] = string(b)
	}
	sort.Strings(keyed)
	out := make([]any, len(keyed))
	for i, k := range keyed {
		_ = json.Unmarshal([]byte(k), &out[i])
	}
	return out
}

// TestJSONataSuite runs the official JSONata test suite and fails when fewer than 99 % of its
// cases pass. Goja is several times slower under the race detector, so under -race it runs
// every fifth case and leaves out the cases with a time limit (the runaway tests of this package
// cover the limits under -race); the full run is `go test -run TestJSONataSuite
// ./shared/transform/`.
func TestJSONataSuite(t *testing.T) {
	cases, datasets := loadSuite(t)
	if raceEnabled {
		var sample []suiteCase
		for i, c := range cases {
			if i%5 == 0 && !c.has("timelimit") {
				sample = append(sample, c)
			}
		}
		cases = sample
	}
	e := NewEngine(EngineOptions{PoolSize: runtime.GOMAXPROCS(0)})

	var (
		mu       sync.Mutex
		failures []string
		ran      int
	)
	work := make(chan suiteCase)
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for c := range work {
				err := runSuiteCase(e, c, datasets)
				mu.Lock()
				ran++
				if err != nil {
					failures = append(failures, fmt.Sprintf("%s: %s\n    %v", c.name, strings.TrimSpace(c.expr), err))
				}
				mu.Unlock()
			}
		})
	}
	start := time.Now()
	for _, c := range cases {
		work <- c
	}
	close(work)
	wg.Wait()

	sort.Strings(failures)
	for _, f := range failures {
		t.Log(f)
	}
	passed := ran - len(failures)
	rate := float64(passed) / float64(ran)
	t.Logf("JSONata test suite: %d of %d cases passed (%.2f %%) in %v; engine %+v",
		passed, ran, 100*rate, time.Since(start).Round(time.Millisecond), e.Stats())
	if rate < suiteMinPassRate {
		t.Errorf("pass rate %.2f %% is below %.0f %%", 100*rate, 100*suiteMinPassRate)
	}
}
