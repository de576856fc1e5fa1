package tutorials_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alternayte/queuebox/shared/specdocs"
	"github.com/alternayte/queuebox/shared/specsql"
)

// The pages of docs/tutorials that the test runs, and the checks that each must have made: a
// page whose commands change so that a check no longer happens fails instead of passing with
// less.
var tutorials = []struct {
	page   string
	checks []string
}{
	{page: "deliver-your-first-outbox-message.md", checks: []string{
		"health", "route fragment", "insert", "delivered at the receiver", "row sent", "stopped",
	}},
	{page: "receive-a-webhook.md", checks: []string{
		"appended source", "source block", "health", "stored", "duplicate", "inbox row pending",
		"business table", "go worker written", "go worker stored", "ts worker written",
		"ts worker stored", "orders checked", "second order stored", "worker stored second order",
		"worker stopped", "stopped",
	}},
}

// TestTutorials runs the shell blocks of docs/tutorials/deliver-your-first-outbox-message.md and
// docs/tutorials/receive-a-webhook.md against scripts/run-local.sh, each page on a fresh stack,
// and checks the outputs the pages document.
func TestTutorials(t *testing.T) {
	if testing.Short() {
		t.Skip("the tutorials start a PostgreSQL cluster and QueueBox; skipped with -short")
	}
	root, err := specdocs.CheckoutRoot()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "tutorials-without-docker.md"))
	if err != nil {
		t.Fatalf("reading docs/tutorials-without-docker.md: %v", err)
	}
	// `make run` builds bin/queuebox and bin/receiver; the test builds the same two commands
	// into its own folder, so that it never replaces a developer's binaries.
	bin := t.TempDir()
	if err := os.Chmod(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, pkg := range []struct{ out, pkg string }{{"queuebox", "./local"}, {"receiver", "./local/receiver"}} {
		cmd := exec.Command("go", "build", "-o", filepath.Join(bin, pkg.out), pkg.pkg)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v: %s", pkg.pkg, err, out)
		}
	}
	pages := filepath.Join(root, "docs", "tutorials")
	for _, tut := range tutorials {
		t.Run(strings.TrimSuffix(tut.page, ".md"), func(t *testing.T) {
			text, err := os.ReadFile(filepath.Join(pages, tut.page))
			if err != nil {
				t.Fatalf("reading docs/tutorials/%s: %v", tut.page, err)
			}
			r := &runner{t: t, root: root, doc: string(doc), page: tut.page, done: map[string]bool{}}
			r.stack = newStack(t, root, bin)
			r.run(string(text))
			for _, c := range tut.checks {
				if !r.done[c] {
					t.Errorf("%s: the check %q did not run: the page changed; update the test", tut.page, c)
				}
			}
			t.Logf("%s: %d commands run, %d skipped:\n  %s", tut.page, r.ran, len(r.skipped), strings.Join(r.skipped, "\n  "))
		})
	}
}

// runner runs the blocks of one page in order.
type runner struct {
	t       *testing.T
	root    string
	doc     string // docs/tutorials-without-docker.md
	page    string
	stack   *stack
	done    map[string]bool
	ran     int
	skipped []string

	cwd           string   // the worker's folder, after `mkdir orders-worker && cd orders-worker`
	worker        *process // the running pull worker
	firstPost     string   // the post of order-1, which the test repeats for the second worker
	firstPostWant string   // its documented answer
}

