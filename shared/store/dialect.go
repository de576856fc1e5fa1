package store

import (
	"context"

	"github.com/alternayte/queuebox/shared/dburl"
)

// Dialect describes one database dialect: what the code that checks database.url, opens the
// database or reads its changes needs to know of it. Each dialect folder fills one
// (postgres.Dialect, sqlserver.Dialect); the dialect table, shared/store/dialect, lists them,
// and nothing else switches on database.type.
type Dialect struct {
	// Name is the value of database.type that selects the dialect (DialectPostgreSQL,
	// DialectSQLServer).
	Name string
	// ParseURL parses database.url of the dialect. A URL of another dialect is an error that
	// names that dialect; the error quotes no password.
	ParseURL func(raw string) (dburl.URL, error)
	// Params splits the parameters of a parsed URL into those that the driver takes, under
	// the driver's names, and the names of those that it leaves out.
	Params func(u dburl.URL) (kept []dburl.Param, dropped []string)
	// ConnString returns the driver's connection string for database.url, database.username
	// and database.password; an empty user or password takes the one of the URL. Errors read
	// "database.url ..." and quote no password. The string holds the password: never log it.
	ConnString func(raw, user, password string) (string, error)
	// EndpointConnString returns the driver's connection string of an endpoint other than
	// database.url itself: the capture connection. It holds the password: never log it.
	EndpointConnString func(e Endpoint) string
	// Open waits for the database (OpenConfig.WaitForDatabase) and opens its store.
	Open func(ctx context.Context, cfg OpenConfig) (*Driver, error)
	// OpenHealth opens a lazy pool of one connection, without a store, for the database
	// health component of a process that opens no store.
	OpenHealth func(ctx context.Context, cfg OpenConfig) (*Driver, error)
	// DefaultSchema is the schema of the outbox table when outbox.capture.schema is empty.
	DefaultSchema string
	// CaptureMode is the outbox.capture.mode of the dialect's change data capture; empty when
	// the dialect has none.
	CaptureMode string
	// ClaimLock says that the dialect's store offers the claim mode lock
	// (store.OutboxLocker, outbox.claimMode lock).
	ClaimLock bool
	// UTF16Keys says that the key columns (idempotency key, aggregate id, event type) count
	// UTF-16 code units, as NVARCHAR does, rather than code points, as VARCHAR does.
	UTF16Keys bool
}

// Endpoint is a connection of a dialect that is not database.url itself: the capture
// connection, which is database.url with the overrides of outbox.capture.connection.
type Endpoint struct {
	// Host is the host and port.
	Host dburl.Host
	// Database is the database name.
	Database string
	// User is the user name.
	User string
	// Password is the password: never log it.
	Password string
	// Encrypt encrypts the connection (SQL Server only).
	Encrypt bool
	// TrustServerCertificate accepts the server certificate without a check (SQL Server only).
	TrustServerCertificate bool
	// Params are the parameters of database.url that the driver takes (Dialect.Params); the
	// PostgreSQL endpoint carries them, for example sslmode.
	Params []dburl.Param
}
