package jsonata

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/transform"
)

// sharedEngine serves the tests that need no engine of their own.
var sharedEngine = sync.OnceValue(func() *Engine { return NewEngine(EngineOptions{}) })

// relaxed is the limits of tests that check results, not time: a timeout that a busy machine
// cannot reach, and the default depth.
var relaxed = transform.Limits{Timeout: 10 * time.Second}

// eval compiles and evaluates expr with relaxed limits.
func eval(t *testing.T, e *Engine, expr, input string, vars transform.Vars) (json.RawMessage, error) {
	t.Helper()
	x, err := e.Compile(expr, relaxed)
	require.NoError(t, err, expr)
	return x.Evaluate(context.Background(), json.RawMessage(input), vars)
}

// requireHealthy checks that the engine still evaluates an ordinary expression correctly.
func requireHealthy(t *testing.T, e *Engine) {
	t.Helper()
	out, err := eval(t, e, `{ "total": items.(price * qty) ~> $sum(), "id": $messageId }`,
		`{"items":[{"price":10,"qty":2},{"price":5,"qty":3}]}`, transform.Vars{"messageId": "m-1"})
	require.NoError(t, err)
	assert.JSONEq(t, `{"total":35,"id":"m-1"}`, string(out))
}

func TestRunawayExpressionsStopWithinTheirLimits(t *testing.T) {
	t.Parallel()
	// The cases that must fail for another reason than time get a timeout that a busy machine
	// cannot reach; the others keep the default of 100 ms.
	slow := relaxed
	tests := []struct {
		name     string
		expr     string
		limits   transform.Limits
		wantKind transform.Kind
		// orKind is a second kind that also passes: a runaway that meets two bounds stops at
		// whichever it reaches first, which depends on the speed of the machine.
		orKind   transform.Kind
		wantCode string
	}{
		{name: "recursion that is not a tail call overflows maxDepth",
			expr: `( $f := function($x){ $x + $f($x) }; $f(1) )`, limits: slow, wantKind: transform.KindDepth, wantCode: "D1011"},
		{name: "infinite tail recursion runs out of time",
			expr: `( $f := function($x){ $f($x) }; $f(1) )`, wantKind: transform.KindTimeout},
		{name: "a loop of a billion tail calls runs out of time",
			expr: `( $loop := function($i){ $i < 1e9 ? $loop($i+1) : $i }; $loop(0) )`, wantKind: transform.KindTimeout},
		{name: "a sum over ten million numbers runs out of time",
			expr: `$sum([1..10000000])`, wantKind: transform.KindTimeout},
		{name: "roman numerals of a huge number run out of time or depth",
			expr: `$formatInteger(1e15, 'I')`, wantKind: transform.KindTimeout, orKind: transform.KindDepth},
		{name: "a catastrophic regular expression is cut off",
			expr: `$match("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa aaaaaaaaaa!", /^(\w+\s?)*$(?<=z)/)`, wantKind: transform.KindTimeout},
		{name: "a catastrophic regular expression fails with its own code inside a longer timeout",
			expr:   `$match("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa aaaaaaaaaa!", /^(\w+\s?)*$(?<=z)/)`,
			limits: transform.Limits{Timeout: 1500 * time.Millisecond}, wantKind: transform.KindTimeout, wantCode: "QB1001"},
		{name: "a padding of four billion characters is refused",
			expr: `$pad("", 4000000000)`, limits: slow, wantKind: transform.KindEvaluation, wantCode: "QB1002"},
		{name: "deep recursion under a huge maxDepth runs out of time",
			expr: `( $f := function($x){ $x + $f($x) }; $f(1) )`, limits: transform.Limits{MaxDepth: 10_000_000}, wantKind: transform.KindTimeout},
		{name: "deeply nested arrays overflow maxDepth",
			expr: strings.Repeat("[", 300) + "1" + strings.Repeat("]", 300), limits: slow, wantKind: transform.KindDepth, wantCode: "D1011"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := NewEngine(EngineOptions{PoolSize: 1})
			x, err := e.Compile(tt.expr, tt.limits)
			require.NoError(t, err)

			start := time.Now()
			out, err := x.Evaluate(context.Background(), json.RawMessage(`{}`), nil)
			elapsed := time.Since(start)

			require.Error(t, err, "result %s", out)
			// A runaway left to run would take minutes or never end; 10 s beyond the limit leaves a
			// loaded machine (other packages under -race) room to schedule the interrupt.
			assert.Less(t, elapsed, x.Limits().Timeout+10*time.Second, "the evaluation must stop soon after its limit")
			if got := transform.KindOf(err); tt.orKind == 0 || got != tt.orKind {
				assert.Equal(t, tt.wantKind, got, "%v", err)
			}
			assert.True(t, transform.IsFailure(err))
			if tt.wantCode != "" {
				var te *transform.Error
				require.ErrorAs(t, err, &te)
				assert.Equal(t, tt.wantCode, te.Code)
			}
			requireHealthy(t, e)
			assert.Zero(t, e.Stats().Abandoned, "no evaluation may be left running")
		})
	}
}

