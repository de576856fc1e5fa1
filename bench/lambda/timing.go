package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"time"

	"github.com/alternayte/queuebox/bench/machine"
	"github.com/alternayte/queuebox/functions/rietest"
	"github.com/alternayte/queuebox/shared/lambdafn"
	"github.com/alternayte/queuebox/shared/store/postgres/dbtest"
	"github.com/alternayte/queuebox/shared/store/postgres/pgtool"
)

// InitTarget is the cold-start init time that a function should stay under.
const InitTarget = 50 * time.Millisecond

// timing is the cold-start and warm invoke time of one function under the Lambda Runtime
// Interface Emulator, built for the host (rietest.BuildEnv) on a database that is already
// migrated.
type timing struct {
	Function string `json:"function"`
	// InitMs is the function's Init phase as the emulator's INIT REPORT line gives it: the
	// median of the cold starts (ColdStarts).
	InitMs float64 `json:"initMs"`
	// InitMinMs and InitMaxMs are the shortest and the longest Init of the cold starts.
	InitMinMs float64 `json:"initMinMs"`
	InitMaxMs float64 `json:"initMaxMs"`
	// InitRunsMs is the Init of each cold start, in order.
	InitRunsMs []float64 `json:"initRunsMs"`
	// ColdStarts is the number of cold starts: each a new emulator and a new function process.
	ColdStarts int `json:"coldStarts"`
	// ColdInvokeMs is the round trip of the first invoke after the emulator started: the
	// function's Init and its first invocation (median of the cold starts).
	ColdInvokeMs float64 `json:"coldInvokeMs"`
	// StartToAnswerMs is from starting the emulator process to the first answer (median of
	// the cold starts).
	StartToAnswerMs float64 `json:"startToAnswerMs"`
	// Warm invoke round trips after the first.
	WarmMedianMs float64 `json:"warmMedianMs"`
	WarmMinMs    float64 `json:"warmMinMs"`
	WarmMaxMs    float64 `json:"warmMaxMs"`
	WarmInvokes  int     `json:"warmInvokes"`
	Event        string  `json:"event"`
	Error        string  `json:"error,omitempty"`
}

// timingInfo describes the timing measurements in the results file.
type timingInfo struct {
	Target string `json:"target"`
	// Migrate is QUEUEBOX_DATABASE_MIGRATE of the timed runs.
	Migrate bool `json:"migrate"`
	// ColdStarts is the number of cold starts per function (-cold).
	ColdStarts int      `json:"coldStarts"`
	Emulator   string   `json:"emulator"`
	InitTarget float64  `json:"initTargetMs"`
	Functions  []timing `json:"functions"`
}

func ms(d time.Duration) float64 {
	return float64(d.Microseconds()) / 1000
}

// measureTiming runs each function under the emulator: cold starts, each with one invoke,
// then warm invokes after the last one.
func measureTiming(ctx context.Context, work string, names []string, warm, cold int, migrate bool) (*timingInfo, error) {
	dir, err := rietest.DefaultEmulatorDir()
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "installing %s@%s when missing\n", rietest.EmulatorPackage, rietest.EmulatorVersion)
	rie, err := rietest.InstallEmulator(ctx, dir)
	if err != nil {
		return nil, err
	}
	dbURL, drop, err := benchDatabase(ctx)
	if err != nil {
		return nil, err
	}
	defer drop()
	dbEnv, err := rietest.DatabaseEnv(dbURL)
	if err != nil {
		return nil, err
	}
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	defer receiver.Close()
	env := map[string]string{
		"AWS_LAMBDA_FUNCTION_TIMEOUT":                "10",
		lambdafn.ModeVariable:                        string(lambdafn.Drain),
		"QUEUEBOX_SOURCES_ORDERS_TYPE":               "http",
		"QUEUEBOX_SOURCES_ORDERS_PATH":               "/orders",
		"QUEUEBOX_SOURCES_ORDERS_IDEMPOTENCYKEYPATH": "$.id",
		"QUEUEBOX_SOURCES_ORDERS_EVENTTYPEPATH":      "$.type",
		"QUEUEBOX_DESTINATIONS_RECEIVER_BASEURL":     receiver.URL,
		"QUEUEBOX_DESTINATIONS_RECEIVER_PATH":        "/events",
		"QUEUEBOX_ROUTES_0_TOPICPATTERN":             "order.**",
		"QUEUEBOX_ROUTES_0_DESTINATION":              "receiver",
	}
	for k, v := range dbEnv {
		env[k] = v
	}
	info := &timingInfo{
		Target: "linux/" + runtime.GOARCH, Emulator: rietest.EmulatorPackage + "@" + rietest.EmulatorVersion,
		InitTarget: ms(InitTarget), Migrate: migrate, ColdStarts: max(cold, 1),
	}
	// Every build ends before the first timed start, so no compiler competes with a start.
	for _, name := range names {
		fmt.Fprintf(os.Stderr, "building functions/%s for linux/%s\n", name, runtime.GOARCH)
		if err := rietest.Build(ctx, ".", name, filepath.Join(work, "host", name, "bootstrap")); err != nil {
			return nil, err
		}
	}
	migrated := false
	for _, name := range names {
		bootstrap := filepath.Join(work, "host", name, "bootstrap")
		if !migrated {
			// A first run migrates the database, so every cold start below is one on a
			// migrated database, as in production.
			if _, err := timeFunction(ctx, rie, bootstrap, name, env, 0); err != nil {
				return nil, fmt.Errorf("migrating the bench database with functions/%s: %w", name, err)
			}
			migrated = true
		}
		timed := maps.Clone(env)
		timed["QUEUEBOX_DATABASE_MIGRATE"] = strconv.FormatBool(migrate)
		tm, err := timeColdStarts(ctx, rie, bootstrap, name, timed, warm, cold)
		if err != nil {
			tm = timing{Function: name, Error: err.Error()}
			fmt.Fprintf(os.Stderr, "functions/%s: %v\n", name, err)
		}
		info.Functions = append(info.Functions, tm)
	}
	return info, nil
}

