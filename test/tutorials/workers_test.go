package tutorials_test

import (
	"context"
	"errors"
	"fmt"
	"go/format"
	"go/parser"
	"go/scanner"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/alternayte/queuebox/shared/specsql"
)

// The pull workers of Receive a webhook. The page says "choose a language": the test runs the
// Go worker, then the TypeScript worker, each in its own orders-worker folder under a temporary folder.
// Both must store order-1, so before the second one the test puts the database back as it was
// before the first (the order row and the inbox row deleted, order-1 posted again with the
// page's command). The second worker keeps running through "Check the result" and the post of
// order-2, as the page says, and stops with the Ctrl-C of "Clean up". The C# worker
// (QueueBox.Inbox) belongs to another repository and is skipped.

// csharpSkip is why the C# worker's steps do not run.
const csharpSkip = "the C# worker (QueueBox.Inbox) belongs to another repository and does not run here (docs/tutorials-without-docker.md)"

// workerLimit bounds the wait for a worker's first order: `go run .` compiles the worker
// first, on a machine that may be busy.
const workerLimit = 4 * time.Minute

// process is a worker started by the page's `go run .` or `node worker.ts`, in its own process
// group so that stop can send it the Ctrl-C of a terminal.
type process struct {
	name   string
	cmd    *exec.Cmd
	out    *syncBuffer
	exited chan struct{}
	err    error // the exit status, once exited is closed
	// goRun: the process is `go run`, which exits 1 after a Ctrl-C whatever the program's
	// status; the program's own failure (log.Fatal) prints its reason.
	goRun bool
}

// startProcess runs script with bash in dir; the test's cleanup kills it if it still runs.
func startProcess(t *testing.T, name, dir string, env []string, script string) *process {
	t.Helper()
	p := &process{name: name, out: &syncBuffer{}, exited: make(chan struct{})}
	p.cmd = exec.Command("bash", "-c", script)
	p.cmd.Dir, p.cmd.Env = dir, env
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		if p.running() {
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.exited
		}
	})
	return p
}

func (p *process) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// stop is Ctrl-C in the worker's terminal: the page says the worker stops claiming and lets a
// running handler finish. It returns the exit status.
func (p *process) stop() error {
	if !p.running() {
		return fmt.Errorf("%s had already exited: %v", p.name, p.err)
	}
	before := len(p.out.String())
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGINT)
	select {
	case <-p.exited:
		if after := strings.TrimSpace(p.out.String()[before:]); after != "" {
			return fmt.Errorf("%s printed after Ctrl-C (exit %v): %s", p.name, p.err, after)
		}
		var exit *exec.ExitError
		if p.goRun && errors.As(p.err, &exit) && exit.ExitCode() == 1 {
			return nil
		}
		return p.err
	case <-time.After(time.Minute):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.exited
		return fmt.Errorf("%s did not stop within a minute of Ctrl-C; killed it", p.name)
	}
}

// tail is the end of the worker's output, for a failure message.
func (p *process) tail() string {
	out := p.out.String()
	if len(out) > 3000 {
		out = "..." + out[len(out)-3000:]
	}
	return out
}

// printed reports whether the worker printed the line: as it is (Node) or after the date and
// time that Go's log writes first.
func (p *process) printed(line string) bool {
	for _, got := range strings.Split(p.out.String(), "\n") {
		got = strings.TrimSpace(got)
		if got == line || strings.HasSuffix(got, " "+line) {
			return true
		}
	}
	return false
}

