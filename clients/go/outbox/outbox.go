package outbox

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	queuebox "github.com/alternayte/queuebox/clients/go"
)

// Dialect names the database that a Writer writes to. It is the Dialect of the pull worker.
type Dialect = queuebox.Dialect

const (
	// DialectPostgreSQL is PostgreSQL, through a pgx.Tx or a *sql.Tx. It is the default.
	DialectPostgreSQL = queuebox.DialectPostgreSQL
	// DialectSQLServer is SQL Server, through a *sql.Tx of the go-mssqldb driver.
	DialectSQLServer = queuebox.DialectSQLServer
)

const (
	// MaxTextLength is the largest number of characters of Topic, Key and AggregateType: their
	// columns are VARCHAR(255) (NVARCHAR(255) on SQL Server).
	MaxTextLength = 255
	// MaxAttemptsLimit is the largest MaxAttempts: the column is a 32-bit INTEGER.
	MaxAttemptsLimit = math.MaxInt32
	// MaxDelay is the longest Delay. A longer one is almost always a unit mistake; schedule
	// such a message from a job of your own instead.
	MaxDelay = 365 * 24 * time.Hour
)

var (
	// ErrInvalidMessage is the error of a Message that Enqueue refuses before it sends anything.
	// The error text names the field and the reason.
	ErrInvalidMessage = errors.New("outbox: invalid message")
	// ErrNotTransaction is the error of a tx argument that is neither a pgx.Tx nor a *sql.Tx,
	// or a pgx.Tx given to a SQL Server Writer.
	ErrNotTransaction = errors.New("outbox: tx must be a pgx.Tx or a *sql.Tx")
)

// Message is one outbox row to write.
type Message struct {
	// Topic routes the row (topicPattern of the routes). Required, at most 255 characters.
	Topic string
	// Key is the unit of order: the rows of one non-empty key are delivered in insert order.
	// Optional, at most 255 characters; "" writes NULL.
	Key string
	// Payload is the message body. A json.RawMessage or a []byte is JSON text, written as it
	// is (it must be valid JSON); any other value is encoded with json.Marshal. Required: a
	// nil payload, a payload whose JSON is null, and a JSON string that holds JSON (a payload
	// encoded twice) are refused.
	Payload any
	// Headers travel with the message (an HTTP destination sends each as an HTTP header).
	// Each name must be an HTTP field name and no value may hold CR, LF or NUL. nil or empty
	// writes {}.
	Headers map[string]string
	// AggregateType is the kind of business entity, for destinations that read it. Optional,
	// at most 255 characters; "" writes NULL.
	AggregateType string
	// MaxAttempts is the retry ceiling of this row, from 1 to MaxAttemptsLimit. 0 keeps the
	// column default (5).
	MaxAttempts int
	// Delay postpones the first delivery: scheduled_at is the database's current time plus
	// Delay, counted in whole milliseconds. From 0 (deliver at once, the default) to MaxDelay.
	// On PostgreSQL the current time is the start of the transaction (CURRENT_TIMESTAMP); on
	// SQL Server it is SYSUTCDATETIME().
	Delay time.Duration
}

// Schema holds the outbox table name and the names of the columns that Enqueue writes, for an
// outbox table that database.outboxTableName or database.columnMapping.outbox renames. An
// empty field keeps its default name. Every name must be a SQL identifier: a letter or "_"
// first, then letters, digits and "_".
type Schema struct {
	// Table is the outbox table. Default "outbox".
	Table string
	// ID is the row identifier column, returned by Enqueue. Default "id".
	ID string
	// Topic is the topic column. Default "topic".
	Topic string
	// Key is the key column. Default "key".
	Key string
	// AggregateType is the aggregate type column. Default "aggregate_type".
	AggregateType string
	// Payload is the JSON body column. Default "payload".
	Payload string
	// Headers is the JSON headers column. Default "headers".
	Headers string
	// MaxAttempts is the retry ceiling column. Default "max_attempts".
	MaxAttempts string
	// ScheduledAt is the due time column. Default "scheduled_at".
	ScheduledAt string
}

// DefaultSchema returns the names that the bundled migrations create.
func DefaultSchema() Schema {
	return Schema{
		Table:         "outbox",
		ID:            "id",
		Topic:         "topic",
		Key:           "key",
		AggregateType: "aggregate_type",
		Payload:       "payload",
		Headers:       "headers",
		MaxAttempts:   "max_attempts",
		ScheduledAt:   "scheduled_at",
	}
}