// run walks the page's fenced blocks: each bash block's commands run, each yaml block is
// checked against the configuration it shows, a go or ts block is the worker the next commands
// run, and a text block after a bash block is that block's documented output. A worker's
// output comes after the three languages' blocks: the first text block after the command.
func (r *runner) run(page string) {
	blocks := specsql.Fenced(page)
	for i, b := range blocks {
		switch b.Lang {
		case "bash":
			want, later := "", ""
			for j := i + 1; j < len(blocks); j++ {
				if blocks[j].Lang == "text" {
					later = blocks[j].Text
					break
				}
			}
			for j := i + 1; j < len(blocks) && blocks[j].Lang != "bash"; j++ {
				if blocks[j].Lang == "text" {
					want = blocks[j].Text
					break
				}
			}
			cmds, err := specsql.Commands(b.Text)
			if err != nil {
				r.t.Fatalf("%s: reading the block %q: %v", r.page, specsql.Squeeze(b.Text), err)
			}
			for k, c := range cmds {
				w := ""
				if k == len(cmds)-1 {
					w = want
				}
				if !r.workerCommand(c, later) {
					r.command(c, w)
				}
			}
		case "yaml":
			r.yaml(b.Text)
		case "go":
			r.goWorker(b.Text)
		case "ts":
			r.tsWorker(b.Text)
		case "csharp":
			r.skip("Program.cs", csharpSkip)
		}
	}
}

// command runs one command of the page, or its local equivalent, or names why it is skipped.
func (r *runner) command(c specsql.Command, want string) {
	t := r.t
	line := c.Line
	switch {
	case strings.HasPrefix(line, "git clone "), line == "cd queuebox":
		r.note(line, "the test runs in the checkout")
	case line == "git checkout examples/queuebox.yml":
		r.mapped(line, "git checkout examples/queuebox.yml")
		r.note(line, "the test appended to its own copy of local/queuebox.yml, deleted with the stack")
	case strings.HasPrefix(line, "docker compose "):
		r.docker(c, want)
	case strings.HasPrefix(line, "curl "):
		r.curl(c, want)
	case strings.HasPrefix(line, "cat >> examples/queuebox.yml <<"):
		r.appendSource(c)
	default:
		t.Errorf("%s: the command %q is new to the test: map it to its local equivalent (docs/tutorials-without-docker.md) and check its output", r.page, line)
	}
}

func (r *runner) note(line, why string) {
	r.t.Logf("%s: %s: nothing to run (%s)", r.page, line, why)
}

func (r *runner) skip(line, why string) {
	r.t.Logf("%s: SKIP %s: %s", r.page, line, why)
	r.skipped = append(r.skipped, line+" ("+why+")")
}

// mapped checks that docs/tutorials-without-docker.md has a row for the Docker command that the
// test maps, so that the document and the test say the same.
func (r *runner) mapped(line string, rows ...string) {
	for _, row := range rows {
		if strings.Contains(r.doc, "`"+row) {
			return
		}
	}
	r.t.Errorf("%s: %q runs as its local equivalent, but docs/tutorials-without-docker.md names none of %q", r.page, line, rows)
}

const compose = "docker compose -f docker-compose.yml "

// docker runs the local equivalent of a Docker Compose command.
func (r *runner) docker(c specsql.Command, want string) {
	t, line := r.t, c.Line
	switch {
	case strings.HasPrefix(line, compose+"--env-file .env.example up -d --build"):
		r.mapped(line, line, "docker compose ... up -d --build")
		r.stack.start(t)
		r.ran++
	case line == compose+"logs receiver":
		r.mapped(line, line)
		r.receiverLog(want)
		r.ran++
	case strings.HasPrefix(line, compose+"down -v"):
		r.mapped(line, compose+"down -v")
		// "Press Ctrl+C in the worker terminal", then stop the stack.
		r.stopWorker()
		r.stack.stop(t)
		if r.stack.running() {
			t.Errorf("%s: the stack still runs after the local equivalent of %q", r.page, line)
		}
		r.done["stopped"] = true
		r.ran++
	case strings.HasPrefix(line, compose+"exec -T postgres psql "), strings.HasPrefix(line, compose+"exec postgres psql "):
		r.mapped(line, line[:strings.Index(line, " psql ")])
		r.psql(c, want)
	default:
		t.Errorf("%s: the Docker command %q is new to the test: map it (docs/tutorials-without-docker.md)", r.page, line)
	}
}

