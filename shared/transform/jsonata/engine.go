package jsonata

import (
	"container/list"
	"context"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	goruntime "runtime"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf16"

	"github.com/dlclark/regexp2/v2"
	"github.com/dop251/goja"

	"github.com/alternayte/queuebox/shared/transform"
	"github.com/alternayte/queuebox/shared/transform/jsjsonata"
)

//go:embed glue.js
var glueSource string

// The guards that no setting changes.
const (
	// RegexMatchTimeout cuts off one regular expression match. goja runs a pattern with
	// lookaround or back-references on a backtracking engine, in native code that no interrupt
	// reaches; past this time the match stops and the evaluation fails with code QB1001.
	RegexMatchTimeout = 500 * time.Millisecond
	// MaxPadWidth is the largest width that $pad accepts (code QB1002 beyond it): $pad builds its
	// padding in one native step, which no interrupt can stop.
	MaxPadWidth = 1 << 20
	// maxCallStackSize caps goja's call stack, so that a deep JavaScript recursion inside JSONata
	// (the parser on a deeply nested expression) fails with an error instead of growing the Go
	// stack.
	maxCallStackSize = 10_000
	// abandonAfter is how long an interrupted evaluation may take to stop. An evaluation still
	// running then is stuck in native code: the caller gets its error and the runtime is left to
	// finish on its own and is never reused.
	abandonAfter = time.Second
	// compileTimeout bounds one compile.
	compileTimeout = 5 * time.Second
)

func init() {
	// Read by goja each time it compiles a backtracking pattern. Set here, before any runtime
	// exists, so no goroutine can read it while it changes. It is process-wide: in this module
	// only goja uses regexp2.
	regexp2.DefaultMatchTimeout = RegexMatchTimeout
}

// The compiled programs, shared by every runtime of every engine (a goja.Program is
// immutable). They compile on first use, not at process start: a process that configures no
// transform (most Lambda cold starts) never pays for parsing jsonata.
var (
	jsonataProgram = sync.OnceValue(func() *goja.Program {
		return goja.MustCompile("jsonata.min.js", jsjsonata.Source, false)
	})
	glueProgram = sync.OnceValue(func() *goja.Program {
		return goja.MustCompile("glue.js", glueSource, false)
	})
)

// EngineOptions configures an Engine.
type EngineOptions struct {
	// PoolSize is the largest number of JavaScript runtimes, which is also the largest number of
	// evaluations that run at the same time; more callers wait for a runtime. A runtime costs
	// about 10 ms of CPU and 0.8 MB to create and is created when first needed.
	// Default: runtime.GOMAXPROCS(0).
	PoolSize int
	// CacheSize is how many compiled expressions each runtime keeps, least recently used out
	// first. Default: 256.
	CacheSize int
}

// WithDefaults fills the zero fields with their defaults.
func (o EngineOptions) WithDefaults() EngineOptions {
	if o.PoolSize <= 0 {
		o.PoolSize = goruntime.GOMAXPROCS(0)
	}
	if o.CacheSize <= 0 {
		o.CacheSize = 256
	}
	return o
}

// Engine compiles and evaluates JSONata expressions on a pool of goja runtimes. It is safe for
// concurrent use. It starts no goroutine of its own apart from one per running evaluation, and
// needs no closing: idle runtimes are ordinary garbage once the Engine is.
type Engine struct {
	opts EngineOptions
	// slots holds one token per runtime in use: at most PoolSize evaluations run at once.
	slots chan struct{}
	// idle holds the runtimes that wait for work.
	idle chan *jsRuntime

	created   atomic.Int64
	discarded atomic.Int64
	abandoned atomic.Int64
}

// NewEngine returns an engine with the given options, defaults filled.
func NewEngine(opts EngineOptions) *Engine {
	opts = opts.WithDefaults()
	return &Engine{
		opts:  opts,
		slots: make(chan struct{}, opts.PoolSize),
		idle:  make(chan *jsRuntime, opts.PoolSize),
	}
}

// Stats counts the runtimes of an engine over its life.
type Stats struct {
	// Created is the number of runtimes created.
	Created int64
	// Discarded is the number of runtimes dropped after an interrupt (a timeout, a cancelled
	// context) or a goja stack overflow; a new one replaces each when needed.
	Discarded int64
	// Abandoned is the number of evaluations that did not stop within a second of their
	// interrupt (stuck in native code). Their runtimes are never reused.
	Abandoned int64
}

