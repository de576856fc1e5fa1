package outbox_test

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/alternayte/queuebox/clients/go/outbox"
)

// The business row and the message commit together, or neither does.
func ExampleEnqueue() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://app@localhost:5432/app")
	if err != nil {
		return
	}
	defer pool.Close()
	tx, err := pool.Begin(ctx)
	if err != nil {
		return
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, "INSERT INTO orders (id, customer_id, amount) VALUES ($1, $2, $3)", "o-1", "cust-42", 99.99); err != nil {
		return
	}
	if _, err := outbox.Enqueue(ctx, tx, outbox.Message{
		Topic:         "order.created",
		Key:           "cust-42",
		Payload:       map[string]any{"orderId": "o-1", "amount": 99.99},
		Headers:       map[string]string{"X-Tenant": "acme"},
		AggregateType: "order",
		MaxAttempts:   10,
		Delay:         5 * time.Second,
	}); err != nil {
		return
	}
	_ = tx.Commit(ctx)
}

// A Writer for the renamed table of spec/15 on SQL Server, with a *sql.Tx of go-mssqldb.
func ExampleNew() {
	writer, err := outbox.New(outbox.Config{
		Dialect: outbox.DialectSQLServer,
		Schema:  outbox.Schema{Table: "qb_outbox", Payload: "body"},
	})
	if err != nil {
		return
	}
	_ = writer // writer.Enqueue(ctx, sqlTx, message)
}
