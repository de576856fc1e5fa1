package config

// Config is the whole configuration of QueueBox. Load returns it with every default filled in
// and every rule checked; Default returns the defaults alone.
//
// The yaml tags give the key names; the loader matches them in any letter case.
type Config struct {
	// Server is the server section: the ports.
	Server Server `yaml:"server"`
	// Database is the database section.
	Database Database `yaml:"database"`
	// Outbox is the outbox section: the poller and capture.
	Outbox Outbox `yaml:"outbox"`
	// Inbox is the inbox section: the HTTP inbox and the relay.
	Inbox Inbox `yaml:"inbox"`
	// HTTP holds the settings that apply to every HTTP destination.
	HTTP HTTP `yaml:"http"`
	// Admin is the admin routes section.
	Admin Admin `yaml:"admin"`
	// Destinations maps a destination name to its destination. Default: empty.
	Destinations map[string]*Destination `yaml:"destinations,omitempty"`
	// Routes is the list of routes, tested in order; the first match wins. Default: empty.
	Routes []Route `yaml:"routes,omitempty"`
	// Sources maps a source name to its inbox source. Default: empty.
	Sources map[string]*Source `yaml:"sources,omitempty"`
	// Retention is the retention section.
	Retention Retention `yaml:"retention"`
	// Logging is the logging section, an extension (docs/monitoring.md).
	Logging Logging `yaml:"logging"`
	// Tracing is the tracing section, an extension (docs/tracing.md).
	Tracing Tracing `yaml:"tracing"`

	// Origin tells which sources Load read. It is not a configuration key.
	Origin Origin `yaml:"-"`

	// target is host:port/database of database.url, as Load parsed it with the parser of its
	// dialect (the summary of the start log); empty when Load did not parse it.
	target string
}

// Logging is the logging section.
type Logging struct {
	// Level is the lowest level of the lines written: debug, info, warn or error, in any
	// letter case. debug adds a line for each claim and each delivery. Default: info.
	Level LogLevel `yaml:"level"`
}

// Tracing is the tracing section: OpenTelemetry traces over OTLP (docs/tracing.md). Tracing is
// off unless an endpoint is set, here or by the standard OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT variable; a key that this block leaves unset takes the
// value of its OTEL_ variable (OTEL_EXPORTER_OTLP_PROTOCOL, OTEL_SERVICE_NAME), and
// OTEL_SDK_DISABLED=true turns tracing off whatever the block says.
type Tracing struct {
	// Endpoint is the base URL of the OTLP receiver, http:// or https://; for http/protobuf the
	// spans go to <endpoint>/v1/traces. Default: OTEL_EXPORTER_OTLP_ENDPOINT, else none (off).
	Endpoint string `yaml:"endpoint,omitempty"`
	// TracesEndpoint is the full URL of the traces receiver; it wins over Endpoint. Default:
	// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, else none.
	TracesEndpoint string `yaml:"tracesEndpoint,omitempty"`
	// Protocol is http/protobuf or grpc. Default: OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else
	// OTEL_EXPORTER_OTLP_PROTOCOL, else http/protobuf.
	Protocol string `yaml:"protocol"`
	// ServiceName is the service.name of the spans. Default: OTEL_SERVICE_NAME, else queuebox.
	ServiceName string `yaml:"serviceName"`
	// SampleRatio is the share of new traces that are recorded, from 0 to 1; a request or row
	// that carries a traceparent follows its sampled flag. Default: 1.
	SampleRatio float64 `yaml:"sampleRatio"`
	// ExportTimeoutMs bounds one export of spans, from 1 to 60000. Default: 10000.
	ExportTimeoutMs Milliseconds `yaml:"exportTimeoutMs"`
}

// Enabled reports whether the tracing section names an endpoint.
func (t Tracing) Enabled() bool { return t.Endpoint != "" || t.TracesEndpoint != "" }

// Origin records where a loaded configuration came from.
type Origin struct {
	// File is the configuration file that Load read, or empty when it read none.
	File string
	// Packaged is true when Load read the packaged default queuebox.yml.
	Packaged bool
	// Variables lists the QUEUEBOX_ variables that Load applied, sorted.
	Variables []string
	// MissingFile is the file that QUEUEBOX_CONFIG_FILE named and that did not exist, when the
	// QUEUEBOX_ variables alone configured QueueBox instead; empty otherwise.
	MissingFile string
}