// Stats returns the counts so far.
func (e *Engine) Stats() Stats {
	return Stats{Created: e.created.Load(), Discarded: e.discarded.Load(), Abandoned: e.abandoned.Load()}
}

// Check compiles expression with the default limits and returns its compile error, if any. Its
// signature is config.TransformCompiler, so it can be config.LoadOptions.CompileTransform
// (shared/cli sets it).
func (e *Engine) Check(expression string) error {
	_, err := e.Compile(expression, transform.Limits{})
	return err
}

// acquire takes a runtime slot and an idle runtime, or creates one.
func (e *Engine) acquire(ctx context.Context) (*jsRuntime, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("evaluating JSONata expression: %w", err)
	}
	select {
	case e.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for a JSONata runtime: %w", ctx.Err())
	}
	select {
	case rt := <-e.idle:
		return rt, nil
	default:
	}
	rt, err := newJSRuntime(e.opts.CacheSize)
	if err != nil {
		<-e.slots
		return nil, err
	}
	e.created.Add(1)
	return rt, nil
}

// release returns a healthy runtime to the pool, or drops a broken one, and frees its slot.
func (e *Engine) release(rt *jsRuntime, reuse bool) {
	if reuse {
		e.idle <- rt // never blocks: at most PoolSize runtimes hold a slot
	} else {
		e.discarded.Add(1)
	}
	<-e.slots
}

// errInterrupted marks a job that goja interrupted; run replaces it with the interrupt's reason.
var errInterrupted = errors.New("interrupted")

// jobResult is what one job on a runtime produced.
type jobResult struct {
	out json.RawMessage
	err error
	// broken: the runtime must not be reused (an uncatchable goja error or a panic).
	broken bool
}

// run executes job (an evaluation or a compile, as what says) on a runtime of the pool, on its
// own goroutine, within timeout. At the timeout, or when ctx ends, it interrupts the runtime; an
// interrupted runtime is discarded. A job that does not stop within abandonAfter of the
// interrupt is abandoned: run returns and the runtime, still held by the job's goroutine, is
// never reused.
func (e *Engine) run(ctx context.Context, what string, timeout time.Duration, job func(*jsRuntime) jobResult) (json.RawMessage, error) {
	rt, err := e.acquire(ctx)
	if err != nil {
		return nil, err
	}
	done := make(chan jobResult, 1)
	go func() {
		var res jobResult
		defer func() {
			if p := recover(); p != nil {
				res.err = &transform.Error{Kind: transform.KindEvaluation, Position: -1, Message: fmt.Sprintf("the JavaScript engine panicked: %v", p)}
				res.broken = true
			}
			done <- res
		}()
		res = job(rt)
	}()

	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var reason error
	select {
	case res := <-done:
		e.release(rt, !res.broken)
		return res.out, res.err
	case <-timer.C:
		reason = &transform.Error{Kind: transform.KindTimeout, Position: -1, Message: fmt.Sprintf("the %s ran longer than %v", what, timeout)}
	case <-ctx.Done():
		reason = fmt.Errorf("evaluating JSONata expression: %w", ctx.Err())
	}

	rt.vm.Interrupt(reason)
	grace := time.NewTimer(abandonAfter)
	defer grace.Stop()
	select {
	case res := <-done:
		// The flag may still be set, and an interrupted goja runtime can be left with
		// promise jobs that never run: never reuse it.
		e.release(rt, false)
		if errors.Is(res.err, errInterrupted) {
			return nil, reason
		}
		return res.out, res.err
	case <-grace.C:
		e.abandoned.Add(1)
		e.discarded.Add(1)
		<-e.slots
		return nil, reason
	}
}

// jsRuntime is one goja runtime with JSONata loaded. Only one goroutine uses it at a time.
type jsRuntime struct {
	vm       *goja.Runtime
	compile  goja.Callable
	evaluate goja.Callable
	cache    *exprCache
}

