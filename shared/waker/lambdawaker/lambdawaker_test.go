package lambdawaker_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/waker"
	"github.com/alternayte/queuebox/shared/waker/lambdawaker"
)

// invocation is one request that the fake Lambda API received.
type invocation struct {
	at             time.Time
	method, path   string
	invocationType string
	authorization  string
	body           string
}

// fakeLambda is a local HTTP server that answers the Lambda Invoke API as Lambda answers an
// asynchronous invoke (202, empty body) and records every request. status, when set, is the
// answer instead.
type fakeLambda struct {
	srv    *httptest.Server
	status int

	mu    sync.Mutex
	calls []invocation
}

func newFakeLambda(t *testing.T, status int) *fakeLambda {
	t.Helper()
	f := &fakeLambda{status: status}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.calls = append(f.calls, invocation{
			at: time.Now(), method: r.Method, path: r.URL.Path,
			invocationType: r.Header.Get("X-Amz-Invocation-Type"),
			authorization:  r.Header.Get("Authorization"),
			body:           string(body),
		})
		f.mu.Unlock()
		if f.status != 0 {
			w.Header().Set("X-Amzn-ErrorType", "ServiceException")
			w.WriteHeader(f.status)
			_, _ = w.Write([]byte(`{"Type":"Service","message":"unavailable"}`))
			return
		}
		w.WriteHeader(http.StatusAccepted)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeLambda) invocations() []invocation {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]invocation(nil), f.calls...)
}

// waitFor polls cond until it holds or the timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// useStaticCredentials makes the default AWS configuration chain find static credentials and
// a region in the environment, and nothing on the machine.
func useStaticCredentials(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDQUEUEBOXTEST")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "queuebox-test-secret")
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_REGION", "eu-west-1")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
}

func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// TestLambdaInvokerDebouncesABurst sends one wake and, once its invoke is under way, 999 more
// from many goroutines, through the default credential chain and a real Lambda client pointed
// at a local server: the burst costs one trailing invoke when the interval ends (a burst that
// a busy machine stretches past an interval may cost one more per interval, never more), no
// invoke comes sooner than an interval after the one before, and a later wake invokes again.
func TestWakerDebouncesABurst(t *testing.T) {
	useStaticCredentials(t)
	fake := newFakeLambda(t, 0)
	const interval = time.Second
	inv, err := lambdawaker.New(context.Background(), lambdawaker.Config{
		FunctionName: "queuebox-poll",
		Interval:     interval,
		Endpoint:     fake.srv.URL,
		Logger:       quietLogger(),
	})
	require.NoError(t, err)
	t.Cleanup(inv.Close)

	start := time.Now()
	inv.Wake()
	waitFor(t, 10*time.Second, "the leading invoke", func() bool { return len(fake.invocations()) >= 1 })
	// The leading invoke took its wake: every wake of the burst is a new pending wake.
	var wg sync.WaitGroup
	for g := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				if g == 0 && i == 0 {
					continue // the leading wake was the thousandth
				}
				inv.Wake()
			}
		}()
	}
	wg.Wait()
	burstEnd := time.Now()
	// Invoke k (from 0) starts no sooner than k intervals after the first wake and needs a wake
	// after invoke k-1 started, so the burst allows 1 + ceil(burst / interval) invokes: two
	// when it fits in one interval.
	maxInvokes := 1 + int((burstEnd.Sub(start)+interval-1)/interval)
	waitFor(t, 10*time.Second, "the trailing invoke", func() bool { return len(fake.invocations()) >= 2 })
	// Two more intervals with no wake: nothing else may arrive.
	time.Sleep(burstEnd.Add(2 * interval).Sub(time.Now()))
	calls := fake.invocations()
	assert.GreaterOrEqual(t, len(calls), 2, "the wakes after the leading invoke cost a trailing invoke")
	assert.LessOrEqual(t, len(calls), maxInvokes, "1 000 wakes within %s cost at most %d invokes", burstEnd.Sub(start), maxInvokes)
	if maxInvokes == 2 {
		t.Logf("the burst fit in one interval: %d invokes", len(calls))
	}
	for k, c := range calls {
		assert.GreaterOrEqual(t, c.at.Sub(start), time.Duration(k)*interval,
			"invoke %d waits for the end of the interval of the one before", k)
	}

	inv.Wake()
	waitFor(t, 10*time.Second, "the invoke of a later wake", func() bool { return len(fake.invocations()) > len(calls) })

	for _, c := range fake.invocations() {
		assert.Equal(t, http.MethodPost, c.method)
		assert.Equal(t, "/2015-03-31/functions/queuebox-poll/invocations", c.path)
		assert.Equal(t, "Event", c.invocationType)
		assert.Equal(t, lambdawaker.DefaultPayload, c.body)
		assert.True(t, strings.HasPrefix(c.authorization, "AWS4-HMAC-SHA256 Credential=AKIDQUEUEBOXTEST/"),
			"signed with the credentials of the default chain: %q", c.authorization)
		assert.Contains(t, c.authorization, "/eu-west-1/lambda/aws4_request")
	}
	// The client counts an invoke when the answer arrives, after the server recorded it.
	n := uint64(len(fake.invocations()))
	waitFor(t, 10*time.Second, "the count of invokes", func() bool { return inv.Stats().Invokes >= n })
	assert.Equal(t, lambdawaker.Stats{Wakes: 1001, Invokes: uint64(len(fake.invocations()))}, inv.Stats())
}

