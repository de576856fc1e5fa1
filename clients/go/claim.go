package queuebox

import (
	"context"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// candidateLimit is cand_limit of the claim: LEAST(GREATEST(3 * batch, 50), 500).
func candidateLimit(batch int) int {
	return min(max(3*batch, 50), 500)
}

// claimed is one row that the worker holds: the message, its claim token, and the context,
// local deadline and renewal that belong to it.
type claimed struct {
	msg     Message
	token   string
	readErr error // the row could not be read into a Message; it fails without a handler

	// ctx is the handler's context. It is cancelled on a lost lease, at the local deadline and
	// after the shutdown grace.
	ctx    context.Context
	cancel context.CancelCauseFunc

	span     time.Duration // the lease minus its margin: how long a claim or renewal counts from its sending
	dmu      sync.Mutex
	deadline time.Time   // the local deadline; guarded by dmu
	timer    *time.Timer // cancels ctx at the deadline; guarded by dmu
	released bool        // the row is finished or given up; guarded by dmu

	ren      *renewals  // the renewals of the Run that holds the row; nil until it is registered
	renewing sync.Mutex // held while a renewal of the row runs
	next     time.Time  // when the row is due for renewal; guarded by ren.mu
	stopped  bool       // the row is no longer renewed; guarded by ren.mu
}

// claim claims up to batch rows. It runs the claim statement alone, as one autocommit
// statement (PostgreSQL) or as the batch that opens and commits its own transaction (SQL
// Server), and reads every row and the end of the response. Each row gets its handler's
// context, which ends at the row's local deadline: the time the claim was sent plus the lease
// minus its margin. The caller registers the rows for renewal.
func (w *InboxWorker) claim(ctx, hard context.Context, batch int) ([]*claimed, error) {
	parent := ctx
	if w.opts.Dialect == DialectSQLServer {
		// Never abandon a SQL Server claim halfway: the per-source lock would stay held until
		// the connection resets. The server itself gives up after 10 seconds (Msg 51000).
		parent = context.WithoutCancel(ctx)
	}
	cctx, cancel := context.WithTimeout(parent, claimTimeout)
	defer cancel()
	claim := w.claims.statement(w.stmts.claim, batch)
	args, err := claim.args(map[string]any{
		"source":     w.opts.Source,
		"batch":      int64(batch),
		"lease_ms":   int64(w.opts.LeaseMS),
		"cand_limit": int64(candidateLimit(batch)),
	})
	if err != nil {
		return nil, err
	}
	// The lease runs on the database's clock from when the claim runs there, which is after
	// this moment: a deadline counted from here comes first.
	sent := time.Now()
	rows, err := w.db.QueryContext(cctx, claim.text, args...)
	if err != nil {
		return nil, fmt.Errorf("claiming inbox rows: %w", err)
	}
	defer rows.Close()
	var out []*claimed
	for rows.Next() {
		c, err := w.scanClaim(rows)
		if err != nil {
			return nil, fmt.Errorf("claiming inbox rows: %w", err)
		}
		out = append(out, c)
	}
	// An error after the rows means that the claim did not commit: drop the rows.
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("claiming inbox rows: %w", err)
	}
	if err := rows.Close(); err != nil {
		return nil, fmt.Errorf("claiming inbox rows: %w", err)
	}
	for _, c := range out {
		c.hold(hard, sent, w.leaseSpan)
	}
	return out, nil
}

// scanClaim reads one row of the claim. The columns come in the order of the contract:
// id, source, idempotency_key, aggregate_id, event_type, payload, headers, attempt,
// correlation_id, claim_token.
func (w *InboxWorker) scanClaim(rows *sql.Rows) (*claimed, error) {
	var (
		id, token                         any
		source, key                       string
		aggregate, eventType, correlation sql.NullString
		payload, headers                  []byte
		attempt                           int64
	)
	if err := rows.Scan(&id, &source, &key, &aggregate, &eventType, &payload, &headers, &attempt, &correlation, &token); err != nil {
		return nil, fmt.Errorf("reading a claimed row: %w", err)
	}
	idText, err := uuidText(id, w.opts.Dialect)
	if err != nil {
		return nil, fmt.Errorf("reading the id of a claimed row: %w", err)
	}
	tokenText, err := uuidText(token, w.opts.Dialect)
	if err != nil {
		return nil, fmt.Errorf("reading the claim token of row %s: %w", idText, err)
	}
	c := &claimed{
		token: tokenText,
		msg: Message{
			ID:             idText,
			Source:         source,
			IdempotencyKey: key,
			AggregateID:    aggregate.String,
			EventType:      eventType.String,
			Payload:        payload,
			Attempt:        int(attempt),
			CorrelationID:  correlation.String,
		},
	}
	if c.msg.Headers, err = parseHeaders(headers); err != nil {
		c.msg.Headers = map[string]string{}
		c.readErr = fmt.Errorf("reading the claimed row: %w", err)
	}
	return c, nil
}

// uuidText returns a UUID that the driver returned in its canonical lower-case text form.
// go-mssqldb returns a UNIQUEIDENTIFIER as 16 bytes in SQL Server's order, whose first three
// groups are little-endian.
func uuidText(v any, dialect Dialect) (string, error) {
	switch x := v.(type) {
	case string:
		return strings.ToLower(x), nil
	case []byte:
		if len(x) != 16 {
			return strings.ToLower(string(x)), nil
		}
		b := make([]byte, 16)
		copy(b, x)
		if dialect == DialectSQLServer {
			b[0], b[1], b[2], b[3] = b[3], b[2], b[1], b[0]
			b[4], b[5] = b[5], b[4]
			b[6], b[7] = b[7], b[6]
		}
		h := hex.EncodeToString(b)
		return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:], nil
	case [16]byte:
		return uuidText(x[:], DialectPostgreSQL)
	case nil:
		return "", errors.New("the value is NULL")
	default:
		return "", fmt.Errorf("unexpected type %T", v)
	}
}