func TestTimeoutIsHonoured(t *testing.T) {
	t.Parallel()
	e := NewEngine(EngineOptions{PoolSize: 1})
	x, err := e.Compile(`( $f := function($x){ $f($x) }; $f(1) )`, transform.Limits{Timeout: 100 * time.Millisecond})
	require.NoError(t, err)

	start := time.Now()
	_, err = x.Evaluate(context.Background(), json.RawMessage(`{}`), nil)
	elapsed := time.Since(start)

	require.ErrorIs(t, err, transform.ErrTimeout)
	assert.EqualError(t, err, "the evaluation ran longer than 100ms")
	assert.GreaterOrEqual(t, elapsed, 100*time.Millisecond)
	// The recursion never ends on its own: returning at all is the timeout; the bound leaves a
	// loaded machine room.
	assert.Less(t, elapsed, 10*time.Second)
	// The interrupted runtime is dropped and a new one serves the next evaluation.
	requireHealthy(t, e)
	st := e.Stats()
	assert.Equal(t, int64(1), st.Discarded)
	assert.Equal(t, int64(2), st.Created)
}

func TestFormatNumberWithAnExponentFinishes(t *testing.T) {
	t.Parallel()
	// jsonata before 2.2 looped forever on these (jsonata-js issue 785); 2.2.2 answers, and the
	// timeout would stop a loop anyway.
	tests := []struct{ expr, want string }{
		{`$formatNumber(0,'0e0')`, `"0e0"`},
		{`$formatNumber(-42,'0e0')`, `"-4e1"`},
		{`$formatNumber(42,'0e0')`, `"4e1"`},
	}
	for _, tt := range tests {
		start := time.Now()
		out, err := eval(t, sharedEngine(), tt.expr, `{}`, nil)
		require.NoError(t, err, tt.expr)
		assert.Equal(t, tt.want, string(out), tt.expr)
		// A loop would have run into the relaxed timeout (10 s) and failed above; the bound
		// only leaves a loaded machine room.
		assert.Less(t, time.Since(start), 15*time.Second, tt.expr)
	}
}

func TestCompileErrorsNameCodeAndPosition(t *testing.T) {
	t.Parallel()
	tests := []struct {
		expr     string
		wantCode string
		wantPos  int
		wantText string
	}{
		{`$sum(items.(price*qty`, "S0203", 21, `JSONata S0203 at position 21: Expected ")" before end of expression`},
		{`$bad(`, "S0203", 5, `JSONata S0203 at position 5: Expected ")" before end of expression`},
		{`{"a": }`, "S0211", 7, `JSONata S0211 at position 7: The symbol "}" cannot be used as a unary operator`},
		{`1 +`, "S0207", 3, `JSONata S0207 at position 3: Unexpected end of expression`},
		{`"abc`, "S0101", 4, `JSONata S0101 at position 4: String literal must be terminated by a matching quote`},
		{`foo[`, "S0203", 4, `JSONata S0203 at position 4: Expected "]" before end of expression`},
	}
	for _, tt := range tests {
		_, err := sharedEngine().Compile(tt.expr, transform.Limits{})
		require.Error(t, err, tt.expr)
		assert.ErrorIs(t, err, transform.ErrCompile)
		assert.True(t, transform.IsFailure(err))
		var te *transform.Error
		require.ErrorAs(t, err, &te)
		assert.Equal(t, tt.wantCode, te.Code, tt.expr)
		assert.Equal(t, tt.wantPos, te.Position, tt.expr)
		assert.EqualError(t, err, tt.wantText)
	}
}

func TestAnExpressionNestedTooDeeplyFailsToCompile(t *testing.T) {
	t.Parallel()
	e := NewEngine(EngineOptions{PoolSize: 1})
	_, err := e.Compile(strings.Repeat("(", 20_000)+"1"+strings.Repeat(")", 20_000), transform.Limits{})
	// Usually the JavaScript stack limit stops the parser; on a very busy machine the compile
	// timeout may come first. Either way it is a compile error.
	require.ErrorIs(t, err, transform.ErrCompile)
	assert.NotErrorIs(t, err, transform.ErrTimeout)
	requireHealthy(t, e)
}

func TestEvaluationErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		expr     string
		input    string
		wantIs   error
		wantCode string
		wantText string
	}{
		{name: "type error", expr: `"a" + 1`, input: `{}`, wantIs: transform.ErrEvaluation, wantCode: "T2001",
			wantText: `JSONata T2001 at position 5: The left side of the "+" operator must evaluate to a number`},
		{name: "$error", expr: `$error("boom")`, input: `{}`, wantIs: transform.ErrEvaluation, wantCode: "D3137",
			wantText: `JSONata D3137 at position 7: boom`},
		{name: "$assert", expr: `$assert(false, "no")`, input: `{}`, wantIs: transform.ErrEvaluation, wantCode: "D3141"},
		{name: "no result", expr: `missing.field`, input: `{"a":1}`, wantIs: transform.ErrNoResult,
			wantText: "the expression gave no result"},
		{name: "a function is no result", expr: `function($x){ $x }`, input: `{}`, wantIs: transform.ErrNoResult},
		{name: "input that is not JSON", expr: `$`, input: `{"a":`, wantIs: transform.ErrEvaluation},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out, err := eval(t, sharedEngine(), tt.expr, tt.input, nil)
			require.ErrorIs(t, err, tt.wantIs, "result %s", out)
			assert.True(t, transform.IsFailure(err))
			for _, other := range []error{transform.ErrCompile, transform.ErrEvaluation, transform.ErrTimeout, transform.ErrDepth, transform.ErrNoResult} {
				if other != tt.wantIs {
					assert.NotErrorIs(t, err, other)
				}
			}
			var te *transform.Error
			require.ErrorAs(t, err, &te)
			if tt.wantCode != "" {
				assert.Equal(t, tt.wantCode, te.Code)
			}
			if tt.wantText != "" {
				assert.EqualError(t, err, tt.wantText)
			}
		})
	}
}