// Server is the server section.
type Server struct {
	// HTTPPort is the port of the inbox routes, from 1 to 65535. Default: 8080.
	HTTPPort int `yaml:"httpPort"`
	// ManagementPort is the port of /health, /metrics and /admin; when set, the data port
	// answers 404 on those paths. It must differ from HTTPPort. Default: 0, none: those routes
	// stay on the data port.
	ManagementPort int `yaml:"managementPort,omitempty"`
	// ReadHeaderTimeoutMs is the longest time that a port of queuebox serve (and the capture
	// node's port) waits for the request line and headers of a request; past it the connection
	// is closed. An extension (docs/http-server.md). Default: 10000.
	ReadHeaderTimeoutMs Milliseconds `yaml:"readHeaderTimeoutMs"`
	// ReadBodyTimeoutMs is the longest time that those ports take to read a request body,
	// from the end of its headers; past it the route stops reading and the connection is
	// closed. An extension (docs/http-server.md). Default: 60000.
	ReadBodyTimeoutMs Milliseconds `yaml:"readBodyTimeoutMs"`
}

// Database is the database section.
type Database struct {
	// Type is postgresql or sqlserver. Default: postgresql.
	Type DatabaseType `yaml:"type"`
	// URL is the JDBC URL (jdbc:postgresql://... or jdbc:sqlserver://..., matching Type), or a
	// native postgres://, postgresql:// or sqlserver:// URL. Required. The dialect of Type
	// turns it into what its driver takes.
	URL ConnectionURL `yaml:"url"`
	// Username is the database user. Required.
	Username string `yaml:"username"`
	// Password is the database password. Required.
	Password Secret `yaml:"password"`
	// PoolSize is the size of the connection pool. It must be above 0. Default: 10.
	PoolSize int `yaml:"poolSize"`
	// ConnectionTimeoutMs is the longest wait for a connection from the pool: a statement
	// that waits longer fails (store.ErrPoolTimeout). On PostgreSQL it also bounds opening one
	// connection. 0: no bound. Default: 30000.
	ConnectionTimeoutMs Milliseconds `yaml:"connectionTimeoutMs"`
	// StartupTimeoutMs is how long the start retries the database before the process exits.
	// Default: 60000.
	StartupTimeoutMs Milliseconds `yaml:"startupTimeoutMs"`
	// Migrate applies the bundled migrations at start. It must be false when a table or a
	// column has a custom name. Default: true.
	Migrate bool `yaml:"migrate"`
	// OutboxTableName is the name of the outbox table, a SQL identifier. Default: outbox.
	OutboxTableName string `yaml:"outboxTableName"`
	// InboxTableName is the name of the inbox table, a SQL identifier. Default: inbox.
	InboxTableName string `yaml:"inboxTableName"`
	// ColumnMapping holds the column names of both tables. Default: the default names.
	ColumnMapping ColumnMapping `yaml:"columnMapping"`
}

// Outbox is the outbox section.
type Outbox struct {
	// PollIntervalMs is the wait between two claim cycles of the poller. It must be above 0.
	// Default: 100.
	PollIntervalMs Milliseconds `yaml:"pollIntervalMs"`
	// BatchSize is the largest number of rows that one claim takes. It must be above 0.
	// Default: 100.
	BatchSize int `yaml:"batchSize"`
	// Concurrency is the largest number of rows published at the same time. It must be above 0.
	// Default: 8.
	Concurrency int `yaml:"concurrency"`
	// RetryBaseDelayMs is the base of the retry backoff: the delay is RetryBaseDelayMs *
	// 2^attempt plus 0-25 % jitter, at most retry.maxDelayMs (60 s by default). Default: 1000.
	RetryBaseDelayMs Milliseconds `yaml:"retryBaseDelayMs"`
	// Retry is the retry schedule of the destinations that set none of their own, an
	// extension (docs/delivery-controls.md). Default: the doubling backoff of RetryBaseDelayMs.
	Retry Retry `yaml:"retry,omitempty"`
	// MaxAttempts is the dead-letter ceiling written into max_attempts of each row QueueBox
	// creates. It must be above 0. Default: 5.
	MaxAttempts int `yaml:"maxAttempts"`
	// ClaimTimeoutMs is the visibility timeout: a claim older than this returns to pending. It
	// must be above 0. Default: 300000.
	ClaimTimeoutMs Milliseconds `yaml:"claimTimeoutMs"`
	// PendingGaugeIntervalMs is the shortest interval between two queries for the pending
	// gauges. Default: 5000.
	PendingGaugeIntervalMs Milliseconds `yaml:"pendingGaugeIntervalMs"`
	// ShutdownTimeoutMs is the longest wait for the publishes in flight at shutdown.
	// Default: 30000.
	ShutdownTimeoutMs Milliseconds `yaml:"shutdownTimeoutMs"`
	// ClaimMode is lease, the documented claim, or lock, which holds the claimed rows under
	// row locks while they are delivered and writes each row once (PostgreSQL only). An
	// extension (docs/claim-modes.md). Default: lease.
	ClaimMode ClaimMode `yaml:"claimMode"`
	// Capture is change data capture. Default: polling, off.
	Capture Capture `yaml:"capture"`
}