// Config configures a Writer.
type Config struct {
	// Dialect is the database. Default DialectPostgreSQL.
	Dialect Dialect
	// Schema is the table and column names. Default DefaultSchema().
	Schema Schema
}

// Writer writes outbox rows with one dialect and one schema. It is safe for concurrent use.
type Writer struct {
	dialect Dialect
	schema  Schema
	// statements holds the INSERT of each shape: index bit 0 writes max_attempts, bit 1
	// writes scheduled_at.
	statements [4]string
}

var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// New checks config and returns its Writer. The error names every bad setting.
func New(config Config) (*Writer, error) {
	if config.Dialect == "" {
		config.Dialect = DialectPostgreSQL
	}
	if config.Dialect != DialectPostgreSQL && config.Dialect != DialectSQLServer {
		return nil, fmt.Errorf("outbox: checking the config: Dialect %q is neither %q nor %q",
			config.Dialect, DialectPostgreSQL, DialectSQLServer)
	}
	s := config.Schema
	d := DefaultSchema()
	fields := []struct {
		name string
		ptr  *string
		def  string
	}{
		{"Table", &s.Table, d.Table}, {"ID", &s.ID, d.ID}, {"Topic", &s.Topic, d.Topic},
		{"Key", &s.Key, d.Key}, {"AggregateType", &s.AggregateType, d.AggregateType},
		{"Payload", &s.Payload, d.Payload}, {"Headers", &s.Headers, d.Headers},
		{"MaxAttempts", &s.MaxAttempts, d.MaxAttempts}, {"ScheduledAt", &s.ScheduledAt, d.ScheduledAt},
	}
	var bad []string
	seen := map[string]string{}
	for _, f := range fields {
		if *f.ptr == "" {
			*f.ptr = f.def
		}
		if !identifier.MatchString(*f.ptr) {
			bad = append(bad, fmt.Sprintf("Schema.%s %q is not a SQL identifier (a letter or _, then letters, digits and _)", f.name, *f.ptr))
			continue
		}
		if f.name == "Table" {
			continue
		}
		// SQL Server compares names without regard to case in the default collation.
		key := strings.ToLower(*f.ptr)
		if other, ok := seen[key]; ok {
			bad = append(bad, fmt.Sprintf("Schema.%s %q is also the name of Schema.%s", f.name, *f.ptr, other))
			continue
		}
		seen[key] = f.name
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("outbox: checking the config: %s", strings.Join(bad, "; "))
	}
	w := &Writer{dialect: config.Dialect, schema: s}
	for shape := range w.statements {
		w.statements[shape] = w.render(shape&1 != 0, shape&2 != 0)
	}
	return w, nil
}

// defaultWriter is the Writer of the package-level Enqueue.
var defaultWriter = func() *Writer {
	w, err := New(Config{})
	if err != nil {
		panic(err) // the default config is valid; a test pins it
	}
	return w
}()

// Enqueue writes message into the default outbox table of PostgreSQL through tx, a pgx.Tx or
// a *sql.Tx, and returns the id of the new row. The row exists for QueueBox only when tx
// commits. Use New for SQL Server or renamed names.
func Enqueue(ctx context.Context, tx any, message Message) (string, error) {
	return defaultWriter.Enqueue(ctx, tx, message)
}

// Enqueue writes message through tx and returns the id of the new row, as text. tx is the
// open transaction of the business write: a pgx.Tx (PostgreSQL only) or a *sql.Tx. Enqueue
// neither commits nor rolls back. A message that breaks a rule of Message fails with
// ErrInvalidMessage before anything is sent.
func (w *Writer) Enqueue(ctx context.Context, tx any, message Message) (string, error) {
	row, err := w.prepare(message)
	if err != nil {
		return "", err
	}
	var id string
	switch t := tx.(type) {
	case *sql.Tx:
		if t == nil {
			return "", fmt.Errorf("%w: got a nil *sql.Tx", ErrNotTransaction)
		}
		err = t.QueryRowContext(ctx, row.statement, row.args...).Scan(&id)
	case pgx.Tx:
		if w.dialect != DialectPostgreSQL {
			return "", fmt.Errorf("%w: a pgx.Tx is a PostgreSQL transaction, and this Writer writes %s", ErrNotTransaction, w.dialect)
		}
		err = t.QueryRow(ctx, row.statement, row.args...).Scan(&id)
	case nil:
		return "", fmt.Errorf("%w: got nil", ErrNotTransaction)
	default:
		return "", fmt.Errorf("%w: got %T", ErrNotTransaction, tx)
	}
	if err != nil {
		return "", fmt.Errorf("outbox: inserting the %q row into %s: %w", message.Topic, w.schema.Table, err)
	}
	return id, nil
}