func TestResults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		expr, input string
		want        string
	}{
		{name: "no input document", expr: `$exists($)`, input: ``, want: `false`},
		{name: "a null input", expr: `$ = null`, input: `null`, want: `true`},
		{name: "a function inside a result is left out", expr: `{"f": function($x){$x}, "n": 1}`, input: `{}`, want: `{"n":1}`},
		{name: "an array input stays an array", expr: `$`, input: `[1,2]`, want: `[1,2]`},
		{name: "a string result", expr: `"x" & a`, input: `{"a":"y"}`, want: `"xy"`},
		{name: "base64 both ways", expr: `[$base64encode("hello:world"), $base64decode("aGVsbG86d29ybGQ=")]`, input: `{}`, want: `["aGVsbG86d29ybGQ=","hello:world"]`},
		{name: "an ordinary padding", expr: `$pad("x", -4, "#")`, input: `{}`, want: `"###x"`},
		{name: "regular expressions", expr: `$replace("abcabc", /b(c)/, "[$1]")`, input: `{}`, want: `"a[c]a[c]"`},
		{name: "unicode", expr: `$uppercase(s) & $string($length(s))`, input: `{"s":"zäh😀"}`, want: `"ZÄH😀4"`},
		// JSON numbers become JavaScript numbers: an integer beyond 2^53 loses precision.
		{name: "a large integer loses precision", expr: `$`, input: `{"id":9007199254740993}`, want: `{"id":9007199254740992}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out, err := eval(t, sharedEngine(), tt.expr, tt.input, nil)
			require.NoError(t, err)
			assert.JSONEq(t, tt.want, string(out))
		})
	}
}

func TestConcurrentEvaluations(t *testing.T) {
	t.Parallel()
	e := NewEngine(EngineOptions{PoolSize: 4})
	// A generous timeout: the test checks results under concurrency, not speed on a busy machine.
	sum, err := e.Compile(`{ "id": $messageId, "total": $sum(items.(price * qty)), "n": n }`, transform.Limits{Timeout: 30 * time.Second})
	require.NoError(t, err)
	upper, err := e.Compile(`$uppercase($topic) & "-" & $string(n)`, transform.Limits{Timeout: 30 * time.Second})
	require.NoError(t, err)
	runaway, err := e.Compile(`( $f := function($x){ $f($x) }; $f(1) )`, transform.Limits{Timeout: 20 * time.Millisecond})
	require.NoError(t, err)

	const goroutines, rounds = 32, 10
	errs := make(chan error, goroutines*rounds)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for r := range rounds {
				n := g*rounds + r
				input := json.RawMessage(fmt.Sprintf(`{"n":%d,"items":[{"price":%d,"qty":2}]}`, n, n))
				vars := transform.Vars{"messageId": fmt.Sprintf("m-%d", n), "topic": fmt.Sprintf("t%d", n)}
				switch n % 7 {
				case 0:
					if _, err := runaway.Evaluate(context.Background(), input, vars); !errors.Is(err, transform.ErrTimeout) {
						errs <- fmt.Errorf("runaway %d: want a timeout, got %v", n, err)
					}
				case 1, 2, 3:
					out, err := upper.Evaluate(context.Background(), input, vars)
					if want := fmt.Sprintf(`"T%d-%d"`, n, n); err != nil || string(out) != want {
						errs <- fmt.Errorf("upper %d: want %s, got %s %v", n, want, out, err)
					}
				default:
					out, err := sum.Evaluate(context.Background(), input, vars)
					want := fmt.Sprintf(`{"id":"m-%d","total":%d,"n":%d}`, n, 2*n, n)
					if err != nil || string(out) != want {
						errs <- fmt.Errorf("sum %d: want %s, got %s %v", n, want, out, err)
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	assert.LessOrEqual(t, len(e.idle), 4, "the pool never holds more than PoolSize runtimes")
	assert.Zero(t, e.Stats().Abandoned)
}

func TestContextCancellation(t *testing.T) {
	t.Parallel()

	t.Run("cancel during an evaluation", func(t *testing.T) {
		t.Parallel()
		e := NewEngine(EngineOptions{PoolSize: 1})
		x, err := e.Compile(`( $f := function($x){ $f($x) }; $f(1) )`, transform.Limits{Timeout: time.Minute})
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()

		start := time.Now()
		_, err = x.Evaluate(ctx, json.RawMessage(`{}`), nil)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.False(t, transform.IsFailure(err), "a cancelled context is not a transform failure")
		// The recursion never ends on its own (its timeout is a minute): returning at all is the
		// cancellation; the bound leaves a loaded machine room.
		assert.Less(t, time.Since(start), 10*time.Second)
		requireHealthy(t, e)
	})

	t.Run("cancel while waiting for a runtime", func(t *testing.T) {
		t.Parallel()
		e := NewEngine(EngineOptions{PoolSize: 1})
		// The busy evaluation must hold the only runtime until cancel, however slow the machine:
		// its own timeout is far away.
		busy, err := e.Compile(`( $f := function($x){ $f($x) }; $f(1) )`, transform.Limits{Timeout: time.Minute})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := busy.Evaluate(ctx, json.RawMessage(`{}`), nil)
			done <- err
		}()
		require.Eventually(t, func() bool { return len(e.slots) == 1 }, 30*time.Second, time.Millisecond)

		waitCtx, waitCancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
		defer waitCancel()
		_, err = busy.Evaluate(waitCtx, json.RawMessage(`{}`), nil)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Contains(t, err.Error(), "waiting for a JSONata runtime")
		assert.False(t, transform.IsFailure(err))

		cancel()
		require.ErrorIs(t, <-done, context.Canceled)
		requireHealthy(t, e)
	})
}

func TestTheCacheEvictsAndRecompiles(t *testing.T) {
	t.Parallel()
	e := NewEngine(EngineOptions{PoolSize: 1, CacheSize: 2})
	var exprs []transform.Expression
	for i := range 5 {
		x, err := e.Compile(fmt.Sprintf(`n + %d`, i), relaxed)
		require.NoError(t, err)
		exprs = append(exprs, x)
	}
	for round := range 2 {
		for i, x := range exprs {
			out, err := x.Evaluate(context.Background(), json.RawMessage(`{"n":10}`), nil)
			require.NoError(t, err)
			assert.Equal(t, fmt.Sprint(10+i), string(out), "round %d", round)
		}
	}
	rt := <-e.idle
	assert.Equal(t, 2, rt.cache.order.Len())
	assert.Len(t, rt.cache.items, 2)
}

func TestLimits(t *testing.T) {
	t.Parallel()
	assert.Equal(t, transform.Limits{Timeout: 100 * time.Millisecond, MaxDepth: 100}, transform.Limits{}.WithDefaults())
	assert.Equal(t, transform.Limits{Timeout: 150 * time.Millisecond, MaxDepth: 7}, transform.Config{Timeout: 150 * time.Millisecond, MaxDepth: 7}.Limits())
	assert.Equal(t, transform.Limits{Timeout: 100 * time.Millisecond, MaxDepth: 100}, transform.Config{}.Limits())

	// The depth counts JSONata evaluation steps: a recursion of 10 levels fits in 100, one of
	// 100 levels does not.
	x, err := sharedEngine().Compile(`( $f := function($n){ $n = 0 ? 0 : 1 + $f($n - 1) }; $f(n) )`, transform.Limits{Timeout: 10 * time.Second, MaxDepth: 100})
	require.NoError(t, err)
	out, err := x.Evaluate(context.Background(), json.RawMessage(`{"n":10}`), nil)
	require.NoError(t, err)
	assert.Equal(t, "10", string(out))
	_, err = x.Evaluate(context.Background(), json.RawMessage(`{"n":100}`), nil)
	assert.ErrorIs(t, err, transform.ErrDepth)
}