// psql runs a psql command of the page against the stack's cluster: `docker compose exec
// postgres psql ARGS` becomes `psql -h 127.0.0.1 -p PORT ARGS`, the row of
// docs/tutorials-without-docker.md.
func (r *runner) psql(c specsql.Command, want string) {
	t := r.t
	args := c.Line[strings.Index(c.Line, " psql ")+len(" psql "):]
	local := c
	local.Line = fmt.Sprintf("psql -h 127.0.0.1 -p %d %s", r.stack.pgPort, args)
	switch {
	case strings.Contains(args, "FROM orders;"):
		// Receive a webhook's "Check the result" reads what the worker wrote.
		if r.worker == nil {
			t.Fatalf("%s: %q reads the worker's work, but no worker runs", r.page, c.Line)
		}
		r.until(local.Script(), want, "orders checked")
	case c.Tag == "SQL" && strings.Contains(c.Heredoc, "INSERT INTO outbox"):
		// The page says: psql prints BEGIN, INSERT 0 1 and COMMIT.
		r.once(local.Script(), "BEGIN INSERT 0 1 COMMIT", "insert")
	case strings.Contains(args, "CREATE TABLE IF NOT EXISTS orders"):
		r.once(local.Script(), "CREATE TABLE", "business table")
	case strings.Contains(args, "FROM outbox;") && want != "":
		// The row turns sent once delivered; the page says to run the command again.
		r.until(local.Script(), want, "row sent")
	case strings.Contains(args, "FROM inbox;") && want != "":
		r.until(local.Script(), want, "inbox row pending")
	default:
		t.Errorf("%s: the psql command %q is new to the test: say what it must print", r.page, c.Line)
	}
}

// once runs a command that changes the database once and compares its output, white space
// squeezed, with want.
func (r *runner) once(script, want, check string) {
	t := r.t
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, errOut, err := r.stack.shell(ctx, script)
	if err != nil {
		t.Fatalf("%s: %s: %v\n%s%s", r.page, script, err, out, errOut)
	}
	if got := specsql.Squeeze(out); got != want {
		t.Errorf("%s: %s printed %q, the page says %q", r.page, script, got, want)
		return
	}
	r.ran++
	r.done[check] = true
}