// Capture is outbox.capture.
type Capture struct {
	// Mode is polling, postgres-logical (PostgreSQL only) or sqlserver-cdc (SQL Server only).
	// Default: polling.
	Mode CaptureMode `yaml:"mode"`
	// Enabled is true on the one replica that owns capture; true needs a mode other than
	// polling. Default: false.
	Enabled bool `yaml:"enabled"`
	// Identity is the name of the capture owner: a lower case letter first, then lower case
	// letters, digits and _, at most 63 characters. Default: queuebox.
	Identity string `yaml:"identity"`
	// StateDirectory is a durable directory for the capture offsets. Required when Enabled.
	// Default: empty.
	StateDirectory string `yaml:"stateDirectory,omitempty"`
	// Schema is the schema of the outbox table. Default: empty, which means the default
	// schema of the dialect: public on PostgreSQL, dbo on SQL Server.
	Schema string `yaml:"schema,omitempty"`
	// Publication is the PostgreSQL publication of the outbox table; QueueBox never creates it.
	// Same rule as Identity. Default: queuebox_outbox.
	Publication string `yaml:"publication"`
	// Slot is the PostgreSQL replication slot. Same rule as Identity. Default: queuebox_outbox.
	Slot string `yaml:"slot"`
	// ReconciliationIntervalMs is the longest wait of the poller when no event arrives. It must
	// be above 0. Default: 1000.
	ReconciliationIntervalMs Milliseconds `yaml:"reconciliationIntervalMs"`
	// Connection overrides parts of database.url for capture only.
	Connection CaptureConnection `yaml:"connection"`
}

// CaptureConnection is outbox.capture.connection. Each empty field takes its value from
// database.url, database.username or database.password (the composition root maps it).
type CaptureConnection struct {
	// Hostname is the capture host. Required when database.url names more than one host.
	// Default: the host of database.url.
	Hostname string `yaml:"hostname,omitempty"`
	// Port is the capture port, from 1 to 65535. Default: 0, the port of database.url.
	Port int `yaml:"port,omitempty"`
	// Database is the database name. Default: the database of database.url.
	Database string `yaml:"database,omitempty"`
	// Username is the capture account. Default: database.username.
	Username string `yaml:"username,omitempty"`
	// Password is the password of the capture account. Default: database.password.
	Password Secret `yaml:"password,omitempty"`
	// Encrypt encrypts the capture connection; SQL Server only. Default: true.
	Encrypt bool `yaml:"encrypt"`
	// TrustServerCertificate accepts the server certificate without a check; SQL Server only.
	// Default: false.
	TrustServerCertificate bool `yaml:"trustServerCertificate"`
}

// Inbox is the inbox section.
type Inbox struct {
	// BasePath is the prefix of every HTTP source path. Default: /inbox.
	BasePath string `yaml:"basePath"`
	// MaxBodyBytes is the largest request body on every route of the data port; a larger body
	// gets 413. It must be above 0. Default: 1048576.
	MaxBodyBytes int64 `yaml:"maxBodyBytes"`
	// Relay copies push rows into the outbox. Default: on.
	Relay Relay `yaml:"relay"`
}