// preparedRow is the statement and the arguments of one message.
type preparedRow struct {
	statement string
	args      []any
}

// prepare checks message and returns its statement and arguments.
func (w *Writer) prepare(m Message) (preparedRow, error) {
	var bad []string
	text := func(field, value string, required bool) {
		switch {
		case value == "" && required:
			bad = append(bad, field+" is required")
		case !utf8.ValidString(value):
			bad = append(bad, field+" is not valid UTF-8")
		case utf8.RuneCountInString(value) > MaxTextLength:
			bad = append(bad, fmt.Sprintf("%s has %d characters, more than %d", field, utf8.RuneCountInString(value), MaxTextLength))
		case strings.ContainsRune(value, 0):
			bad = append(bad, field+" holds a NUL character")
		}
	}
	text("Topic", m.Topic, true)
	text("Key", m.Key, false)
	text("AggregateType", m.AggregateType, false)

	payload, err := EncodePayload(m.Payload)
	if err != nil {
		bad = append(bad, err.Error())
	}
	headers, err := EncodeHeaders(m.Headers)
	if err != nil {
		bad = append(bad, err.Error())
	}
	if m.MaxAttempts < 0 || int64(m.MaxAttempts) > MaxAttemptsLimit {
		bad = append(bad, fmt.Sprintf("MaxAttempts %d is outside 1 to %d (0 keeps the column default, 5)", m.MaxAttempts, MaxAttemptsLimit))
	}
	if m.Delay < 0 || m.Delay > MaxDelay {
		bad = append(bad, fmt.Sprintf("Delay %s is outside 0 to %s", m.Delay, MaxDelay))
	}
	if len(bad) > 0 {
		return preparedRow{}, fmt.Errorf("%w: %s", ErrInvalidMessage, strings.Join(bad, "; "))
	}

	args := []any{m.Topic, nullable(m.Key), nullable(m.AggregateType), payload, headers}
	shape := 0
	if m.MaxAttempts > 0 {
		shape |= 1
		args = append(args, int64(m.MaxAttempts))
	}
	if ms := m.Delay.Milliseconds(); ms > 0 {
		shape |= 2
		if w.dialect == DialectSQLServer {
			// DATEADD takes an int: the seconds and the remaining milliseconds apart.
			args = append(args, ms/1000, ms%1000)
		} else {
			args = append(args, ms)
		}
	}
	return preparedRow{statement: w.statements[shape], args: args}, nil
}

// nullable returns nil for "" (NULL) and s otherwise.
func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// EncodePayload returns the JSON text that Enqueue writes for payload, or an error that says
// why payload is refused. It is exported so that an application can check a payload before it
// opens a transaction.
func EncodePayload(payload any) (string, error) {
	var raw []byte
	switch p := payload.(type) {
	case nil:
		return "", errors.New("Payload is required")
	case json.RawMessage:
		raw = p
	case []byte:
		raw = p
	default:
		encoded, err := json.Marshal(payload)
		if err != nil {
			return "", fmt.Errorf("Payload cannot be encoded as JSON: %w", err)
		}
		raw = encoded
	}
	raw = bytes.TrimSpace(raw)
	if !json.Valid(raw) {
		return "", errors.New("Payload is not valid JSON (a json.RawMessage or a []byte must hold JSON text)")
	}
	if !utf8.Valid(raw) {
		return "", errors.New("Payload is not valid UTF-8")
	}
	if string(raw) == "null" {
		return "", errors.New("Payload is JSON null; the column needs a JSON value")
	}
	if raw[0] == '"' {
		var inner string
		if err := json.Unmarshal(raw, &inner); err == nil {
			inner = strings.TrimSpace(inner)
			if inner != "" && (inner[0] == '{' || inner[0] == '[' || inner[0] == '"') && json.Valid([]byte(inner)) {
				return "", errors.New("Payload is a JSON string that holds JSON (encoded twice): pass the value, or its JSON as a json.RawMessage, not a string of JSON")
			}
		}
	}
	return string(raw), nil
}