// workerCommand runs a step of Receive a webhook's "Write the worker", or its local equivalent of
// docs/tutorials-without-docker.md. It reports false for a command that is no worker step.
func (r *runner) workerCommand(c specsql.Command, later string) bool {
	t, line := r.t, c.Line
	switch {
	case line == "mkdir orders-worker && cd orders-worker":
		r.newWorkerFolder()
		r.inWorker(line, nil)
		r.cwd = filepath.Join(r.cwd, "orders-worker")
	case strings.HasPrefix(line, "dotnet "):
		r.skip(line, csharpSkip)
	case strings.HasPrefix(line, "go mod init "):
		r.inWorker(line, r.goEnv())
	case line == "go mod tidy":
		r.mapped(line, "go mod tidy")
		// The client is not fetched from a registry: the documented replace points at the
		// checkout. The client's go.sum gives the checksums of its dependencies. `go mod tidy`
		// also loads the tests of the dependencies' packages, whose modules a fresh machine's
		// cache may lack, so it runs with the configured module proxy (and checksum
		// database); `go run .` then builds from the module cache alone (GOPROXY=off).
		r.inWorker(r.goReplace(), r.goEnv())
		sum, err := os.ReadFile(filepath.Join(r.root, "clients", "go", "go.sum"))
		if err != nil {
			t.Fatalf("reading clients/go/go.sum: %v", err)
		}
		if err := os.WriteFile(filepath.Join(r.cwd, "go.sum"), sum, 0o644); err != nil {
			t.Fatal(err)
		}
		r.inWorker(line, r.goTidyEnv())
	case line == "go run .":
		r.runWorker("the Go worker", line, r.goEnv(), later, "go worker stored")
	case strings.HasPrefix(line, "npm init"), strings.HasPrefix(line, "npm pkg set "):
		r.inWorker(line, r.npmEnv())
	case line == "npm install @alternayte/queuebox-inbox pg":
		r.mapped(line, line)
		r.inWorker("npm install "+r.packClient()+" pg", r.npmEnv())
	case line == "node worker.ts":
		// Node 20 runs no TypeScript file: examples/worker.mjs is the same program, and
		// DATABASE_URL gives it the stack's port.
		r.mapped(line, line)
		env := append(r.npmEnv(), "DATABASE_URL="+r.mapURL("postgres://queuebox:queuebox@localhost:5432/queuebox"))
		r.runWorker("the TypeScript worker", "node worker.mjs", env, later, "ts worker stored")
	default:
		return false
	}
	return true
}

// newWorkerFolder gives the language's `mkdir orders-worker` a fresh parent folder; a worker
// of the previous language stops first, and the database goes back to where the page's worker
// step starts: order-1 stored and pending, no order row.
func (r *runner) newWorkerFolder() {
	t := r.t
	if r.worker != nil {
		if err := r.worker.stop(); err != nil {
			t.Errorf("%s: %s: %v\n%s", r.page, r.worker.name, err, r.worker.tail())
		}
		r.worker = nil
		r.psqlLocal("DELETE FROM orders; DELETE FROM inbox WHERE source = 'orders';")
		if r.firstPost == "" {
			t.Fatalf("%s: a second worker, but no post of order-1 to repeat", r.page)
		}
		if err := r.expect(r.firstPost, r.firstPostWant); err != nil {
			t.Fatalf("%s: posting order-1 again for the next worker: %v", r.page, err)
		}
	}
	r.cwd = t.TempDir()
}

// inWorker runs one command in the worker's folder and fails the test if it fails.
func (r *runner) inWorker(script string, env []string) {
	t := r.t
	if r.cwd == "" {
		t.Fatalf("%s: %q runs before `mkdir orders-worker`", r.page, script)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script)
	cmd.Dir, cmd.Env = r.cwd, r.stack.env
	if env != nil {
		cmd.Env = env
	}
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil && !errors.Is(err, exec.ErrWaitDelay) {
		t.Fatalf("%s: %s (in %s): %v\n%s", r.page, script, r.cwd, err, out)
	}
	r.ran++
}

// goTidyEnv is the stack's environment with the configured module proxy, go.mod and go.sum
// updated as needed, no workspace.
func (r *runner) goTidyEnv() []string {
	return append(append([]string{}, r.stack.env...), "GOFLAGS=-mod=mod", "GOWORK=off")
}

// goEnv is the stack's environment with the module cache only: no proxy, go.mod and go.sum
// updated as needed, no workspace.
func (r *runner) goEnv() []string {
	return append(append([]string{}, r.stack.env...), "GOPROXY=off", "GOFLAGS=-mod=mod", "GOWORK=off")
}

// npmEnv is the stack's environment with npm's cache preferred and its notices off.
func (r *runner) npmEnv() []string {
	return append(append([]string{}, r.stack.env...), "npm_config_prefer_offline=true",
		"npm_config_audit=false", "npm_config_fund=false", "npm_config_update_notifier=false")
}

var goReplaceRow = regexp.MustCompile("`(go mod edit -replace github.com/alternayte/queuebox/clients/go=)/path/to/queuebox(/clients/go)`")

// goReplace is the `go mod edit -replace` of docs/tutorials-without-docker.md with the
// checkout's path.
func (r *runner) goReplace() string {
	m := goReplaceRow.FindStringSubmatch(r.doc)
	if m == nil {
		r.t.Fatalf("%s: docs/tutorials-without-docker.md has no row `go mod edit -replace github.com/alternayte/queuebox/clients/go=/path/to/queuebox/clients/go`", r.page)
	}
	return m[1] + r.root + m[2]
}