func TestWakerQualifierAndPayload(t *testing.T) {
	useStaticCredentials(t)
	fake := newFakeLambda(t, 0)
	inv, err := lambdawaker.New(context.Background(), lambdawaker.Config{
		FunctionName: "arn:aws:lambda:eu-west-1:123456789012:function:queuebox-relay",
		Qualifier:    "live",
		Payload:      []byte(`{"source":"capture"}`),
		Region:       "eu-west-1",
		Endpoint:     fake.srv.URL,
		Logger:       quietLogger(),
	})
	require.NoError(t, err)
	t.Cleanup(inv.Close)
	inv.Wake()
	waitFor(t, 30*time.Second, "the invoke", func() bool { return len(fake.invocations()) == 1 })
	c := fake.invocations()[0]
	assert.Equal(t, "/2015-03-31/functions/arn:aws:lambda:eu-west-1:123456789012:function:queuebox-relay/invocations", c.path)
	assert.Equal(t, `{"source":"capture"}`, c.body)
	waitFor(t, 30*time.Second, "the count", func() bool { return inv.Stats().Invokes == 1 })
}

// countingClient is an Invoker that records its calls without HTTP.
type countingClient struct {
	calls atomic.Int64
	err   error
	block chan struct{} // when set, Invoke waits for it or for ctx
}

