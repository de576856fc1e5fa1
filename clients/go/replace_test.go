package queuebox_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// replaceWorker is the worker of spec/33 with an outbox write added, as a new module in its own
// folder would hold it.
const replaceWorker = `package main

import (
	"context"
	"database/sql"
	"log"
	"os"
	"os/signal"
	"syscall"

	_ "github.com/jackc/pgx/v5/stdlib"

	queuebox "github.com/alternayte/queuebox/clients/go"
	"github.com/alternayte/queuebox/clients/go/outbox"
)

func main() {
	db, err := sql.Open("pgx", os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	worker, err := queuebox.NewInboxWorker(db, queuebox.Options{Source: "orders"})
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err = worker.Run(ctx, func(ctx context.Context, message queuebox.Message, tx *sql.Tx) error {
		_, err := outbox.Enqueue(ctx, tx, outbox.Message{Topic: "order.stored", Key: message.AggregateID, Payload: message.Payload})
		return err
	})
	if err != nil {
		log.Fatal(err)
	}
}
`

// TestReplaceDirectiveBuildsFromCheckout is the check of the README's "From a checkout": a new
// module outside the repository that requires the client and replaces it with this folder
// resolves and builds, with no download (GOPROXY=off: every other module comes from the module
// cache, into which the test first brings the client's module graph).
func TestReplaceDirectiveBuildsFromCheckout(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Fatalf("the go command is not on PATH: %v", err)
	}
	checkout, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	// The new module's build reads the go.mod of every module in the client's module graph,
	// some of which (go-logr/logr v1.2.2, required by go-logr/stdr) no build of the client
	// itself needs, so a fresh module cache may lack them. They come into the cache here, with
	// the environment's own proxy settings, before the offline build.
	graph := exec.Command("go", "list", "-m", "all")
	graph.Env = append(os.Environ(), "GOWORK=off")
	if out, err := graph.CombinedOutput(); err != nil {
		t.Fatalf("go list -m all in the client module: %v\n%s", err, out)
	}
	dir := t.TempDir()
	goMod := "module example.com/orders-worker\n\ngo 1.24.0\n\n" +
		"require github.com/alternayte/queuebox/clients/go v0.0.0\n\n" +
		"replace github.com/alternayte/queuebox/clients/go => " + checkout + "\n"
	sum, err := os.ReadFile("go.sum")
	if err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string][]byte{"go.mod": []byte(goMod), "go.sum": sum, "main.go": []byte(replaceWorker)} {
		if err := os.WriteFile(filepath.Join(dir, name), body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOPROXY=off", "GOFLAGS=-mod=mod", "GOWORK=off")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	run("build", "-o", filepath.Join(dir, "orders-worker"), ".")
	if _, err := os.Stat(filepath.Join(dir, "orders-worker")); err != nil {
		t.Fatalf("the worker binary: %v", err)
	}
	got := strings.TrimSpace(run("list", "-m", "-f", "{{.Replace.Dir}}", "github.com/alternayte/queuebox/clients/go"))
	if got != checkout {
		t.Fatalf("the client module resolves to %q, want the checkout %q", got, checkout)
	}
}