// Relay is inbox.relay.
type Relay struct {
	// Enabled runs the relay; with false a push row stays in the inbox. Default: true.
	Enabled bool `yaml:"enabled"`
	// PollIntervalMs is the wait between two relay cycles. It must be above 0. Default: 100.
	PollIntervalMs Milliseconds `yaml:"pollIntervalMs"`
	// BatchSize is the largest number of rows that one relay claim takes. It must be above 0.
	// Default: 100.
	BatchSize int `yaml:"batchSize"`
	// ClaimTimeoutMs is the visibility timeout of a relay claim. It must be above 0.
	// Default: 300000.
	ClaimTimeoutMs Milliseconds `yaml:"claimTimeoutMs"`
	// PendingGaugeIntervalMs is the shortest interval between two queries for the oldest
	// pending inbox row. Default: 5000.
	PendingGaugeIntervalMs Milliseconds `yaml:"pendingGaugeIntervalMs"`
	// MaxAttempts is written into max_attempts of each outbox row the relay creates. It must be
	// above 0. Default: the value of outbox.maxAttempts, which the loader fills in.
	MaxAttempts int `yaml:"maxAttempts"`
}

// HTTP holds the settings of every HTTP destination.
type HTTP struct {
	// MaxErrorBodyBytes is the largest part of a failed response body that QueueBox keeps.
	// Default: 2048.
	MaxErrorBodyBytes int `yaml:"maxErrorBodyBytes"`
	// BlockPrivateAddresses refuses a destination baseUrl or OAuth2 tokenUrl whose host
	// resolves to a loopback, link-local, site-local or unique-local address. The check runs
	// at start, in the publisher. Default: false.
	BlockPrivateAddresses bool `yaml:"blockPrivateAddresses"`
}

// Admin is the admin section.
type Admin struct {
	// Enabled registers /admin/transform/test and /admin/replay. Default: false.
	Enabled bool `yaml:"enabled"`
	// Auth holds the credentials of the admin routes: bearer, api-key or hmac. Required when
	// Enabled, unless Insecure. Default: nil, none.
	Auth *InboundAuth `yaml:"auth,omitempty"`
	// Insecure allows the admin routes without Auth; for a local test only. Default: false.
	Insecure bool `yaml:"insecure"`
	// MaxTransformTimeoutMs caps the timeoutMs that a caller of /admin/transform/test sends.
	// It must be above 0. Default: 1000.
	MaxTransformTimeoutMs Milliseconds `yaml:"maxTransformTimeoutMs"`
	// MaxPayloadBytes is the largest admin request body; a larger body gets 413. It must be
	// above 0. Default: 65536.
	MaxPayloadBytes int64 `yaml:"maxPayloadBytes"`
}

// Route is one entry of routes.
type Route struct {
	// TopicPattern is a glob on the whole topic: * matches one segment without a dot, **
	// matches any text; *** stops the start. Required.
	TopicPattern string `yaml:"topicPattern"`
	// Destination is the name of a destination. Required.
	Destination string `yaml:"destination"`
	// RoutingKeyTemplate is the RabbitMQ routing key or the Kafka record key for this route;
	// it wins over the destination template. Default: empty, none.
	RoutingKeyTemplate string `yaml:"routingKeyTemplate,omitempty"`
	// RoutingKeyMissingFieldDefault is the value of a placeholder that finds no value.
	// Default: empty.
	RoutingKeyMissingFieldDefault string `yaml:"routingKeyMissingFieldDefault,omitempty"`
	// Transform runs before the destination transform. Default: nil, none.
	Transform *Transform `yaml:"transform,omitempty"`
}

// Transform is a transform block, on a source, a route or a destination.
type Transform struct {
	// Expression is the JSONata expression. It must compile at start. Required.
	Expression string `yaml:"expression"`
	// TimeoutMs is the longest run time of one evaluation. It must be above 0. Default: 100.
	TimeoutMs Milliseconds `yaml:"timeoutMs"`
	// MaxDepth is the deepest recursion of one evaluation. It must be above 0. Default: 100.
	MaxDepth int `yaml:"maxDepth"`
	// OnError is Fail, Skip or Dead, in this letter case. Default: Fail.
	OnError OnError `yaml:"onError"`
}

// DefaultTransform returns a transform block with its defaults and no expression.
func DefaultTransform() Transform {
	return Transform{TimeoutMs: 100, MaxDepth: 100, OnError: OnErrorFail}
}