func newJSRuntime(cacheSize int) (*jsRuntime, error) {
	vm := goja.New()
	vm.SetMaxCallStackSize(maxCallStackSize)
	if _, err := vm.RunProgram(jsonataProgram()); err != nil {
		return nil, fmt.Errorf("loading JSONata into a JavaScript runtime: %w", err)
	}
	// JSONata's $base64encode and $base64decode use window.btoa and window.atob when a window
	// exists (Node's Buffer otherwise); defined after the load, so JSONata still installs itself
	// on the global object.
	window := vm.NewObject()
	if err := errors.Join(window.Set("btoa", btoa), window.Set("atob", atob), vm.Set("window", window)); err != nil {
		return nil, fmt.Errorf("defining window.btoa and window.atob: %w", err)
	}
	glue, err := vm.RunProgram(glueProgram())
	if err != nil {
		return nil, fmt.Errorf("loading the JSONata bridge: %w", err)
	}
	setup, ok := goja.AssertFunction(glue)
	if !ok {
		return nil, errors.New("loading the JSONata bridge: it is not a function")
	}
	api, err := setup(goja.Undefined(), vm.Get("jsonata"), vm.ToValue(RegexMatchTimeout.Milliseconds()), vm.ToValue(MaxPadWidth))
	if err != nil {
		return nil, fmt.Errorf("starting the JSONata bridge: %w", err)
	}
	obj := api.ToObject(vm)
	compile, ok1 := goja.AssertFunction(obj.Get("compile"))
	evaluate, ok2 := goja.AssertFunction(obj.Get("evaluate"))
	if !ok1 || !ok2 {
		return nil, errors.New("starting the JSONata bridge: compile or evaluate is missing")
	}
	return &jsRuntime{vm: vm, compile: compile, evaluate: evaluate, cache: newExprCache(cacheSize)}, nil
}

// btoa encodes a string as Base64 the way JSONata does under Node.js (Buffer.from(s, 'binary')):
// each UTF-16 code unit becomes one byte, its low eight bits.
func btoa(call goja.FunctionCall, vm *goja.Runtime) goja.Value {
	units := utf16.Encode([]rune(call.Argument(0).String()))
	b := make([]byte, len(units))
	for i, u := range units {
		b[i] = byte(u)
	}
	return vm.ToValue(base64.StdEncoding.EncodeToString(b))
}

// atob decodes Base64 the way Node.js does (Buffer.from(s, 'base64').toString('binary')): it
// accepts the URL-safe alphabet, skips other characters, stops at the first '=', ignores a
// trailing partial byte, and gives one character per byte.
func atob(call goja.FunctionCall, vm *goja.Runtime) goja.Value {
	s := call.Argument(0).String()
	clean := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '=':
			i = len(s)
		case c == '-':
			clean = append(clean, '+')
		case c == '_':
			clean = append(clean, '/')
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '+', c == '/':
			clean = append(clean, c)
		}
	}
	if len(clean)%4 == 1 {
		clean = clean[:len(clean)-1]
	}
	b, err := base64.RawStdEncoding.DecodeString(string(clean))
	if err != nil {
		panic(vm.NewTypeError("decoding Base64: %v", err))
	}
	runes := make([]rune, len(b))
	for i, c := range b {
		runes[i] = rune(c)
	}
	return vm.ToValue(string(runes))
}

// compiled returns the compiled form of the expression on this runtime, compiling it on a miss.
func (rt *jsRuntime) compiled(key exprKey) (goja.Value, jobResult) {
	if v, ok := rt.cache.get(key); ok {
		return v, jobResult{}
	}
	v, err := rt.compile(goja.Undefined(), rt.vm.ToValue(key.src), rt.vm.ToValue(key.maxDepth))
	if err != nil {
		return nil, rt.failure(err, transform.KindCompile)
	}
	rt.cache.put(key, v)
	return v, jobResult{}
}

// run evaluates the compiled expression on input (JSON text; empty means no input) with the
// bindings (a JSON object, or empty).
func (rt *jsRuntime) run(key exprKey, input json.RawMessage, bindings string) jobResult {
	expr, res := rt.compiled(key)
	if res.err != nil {
		return res
	}
	in, vars := goja.Undefined(), goja.Undefined()
	if len(input) > 0 {
		in = rt.vm.ToValue(string(input))
	}
	if bindings != "" {
		vars = rt.vm.ToValue(bindings)
	}
	v, err := rt.evaluate(goja.Undefined(), expr, in, vars)
	if err != nil {
		return rt.failure(err, transform.KindEvaluation)
	}
	p, ok := v.Export().(*goja.Promise)
	if !ok {
		return jobResult{err: &transform.Error{Kind: transform.KindEvaluation, Position: -1, Message: "the JSONata bridge returned no promise"}, broken: true}
	}
	switch p.State() {
	case goja.PromiseStateFulfilled:
		r := p.Result()
		if goja.IsUndefined(r) {
			return jobResult{err: &transform.Error{Kind: transform.KindNoResult, Position: -1, Message: "the expression gave no result"}}
		}
		return jobResult{out: json.RawMessage(r.String())}
	case goja.PromiseStateRejected:
		return jobResult{err: rt.jsError(p.Result(), transform.KindEvaluation)}
	default:
		// Nothing in JSONata waits for a timer, so a pending promise means a broken runtime.
		return jobResult{err: &transform.Error{Kind: transform.KindEvaluation, Position: -1, Message: "the evaluation did not finish"}, broken: true}
	}
}