// until runs a read-only command until its output matches the documented one, or a deadline.
func (r *runner) until(script, want, check string) {
	t := r.t
	re := outputPattern(want)
	// The first answer waits for initdb, the migrations and the start, which take their time
	// on a busy machine; the others for a delivery.
	limit := 2 * time.Minute
	if check == "health" {
		limit = 5 * time.Minute
	}
	deadline := time.Now().Add(limit)
	var got string
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		out, errOut, err := r.stack.shell(ctx, script)
		cancel()
		got = specsql.Squeeze(out)
		if err == nil && re.MatchString(got) {
			r.ran++
			r.done[check] = true
			return
		}
		if err != nil {
			got += " (" + err.Error() + ": " + specsql.Squeeze(errOut) + ")"
		}
		if !r.stack.running() {
			t.Fatalf("%s: the stack stopped before %s printed what the page says:\n%s", r.page, script, r.stack.tail())
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s printed %q, the page says %q; the stack's output:\n%s", r.page, script, got, specsql.Squeeze(want), r.stack.tail())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

var uuidText = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// outputPattern turns a documented output into a pattern of the squeezed actual output: `...`
// stands for any text (the page elides the headers of a response), and an identifier (a UUID)
// for any identifier ("Your identifier differs").
func outputPattern(want string) *regexp.Regexp {
	parts := strings.Split(specsql.Squeeze(want), "...")
	for i, p := range parts {
		p = regexp.QuoteMeta(strings.TrimSpace(p))
		parts[i] = uuidText.ReplaceAllLiteralString(p, `[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	}
	return regexp.MustCompile(`(?s)^` + strings.Join(parts, `.*`) + `$`)
}

// curl runs a curl command of the page as written, on the stack's port instead of 8080 (the
// port of `make run`, which a parallel test run or a developer's `make run` may hold).
func (r *runner) curl(c specsql.Command, want string) {
	t := r.t
	const base = "http://localhost:8080"
	if !strings.Contains(c.Line, base) {
		t.Errorf("%s: the curl command %q does not call %s", r.page, c.Line, base)
		return
	}
	script := strings.ReplaceAll(c.Script(), base, "http://127.0.0.1:"+strconv.Itoa(r.stack.httpPort))
	switch {
	case strings.HasSuffix(c.Line, base+"/health"):
		// "A ready instance answers with status 200 and a body that starts with
		// {"status":"healthy"". If curl cannot connect, wait a moment and send it again.
		r.until(script, `{"status":"healthy"...`, "health")
	case strings.Contains(c.Line, "/inbox/orders") && strings.Contains(c.Line, `"id":"order-1"`):
		if want == "" {
			t.Errorf("%s: %q has no documented output", r.page, c.Line)
			return
		}
		check := "stored"
		if r.done["stored"] {
			check = "duplicate"
		} else {
			r.firstPost, r.firstPostWant = script, want
		}
		r.match(script, want, check)
	case strings.Contains(c.Line, "/inbox/orders") && strings.Contains(c.Line, `"id":"order-2"`):
		// The page shows no output: the worker prints the order. The message is stored.
		r.match(script, `{"messageId":"00000000-0000-0000-0000-000000000000"}`, "second order stored")
		// "Post a new order while the worker runs, and watch the worker print it."
		if r.worker == nil {
			t.Fatalf("%s: order-2 is posted while no worker runs", r.page)
		}
		r.waitWorker("Stored the order order-2.", "order-2", 17)
		r.done["worker stored second order"] = true
	default:
		t.Errorf("%s: the curl command %q is new to the test: say what it must print", r.page, c.Line)
	}
}

// match runs a command once (a post is not repeated) and matches its output with the
// documented one.
func (r *runner) match(script, want, check string) {
	t := r.t
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, errOut, err := r.stack.shell(ctx, script)
	if err != nil {
		t.Fatalf("%s: %s: %v\n%s%s", r.page, script, err, out, errOut)
	}
	if got := specsql.Squeeze(out); !outputPattern(want).MatchString(got) {
		t.Errorf("%s: %s printed %q, the page says %q", r.page, script, got, specsql.Squeeze(want))
		return
	}
	r.ran++
	r.done[check] = true
}

// receiverLog waits until the stack's output holds the documented lines of the receiver's
// log: `receiver-1 | receiver listening on 8080 receiver-1 | delivered POST /webhook {...}`.
// The local receiver prints to the terminal of `make run`, with its own address.
func (r *runner) receiverLog(want string) {
	t := r.t
	var lines []string
	for _, l := range strings.Split(specsql.Squeeze(want), "receiver-1 |") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) == 0 {
		t.Fatalf("%s: the receiver's log has no documented lines", r.page)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		missing := ""
		out := r.stack.out.String()
		for _, l := range lines {
			found := false
			for _, got := range strings.Split(out, "\n") {
				got = strings.TrimSpace(got)
				if got == l || (strings.HasPrefix(l, "receiver listening on ") && strings.HasPrefix(got, "receiver listening on ")) {
					found = true
					break
				}
			}
			if !found {
				missing = l
				break
			}
		}
		if missing == "" {
			r.done["delivered at the receiver"] = true
			return
		}
		if time.Now().After(deadline) || !r.stack.running() {
			t.Fatalf("%s: the receiver never printed %q; the stack's output:\n%s", r.page, missing, r.stack.tail())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// appendSource runs Receive a webhook's `cat >> examples/queuebox.yml <<'YAML'` on the stack's
// copy of local/queuebox.yml, with the here-document's lines rebuilt from its squeezed words.
func (r *runner) appendSource(c specsql.Command) {
	t := r.t
	r.mapped(c.Line, "cat >> examples/queuebox.yml <<'YAML'")
	if r.stack.running() {
		t.Errorf("%s: the source is appended while QueueBox runs; the page appends it before the start", r.page)
	}
	body, err := rebuildYAML(c.Heredoc, 2)
	if err != nil {
		t.Fatalf("%s: rebuilding the here-document %q: %v", r.page, c.Heredoc, err)
	}
	local := c
	local.Line = strings.Replace(c.Line, "examples/queuebox.yml", r.stack.config, 1)
	local.Heredoc = body
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if out, errOut, err := r.stack.shell(ctx, local.Script()); err != nil {
		t.Fatalf("%s: %s: %v\n%s%s", r.page, local.Script(), err, out, errOut)
	}
	r.ran++
	r.done["appended source"] = true
}

// rebuildYAML rebuilds the lines of a YAML mapping from its squeezed words: `key: value`
// pairs, where a key with no value opens a nested mapping two spaces deeper. It reads the
// tutorials' blocks, whose nested mappings are each the last of their parent.
func rebuildYAML(flat string, indent int) (string, error) {
	toks := strings.Fields(flat)
	var lines []string
	for i := 0; i < len(toks); {
		key := toks[i]
		if !strings.HasSuffix(key, ":") {
			return "", fmt.Errorf("%q is not a key", key)
		}
		j := i + 1
		for j < len(toks) && !strings.HasSuffix(toks[j], ":") {
			j++
		}
		pad := strings.Repeat(" ", indent)
		if j == i+1 {
			lines = append(lines, pad+key)
			indent += 2
		} else {
			lines = append(lines, pad+key+" "+strings.Join(toks[i+1:j], " "))
		}
		i = j
	}
	return strings.Join(lines, "\n"), nil
}

// yaml checks a configuration block of the page: Deliver your first outbox message's fragment of
// examples/queuebox.yml (a block whose first line is a `# fragment` comment), and Receive a
// webhook's source block as the appended configuration reads.
func (r *runner) yaml(block string) {
	t := r.t
	first, rest, _ := strings.Cut(block, "\n")
	switch {
	case strings.HasPrefix(first, "# fragment"):
		text, err := os.ReadFile(filepath.Join(r.root, "examples", "queuebox.yml"))
		if err != nil {
			t.Fatalf("reading examples/queuebox.yml: %v", err)
		}
		want := withoutComments(rest)
		if got := withoutComments(string(text)); !strings.Contains(got, want) {
			t.Errorf("%s: examples/queuebox.yml does not hold the fragment %q", r.page, want)
			return
		}
		// make run's twin, local/queuebox.yml, has the same route and destination with the
		// local receiver's address (docs/tutorials-without-docker.md).
		local, err := os.ReadFile(filepath.Join(r.root, "local", "queuebox.yml"))
		if err != nil {
			t.Fatalf("reading local/queuebox.yml: %v", err)
		}
		wantLocal := strings.Replace(want, "baseUrl: http://receiver:8080", "baseUrl: http://127.0.0.1:8088", 1)
		if got := withoutComments(string(local)); !strings.Contains(got, wantLocal) {
			t.Errorf("%s: local/queuebox.yml does not hold the fragment with the local receiver %q", r.page, wantLocal)
			return
		}
		r.done["route fragment"] = true
	case strings.HasPrefix(specsql.Squeeze(block), "sources: "):
		text, err := os.ReadFile(r.stack.config)
		if err != nil {
			t.Fatalf("reading the configuration copy: %v", err)
		}
		got := withoutComments(string(text))
		if i := strings.Index(got, "sources: "); i >= 0 {
			got = got[i:]
		}
		if want := specsql.Squeeze(block); got != want {
			t.Errorf("%s: after the append, the sources block reads %q; the page says %q", r.page, got, want)
			return
		}
		r.done["source block"] = true
	default:
		t.Errorf("%s: the yaml block %q is new to the test", r.page, specsql.Squeeze(block))
	}
}

// withoutComments squeezes a YAML file without its comments.
func withoutComments(text string) string {
	var kept []string
	for _, l := range strings.Split(text, "\n") {
		if i := strings.Index(l, "#"); i >= 0 && (i == 0 || l[i-1] == ' ') {
			l = l[:i]
		}
		kept = append(kept, l)
	}
	return specsql.Squeeze(strings.Join(kept, "\n"))
}