func (t *Transform) setDefaults() { *t = DefaultTransform() }

// Retention is the retention section.
type Retention struct {
	// Enabled runs the cleanup. Default: false.
	Enabled bool `yaml:"enabled"`
	// Outbox is the outbox policy: AGE, COUNT or DISABLED. Default: DISABLED.
	Outbox TableRetention `yaml:"outbox"`
	// Inbox is the inbox policy: AGE or DISABLED. Default: DISABLED.
	Inbox TableRetention `yaml:"inbox"`
}

// TableRetention is retention.outbox or retention.inbox.
type TableRetention struct {
	// Policy is AGE, COUNT (outbox only) or DISABLED, in upper case. Default: DISABLED.
	Policy RetentionPolicy `yaml:"policy"`
	// MaxAge is the age past which rows go. Required by AGE. Default: unset.
	MaxAge RetentionDuration `yaml:"maxAge,omitempty"`
	// MaxCount is how many sent rows, and apart from them how many dead rows, the outbox count
	// policy keeps. Required by COUNT, and above 0. Default: 0, unset.
	MaxCount int `yaml:"maxCount,omitempty"`
	// CleanupInterval is the wait between two cleanup runs. Default: 1h.
	CleanupInterval RetentionDuration `yaml:"cleanupInterval"`
	// BatchSize is the largest number of rows that one delete statement removes. It must be
	// above 0. Default: 1000.
	BatchSize int `yaml:"batchSize"`
}

// DefaultTableRetention returns a disabled retention policy with its defaults.
func DefaultTableRetention() TableRetention {
	return TableRetention{Policy: RetentionDisabled, CleanupInterval: MustRetentionDuration("1h"), BatchSize: 1000}
}

// Default returns the configuration with every default of spec/23-configuration.md and nothing
// else: no database URL or credentials, no destination, route or source. Load decodes the
// sources on top of it, so a key that a source sets, even to 0, "" or false, wins over the
// default.
func Default() *Config {
	return &Config{
		Server: Server{HTTPPort: 8080, ReadHeaderTimeoutMs: 10000, ReadBodyTimeoutMs: 60000},
		Database: Database{
			Type:                PostgreSQL,
			PoolSize:            10,
			ConnectionTimeoutMs: 30000,
			StartupTimeoutMs:    60000,
			Migrate:             true,
			OutboxTableName:     DefaultOutboxTableName,
			InboxTableName:      DefaultInboxTableName,
			ColumnMapping: ColumnMapping{
				Outbox: DefaultOutboxColumns(),
				Inbox:  DefaultInboxColumns(),
			},
		},
		Outbox: Outbox{
			PollIntervalMs:         100,
			BatchSize:              100,
			Concurrency:            8,
			RetryBaseDelayMs:       1000,
			MaxAttempts:            5,
			ClaimTimeoutMs:         300000,
			PendingGaugeIntervalMs: 5000,
			ShutdownTimeoutMs:      30000,
			ClaimMode:              ClaimModeLease,
			Capture: Capture{
				Mode:                     CapturePolling,
				Identity:                 "queuebox",
				Publication:              "queuebox_outbox",
				Slot:                     "queuebox_outbox",
				ReconciliationIntervalMs: 1000,
				Connection:               CaptureConnection{Encrypt: true},
			},
		},
		Inbox: Inbox{
			BasePath:     "/inbox",
			MaxBodyBytes: 1048576,
			Relay: Relay{
				Enabled:                true,
				PollIntervalMs:         100,
				BatchSize:              100,
				ClaimTimeoutMs:         300000,
				PendingGaugeIntervalMs: 5000,
				MaxAttempts:            5,
			},
		},
		HTTP: HTTP{MaxErrorBodyBytes: 2048},
		Admin: Admin{
			MaxTransformTimeoutMs: 1000,
			MaxPayloadBytes:       65536,
		},
		Retention: Retention{
			Outbox: DefaultTableRetention(),
			Inbox:  DefaultTableRetention(),
		},
		Logging: Logging{Level: LogInfo},
		Tracing: Tracing{Protocol: "http/protobuf", ServiceName: "queuebox", SampleRatio: 1, ExportTimeoutMs: 10000},
	}
}

// ptr returns a pointer to a copy of v: the default of a key that may be unset.
func ptr[T any](v T) *T { return &v }
