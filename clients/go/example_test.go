package queuebox_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	// The application registers the driver: pgx for PostgreSQL, go-mssqldb for SQL Server.
	_ "github.com/jackc/pgx/v5/stdlib"

	queuebox "github.com/alternayte/queuebox/clients/go"
)

// The worker of the tutorial "Receive a webhook": it takes the messages of the pull source
// orders and writes each order through the transaction that it receives. The order row and the
// completion of the message commit together. Ctrl+C stops the worker: it claims nothing more
// and lets a running handler finish. The worker logs through log/slog, so a database that it
// cannot reach shows; a refused login or an unknown database ends Run with the reason.
func ExampleNewInboxWorker() {
	db, err := sql.Open("pgx", "postgres://queuebox:queuebox@localhost:5432/queuebox?sslmode=disable")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	worker, err := queuebox.NewInboxWorker(db, queuebox.Options{
		Source: "orders",
		// Without a Logger the worker prints nothing, not even a database it cannot reach.
		Logger: queuebox.SlogLogger(slog.Default()),
	})
	if err != nil {
		log.Fatal(err)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	log.Println("Waiting for messages of the source 'orders'. Press Ctrl+C to stop.")
	err = worker.Run(ctx, func(ctx context.Context, message queuebox.Message, tx *sql.Tx) error {
		var order struct {
			ID    string `json:"id"`
			Total int    `json:"total"`
		}
		if err := message.UnmarshalPayload(&order); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO orders (id, total) VALUES ($1, $2)", order.ID, order.Total); err != nil {
			return err
		}
		log.Printf("Stored the order %s.", message.IdempotencyKey)
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
}

// A policy that dead-letters a payload that does not parse at once, since a retry cannot help,
// and otherwise retries after 1 s, 2 s, 4 s, ... up to five times.
func ExampleRetryPolicyFunc() {
	policy := queuebox.RetryPolicyFunc(func(message queuebox.Message, failure error) queuebox.FailureAction {
		var syntax *json.SyntaxError
		if errors.As(failure, &syntax) {
			return queuebox.DeadLetter()
		}
		if message.Attempt >= 5 {
			return queuebox.DeadLetter()
		}
		return queuebox.RetryAfter(time.Duration(1<<message.Attempt) * time.Second)
	})

	var db *sql.DB // opened as in the example of NewInboxWorker
	worker, err := queuebox.NewInboxWorker(db, queuebox.Options{Source: "orders", RetryPolicy: policy})
	_, _ = worker, err
}

// A worker on an inbox table that queuebox.yml renames: database.inboxTableName qb_inbox and
// database.columnMapping.inbox.idempotencyKey dedup_key. The library checks and quotes every
// name, so a mapping cannot carry SQL.
func ExampleDefaultSchema() {
	schema := queuebox.DefaultSchema()
	schema.Table = "qb_inbox"
	schema.IdempotencyKey = "dedup_key"

	var db *sql.DB // opened as in the example of NewInboxWorker
	worker, err := queuebox.NewInboxWorker(db, queuebox.Options{Source: "orders", Schema: &schema})
	_, _ = worker, err
}

// On SQL Server, register go-mssqldb and set the dialect. The worker gives each claim a
// deadline of 35 seconds, so the server's own 10-second lock timeout (Msg 51000) comes first.
func ExampleOptions_sqlServer() {
	var db *sql.DB // sql.Open("sqlserver", "sqlserver://app:...@db:1433?database=app")
	worker, err := queuebox.NewInboxWorker(db, queuebox.Options{
		Source:         "orders",
		Dialect:        queuebox.DialectSQLServer,
		BatchSize:      20,
		MaxConcurrency: 4,
	})
	_, _ = worker, err
}