// headerName matches an HTTP field name (RFC 9110 token).
var headerName = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

// EncodeHeaders returns the JSON object that Enqueue writes for headers ("{}" for none), or an
// error that names the bad header.
func EncodeHeaders(headers map[string]string) (string, error) {
	if len(headers) == 0 {
		return "{}", nil
	}
	var bad []string
	for name, value := range headers {
		if !headerName.MatchString(name) {
			bad = append(bad, fmt.Sprintf("Headers name %q is not an HTTP field name", name))
		}
		if strings.ContainsAny(value, "\r\n\x00") {
			bad = append(bad, fmt.Sprintf("Headers %q has a value with CR, LF or NUL", name))
		}
		if !utf8.ValidString(value) {
			bad = append(bad, fmt.Sprintf("Headers %q has a value that is not valid UTF-8", name))
		}
	}
	if len(bad) > 0 {
		// Sorted so that the error text does not depend on the map order.
		sort.Strings(bad)
		return "", errors.New(strings.Join(bad, "; "))
	}
	encoded, err := json.Marshal(headers) // json.Marshal sorts the keys
	if err != nil {
		return "", fmt.Errorf("Headers cannot be encoded as JSON: %w", err)
	}
	return string(encoded), nil
}

// Statement returns the INSERT that Enqueue sends for a message with (withMaxAttempts) or
// without a MaxAttempts, and with (withDelay) or without a Delay. Its parameters are, in
// order: topic, key, aggregate type, payload, headers, then max attempts when present, then
// the delay (in milliseconds on PostgreSQL; in seconds and the remaining milliseconds on SQL
// Server) when present. It returns the id as text.
func (w *Writer) Statement(withMaxAttempts, withDelay bool) string {
	shape := 0
	if withMaxAttempts {
		shape |= 1
	}
	if withDelay {
		shape |= 2
	}
	return w.statements[shape]
}

// render builds the INSERT of one shape.
func (w *Writer) render(withMaxAttempts, withDelay bool) string {
	s := w.schema
	q := w.quote
	columns := []string{q(s.Topic), q(s.Key), q(s.AggregateType), q(s.Payload), q(s.Headers)}
	n := 0
	param := func() string {
		n++
		if w.dialect == DialectSQLServer {
			return fmt.Sprintf("@p%d", n)
		}
		return fmt.Sprintf("$%d", n)
	}
	values := []string{param(), param(), param(), param(), param()}
	if withMaxAttempts {
		columns = append(columns, q(s.MaxAttempts))
		values = append(values, param())
	}
	if withDelay {
		columns = append(columns, q(s.ScheduledAt))
		if w.dialect == DialectSQLServer {
			seconds, millis := param(), param()
			values = append(values, fmt.Sprintf("DATEADD(MILLISECOND, CAST(%s AS INT), DATEADD(SECOND, CAST(%s AS INT), SYSUTCDATETIME()))", millis, seconds))
		} else {
			values = append(values, fmt.Sprintf("CURRENT_TIMESTAMP + CAST(%s AS BIGINT) * INTERVAL '1 millisecond'", param()))
		}
	}
	if w.dialect == DialectSQLServer {
		return fmt.Sprintf("INSERT INTO %s (%s) OUTPUT CAST(INSERTED.%s AS NVARCHAR(64)) VALUES (%s)",
			q(s.Table), strings.Join(columns, ", "), q(s.ID), strings.Join(values, ", "))
	}
	return fmt.Sprintf("INSERT INTO %s (%s) VALUES (%s) RETURNING CAST(%s AS TEXT)",
		q(s.Table), strings.Join(columns, ", "), strings.Join(values, ", "), q(s.ID))
}

// quote returns name as an identifier of the dialect. Names are checked identifiers, so the
// escaping never applies; it stays as a second guard.
func (w *Writer) quote(name string) string {
	if w.dialect == DialectSQLServer {
		return "[" + strings.ReplaceAll(name, "]", "]]") + "]"
	}
	return `"` + strings.ReplaceAll(name, `"`, `""`) + `"`
}