// mapURL gives a database URL of the page the stack's port, the one change the document's rows
// make ("port 55432 instead of 5432").
func (r *runner) mapURL(url string) string {
	return strings.Replace(url, "@localhost:5432/", "@localhost:"+strconv.Itoa(r.stack.pgPort)+"/", 1)
}

// goWorker writes the page's main.go into the Go worker's folder: the block rebuilt (should its
// line breaks be lost) and formatted, with the database URL on the stack's port.
func (r *runner) goWorker(block string) {
	t := r.t
	if r.cwd == "" {
		t.Fatalf("%s: main.go comes before `mkdir orders-worker`", r.page)
	}
	src, err := rebuildGo(block)
	if err != nil {
		t.Fatalf("%s: rebuilding main.go: %v", r.page, err)
	}
	const url = `"postgres://queuebox:queuebox@localhost:5432/queuebox?sslmode=disable"`
	if strings.Count(src, url) != 1 {
		t.Fatalf("%s: main.go no longer opens %s; update the test", r.page, url)
	}
	r.mapped("main.go", `sql.Open("pgx", `+url+`)`)
	src = strings.Replace(src, url, r.mapURL(url), 1)
	if err := os.WriteFile(filepath.Join(r.cwd, "main.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	r.done["go worker written"] = true
}

// tsWorker checks that clients/typescript/examples/worker.mjs, the documented route for Node
// 20, is the page's worker.ts without its type assertion and with DATABASE_URL, and copies it
// into the TypeScript worker's folder.
func (r *runner) tsWorker(block string) {
	t := r.t
	if r.cwd == "" {
		t.Fatalf("%s: worker.ts comes before `mkdir orders-worker`", r.page)
	}
	mjs, err := os.ReadFile(filepath.Join(r.root, "clients", "typescript", "examples", "worker.mjs"))
	if err != nil {
		t.Fatalf("reading clients/typescript/examples/worker.mjs: %v", err)
	}
	var code []string
	for _, l := range strings.Split(string(mjs), "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "//") {
			continue
		}
		if i := strings.Index(l, " //"); i >= 0 {
			l = l[:i]
		}
		code = append(code, l)
	}
	got := jsShape(strings.Replace(strings.Join(code, "\n"), "process.env.DATABASE_URL ?? ", "", 1))
	want := jsShape(strings.Replace(block, " as { id: string; total: number }", "", 1))
	if got != want {
		t.Errorf("%s: clients/typescript/examples/worker.mjs is no longer the page's worker.ts:\n got %s\nwant %s", r.page, got, want)
	}
	r.mapped("worker.ts", "clients/typescript/examples/worker.mjs")
	if err := os.WriteFile(filepath.Join(r.cwd, "worker.mjs"), mjs, 0o644); err != nil {
		t.Fatal(err)
	}
	r.done["ts worker written"] = true
}

var trailingComma = regexp.MustCompile(`,\s*([}\])])`)

// jsShape squeezes a program's white space and drops trailing commas.
func jsShape(s string) string {
	return specsql.Squeeze(trailingComma.ReplaceAllString(s, " $1"))
}

// packClient packs the TypeScript client of the checkout as the document says, `npm ci && npm
// pack` in clients/typescript, in a copy of that folder (with examples/pull/sql, which its
// build reads) so that the checkout is left as it is. It returns the package file.
func (r *runner) packClient() string {
	t := r.t
	copyDir := t.TempDir()
	pkg := filepath.Join(copyDir, "clients", "typescript")
	for _, d := range []struct{ from, to string }{
		{filepath.Join(r.root, "clients", "typescript"), pkg},
		{filepath.Join(r.root, "examples", "pull", "sql"), filepath.Join(copyDir, "examples", "pull", "sql")},
	} {
		if err := os.MkdirAll(d.to, 0o755); err != nil {
			t.Fatal(err)
		}
		script := fmt.Sprintf("tar -C %q --exclude=./node_modules --exclude=./dist --exclude=./build --exclude='*.tgz' -cf - . | tar -C %q -xf -", d.from, d.to)
		if out, err := exec.Command("bash", "-c", script).CombinedOutput(); err != nil {
			t.Fatalf("copying %s: %v\n%s", d.from, err, out)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", "npm ci && npm pack --pack-destination "+copyDir)
	cmd.Dir, cmd.Env = pkg, r.npmEnv()
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("%s: npm ci && npm pack in a copy of clients/typescript: %v\n%s%s", r.page, err, out, stderr)
	}
	lines := strings.Fields(string(out))
	if len(lines) == 0 || !strings.HasSuffix(lines[len(lines)-1], ".tgz") {
		t.Fatalf("%s: npm pack named no package file: %s", r.page, out)
	}
	return filepath.Join(copyDir, lines[len(lines)-1])
}

// runWorker starts a worker and waits until it has done what the page says: it prints the
// documented lines (`Stored the order order-1.`), the order row holds order-1's total and the
// inbox row is processed. The worker keeps running: the next language's `mkdir` or the page's
// Clean up stops it.
func (r *runner) runWorker(name, script string, env []string, want, check string) {
	t := r.t
	if want == "" {
		t.Fatalf("%s: %q has no documented output", r.page, script)
	}
	r.worker = startProcess(t, name, r.cwd, env, script)
	r.worker.goRun = strings.HasPrefix(script, "go run")
	r.waitWorker(want, "order-1", 42)
	t.Logf("%s: %s (%s) stored order-1 and completed its inbox row; it printed:\n%s", r.page, name, script, r.worker.tail())
	r.ran++
	r.done[check] = true
}

// waitWorker waits until the running worker printed want and completed the order.
func (r *runner) waitWorker(want, id string, total int) {
	t, p := r.t, r.worker
	var lines []string
	for _, l := range strings.Split(want, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	query := fmt.Sprintf("SELECT (SELECT total FROM orders WHERE id = '%s'), (SELECT state FROM inbox WHERE source = 'orders' AND idempotency_key = '%s')", id, id)
	wantRow := fmt.Sprintf("%d|processed", total)
	deadline := time.Now().Add(workerLimit)
	for {
		missing := ""
		for _, l := range lines {
			if !p.printed(l) {
				missing = "the line " + strconv.Quote(l)
				break
			}
		}
		if missing == "" {
			if row := r.psqlLocal(query); row != wantRow {
				missing = fmt.Sprintf("the order row and the processed inbox row of %s (the database says %q)", id, row)
			}
		}
		if missing == "" {
			return
		}
		if !p.running() {
			t.Fatalf("%s: %s exited (%v) before %s; its output:\n%s", r.page, p.name, p.err, missing, p.tail())
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s did not show %s within %s; its output:\n%s", r.page, p.name, missing, workerLimit, p.tail())
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// stopWorker is the Ctrl-C of the page's Clean up: the worker exits 0.
func (r *runner) stopWorker() {
	if r.worker == nil {
		return
	}
	if err := r.worker.stop(); err != nil {
		r.t.Errorf("%s: Ctrl-C in the worker's terminal: %s: %v\n%s", r.page, r.worker.name, err, r.worker.tail())
	} else {
		r.done["worker stopped"] = true
	}
	r.worker = nil
}

// psqlLocal runs one statement on the stack's database, unaligned, and returns its output.
func (r *runner) psqlLocal(sql string) string {
	t := r.t
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	script := fmt.Sprintf("psql -h 127.0.0.1 -p %d -U queuebox -d queuebox -v ON_ERROR_STOP=1 -Atc %q", r.stack.pgPort, sql)
	out, errOut, err := r.stack.shell(ctx, script)
	if err != nil {
		t.Fatalf("%s: %s: %v\n%s%s", r.page, script, err, out, errOut)
	}
	return strings.TrimSpace(out)
}

// expect runs a command once and matches its output with a documented one.
func (r *runner) expect(script, want string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, errOut, err := r.stack.shell(ctx, script)
	if err != nil {
		return fmt.Errorf("%s: %w\n%s%s", script, err, out, errOut)
	}
	if got := specsql.Squeeze(out); !outputPattern(want).MatchString(got) {
		return fmt.Errorf("%s printed %q, the page says %q", script, got, specsql.Squeeze(want))
	}
	return nil
}

// rebuildGo rebuilds a Go file whose line breaks were lost: where the parser wants a `;` that
// a line break would have given, it breaks the line, until the file parses; then gofmt's layout.
func rebuildGo(flat string) (string, error) {
	src := flat
	for i := 0; i < 10000; i++ {
		_, err := parser.ParseFile(token.NewFileSet(), "main.go", src, parser.SkipObjectResolution)
		if err == nil {
			out, err := format.Source([]byte(src))
			if err != nil {
				return "", fmt.Errorf("formatting: %w", err)
			}
			return string(out), nil
		}
		var list scanner.ErrorList
		if !errors.As(err, &list) || len(list) == 0 || !strings.HasPrefix(list[0].Msg, "expected ';'") {
			return "", fmt.Errorf("parsing: %w", err)
		}
		off := list[0].Pos.Offset
		if off <= 0 || off > len(src) || src[off-1] == '\n' {
			return "", fmt.Errorf("parsing: %w", err)
		}
		src = src[:off] + "\n" + src[off:]
	}
	return "", errors.New("too many line breaks to rebuild")
}
