package rietest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/alternayte/queuebox/deploy/lambdazip"
)

// EmulatorPackage is the emulator's command, installed at EmulatorVersion.
const EmulatorPackage = "github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie"

// EmulatorVersion is the pinned emulator version (see DESIGN.md).
const EmulatorVersion = "v0.0.0-20261030222936-bef5c4ba774d"

// emulatorName is the file name that go install gives the emulator.
const emulatorName = "aws-lambda-rie"

// InvokePath is the path of the emulator's invoke API.
const InvokePath = "/2015-03-31/functions/function/invocations"

// DefaultEmulatorDir is the folder that holds the installed emulator: queuebox-rie in the
// user's cache folder.
func DefaultEmulatorDir() (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("finding the user cache folder: %w", err)
	}
	return filepath.Join(cache, "queuebox-rie"), nil
}

// InstallEmulator returns the path of the emulator in dir, installing EmulatorPackage at
// EmulatorVersion there with `go install` (GOBIN=dir) when it is not there yet.
func InstallEmulator(ctx context.Context, dir string) (string, error) {
	path := filepath.Join(dir, emulatorName)
	if fi, err := os.Stat(path); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
		return path, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("creating the emulator folder: %w", err)
	}
	cmd := exec.CommandContext(ctx, "go", "install", EmulatorPackage+"@"+EmulatorVersion)
	cmd.Env = append(os.Environ(), "GOBIN="+dir, "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("installing the emulator with go install %s@%s: %w\n%s", EmulatorPackage, EmulatorVersion, err, out)
	}
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("finding the installed emulator: %w", err)
	}
	return path, nil
}

// BuildEnv is the environment of Build: lambdazip.BuildEnv with the host's architecture,
// so the emulator can run the binary here.
func BuildEnv() []string {
	env := slices.Clone(lambdazip.BuildEnv)
	for i, kv := range env {
		if strings.HasPrefix(kv, "GOARCH=") {
			env[i] = "GOARCH=" + runtime.GOARCH
		}
	}
	return env
}

// Build compiles functions/<name> of the repository at root into out (normally a file named
// bootstrap) with lambdazip.BuildFlags and BuildEnv.
func Build(ctx context.Context, root, name, out string) error {
	args := append([]string{"build"}, lambdazip.BuildFlags...)
	args = append(args, "-o", out, "./functions/"+name)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), BuildEnv()...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building functions/%s: %w\n%s", name, err, out)
	}
	return nil
}

// DatabaseEnv returns the QUEUEBOX_DATABASE_ variables of a function that uses the database
// of dbURL (a postgres:// URL such as dbtest gives): the JDBC URL an operator would write, the
// user name and the password, and QUEUEBOX_DATABASE_MIGRATE=true so the function's Init
// applies the migrations.
func DatabaseEnv(dbURL string) (map[string]string, error) {
	u, err := url.Parse(dbURL)
	if err != nil {
		return nil, fmt.Errorf("parsing the database URL: %w", err)
	}
	if u.Scheme != "postgres" && u.Scheme != "postgresql" {
		return nil, fmt.Errorf("the database URL has scheme %q; want postgres", u.Scheme)
	}
	jdbc := "jdbc:postgresql://" + u.Host + u.Path
	if u.RawQuery != "" {
		jdbc += "?" + u.RawQuery
	}
	password, _ := u.User.Password()
	if password == "" {
		password = "unused-with-trust-auth"
	}
	return map[string]string{
		"QUEUEBOX_DATABASE_URL":      jdbc,
		"QUEUEBOX_DATABASE_USERNAME": u.User.Username(),
		"QUEUEBOX_DATABASE_PASSWORD": password,
		"QUEUEBOX_DATABASE_MIGRATE":  "true",
	}, nil
}

// Options configure an emulator.
type Options struct {
	// Emulator is the path of aws-lambda-rie.
	Emulator string
	// Bootstrap is the path of the function's binary.
	Bootstrap string
	// Env is the function's environment. The emulator passes it to the function; it also reads
	// AWS_LAMBDA_FUNCTION_TIMEOUT (seconds, default 300) from it for the invocation deadline.
	// PATH, HOME and TMPDIR come from this process; nothing else does.
	Env map[string]string
	// Output, when not nil, also receives the emulator's and the function's output.
	Output io.Writer
}

// Emulator is a running aws-lambda-rie with one function, listening on loopback.
type Emulator struct {
	// URL is the invoke URL: http://127.0.0.1:<port>/2015-03-31/functions/function/invocations.
	URL string
	// Started is when the emulator process started.
	Started time.Time

	cmd    *exec.Cmd
	logs   *syncBuffer
	exited chan struct{}
	client *http.Client
	stop   sync.Once
}