// timeColdStarts runs timeFunction cold times, with the warm invokes in the last run only,
// and returns the last run's figures with the medians of the cold figures.
func timeColdStarts(ctx context.Context, rie, bootstrap, name string, env map[string]string, warm, cold int) (timing, error) {
	cold = max(cold, 1)
	var inits, invokes, answers []float64
	var tm timing
	for i := range cold {
		w := 0
		if i == cold-1 {
			w = warm
		}
		var err error
		if tm, err = timeFunction(ctx, rie, bootstrap, name, env, w); err != nil {
			return tm, err
		}
		inits = append(inits, tm.InitMs)
		invokes = append(invokes, tm.ColdInvokeMs)
		answers = append(answers, tm.StartToAnswerMs)
	}
	tm.ColdStarts, tm.InitRunsMs = cold, inits
	tm.InitMs, tm.ColdInvokeMs, tm.StartToAnswerMs = machine.Median(inits), machine.Median(invokes), machine.Median(answers)
	tm.InitMinMs, tm.InitMaxMs = slices.Min(inits), slices.Max(inits)
	return tm, nil
}

// timeFunction starts the emulator, invokes the function once cold and warm times more.
func timeFunction(ctx context.Context, rie, bootstrap, name string, env map[string]string, warm int) (timing, error) {
	tm := timing{Function: name, WarmInvokes: warm}
	event, describe, err := eventFor(name)
	if err != nil {
		return tm, err
	}
	tm.Event = describe
	e, err := rietest.Start(rietest.Options{Emulator: rie, Bootstrap: bootstrap, Env: env})
	if err != nil {
		return tm, err
	}
	defer e.Stop()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	check := func(resp rietest.Response) error {
		if resp.Status != http.StatusOK {
			return fmt.Errorf("the emulator answered %d: %s\n%s", resp.Status, resp.Body, e.Logs())
		}
		return nil
	}
	resp, err := e.Invoke(ctx, event(0))
	if err != nil {
		return tm, err
	}
	tm.StartToAnswerMs = ms(time.Since(e.Started))
	if err := check(resp); err != nil {
		return tm, err
	}
	tm.ColdInvokeMs = ms(resp.RoundTrip)
	initDuration, err := e.InitDuration(ctx)
	if err != nil {
		return tm, err
	}
	tm.InitMs = ms(initDuration)
	var rounds []time.Duration
	for i := 1; i <= warm; i++ {
		resp, err := e.Invoke(ctx, event(i))
		if err != nil {
			return tm, err
		}
		if err := check(resp); err != nil {
			return tm, err
		}
		rounds = append(rounds, resp.RoundTrip)
	}
	if len(rounds) > 0 {
		slices.Sort(rounds)
		median := rounds[len(rounds)/2]
		if len(rounds)%2 == 0 {
			median = (rounds[len(rounds)/2-1] + median) / 2
		}
		tm.WarmMedianMs, tm.WarmMinMs, tm.WarmMaxMs = ms(median), ms(rounds[0]), ms(rounds[len(rounds)-1])
	}
	return tm, nil
}