// failure converts an error of a goja call.
func (rt *jsRuntime) failure(err error, kind transform.Kind) jobResult {
	var interrupted *goja.InterruptedError
	var overflow *goja.StackOverflowError
	var exception *goja.Exception
	switch {
	case errors.As(err, &interrupted):
		return jobResult{err: errInterrupted, broken: true}
	case errors.As(err, &overflow):
		msg := "the evaluation exceeded the JavaScript call stack"
		if kind == transform.KindCompile {
			return jobResult{err: &transform.Error{Kind: transform.KindCompile, Position: -1, Message: "the expression nests too deeply to compile"}, broken: true}
		}
		return jobResult{err: &transform.Error{Kind: transform.KindDepth, Position: -1, Message: msg}, broken: true}
	case errors.As(err, &exception):
		return jobResult{err: rt.jsError(exception.Value(), kind)}
	default:
		return jobResult{err: &transform.Error{Kind: kind, Position: -1, Message: err.Error()}, broken: true}
	}
}

// jsError converts a thrown JavaScript value: a JSONata error object ({code, position, token,
// message}) or a JavaScript Error.
func (rt *jsRuntime) jsError(v goja.Value, kind transform.Kind) *transform.Error {
	e := &transform.Error{Kind: kind, Position: -1}
	if v == nil {
		e.Message = "the JavaScript engine threw nothing"
		return e
	}
	obj, ok := v.(*goja.Object)
	if !ok || obj == nil {
		e.Message = v.String()
		return e
	}
	e.Code = stringField(obj, "code")
	e.Message = stringField(obj, "message")
	if e.Message == "" {
		e.Message = v.String()
	}
	e.Token = stringField(obj, "token")
	if p := obj.Get("position"); p != nil && !goja.IsUndefined(p) && !goja.IsNull(p) {
		e.Position = int(p.ToInteger())
	}
	switch e.Code {
	case "D1011":
		e.Kind = transform.KindDepth
	case "QB1001":
		e.Kind = transform.KindTimeout
	}
	if kind == transform.KindEvaluation && e.Code == "" && stringField(obj, "name") == "SyntaxError" {
		e.Message = "the input is not JSON: " + e.Message
	}
	return e
}

func stringField(obj *goja.Object, name string) string {
	v := obj.Get(name)
	if v == nil || goja.IsUndefined(v) || goja.IsNull(v) {
		return ""
	}
	return v.String()
}

// exprKey identifies a compiled expression on a runtime: JSONata fixes the depth bound at compile.
type exprKey struct {
	src      string
	maxDepth int
}

// exprCache is a least-recently-used map of compiled expressions. Not safe for concurrent use;
// each runtime has its own.
type exprCache struct {
	max   int
	order *list.List // front: most recently used; values are *cacheEntry
	items map[exprKey]*list.Element
}

type cacheEntry struct {
	key exprKey
	val goja.Value
}

func newExprCache(max int) *exprCache {
	return &exprCache{max: max, order: list.New(), items: make(map[exprKey]*list.Element)}
}

func (c *exprCache) get(k exprKey) (goja.Value, bool) {
	el, ok := c.items[k]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(el)
	return el.Value.(*cacheEntry).val, true
}

func (c *exprCache) put(k exprKey, v goja.Value) {
	if el, ok := c.items[k]; ok {
		el.Value.(*cacheEntry).val = v
		c.order.MoveToFront(el)
		return
	}
	c.items[k] = c.order.PushFront(&cacheEntry{key: k, val: v})
	for c.order.Len() > c.max {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.items, last.Value.(*cacheEntry).key)
	}
}