// Start starts the emulator on two free loopback ports (its invoke API and the Runtime API
// that the function polls). The emulator starts the function on the first invoke. Stop ends
// both.
func Start(opts Options) (*Emulator, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	apiAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	bootstrap, err := filepath.Abs(opts.Bootstrap)
	if err != nil {
		return nil, fmt.Errorf("resolving the bootstrap path: %w", err)
	}
	cmd := exec.Command(opts.Emulator,
		"--runtime-interface-emulator-address", addr,
		"--runtime-api-address", apiAddr,
		bootstrap)
	cmd.Dir = filepath.Dir(bootstrap)
	var env []string
	for _, name := range []string{"PATH", "HOME", "TMPDIR"} {
		if v, ok := os.LookupEnv(name); ok {
			env = append(env, name+"="+v)
		}
	}
	for k, v := range opts.Env {
		env = append(env, k+"="+v)
	}
	cmd.Env = env
	logs := &syncBuffer{}
	var out io.Writer = logs
	if opts.Output != nil {
		out = io.MultiWriter(logs, opts.Output)
	}
	cmd.Stdout, cmd.Stderr = out, out
	// The emulator starts bootstrap as its child: a process group lets Stop end both.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	e := &Emulator{
		URL:    "http://" + addr + InvokePath,
		cmd:    cmd,
		logs:   logs,
		exited: make(chan struct{}),
		client: &http.Client{Transport: &http.Transport{}},
	}
	e.Started = time.Now()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the emulator: %w", err)
	}
	go func() {
		_ = cmd.Wait()
		close(e.exited)
	}()
	return e, nil
}

// freeAddr returns a loopback address with a port that was free a moment ago.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("finding a free loopback port: %w", err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		return "", fmt.Errorf("releasing the free port: %w", err)
	}
	return addr, nil
}

// Response is the emulator's answer to one invoke.
type Response struct {
	// Status is the emulator's HTTP status: 200 when the function returned a result, 502
	// when its Init or handler failed.
	Status int
	// Body is the function's result, or its error, as JSON.
	Body []byte
	// RoundTrip is how long the invoke that was answered took, from sending the request to
	// reading the whole answer.
	RoundTrip time.Duration
}

// Invoke sends event to the function and returns the answer. While the emulator does not yet
// accept connections (it has just started), Invoke tries again until ctx ends; any other
// failure, or the emulator exiting, ends it at once. A request that reached the emulator is
// never sent twice.
func (e *Emulator) Invoke(ctx context.Context, event []byte) (Response, error) {
	for {
		start := time.Now()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.URL, bytes.NewReader(event))
		if err != nil {
			return Response{}, fmt.Errorf("building the invoke request: %w", err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := e.client.Do(req)
		if err != nil {
			if !errors.Is(err, syscall.ECONNREFUSED) {
				return Response{}, fmt.Errorf("invoking the function: %w\n%s", err, e.Logs())
			}
			select {
			case <-e.exited:
				return Response{}, fmt.Errorf("the emulator exited before it answered:\n%s", e.Logs())
			case <-ctx.Done():
				return Response{}, fmt.Errorf("waiting for the emulator to listen: %w\n%s", ctx.Err(), e.Logs())
			case <-time.After(2 * time.Millisecond):
			}
			continue
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return Response{}, fmt.Errorf("reading the invoke answer: %w", err)
		}
		return Response{Status: resp.StatusCode, Body: body, RoundTrip: time.Since(start)}, nil
	}
}

// initReportRE matches the emulator's log line after the function's Init phase. The emulator's
// REPORT line also carries an "Init Duration", but that one times only the emulator's own
// bookkeeping (hundredths of a millisecond), not the function's Init.
var initReportRE = regexp.MustCompile(`INIT REPORT\(durationMs: ([0-9.]+)`)

// InitDuration returns the duration of the emulator's first INIT REPORT line: how long the
// function's Init phase took, from the emulator starting bootstrap to the function asking
// for its first event (for QueueBox: loading the configuration, connecting to the database
// and, with QUEUEBOX_DATABASE_MIGRATE=true, migrating). It waits for the line until ctx ends.
func (e *Emulator) InitDuration(ctx context.Context) (time.Duration, error) {
	for {
		if m := initReportRE.FindStringSubmatch(e.Logs()); m != nil {
			ms, err := strconv.ParseFloat(m[1], 64)
			if err != nil {
				return 0, fmt.Errorf("parsing the init duration %q: %w", m[1], err)
			}
			return time.Duration(ms * float64(time.Millisecond)), nil
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("waiting for the emulator's Init Duration: %w\n%s", ctx.Err(), e.Logs())
		case <-e.exited:
			return 0, fmt.Errorf("the emulator exited without reporting the Init Duration:\n%s", e.Logs())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// Logs returns everything the emulator and the function wrote so far.
func (e *Emulator) Logs() string {
	return e.logs.String()
}

// Stop kills the emulator and the function (its process group) and waits for the emulator
// to exit. It is safe to call more than once.
func (e *Emulator) Stop() {
	e.stop.Do(func() {
		_ = syscall.Kill(-e.cmd.Process.Pid, syscall.SIGKILL)
		<-e.exited
		e.client.CloseIdleConnections()
	})
}

// syncBuffer is a bytes.Buffer that the emulator's output goroutines and readers share.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