// eventFor returns the events of the function's invokes: the inbox gets API Gateway HTTP API
// events, each storing a new row; the others the scheduled event, on an idle database.
func eventFor(name string) (func(i int) []byte, string, error) {
	if name == "admin" {
		raw, err := os.ReadFile("functions/admin/testdata/get-health-ready.json")
		if err != nil {
			return nil, "", fmt.Errorf("reading the admin event: %w", err)
		}
		return func(int) []byte { return raw }, "GET /health/ready", nil
	}
	if name != "inbox" {
		raw, err := os.ReadFile("shared/lambdafn/testdata/scheduled-event.json")
		if err != nil {
			return nil, "", fmt.Errorf("reading the scheduled event: %w", err)
		}
		return func(int) []byte { return raw }, "scheduled event, nothing pending", nil
	}
	raw, err := os.ReadFile("functions/inbox/testdata/json-body.json")
	if err != nil {
		return nil, "", fmt.Errorf("reading the inbox event: %w", err)
	}
	var ev lambdafn.HTTPRequest
	if err := json.Unmarshal(raw, &ev); err != nil {
		return nil, "", fmt.Errorf("decoding the inbox event: %w", err)
	}
	run := make([]byte, 4)
	_, _ = rand.Read(run)
	prefix := hex.EncodeToString(run)
	return func(i int) []byte {
		ev.Body = fmt.Sprintf(`{"id":"bench-%s-%d","type":"order.created","orderId":"o-%d"}`, prefix, i, i)
		ev.Headers["content-length"] = strconv.Itoa(len(ev.Body))
		b, _ := json.Marshal(ev)
		return b
	}, "POST /inbox/orders, a new JSON row each", nil
}

// benchDatabase creates an empty database on the test server (dbtest.ServerURL) and
// returns its URL and a function that drops it.
func benchDatabase(ctx context.Context) (string, func(), error) {
	server := dbtest.ServerURL()
	suffix := make([]byte, 6)
	_, _ = rand.Read(suffix)
	name := "qb_lambdabench_" + hex.EncodeToString(suffix)
	if err := pgtool.CreateDatabase(ctx, server, name); err != nil {
		if ce, ok := errors.AsType[*pgtool.ConnectError](err); ok {
			return "", nil, fmt.Errorf("connecting to PostgreSQL for the Lambda timing (%s): %w", dbtest.StartHint, ce.Err)
		}
		return "", nil, fmt.Errorf("creating the bench database: %w", err)
	}
	u, err := url.Parse(server)
	if err != nil {
		return "", nil, fmt.Errorf("parsing the server URL: %w", err)
	}
	u.Path = "/" + name
	drop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := pgtool.DropDatabase(ctx, server, name); err != nil {
			fmt.Fprintf(os.Stderr, "dropping the bench database %s: %v\n", name, err)
		}
	}
	return u.String(), drop, nil
}

// writeTimingTable prints the timing table with the init target.
func writeTimingTable(w io.Writer, info *timingInfo) {
	fmt.Fprintf(w, "\nLambda timing under the emulator (%s, database migrated, QUEUEBOX_DATABASE_MIGRATE=%t, init: median of %d cold starts):\n",
		info.Target, info.Migrate, info.ColdStarts)
	fmt.Fprintf(w, "%-10s %10s %16s %12s %14s %12s %10s %10s  %s\n", "function", "init ms", "init min-max", "cold rt ms", "start→ans ms", "warm p50 ms", "warm min", "warm max", "init < 50 ms")
	for _, t := range info.Functions {
		if t.Error != "" {
			fmt.Fprintf(w, "%-10s error: %s\n", t.Function, t.Error)
			continue
		}
		ok := "yes"
		if t.InitMs >= info.InitTarget {
			ok = "NO"
		}
		fmt.Fprintf(w, "%-10s %10.2f %16s %12.2f %14.2f %12.2f %10.2f %10.2f  %s\n", t.Function, t.InitMs,
			fmt.Sprintf("%.1f-%.1f", t.InitMinMs, t.InitMaxMs), t.ColdInvokeMs,
			t.StartToAnswerMs, t.WarmMedianMs, t.WarmMinMs, t.WarmMaxMs, ok)
	}
}