func (c *countingClient) Invoke(ctx context.Context, in *lambda.InvokeInput, _ ...func(*lambda.Options)) (*lambda.InvokeOutput, error) {
	c.calls.Add(1)
	if c.block != nil {
		select {
		case <-c.block:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if c.err != nil {
		return nil, c.err
	}
	return &lambda.InvokeOutput{StatusCode: http.StatusAccepted}, nil
}

// TestLambdaInvokerFailureIsLoggedAndDropped checks that a failing invoke is counted and
// logged once, and that the next wake invokes again.
func TestWakerFailureIsLoggedAndDropped(t *testing.T) {
	useStaticCredentials(t)
	fake := newFakeLambda(t, http.StatusBadRequest)
	var logs bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewJSONHandler(lockedWriter{&mu, &logs}, nil))
	inv, err := lambdawaker.New(context.Background(), lambdawaker.Config{
		FunctionName: "queuebox-poll", Interval: 10 * time.Millisecond,
		Endpoint: fake.srv.URL, Logger: logger,
	})
	require.NoError(t, err)
	t.Cleanup(inv.Close)

	inv.Wake()
	waitFor(t, 30*time.Second, "the failure", func() bool { return inv.Stats().Failures == 1 })
	mu.Lock()
	assert.Contains(t, logs.String(), "waking the Lambda function failed")
	assert.NotContains(t, logs.String(), "queuebox-test-secret")
	mu.Unlock()

	inv.Wake()
	waitFor(t, 30*time.Second, "the second failure", func() bool { return inv.Stats().Failures == 2 })
	assert.Zero(t, inv.Stats().Invokes)
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestLambdaInvokerCloseEndsAnInvokeInFlight checks that Close returns while an invoke hangs,
// that it is idempotent and safe from several goroutines, and that Wake after Close does
// nothing.
func TestWakerCloseEndsAnInvokeInFlight(t *testing.T) {
	t.Parallel()
	client := &countingClient{block: make(chan struct{})}
	inv, err := lambdawaker.New(context.Background(), lambdawaker.Config{
		FunctionName: "queuebox-poll", Client: client, Timeout: time.Hour, Logger: quietLogger(),
	})
	require.NoError(t, err)
	inv.Wake()
	waitFor(t, 30*time.Second, "the invoke to start", func() bool { return client.calls.Load() == 1 })

	closed := make(chan struct{})
	go func() {
		var wg sync.WaitGroup
		for range 3 {
			wg.Add(1)
			go func() { defer wg.Done(); inv.Close() }()
		}
		wg.Wait()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(30 * time.Second):
		t.Fatal("Close did not return while an invoke was in flight")
	}
	inv.Close()
	inv.Wake()
	assert.Equal(t, int64(1), client.calls.Load(), "no invoke after Close")
	assert.Equal(t, lambdawaker.Stats{Wakes: 2}, inv.Stats(), "a cancelled invoke is not a failure")
}

func TestWakerCloseWithoutWakes(t *testing.T) {
	t.Parallel()
	inv, err := lambdawaker.New(context.Background(), lambdawaker.Config{
		FunctionName: "f", Client: &countingClient{},
	})
	require.NoError(t, err)
	inv.Close()
	inv.Close()
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		cfg     lambdawaker.Config
		wantErr string
	}{
		{name: "valid", cfg: lambdawaker.Config{FunctionName: "f"}},
		{name: "no function", cfg: lambdawaker.Config{}, wantErr: "FunctionName is empty"},
		{name: "negative interval", cfg: lambdawaker.Config{FunctionName: "f", Interval: -time.Second}, wantErr: "Interval is -1s"},
		{name: "negative timeout", cfg: lambdawaker.Config{FunctionName: "f", Timeout: -time.Second}, wantErr: "Timeout is -1s"},
		{name: "payload not JSON", cfg: lambdawaker.Config{FunctionName: "f", Payload: []byte("{")}, wantErr: "Payload is not a JSON document"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.cfg.Client = &countingClient{}
			inv, err := lambdawaker.New(context.Background(), tt.cfg)
			if tt.wantErr == "" {
				require.NoError(t, err)
				inv.Close()
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
}

func TestWakerNeedsARegion(t *testing.T) {
	useStaticCredentials(t)
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	_, err := lambdawaker.New(context.Background(), lambdawaker.Config{FunctionName: "f"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no region")
}

// TestLambdaInvokerReconcileDelaysNoWake: the reconciliation timer's invoke opens no
// interval, so that a wake of new work right after it invokes at once, while a second
// reconciliation within the interval of an invoke is skipped. The interval is an hour, so a
// wake held back by the reconciliation would not invoke within the test's deadlines.
func TestWakerReconcileDelaysNoWake(t *testing.T) {
	client := &countingClient{}
	inv, err := lambdawaker.New(context.Background(), lambdawaker.Config{
		FunctionName: "queuebox-poll", Interval: time.Hour, Client: client, Logger: quietLogger(),
	})
	require.NoError(t, err)
	t.Cleanup(inv.Close)

	waker.Reconcile(inv)
	waitFor(t, 10*time.Second, "the reconciliation's invoke", func() bool { return inv.Stats().Invokes == 1 })
	inv.Wake()
	waitFor(t, 10*time.Second, "the wake's invoke right after the reconciliation", func() bool { return inv.Stats().Invokes == 2 })

	// Within the wake's interval a reconciliation is skipped: the wake's invoke was the pass.
	waker.Reconcile(inv)
	waitFor(t, 10*time.Second, "the skipped reconciliation", func() bool { return inv.Stats().SkippedReconciles == 1 })
	assert.Equal(t, lambdawaker.Stats{Wakes: 1, Invokes: 2, Reconciles: 2, SkippedReconciles: 1}, inv.Stats())
	assert.Equal(t, int64(2), client.calls.Load())
}

// TestReconcileFallsBackToWake: a waker that is no Reconciler takes a reconciliation as a
// wake, and a nil waker is ignored.
