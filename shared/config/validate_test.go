package config

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/kind"
)

// TestValidationRules loads minimalDatabase plus a fragment and checks the exact problems.
// wantErr nil means the configuration is valid.
func TestValidationRules(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		yaml    string
		env     map[string]string
		wantErr []string
	}{
		// server
		{name: "http port 0", env: map[string]string{"QUEUEBOX_SERVER_HTTPPORT": "0"},
			wantErr: []string{"server.httpPort (QUEUEBOX_SERVER_HTTPPORT) must be from 1 to 65535, not 0"}},
		{name: "http port above 65535", yaml: "server:\n  httpPort: 65536\n",
			wantErr: []string{"server.httpPort (QUEUEBOX_SERVER_HTTPPORT) must be from 1 to 65535, not 65536"}},
		{name: "management port equals http port", yaml: "server:\n  httpPort: 9000\n  managementPort: 9000\n",
			wantErr: []string{"server.managementPort (QUEUEBOX_SERVER_MANAGEMENTPORT) must differ from server.httpPort (9000)"}},
		{name: "read deadlines of 0", yaml: "server:\n  readHeaderTimeoutMs: 0\n  readBodyTimeoutMs: 0\n",
			wantErr: []string{
				"server.readHeaderTimeoutMs (QUEUEBOX_SERVER_READHEADERTIMEOUTMS) must be above 0",
				"server.readBodyTimeoutMs (QUEUEBOX_SERVER_READBODYTIMEOUTMS) must be above 0",
			}},
		{name: "read deadline above an hour", yaml: "server:\n  readBodyTimeoutMs: 3600001\n",
			wantErr: []string{"server.readBodyTimeoutMs (QUEUEBOX_SERVER_READBODYTIMEOUTMS) must be at most 3600000, not 3600001"}},
		{name: "management port out of range", env: map[string]string{"QUEUEBOX_SERVER_MANAGEMENTPORT": "-1"},
			wantErr: []string{"server.managementPort (QUEUEBOX_SERVER_MANAGEMENTPORT) must be from 1 to 65535, not -1"}},
		{name: "management port", yaml: "server:\n  managementPort: 9090\n"},

		// database
		{name: "database type", env: map[string]string{"QUEUEBOX_DATABASE_TYPE": "mysql"},
			wantErr: []string{`database.type (QUEUEBOX_DATABASE_TYPE) must be postgresql or sqlserver, not "mysql"`}},
		{name: "database type in any letter case", env: map[string]string{"QUEUEBOX_DATABASE_TYPE": "PostgreSQL"}},
		{name: "url does not match the type", env: map[string]string{"QUEUEBOX_DATABASE_TYPE": "sqlserver"},
			wantErr: []string{"database.url (QUEUEBOX_DATABASE_URL) names a postgresql database, but database.type is sqlserver"}},
		{name: "url of another database", env: map[string]string{"QUEUEBOX_DATABASE_URL": "jdbc:mysql://db:3306/q?password=pw"},
			wantErr: []string{`database.url (QUEUEBOX_DATABASE_URL) must start with jdbc:postgresql:// or jdbc:sqlserver:// (or be a native postgres:// or sqlserver:// URL), not "jdbc:mysql://db:3306/q?password=***"`}},
		{name: "url with a bad port", env: map[string]string{"QUEUEBOX_DATABASE_URL": "jdbc:postgresql://db:99999/q"},
			wantErr: []string{`database.url (QUEUEBOX_DATABASE_URL) has a port that is not a number from 1 to 65535 (a password that holds /, ?, ; or @ must be percent-encoded, or given in database.password)`}},
		{name: "native postgres url", env: map[string]string{"QUEUEBOX_DATABASE_URL": "postgres://db:5432/q?sslmode=require"}},
		{name: "several postgres hosts", env: map[string]string{"QUEUEBOX_DATABASE_URL": "jdbc:postgresql://h1:5432,h2:5433/q"}},
		{name: "sqlserver", env: map[string]string{"QUEUEBOX_DATABASE_TYPE": "sqlserver", "QUEUEBOX_DATABASE_URL": "jdbc:sqlserver://db:1433;databaseName=q;encrypt=true"}},
		{name: "claim mode lock on postgresql", yaml: "outbox:\n  claimMode: lock\n"},
		{name: "claim mode lease on sqlserver", yaml: "outbox:\n  claimMode: lease\n",
			env: map[string]string{"QUEUEBOX_DATABASE_TYPE": "sqlserver", "QUEUEBOX_DATABASE_URL": "jdbc:sqlserver://db:1433;databaseName=q;encrypt=true"}},
		{name: "claim mode lock on sqlserver", yaml: "outbox:\n  claimMode: lock\n",
			env:     map[string]string{"QUEUEBOX_DATABASE_TYPE": "sqlserver", "QUEUEBOX_DATABASE_URL": "jdbc:sqlserver://db:1433;databaseName=q;encrypt=true"},
			wantErr: []string{"outbox.claimMode (QUEUEBOX_OUTBOX_CLAIMMODE) is lock, which database.type sqlserver does not offer; use lease"}},
		{name: "claim mode lock with a pool of 2", yaml: "outbox:\n  claimMode: lock\n", env: map[string]string{"QUEUEBOX_DATABASE_POOLSIZE": "2"},
			wantErr: []string{"outbox.claimMode (QUEUEBOX_OUTBOX_CLAIMMODE) is lock, which holds a connection per claim and needs database.poolSize 3 or more, not 2"}},
		{name: "claim mode lock with a pool of 3", yaml: "outbox:\n  claimMode: lock\n", env: map[string]string{"QUEUEBOX_DATABASE_POOLSIZE": "3"}},
		{name: "claim mode unknown", env: map[string]string{"QUEUEBOX_OUTBOX_CLAIMMODE": "Lock"},
			wantErr: []string{`outbox.claimMode (QUEUEBOX_OUTBOX_CLAIMMODE) must be lease or lock, not "Lock"`}},
		{name: "username and password required", env: map[string]string{"QUEUEBOX_DATABASE_USERNAME": " ", "QUEUEBOX_DATABASE_PASSWORD": ""},
			wantErr: []string{"database.username (QUEUEBOX_DATABASE_USERNAME) is required", "database.password (QUEUEBOX_DATABASE_PASSWORD) is required"}},
		{name: "pool and timeouts", env: map[string]string{"QUEUEBOX_DATABASE_POOLSIZE": "0", "QUEUEBOX_DATABASE_CONNECTIONTIMEOUTMS": "-1", "QUEUEBOX_DATABASE_STARTUPTIMEOUTMS": "-2"},
			wantErr: []string{
				"database.poolSize (QUEUEBOX_DATABASE_POOLSIZE) must be above 0",
				"database.connectionTimeoutMs (QUEUEBOX_DATABASE_CONNECTIONTIMEOUTMS) must not be negative",
				"database.startupTimeoutMs (QUEUEBOX_DATABASE_STARTUPTIMEOUTMS) must not be negative",
			}},
		{name: "table names are SQL identifiers", env: map[string]string{"QUEUEBOX_DATABASE_MIGRATE": "false", "QUEUEBOX_DATABASE_OUTBOXTABLENAME": "1outbox", "QUEUEBOX_DATABASE_INBOXTABLENAME": "in-box"},
			wantErr: []string{
				`database.outboxTableName (QUEUEBOX_DATABASE_OUTBOXTABLENAME) must be a SQL identifier: a letter or _ first, then letters, digits and _, not "1outbox"`,
				`database.inboxTableName (QUEUEBOX_DATABASE_INBOXTABLENAME) must be a SQL identifier: a letter or _ first, then letters, digits and _, not "in-box"`,
			}},
		{name: "custom identifiers with migrate false", env: map[string]string{"QUEUEBOX_DATABASE_MIGRATE": "false", "QUEUEBOX_DATABASE_OUTBOXTABLENAME": "_qb_Outbox2", "QUEUEBOX_DATABASE_COLUMNMAPPING_INBOX_HEADERS": "hdrs"}},
		{name: "the two tables differ", env: map[string]string{"QUEUEBOX_DATABASE_MIGRATE": "false", "QUEUEBOX_DATABASE_OUTBOXTABLENAME": "events", "QUEUEBOX_DATABASE_INBOXTABLENAME": "Events"},
			wantErr: []string{"database.inboxTableName (QUEUEBOX_DATABASE_INBOXTABLENAME) must differ from database.outboxTableName (events)"}},
		{name: "column names are SQL identifiers", yaml: "database:\n  migrate: false\n  columnMapping:\n    outbox:\n      payload: pay load\n    inbox:\n      eventType: \"\"\n",
			wantErr: []string{
				`database.columnMapping.outbox.payload (QUEUEBOX_DATABASE_COLUMNMAPPING_OUTBOX_PAYLOAD) must be a SQL identifier: a letter or _ first, then letters, digits and _, not "pay load"`,
				`database.columnMapping.inbox.eventType (QUEUEBOX_DATABASE_COLUMNMAPPING_INBOX_EVENTTYPE) must be a SQL identifier: a letter or _ first, then letters, digits and _, not ""`,
			}},
		{name: "a column named twice", env: map[string]string{"QUEUEBOX_DATABASE_MIGRATE": "false", "QUEUEBOX_DATABASE_COLUMNMAPPING_OUTBOX_KEY": "topic"},
			wantErr: []string{"database.columnMapping.outbox.key (QUEUEBOX_DATABASE_COLUMNMAPPING_OUTBOX_KEY) names the column topic, which database.columnMapping.outbox.topic names too"}},
		{name: "custom names need migrate false", yaml: "database:\n  outboxTableName: qb_outbox\n  columnMapping:\n    outbox:\n      payload: body\n    inbox:\n      idempotencyKey: dedup_key\n",
			wantErr: []string{
				"database.outboxTableName (QUEUEBOX_DATABASE_OUTBOXTABLENAME) sets a custom name, so database.migrate (QUEUEBOX_DATABASE_MIGRATE) must be false: the bundled migrations create the default names only; apply your own schema first",
				"database.columnMapping.outbox.payload (QUEUEBOX_DATABASE_COLUMNMAPPING_OUTBOX_PAYLOAD) sets a custom name, so database.migrate (QUEUEBOX_DATABASE_MIGRATE) must be false: the bundled migrations create the default names only; apply your own schema first",
				"database.columnMapping.inbox.idempotencyKey (QUEUEBOX_DATABASE_COLUMNMAPPING_INBOX_IDEMPOTENCYKEY) sets a custom name, so database.migrate (QUEUEBOX_DATABASE_MIGRATE) must be false: the bundled migrations create the default names only; apply your own schema first",
			}},
		{name: "default names written out keep migrate", yaml: "database:\n  outboxTableName: outbox\n  columnMapping:\n    outbox:\n      aggregateType: aggregate_type\n"},

		// outbox
		{name: "outbox numbers", env: map[string]string{
			"QUEUEBOX_OUTBOX_POLLINTERVALMS": "0", "QUEUEBOX_OUTBOX_BATCHSIZE": "0", "QUEUEBOX_OUTBOX_CONCURRENCY": "-1",
			"QUEUEBOX_OUTBOX_RETRYBASEDELAYMS": "-5", "QUEUEBOX_OUTBOX_MAXATTEMPTS": "0", "QUEUEBOX_OUTBOX_CLAIMTIMEOUTMS": "0",
			"QUEUEBOX_OUTBOX_PENDINGGAUGEINTERVALMS": "-1", "QUEUEBOX_OUTBOX_SHUTDOWNTIMEOUTMS": "-1",
		}, wantErr: []string{
			"outbox.pollIntervalMs (QUEUEBOX_OUTBOX_POLLINTERVALMS) must be above 0",
			"outbox.batchSize (QUEUEBOX_OUTBOX_BATCHSIZE) must be above 0",
			"outbox.concurrency (QUEUEBOX_OUTBOX_CONCURRENCY) must be above 0",
			"outbox.retryBaseDelayMs (QUEUEBOX_OUTBOX_RETRYBASEDELAYMS) must not be negative",
			"outbox.maxAttempts (QUEUEBOX_OUTBOX_MAXATTEMPTS) must be above 0",
			"outbox.claimTimeoutMs (QUEUEBOX_OUTBOX_CLAIMTIMEOUTMS) must be above 0",
			"outbox.pendingGaugeIntervalMs (QUEUEBOX_OUTBOX_PENDINGGAUGEINTERVALMS) must not be negative",
			"outbox.shutdownTimeoutMs (QUEUEBOX_OUTBOX_SHUTDOWNTIMEOUTMS) must not be negative",
			"inbox.relay.maxAttempts (QUEUEBOX_INBOX_RELAY_MAXATTEMPTS) must be above 0",
		}},
		{name: "capture enabled with polling and no state directory", yaml: "outbox:\n  capture:\n    enabled: true\n",
			wantErr: []string{
				"outbox.capture.enabled (QUEUEBOX_OUTBOX_CAPTURE_ENABLED) is true, which needs outbox.capture.mode postgres-logical or sqlserver-cdc, not polling",
				"outbox.capture.stateDirectory (QUEUEBOX_OUTBOX_CAPTURE_STATEDIRECTORY) is required when outbox.capture.enabled is true",
			}},
		{name: "postgres-logical on sql server", env: map[string]string{
			"QUEUEBOX_DATABASE_TYPE": "sqlserver", "QUEUEBOX_DATABASE_URL": "jdbc:sqlserver://db;databaseName=q", "QUEUEBOX_OUTBOX_CAPTURE_MODE": "postgres-logical",
		}, wantErr: []string{"outbox.capture.mode (QUEUEBOX_OUTBOX_CAPTURE_MODE) postgres-logical needs database.type postgresql, not sqlserver"}},
		{name: "sqlserver-cdc on postgresql", env: map[string]string{"QUEUEBOX_OUTBOX_CAPTURE_MODE": "sqlserver-cdc"},
			wantErr: []string{"outbox.capture.mode (QUEUEBOX_OUTBOX_CAPTURE_MODE) sqlserver-cdc needs database.type sqlserver, not postgresql"}},
		{name: "unknown capture mode", env: map[string]string{"QUEUEBOX_OUTBOX_CAPTURE_MODE": "logical"},
			wantErr: []string{`outbox.capture.mode (QUEUEBOX_OUTBOX_CAPTURE_MODE) must be polling, postgres-logical or sqlserver-cdc, not "logical"`}},
		{name: "capture names", yaml: "outbox:\n  capture:\n    identity: Queuebox\n    slot: 1slot\n    publication: p" + strings.Repeat("x", 63) + "\n    schema: bad-schema\n",
			wantErr: []string{
				`outbox.capture.identity (QUEUEBOX_OUTBOX_CAPTURE_IDENTITY) must be a lower case letter, then lower case letters, digits and _, at most 63 characters, not "Queuebox"`,
				`outbox.capture.slot (QUEUEBOX_OUTBOX_CAPTURE_SLOT) must be a lower case letter, then lower case letters, digits and _, at most 63 characters, not "1slot"`,
				`outbox.capture.publication (QUEUEBOX_OUTBOX_CAPTURE_PUBLICATION) must be a lower case letter, then lower case letters, digits and _, at most 63 characters, not "p` + strings.Repeat("x", 63) + `"`,
				`outbox.capture.schema (QUEUEBOX_OUTBOX_CAPTURE_SCHEMA) must be a SQL identifier: a letter or _ first, then letters, digits and _, not "bad-schema"`,
			}},
		{name: "capture name of 63 characters", env: map[string]string{"QUEUEBOX_OUTBOX_CAPTURE_SLOT": "s" + strings.Repeat("1", 62)}},
		{name: "capture intervals and port", env: map[string]string{"QUEUEBOX_OUTBOX_CAPTURE_RECONCILIATIONINTERVALMS": "0", "QUEUEBOX_OUTBOX_CAPTURE_CONNECTION_PORT": "70000"},
			wantErr: []string{
				"outbox.capture.reconciliationIntervalMs (QUEUEBOX_OUTBOX_CAPTURE_RECONCILIATIONINTERVALMS) must be above 0",
				"outbox.capture.connection.port (QUEUEBOX_OUTBOX_CAPTURE_CONNECTION_PORT) must be from 1 to 65535, not 70000",
			}},
		{name: "capture on several hosts needs a hostname", env: map[string]string{
			"QUEUEBOX_DATABASE_URL": "jdbc:postgresql://h1:5432,h2:5432/q", "QUEUEBOX_OUTBOX_CAPTURE_MODE": "postgres-logical",
			"QUEUEBOX_OUTBOX_CAPTURE_ENABLED": "true", "QUEUEBOX_OUTBOX_CAPTURE_STATEDIRECTORY": "/var/lib/queuebox/capture",
		}, wantErr: []string{"outbox.capture.connection.hostname (QUEUEBOX_OUTBOX_CAPTURE_CONNECTION_HOSTNAME) is required when outbox.capture.enabled is true and database.url names more than one host"}},
		{name: "capture on several hosts with a hostname", env: map[string]string{
			"QUEUEBOX_DATABASE_URL": "jdbc:postgresql://h1:5432,h2:5432/q", "QUEUEBOX_OUTBOX_CAPTURE_MODE": "postgres-logical",
			"QUEUEBOX_OUTBOX_CAPTURE_ENABLED": "true", "QUEUEBOX_OUTBOX_CAPTURE_STATEDIRECTORY": "/var/lib/queuebox/capture",
			"QUEUEBOX_OUTBOX_CAPTURE_CONNECTION_HOSTNAME": "h1",
		}},

		// inbox, http
		{name: "inbox", env: map[string]string{
			"QUEUEBOX_INBOX_BASEPATH": "inbox", "QUEUEBOX_INBOX_MAXBODYBYTES": "0", "QUEUEBOX_INBOX_RELAY_POLLINTERVALMS": "0",
			"QUEUEBOX_INBOX_RELAY_BATCHSIZE": "0", "QUEUEBOX_INBOX_RELAY_CLAIMTIMEOUTMS": "0", "QUEUEBOX_INBOX_RELAY_MAXATTEMPTS": "0",
			"QUEUEBOX_HTTP_MAXERRORBODYBYTES": "-1",
		}, wantErr: []string{
			`inbox.basePath (QUEUEBOX_INBOX_BASEPATH) must start with /, not "inbox"`,
			"inbox.maxBodyBytes (QUEUEBOX_INBOX_MAXBODYBYTES) must be above 0",
			"inbox.relay.pollIntervalMs (QUEUEBOX_INBOX_RELAY_POLLINTERVALMS) must be above 0",
			"inbox.relay.batchSize (QUEUEBOX_INBOX_RELAY_BATCHSIZE) must be above 0",
			"inbox.relay.claimTimeoutMs (QUEUEBOX_INBOX_RELAY_CLAIMTIMEOUTMS) must be above 0",
			"inbox.relay.maxAttempts (QUEUEBOX_INBOX_RELAY_MAXATTEMPTS) must be above 0",
			"http.maxErrorBodyBytes (QUEUEBOX_HTTP_MAXERRORBODYBYTES) must not be negative",
		}},

		// admin
		{name: "admin enabled without auth", env: map[string]string{"QUEUEBOX_ADMIN_ENABLED": "true"},
			wantErr: []string{"admin.auth (QUEUEBOX_ADMIN_AUTH) is required when admin.enabled is true: set a bearer, api-key or hmac block, or admin.insecure: true (QUEUEBOX_ADMIN_INSECURE) for a local test only"}},
		{name: "admin enabled and insecure", env: map[string]string{"QUEUEBOX_ADMIN_ENABLED": "true", "QUEUEBOX_ADMIN_INSECURE": "true"}},
		{name: "admin limits", env: map[string]string{"QUEUEBOX_ADMIN_MAXTRANSFORMTIMEOUTMS": "0", "QUEUEBOX_ADMIN_MAXPAYLOADBYTES": "0"},
			wantErr: []string{
				"admin.maxTransformTimeoutMs (QUEUEBOX_ADMIN_MAXTRANSFORMTIMEOUTMS) must be above 0",
				"admin.maxPayloadBytes (QUEUEBOX_ADMIN_MAXPAYLOADBYTES) must be above 0",
			}},
		{name: "admin auth of no kind", yaml: "admin:\n  enabled: true\n  auth:\n    type: bearer\n",
			wantErr: []string{"admin.auth (QUEUEBOX_ADMIN_AUTH) sets the required keys of no auth kind: bearer needs token; api-key needs key; hmac needs secret (/etc/queuebox/queuebox.yml line 7)"}},
		{name: "admin auth by variables", env: map[string]string{"QUEUEBOX_ADMIN_ENABLED": "true", "QUEUEBOX_ADMIN_AUTH_KEY": "k", "QUEUEBOX_ADMIN_AUTH_HEADERNAME": "X-Admin-Key"}},
		{name: "empty credentials", yaml: "admin:\n  auth:\n    token: \"\"\nsources:\n  a:\n    path: /a\n    idempotencyKeyPath: $.id\n    topic: a\n    auth:\n      key: \"\"\n      headerName: \"\"\n",
			wantErr: []string{
				"admin.auth.token (QUEUEBOX_ADMIN_AUTH_TOKEN) is required",
				"sources.a.auth.key (QUEUEBOX_SOURCES_A_AUTH_KEY) is required",
				"sources.a.auth.headerName (QUEUEBOX_SOURCES_A_AUTH_HEADERNAME) is required",
			}},
		{name: "hmac rules", yaml: "admin:\n  auth:\n    secret: s\n    algorithm: HmacSHA1\n    timestampTolerance: 0\n    signaturePayloadFormat: TIMESTAMP_DOT_BODY\n",
			wantErr: []string{
				`admin.auth.algorithm (QUEUEBOX_ADMIN_AUTH_ALGORITHM) must be HmacSHA256 or HmacSHA512, in this letter case, not "HmacSHA1"`,
				"admin.auth.timestampTolerance (QUEUEBOX_ADMIN_AUTH_TIMESTAMPTOLERANCE) must be above 0",
				"admin.auth.signaturePayloadFormat (QUEUEBOX_ADMIN_AUTH_SIGNATUREPAYLOADFORMAT) is TIMESTAMP_DOT_BODY, which needs admin.auth.timestampHeader",
			}},
		{name: "hmac algorithm letter case", env: map[string]string{"QUEUEBOX_ADMIN_AUTH_SECRET": "s", "QUEUEBOX_ADMIN_AUTH_ALGORITHM": "hmacsha512"},
			wantErr: []string{`admin.auth.algorithm (QUEUEBOX_ADMIN_AUTH_ALGORITHM) must be HmacSHA256 or HmacSHA512, in this letter case, not "hmacsha512"`}},
		{name: "hmac timestamp-dot-body without header", env: map[string]string{"QUEUEBOX_ADMIN_AUTH_SECRET": "s", "QUEUEBOX_ADMIN_AUTH_SIGNATUREPAYLOADFORMAT": "timestamp-dot-body"},
			wantErr: []string{"admin.auth.signaturePayloadFormat (QUEUEBOX_ADMIN_AUTH_SIGNATUREPAYLOADFORMAT) is TIMESTAMP_DOT_BODY, which needs admin.auth.timestampHeader"}},
		{name: "hmac payload format letter case", env: map[string]string{"QUEUEBOX_ADMIN_AUTH_SECRET": "s", "QUEUEBOX_ADMIN_AUTH_SIGNATUREPAYLOADFORMAT": "Body"},
			wantErr: []string{`admin.auth.signaturePayloadFormat (QUEUEBOX_ADMIN_AUTH_SIGNATUREPAYLOADFORMAT) must be BODY, TIMESTAMP_DOT_BODY, body or timestamp-dot-body, not "Body"`}},
		{name: "hmac body with a timestamp header", env: map[string]string{"QUEUEBOX_ADMIN_AUTH_SECRET": "s", "QUEUEBOX_ADMIN_AUTH_TIMESTAMPHEADER": "X-Ts", "QUEUEBOX_ADMIN_AUTH_SIGNATUREPAYLOADFORMAT": "body", "QUEUEBOX_ADMIN_AUTH_ALGORITHM": "HmacSHA512"}},

		// destinations
		{name: "destination of no kind", yaml: "destinations:\n  x:\n    type: rabbitmq\n    url: amqp://rabbitmq\n",
			wantErr: []string{"destinations.x (QUEUEBOX_DESTINATIONS_X) sets the required keys of no destination kind: http needs baseUrl; rabbitmq needs url and exchange; kafka needs bootstrapServers and topic; nats needs servers and subject (/etc/queuebox/queuebox.yml line 6)"}},
		{name: "empty destination", yaml: "destinations:\n  x:\n",
			wantErr: []string{"destinations.x (QUEUEBOX_DESTINATIONS_X) sets the required keys of no destination kind: http needs baseUrl; rabbitmq needs url and exchange; kafka needs bootstrapServers and topic; nats needs servers and subject (/etc/queuebox/queuebox.yml line 6)"}},
		{name: "base url rules", yaml: `destinations:
  ftp:
    baseUrl: ftp://files.example.com
  relative:
    baseUrl: /events
  nohost:
    baseUrl: "https:///events"
  userinfo:
    baseUrl: https://user:pw@api.example.com
  dots:
    baseUrl: https://api.example.com/a/../b
  path:
    baseUrl: https://api.example.com
    path: /a/./b
  encoded:
    baseUrl: https://api.example.com
    path: /%2e%2e/admin
  blank:
    baseUrl: ""
    timeoutMs: 0
`, wantErr: []string{
			"destinations.blank.baseUrl (QUEUEBOX_DESTINATIONS_BLANK_BASEURL) is required",
			"destinations.blank.timeoutMs (QUEUEBOX_DESTINATIONS_BLANK_TIMEOUTMS) must be above 0",
			`destinations.dots.baseUrl (QUEUEBOX_DESTINATIONS_DOTS_BASEURL) must not hold a . or a .. path segment, not "https://api.example.com/a/../b"`,
			`destinations.encoded.path (QUEUEBOX_DESTINATIONS_ENCODED_PATH) must not hold a . or a .. segment, not "/%2e%2e/admin"`,
			`destinations.ftp.baseUrl (QUEUEBOX_DESTINATIONS_FTP_BASEURL) must be an absolute http or https URL with a host, not "ftp://files.example.com"`,
			`destinations.nohost.baseUrl (QUEUEBOX_DESTINATIONS_NOHOST_BASEURL) must be an absolute http or https URL with a host, not "https:///events"`,
			`destinations.path.path (QUEUEBOX_DESTINATIONS_PATH_PATH) must not hold a . or a .. segment, not "/a/./b"`,
			`destinations.relative.baseUrl (QUEUEBOX_DESTINATIONS_RELATIVE_BASEURL) must be an absolute http or https URL with a host, not "/events"`,
			"destinations.userinfo.baseUrl (QUEUEBOX_DESTINATIONS_USERINFO_BASEURL) must not hold a user name or a password",
		}},
		{name: "destination auth", yaml: `destinations:
  oauth:
    baseUrl: https://api.example.com
    auth:
      clientId: " "
      clientSecret: ""
      tokenUrl: http://user@auth.example.com/token
  relative:
    baseUrl: https://api.example.com
    auth:
      clientId: c
      clientSecret: s
      tokenUrl: auth.example.com/token
  basic:
    baseUrl: https://api.example.com
    auth:
      username: ""
      password: ""
  header:
    baseUrl: https://api.example.com
    auth:
      headerName: ""
      headerValue: ""
  none:
    baseUrl: https://api.example.com
    auth:
      type: oauth2
      clientId: c
`, wantErr: []string{
			"destinations.none.auth (QUEUEBOX_DESTINATIONS_NONE_AUTH) sets the required keys of no auth kind: oauth2 needs clientId, clientSecret and tokenUrl; basic needs username and password; header needs headerValue (/etc/queuebox/queuebox.yml line 30)",
			"destinations.basic.auth.username (QUEUEBOX_DESTINATIONS_BASIC_AUTH_USERNAME) is required",
			"destinations.basic.auth.password (QUEUEBOX_DESTINATIONS_BASIC_AUTH_PASSWORD) is required",
			"destinations.header.auth.headerName (QUEUEBOX_DESTINATIONS_HEADER_AUTH_HEADERNAME) is required",
			"destinations.header.auth.headerValue (QUEUEBOX_DESTINATIONS_HEADER_AUTH_HEADERVALUE) is required",
			"destinations.oauth.auth.clientId (QUEUEBOX_DESTINATIONS_OAUTH_AUTH_CLIENTID) is required",
			"destinations.oauth.auth.clientSecret (QUEUEBOX_DESTINATIONS_OAUTH_AUTH_CLIENTSECRET) is required",
			"destinations.oauth.auth.tokenUrl (QUEUEBOX_DESTINATIONS_OAUTH_AUTH_TOKENURL) must not hold a user name or a password",
			`destinations.relative.auth.tokenUrl (QUEUEBOX_DESTINATIONS_RELATIVE_AUTH_TOKENURL) must be an absolute http or https URL with a host, not "auth.example.com/token"`,
		}},
		{name: "rabbitmq destination", yaml: `destinations:
  events:
    url: http://rabbitmq
    exchange: "events.{{ eventType }}.{{source}}"
    exchangeFrom: aggregateType
    exchangeType: headers
    deliveryMode: durable
`, wantErr: []string{
			`destinations.events.url (QUEUEBOX_DESTINATIONS_EVENTS_URL) must be an amqp:// or amqps:// URI with a host, not "http://rabbitmq"`,
			"destinations.events.exchange (QUEUEBOX_DESTINATIONS_EVENTS_EXCHANGE) uses the placeholder {{ eventType }}, which an address template does not know: use {{ topic }}, {{ key }}, {{ aggregateType }}, {{ payload.<field> }} or {{ data.<field> }}",
			"destinations.events.exchange (QUEUEBOX_DESTINATIONS_EVENTS_EXCHANGE) uses the placeholder {{source}}, which an address template does not know: use {{ topic }}, {{ key }}, {{ aggregateType }}, {{ payload.<field> }} or {{ data.<field> }}",
			`destinations.events.exchangeFrom (QUEUEBOX_DESTINATIONS_EVENTS_EXCHANGEFROM) must be aggregate_type, topic or key, not "aggregateType"`,
			`destinations.events.exchangeType (QUEUEBOX_DESTINATIONS_EVENTS_EXCHANGETYPE) must be topic, direct or fanout, not "headers"`,
			`destinations.events.deliveryMode (QUEUEBOX_DESTINATIONS_EVENTS_DELIVERYMODE) must be persistent or transient, not "durable"`,
		}},
		{name: "address templates that load", yaml: `destinations:
  a:
    url: amqps://user:pw@rabbitmq:5671/vhost
    exchange: "{{topic}}.{{ key }}.{{ aggregateType }}.{{ payload.region }}.{{data.customer.id}}"
    exchangeFrom: aggregate_type
    exchangeType: FANOUT
    deliveryMode: Transient
  b:
    bootstrapServers: k:9092
    topic: "{{ payload.a.b.c }}"
    topicFrom: key
  c:
    servers: nats://n:4222
    subject: literal.subject
    subjectFrom: topic
`},
		{name: "payload alone is no field", yaml: "destinations:\n  a:\n    servers: nats://n:4222\n    subject: \"{{ payload }}.{{ data. }}\"\n",
			wantErr: []string{
				"destinations.a.subject (QUEUEBOX_DESTINATIONS_A_SUBJECT) uses the placeholder {{ payload }}, which an address template does not know: use {{ topic }}, {{ key }}, {{ aggregateType }}, {{ payload.<field> }} or {{ data.<field> }}",
				"destinations.a.subject (QUEUEBOX_DESTINATIONS_A_SUBJECT) uses the placeholder {{ data. }}, which an address template does not know: use {{ topic }}, {{ key }}, {{ aggregateType }}, {{ payload.<field> }} or {{ data.<field> }}",
			}},
		{name: "kafka destination", yaml: `destinations:
  k:
    bootstrapServers: " "
    topic: "t.{{ source }}"
    topicFrom: Topic
    timeoutMs: 1999
    securityProtocol: SASL_SSL
  tls:
    bootstrapServers: k:9092
    topic: t
    securityProtocol: TLS
`, wantErr: []string{
			"destinations.k.bootstrapServers (QUEUEBOX_DESTINATIONS_K_BOOTSTRAPSERVERS) is required",
			"destinations.k.topic (QUEUEBOX_DESTINATIONS_K_TOPIC) uses the placeholder {{ source }}, which an address template does not know: use {{ topic }}, {{ key }}, {{ aggregateType }}, {{ payload.<field> }} or {{ data.<field> }}",
			`destinations.k.topicFrom (QUEUEBOX_DESTINATIONS_K_TOPICFROM) must be aggregate_type, topic or key, not "Topic"`,
			"destinations.k.timeoutMs (QUEUEBOX_DESTINATIONS_K_TIMEOUTMS) must be at least 2000, not 1999",
			"destinations.k.saslMechanism (QUEUEBOX_DESTINATIONS_K_SASLMECHANISM) is required by securityProtocol SASL_SSL",
			"destinations.k.saslUsername (QUEUEBOX_DESTINATIONS_K_SASLUSERNAME) is required by securityProtocol SASL_SSL",
			"destinations.k.saslPassword (QUEUEBOX_DESTINATIONS_K_SASLPASSWORD) is required by securityProtocol SASL_SSL",
			`destinations.tls.securityProtocol (QUEUEBOX_DESTINATIONS_TLS_SECURITYPROTOCOL) must be PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL, not "TLS"`,
		}},
		{name: "kafka sasl", yaml: "destinations:\n  k:\n    bootstrapServers: k:9092\n    topic: t\n    timeoutMs: 2000\n    securityProtocol: sasl_plaintext\n    saslMechanism: SCRAM-SHA-512\n    saslUsername: u\n    saslPassword: p\n"},
		{name: "nats destination", yaml: `destinations:
  a:
    servers: nats://n:4222
    subject: "{{ key }}.{{ nope }}"
    subjectFrom: id
    timeoutMs: 0
    username: u
  b:
    servers: nats://n:4222
    subject: s
    password: p
  c:
    servers: nats://n:4222
    subject: s
    username: u
    password: p
    token: t
  d:
    servers: nats://n:4222
    subject: s
    token: t
`, wantErr: []string{
			"destinations.a.subject (QUEUEBOX_DESTINATIONS_A_SUBJECT) uses the placeholder {{ nope }}, which an address template does not know: use {{ topic }}, {{ key }}, {{ aggregateType }}, {{ payload.<field> }} or {{ data.<field> }}",
			`destinations.a.subjectFrom (QUEUEBOX_DESTINATIONS_A_SUBJECTFROM) must be aggregate_type, topic or key, not "id"`,
			"destinations.a.timeoutMs (QUEUEBOX_DESTINATIONS_A_TIMEOUTMS) must be above 0",
			"destinations.a.password (QUEUEBOX_DESTINATIONS_A_PASSWORD) is required when destinations.a.username is set",
			"destinations.b.username (QUEUEBOX_DESTINATIONS_B_USERNAME) is required when destinations.b.password is set",
			"destinations.c.token (QUEUEBOX_DESTINATIONS_C_TOKEN) must not be set together with destinations.c.username: set a token or a user name, not both",
		}},
		{name: "header without a name", yaml: "destinations:\n  a:\n    baseUrl: https://a.example.com\n    headers:\n      \"\": x\n",
			wantErr: []string{"destinations.a.headers (QUEUEBOX_DESTINATIONS_A_HEADERS) has a header without a name"}},
		{name: "static headers that the destination cannot send", yaml: "destinations:\n" +
			"  a:\n    servers: nats://n:4222\n    subject: s\n    headers:\n      \"X Team\": x\n      x-lf: \"a\\nb\"\n      x-ctl: \"a\\u0001b\"\n" +
			"  b:\n    url: amqp://r\n    exchange: e\n    headers:\n      " + strings.Repeat("n", 256) + ": x\n      \"with space\": x\n" +
			"  c:\n    baseUrl: https://c.example.com\n    headers:\n      \"a:b\": x\n      \"x(y)\": x\n      x-ctl: \"a\\u0001b\"\n" +
			"  d:\n    bootstrapServers: k:9092\n    topic: t\n    headers:\n      \"any name\": \"a\\u0001b\"\n",
			wantErr: []string{
				"destinations.a.headers (QUEUEBOX_DESTINATIONS_A_HEADERS) has the header \"X Team\", which a destination of type nats cannot send: its name is not a header name (one or more letters, digits and !#$%&'*+-.^_`|~)",
				"destinations.a.headers (QUEUEBOX_DESTINATIONS_A_HEADERS) has the header \"x-lf\", which a destination of type nats cannot send: its value holds a CR or LF character, which a NATS header value cannot hold",
				"destinations.b.headers (QUEUEBOX_DESTINATIONS_B_HEADERS) has the header \"" + strings.Repeat("n", 256) + "\", which a destination of type rabbitmq cannot send: its name is longer than 255 bytes, the most that an AMQP header name holds",
				"destinations.c.headers (QUEUEBOX_DESTINATIONS_C_HEADERS) has the header \"a:b\", which a destination of type http cannot send: its name is not a header name (one or more letters, digits and !#$%&'*+-.^_`|~)",
				"destinations.c.headers (QUEUEBOX_DESTINATIONS_C_HEADERS) has the header \"x(y)\", which a destination of type http cannot send: its name is not a header name (one or more letters, digits and !#$%&'*+-.^_`|~)",
				"destinations.c.headers (QUEUEBOX_DESTINATIONS_C_HEADERS) has the header \"x-ctl\", which a destination of type http cannot send: its value holds a control character, which an HTTP header value cannot hold (only tab is allowed)",
			}},
		{name: "transform rules", yaml: `destinations:
  a:
    baseUrl: https://a.example.com
    transform:
      onError: fail
      timeoutMs: 0
      maxDepth: 0
routes:
  - topicPattern: "**"
    destination: a
    transform:
      expression: " "
      onError: Retry
sources:
  s:
    path: /s
    idempotencyKeyPath: $.id
    topic: s
    transform:
      expression: $
      onError: SKIP
`, wantErr: []string{
			"destinations.a.transform.expression (QUEUEBOX_DESTINATIONS_A_TRANSFORM_EXPRESSION) is required",
			"destinations.a.transform.timeoutMs (QUEUEBOX_DESTINATIONS_A_TRANSFORM_TIMEOUTMS) must be above 0",
			"destinations.a.transform.maxDepth (QUEUEBOX_DESTINATIONS_A_TRANSFORM_MAXDEPTH) must be above 0",
			`destinations.a.transform.onError (QUEUEBOX_DESTINATIONS_A_TRANSFORM_ONERROR) must be Fail, Skip or Dead, in this letter case, not "fail"`,
			"routes[0].transform.expression (QUEUEBOX_ROUTES_0_TRANSFORM_EXPRESSION) is required",
			`routes[0].transform.onError (QUEUEBOX_ROUTES_0_TRANSFORM_ONERROR) must be Fail, Skip or Dead, in this letter case, not "Retry"`,
			`sources.s.transform.onError (QUEUEBOX_SOURCES_S_TRANSFORM_ONERROR) must be Fail, Skip or Dead, in this letter case, not "SKIP"`,
		}},

		// routes
		{name: "route rules", yaml: `destinations:
  a:
    baseUrl: https://a.example.com
routes:
  - topicPattern: "order.***"
    destination: nope
  - destination: a
  - topicPattern: "**"
`, wantErr: []string{
			`routes[0].topicPattern (QUEUEBOX_ROUTES_0_TOPICPATTERN) must not contain ***, not "order.***"`,
			`routes[0].destination (QUEUEBOX_ROUTES_0_DESTINATION) names the destination "nope", which destinations does not define`,
			"routes[1].topicPattern (QUEUEBOX_ROUTES_1_TOPICPATTERN) is required",
			"routes[2].destination (QUEUEBOX_ROUTES_2_DESTINATION) is required",
		}},

		// sources
		{name: "source of no kind", yaml: "sources:\n  x:\n    type: http\n    path: /x\n",
			wantErr: []string{"sources.x (QUEUEBOX_SOURCES_X) sets the required keys of no source kind: http needs path and idempotencyKeyPath; rabbitmq needs queueName and connectionUrl; kafka needs bootstrapServers, topics and groupId; nats needs servers, stream and durable (/etc/queuebox/queuebox.yml line 6)"}},
		{name: "http push source without an event type path", yaml: "sources:\n  a:\n    path: /a\n    idempotencyKeyPath: $.id\n  b:\n    path: /b\n    idempotencyKeyPath: $.id\n    topic: \"b.{{eventType}}\"\n",
			wantErr: []string{
				`sources.a.topic (QUEUEBOX_SOURCES_A_TOPIC) reads {{ eventType }}, but sources.a.eventTypePath is not set: an http push source needs it (the topic "{{ eventType }}" renders empty and the relay marks the row dead)`,
				`sources.b.topic (QUEUEBOX_SOURCES_B_TOPIC) reads {{ eventType }}, but sources.b.eventTypePath is not set: an http push source needs it (the topic "b.{{eventType}}" renders empty and the relay marks the row dead)`,
			}},
		{name: "http sources that need no event type", yaml: "sources:\n  a:\n    path: /a\n    idempotencyKeyPath: $.id\n    topic: orders\n  b:\n    path: /b\n    idempotencyKeyPath: $.id\n    consumption: PULL\n"},
		{name: "broker push source without an event type", yaml: `sources:
  q:
    queueName: q
    connectionUrl: amqp://rabbitmq
    topic: "{{ eventType }}"
  k:
    bootstrapServers: k:9092
    topics: [a]
    groupId: g
    topic: "x.{{ eventType }}"
    eventTypeFromHeader: true
  n:
    servers: nats://n:4222
    stream: S
    durable: d
    topic: "{{ eventType }}"
    eventTypePath: $.type
`, wantErr: []string{
			`sources.q.topic (QUEUEBOX_SOURCES_Q_TOPIC) reads {{ eventType }}, but neither sources.q.eventTypePath nor sources.q.eventTypeFromHeader: true is set (the topic "{{ eventType }}" renders empty and the relay marks the row dead)`,
		}},
		{name: "unsupported placeholders in a source topic", yaml: `sources:
  a:
    path: /a
    idempotencyKeyPath: $.id
    eventTypePath: $.type
    topic: "orders.{{ payload.type }}"
  q:
    queueName: q
    connectionUrl: amqp://rabbitmq
    topic: "{{source }}.{{ key }}.{{ key }}"
  ok:
    path: /ok
    idempotencyKeyPath: $.id
    eventTypePath: $.type
    topic: "{{source}}.{{ eventType }}.{{eventType}}.{{ source }} {not a placeholder}"
`, wantErr: []string{
			`sources.a.topic (QUEUEBOX_SOURCES_A_TOPIC) is "orders.{{ payload.type }}", which reads {{ payload.type }}: a source topic reads only {{ source }} and {{ eventType }} (also written {{source}} and {{eventType}}); any other placeholder would stay as text in every topic, and no route would match the rows`,
			`sources.q.topic (QUEUEBOX_SOURCES_Q_TOPIC) is "{{source }}.{{ key }}.{{ key }}", which reads {{source }}, {{ key }}: a source topic reads only {{ source }} and {{ eventType }} (also written {{source}} and {{eventType}}); any other placeholder would stay as text in every topic, and no route would match the rows`,
		}},
		{name: "blank topic on a push source", yaml: "sources:\n  a:\n    path: /a\n    idempotencyKeyPath: $.id\n    topic: \" \"\n  b:\n    path: /b\n    idempotencyKeyPath: $.id\n    topic: \"\"\n    consumption: pull\n",
			wantErr: []string{"sources.a.topic (QUEUEBOX_SOURCES_A_TOPIC) must not be blank on a push source: the relay would mark every row dead"}},
		{name: "consumption", yaml: "sources:\n  a:\n    path: /a\n    idempotencyKeyPath: $.id\n    consumption: poll\n",
			wantErr: []string{`sources.a.consumption (QUEUEBOX_SOURCES_A_CONSUMPTION) must be push or pull, not "poll"`}},
		{name: "indefinite json paths", yaml: `sources:
  a:
    path: /a
    idempotencyKeyPath: $..id
    aggregateIdPath: $.items[*].id
    eventTypePath: "$[?(@.type)]"
  b:
    path: /b
    idempotencyKeyPath: "$['a','b']"
    aggregateIdPath: id
    eventTypePath: $.items[0:2]
    topic: b
  c:
    path: /c
    idempotencyKeyPath: "$['a-b'][0].c[-1]"
    aggregateIdPath: '$["x.y"].z'
    eventTypePath: $
`, wantErr: []string{
			`sources.a.idempotencyKeyPath (QUEUEBOX_SOURCES_A_IDEMPOTENCYKEYPATH) must be a definite JSONPath: $ followed by .name, ['name'] or [index] steps, not "$..id"`,
			`sources.a.aggregateIdPath (QUEUEBOX_SOURCES_A_AGGREGATEIDPATH) must be a definite JSONPath: $ followed by .name, ['name'] or [index] steps, not "$.items[*].id"`,
			`sources.a.eventTypePath (QUEUEBOX_SOURCES_A_EVENTTYPEPATH) must be a definite JSONPath: $ followed by .name, ['name'] or [index] steps, not "$[?(@.type)]"`,
			`sources.b.idempotencyKeyPath (QUEUEBOX_SOURCES_B_IDEMPOTENCYKEYPATH) must be a definite JSONPath: $ followed by .name, ['name'] or [index] steps, not "$['a','b']"`,
			`sources.b.aggregateIdPath (QUEUEBOX_SOURCES_B_AGGREGATEIDPATH) must be a definite JSONPath: $ followed by .name, ['name'] or [index] steps, not "id"`,
			`sources.b.eventTypePath (QUEUEBOX_SOURCES_B_EVENTTYPEPATH) must be a definite JSONPath: $ followed by .name, ['name'] or [index] steps, not "$.items[0:2]"`,
		}},
		{name: "http source paths", yaml: `sources:
  a:
    path: stripe
    idempotencyKeyPath: " "
    topic: a
  b:
    path: /orders
    idempotencyKeyPath: $.id
    topic: b
  c:
    path: /orders
    idempotencyKeyPath: $.id
    topic: c
`, wantErr: []string{
			`sources.a.idempotencyKeyPath (QUEUEBOX_SOURCES_A_IDEMPOTENCYKEYPATH) is required`,
			`sources.a.path (QUEUEBOX_SOURCES_A_PATH) must start with /, not "stripe"`,
			`sources.c.path (QUEUEBOX_SOURCES_C_PATH) is "/orders", which source b answers already`,
		}},
		{name: "rate limit", yaml: "sources:\n  a:\n    path: /a\n    idempotencyKeyPath: $.id\n    topic: a\n    rateLimit:\n      requestsPerMinute: 0\n  b:\n    path: /b\n    idempotencyKeyPath: $.id\n    topic: b\n    rateLimit: {}\n",
			wantErr: []string{
				"sources.a.rateLimit.requestsPerMinute (QUEUEBOX_SOURCES_A_RATELIMIT_REQUESTSPERMINUTE) must be above 0",
				"sources.b.rateLimit.requestsPerMinute (QUEUEBOX_SOURCES_B_RATELIMIT_REQUESTSPERMINUTE) must be above 0",
			}},
		{name: "filter rules", yaml: `sources:
  a:
    path: /a
    idempotencyKeyPath: $.id
    topic: a
    filter:
      require:
        - header: x-one
        - header: x-two
          equals: a
          in: [a]
        - header: x-three
          in: []
        - equals: x
      exclude:
        - header: x-four
          exists: false
        - header: x-five
          matches: "eu.*"
`, wantErr: []string{
			"sources.a.filter.require[0] (QUEUEBOX_SOURCES_A_FILTER_REQUIRE_0) sets no matcher: set exactly one of equals, in, matches and exists",
			"sources.a.filter.require[1] (QUEUEBOX_SOURCES_A_FILTER_REQUIRE_1) sets equals and in: set exactly one of equals, in, matches and exists",
			"sources.a.filter.require[2].in (QUEUEBOX_SOURCES_A_FILTER_REQUIRE_2_IN) must not be empty",
			"sources.a.filter.require[3].header (QUEUEBOX_SOURCES_A_FILTER_REQUIRE_3_HEADER) is required",
			"sources.a.filter.exclude[0].exists (QUEUEBOX_SOURCES_A_FILTER_EXCLUDE_0_EXISTS) is false, which does not load: write exists: true under filter.exclude to refuse a header",
		}},
		{name: "rabbitmq source", yaml: "sources:\n  q:\n    queueName: \" \"\n    connectionUrl: rabbitmq:5672\n    prefetchCount: 0\n",
			wantErr: []string{
				"sources.q.queueName (QUEUEBOX_SOURCES_Q_QUEUENAME) is required",
				`sources.q.connectionUrl (QUEUEBOX_SOURCES_Q_CONNECTIONURL) must be an amqp:// or amqps:// URI with a host, not "rabbitmq:5672"`,
				"sources.q.prefetchCount (QUEUEBOX_SOURCES_Q_PREFETCHCOUNT) must be above 0",
			}},
		{name: "kafka source", yaml: `sources:
  a:
    bootstrapServers: k:9092
    topics: []
    groupId: " "
    autoOffsetReset: newest
    maxPollRecords: 0
    securityProtocol: SASL_PLAINTEXT
    saslMechanism: PLAIN
  b:
    bootstrapServers: k:9092
    topics: [a, " "]
    groupId: g
    autoOffsetReset: LATEST
`, wantErr: []string{
			"sources.a.topics (QUEUEBOX_SOURCES_A_TOPICS) must list at least one topic",
			"sources.a.groupId (QUEUEBOX_SOURCES_A_GROUPID) is required",
			`sources.a.autoOffsetReset (QUEUEBOX_SOURCES_A_AUTOOFFSETRESET) must be earliest or latest, not "newest"`,
			"sources.a.maxPollRecords (QUEUEBOX_SOURCES_A_MAXPOLLRECORDS) must be above 0",
			"sources.a.saslUsername (QUEUEBOX_SOURCES_A_SASLUSERNAME) is required by securityProtocol SASL_PLAINTEXT",
			"sources.a.saslPassword (QUEUEBOX_SOURCES_A_SASLPASSWORD) is required by securityProtocol SASL_PLAINTEXT",
			"sources.b.topics[1] (QUEUEBOX_SOURCES_B_TOPICS_1) must not be blank",
		}},
		{name: "nats source", yaml: `sources:
  n:
    servers: nats://n:4222
    stream: " "
    durable: d
    ackWaitMs: 0
    batchSize: 0
    username: u
    token: t
    attributeHeaders:
      eventType: ""
`, wantErr: []string{
			"sources.n.stream (QUEUEBOX_SOURCES_N_STREAM) is required",
			"sources.n.ackWaitMs (QUEUEBOX_SOURCES_N_ACKWAITMS) must be above 0",
			"sources.n.batchSize (QUEUEBOX_SOURCES_N_BATCHSIZE) must be above 0",
			"sources.n.password (QUEUEBOX_SOURCES_N_PASSWORD) is required when sources.n.username is set",
			"sources.n.token (QUEUEBOX_SOURCES_N_TOKEN) must not be set together with sources.n.username: set a token or a user name, not both",
			"sources.n.attributeHeaders.eventType (QUEUEBOX_SOURCES_N_ATTRIBUTEHEADERS_EVENTTYPE) is required",
		}},

		// retention
		{name: "retention policies", yaml: "retention:\n  enabled: true\n  outbox:\n    policy: age\n  inbox:\n    policy: COUNT\n    maxCount: 10\n",
			wantErr: []string{
				`retention.outbox.policy (QUEUEBOX_RETENTION_OUTBOX_POLICY) must be AGE, COUNT or DISABLED, in upper case, not "age"`,
				`retention.inbox.policy (QUEUEBOX_RETENTION_INBOX_POLICY) must be AGE or DISABLED, in upper case, not "COUNT"`,
			}},
		{name: "retention required keys", yaml: "retention:\n  outbox:\n    policy: COUNT\n    cleanupInterval: 0h\n    batchSize: 0\n  inbox:\n    policy: AGE\n",
			wantErr: []string{
				"retention.outbox.maxCount (QUEUEBOX_RETENTION_OUTBOX_MAXCOUNT) is required by policy COUNT and must be above 0",
				"retention.outbox.cleanupInterval (QUEUEBOX_RETENTION_OUTBOX_CLEANUPINTERVAL) must be above 0",
				"retention.outbox.batchSize (QUEUEBOX_RETENTION_OUTBOX_BATCHSIZE) must be above 0",
				"retention.inbox.maxAge (QUEUEBOX_RETENTION_INBOX_MAXAGE) is required by policy AGE",
			}},
		{name: "retention zero age and negative count", yaml: "retention:\n  outbox:\n    policy: AGE\n    maxAge: 0d\n    maxCount: -1\n",
			wantErr: []string{
				"retention.outbox.maxAge (QUEUEBOX_RETENTION_OUTBOX_MAXAGE) must be above 0",
				"retention.outbox.maxCount (QUEUEBOX_RETENTION_OUTBOX_MAXCOUNT) must not be negative",
			}},
		{name: "retention durations", env: map[string]string{"QUEUEBOX_RETENTION_INBOX_MAXAGE": "10x", "QUEUEBOX_RETENTION_OUTBOX_CLEANUPINTERVAL": "1.5h"},
			wantErr: []string{
				`retention.inbox.maxAge (QUEUEBOX_RETENTION_INBOX_MAXAGE) must be a whole number and one suffix s, m, h or d, for example 7d, not "10x"`,
				`retention.outbox.cleanupInterval (QUEUEBOX_RETENTION_OUTBOX_CLEANUPINTERVAL) must be a whole number and one suffix s, m, h or d, for example 7d, not "1.5h"`,
			}},
		{name: "retention count", yaml: "retention:\n  enabled: true\n  outbox:\n    policy: COUNT\n    maxCount: 1000\n    cleanupInterval: 30m\n  inbox:\n    policy: AGE\n    maxAge: 90s\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			body := minimalDatabase + tt.yaml
			if rest, ok := strings.CutPrefix(tt.yaml, "database:\n"); ok {
				body = minimalDatabase + rest // more keys of the database section
			}
			cfg, _, err := loadYAML(t, body, tt.env, nil)
			if tt.wantErr == nil {
				require.NoError(t, err)
				require.NotNil(t, cfg)
				return
			}
			assert.Nil(t, cfg)
			assert.Equal(t, tt.wantErr, problemStrings(t, err))
		})
	}
}

func TestValidationErrorListsEveryProblem(t *testing.T) {
	t.Parallel()
	_, _, err := loadYAML(t, minimalDatabase, map[string]string{"QUEUEBOX_OUTBOX_POLLINTERVALMS": "0", "QUEUEBOX_OUTBOX_BATCHSIZE": "0"}, nil)
	require.Error(t, err)
	assert.Equal(t, "invalid configuration, 2 problems:\n"+
		"  - outbox.pollIntervalMs (QUEUEBOX_OUTBOX_POLLINTERVALMS) must be above 0\n"+
		"  - outbox.batchSize (QUEUEBOX_OUTBOX_BATCHSIZE) must be above 0", err.Error())
	var ve *ValidationError
	require.True(t, errors.As(err, &ve))
	assert.Equal(t, Problem{Key: "outbox.pollIntervalMs", Variable: "QUEUEBOX_OUTBOX_POLLINTERVALMS", Message: "must be above 0"}, ve.Problems[0])

	_, _, err = loadYAML(t, minimalDatabase, map[string]string{"QUEUEBOX_OUTBOX_POLLINTERVALMS": "0"}, nil)
	assert.EqualError(t, err, "invalid configuration: outbox.pollIntervalMs (QUEUEBOX_OUTBOX_POLLINTERVALMS) must be above 0")
}

func TestValidateOnAConfigBuiltInCode(t *testing.T) {
	t.Parallel()
	cfg := Default()
	err := cfg.Validate(testComponents())
	assert.Equal(t, []string{
		"database.url (QUEUEBOX_DATABASE_URL) is required",
		"database.username (QUEUEBOX_DATABASE_USERNAME) is required",
		"database.password (QUEUEBOX_DATABASE_PASSWORD) is required",
	}, problemStrings(t, err))
	cfg.Database.URL = NewConnectionURL("jdbc:postgresql://db/q")
	cfg.Database.Username = "u"
	cfg.Database.Password = NewSecret("p")
	assert.NoError(t, cfg.Validate(testComponents()))
}

func TestCompileTransformHook(t *testing.T) {
	t.Parallel()
	file := minimalDatabase + `destinations:
  a:
    baseUrl: https://a.example.com
    transform:
      expression: "$bad("
routes:
  - topicPattern: "**"
    destination: a
    transform:
      expression: "$"
`
	var seen []string
	compile := func(expr string) error {
		seen = append(seen, expr)
		if strings.Contains(expr, "bad") {
			return errors.New("syntax error at position 5")
		}
		return nil
	}
	_, _, err := Load(LoadOptions{Components: testComponents(), ReadFile: memFiles{DefaultConfigFile: file}.read, CompileTransform: compile})
	assert.Equal(t, []string{
		"destinations.a.transform.expression (QUEUEBOX_DESTINATIONS_A_TRANSFORM_EXPRESSION) does not compile: syntax error at position 5",
	}, problemStrings(t, err))
	assert.ElementsMatch(t, []string{"$bad(", "$"}, seen)
}

func TestKindSelection(t *testing.T) {
	t.Parallel()
	file := minimalDatabase + `destinations:
  both:
    type: rabbitmq
    baseUrl: https://a.example.com
    url: amqp://rabbitmq
    exchange: events
    exchangeType: direct
  nats:
    type: nats
    servers: nats://n:4222
    subject: s
    timeoutMs: 5000
    path: /ignored
sources:
  kafka:
    type: KAFKA
    bootstrapServers: k:9092
    topics: [a]
    groupId: g
    auth:
      token: t
admin:
  auth:
    type: hmac
    token: t
    headerName: X-Ignored
`
	cfg, warnings, err := loadYAML(t, file, nil, nil)
	require.NoError(t, err)
	both := cfg.Destinations["both"]
	assert.Equal(t, kind.HTTP, both.Kind, "the first kind whose required keys are set wins")
	assert.Equal(t, "rabbitmq", both.Type)
	assert.Nil(t, both.Block)
	assert.Equal(t, DestinationKind("nats"), cfg.Destinations["nats"].Kind)
	assert.EqualValues(t, 5000, blockKey(t, cfg.Destinations["nats"].Block, "timeoutMs"))
	assert.Equal(t, SourceKind("kafka"), cfg.Sources["kafka"].Kind)
	assert.Equal(t, AuthBearer, cfg.Admin.Auth.Kind)
	assert.Equal(t, []string{
		"destinations.both.url is a key of the rabbitmq kind, but destinations.both is of the http kind: it has no effect",
		"destinations.both.exchange is a key of the rabbitmq kind, but destinations.both is of the http kind: it has no effect",
		"destinations.both.exchangeType is a key of the rabbitmq kind, but destinations.both is of the http kind: it has no effect",
		`destinations.both.type says "rabbitmq", but the keys of destinations.both select the http kind (the kind comes from the required keys; type is documentation only)`,
		"destinations.nats.path is a key of the http kind, but destinations.nats is of the nats kind: it has no effect",
		"sources.kafka.auth is a key of the http kind, but sources.kafka is of the kafka kind: it has no effect",
		"admin.auth.headerName is a key of the api-key kind, but admin.auth is of the bearer kind: it has no effect",
		`admin.auth.type says "hmac", but the keys of admin.auth select the bearer kind (the kind comes from the required keys; type is documentation only)`,
	}, warningStrings(warnings))
}

func TestConstructorsCarryTheDefaults(t *testing.T) {
	t.Parallel()
	d := NewDestination("orders", kind.HTTP)
	assert.Equal(t, &HTTPDestination{Path: "/", TimeoutMs: 30000}, d.HTTP)
	assert.Equal(t, kind.HTTP, d.Kind)
	assert.Equal(t, "Authorization", NewDestinationAuth(AuthHeader).Header.HeaderName)

	assert.Nil(t, NewSource("h", kind.HTTP).Broker())
	assert.Equal(t, "{{ eventType }}", NewSource("h", kind.HTTP).Topic)

	h := NewInboundAuth(AuthHMAC)
	assert.Equal(t, &HMACAuth{HeaderName: "X-Signature", Algorithm: HmacSHA256, SignaturePrefix: "sha256=", TimestampTolerance: 300000, SignaturePayloadFormat: PayloadBody}, h.HMAC)
	assert.Equal(t, "X-Signature", h.CredentialHeader())
	assert.Equal(t, "X-API-Key", NewInboundAuth(AuthAPIKey).APIKey.HeaderName)
	assert.Panics(t, func() { NewSource("x", "ftp") })
	assert.Panics(t, func() { NewSource("q", "rabbitmq") }, "a connector's kind comes from its configuration package")

	cfg := Default()
	cfg.Database.URL = NewConnectionURL("jdbc:postgresql://db/q")
	cfg.Database.Username = "u"
	cfg.Database.Password = NewSecret("p")
	d.HTTP.BaseURL = "https://orders.example.com"
	cfg.Destinations = map[string]*Destination{"orders": d}
	cfg.Routes = []Route{{TopicPattern: "**", Destination: "orders"}}
	src := NewSource("stripe", kind.HTTP)
	src.HTTP.Path = "/stripe"
	src.IdempotencyKeyPath = "$.id"
	src.EventTypePath = "$.type"
	cfg.Sources = map[string]*Source{"stripe": src}
	assert.NoError(t, cfg.Validate(testComponents()))
}

func TestColumnsAndTables(t *testing.T) {
	t.Parallel()
	out := DefaultOutboxColumns().All()
	assert.Len(t, out, 17)
	assert.Equal(t, []string{"id", "topic", "key", "aggregate_type", "payload", "headers", "state", "attempt", "max_attempts",
		"scheduled_at", "created_at", "updated_at", "claimed_at", "claim_token", "lease_expires_at", "last_error", "sequence"}, out)
	in := DefaultInboxColumns().All()
	assert.Equal(t, []string{"id", "source", "idempotency_key", "aggregate_id", "event_type", "payload", "state", "created_at",
		"processed_at", "claimed_at", "claim_token", "lease_expires_at", "correlation_id", "consumption", "scheduled_at",
		"attempt", "last_error", "headers"}, in)
	assert.Equal(t, DefaultTables(), Default().Database.Tables())
}

func TestDefinitePathsAndTemplates(t *testing.T) {
	t.Parallel()
	for _, p := range []string{"$", "$.id", "$.data.object.customer", "$['a b']", `$["x"]`, "$[0]", "$[-1]", "$.a[2].b", `$['it\'s']`, "$.x-id"} {
		assert.NoError(t, checkDefiniteJSONPath(p), p)
	}
	for _, p := range []string{"", "id", "$..id", "$.*", "$[*]", "$.a[*]", "$[?(@.a)]", "$[0,1]", "$[0:2]", "$['a','b']", "$.", "$[", "$['a'", "$.a()", "$ .a"} {
		assert.Error(t, checkDefiniteJSONPath(p), p)
	}
	assert.Empty(t, unknownAddressPlaceholders("{{topic}}.{{ key }}.{{ aggregateType }}.{{ payload.a }}.{{ data.a.b }}.literal"))
	assert.Equal(t, []string{"{{ eventType }}", "{{source}}", "{{ Topic }}"}, unknownAddressPlaceholders("{{ eventType }}.{{source}}.{{ Topic }}"))
	assert.True(t, readsEventType("a.{{eventType}}"))
	assert.True(t, readsEventType("{{ eventType }}"))
	assert.False(t, readsEventType("{{ source }}"))
}

func TestRetentionDuration(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"30s": "30s", "15m": "15m0s", "1h": "1h0m0s", "7d": "168h0m0s", " 2d ": "48h0m0s", "31536000s": "8760h0m0s", "36500d": "876000h0m0s"} {
		d, err := ParseRetentionDuration(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, d.Duration().String(), in)
	}
	for _, in := range []string{"", "7", "d", "7w", "1.5h", "-1d", "7 d", "99999999999999999999d", "36501d"} {
		_, err := ParseRetentionDuration(in)
		assert.Error(t, err, in)
	}
	assert.Panics(t, func() { MustRetentionDuration("x") })
	assert.True(t, RetentionDuration{}.IsZero())
}

func TestTypeSelectsTheStripeAndStandardWebhooksKinds(t *testing.T) {
	t.Parallel()
	file := minimalDatabase + `sources:
  stripe:
    path: /stripe
    idempotencyKeyPath: $.id
    eventTypePath: $.type
    auth:
      type: stripe
      secret: whsec_stripe-signing-secret
  stripe-fast:
    path: /stripe-fast
    idempotencyKeyPath: $.id
    eventTypePath: $.type
    auth:
      type: Stripe
      secret: whsec_other
      timestampTolerance: 60000
      headerName: X-Ignored
  svix:
    path: /svix
    idempotencyKeyPath: $.id
    eventTypePath: $.type
    auth:
      type: standard-webhooks
      secret: whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw
  github:
    path: /github
    idempotencyKeyPath: $.id
    eventTypePath: $.type
    auth:
      secret: gh
`
	cfg, warnings, err := loadYAML(t, file, map[string]string{"QUEUEBOX_SOURCES_PLAIN_AUTH_TYPE": "standard-webhooks",
		"QUEUEBOX_SOURCES_PLAIN_AUTH_SECRET": "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "QUEUEBOX_SOURCES_PLAIN_PATH": "/plain",
		"QUEUEBOX_SOURCES_PLAIN_IDEMPOTENCYKEYPATH": "$.id", "QUEUEBOX_SOURCES_PLAIN_EVENTTYPEPATH": "$.type"}, nil)
	require.NoError(t, err)
	assert.Equal(t, []string{
		"sources.stripe-fast.auth.headerName is a key of the api-key kind, but sources.stripe-fast.auth is of the stripe kind: it has no effect",
	}, warningStrings(warnings))

	s := cfg.Sources["stripe"].HTTP.Auth
	assert.Equal(t, AuthStripe, s.Kind)
	assert.Nil(t, s.HMAC)
	require.NotNil(t, s.Stripe)
	assert.Equal(t, "whsec_stripe-signing-secret", s.Stripe.Secret.Reveal())
	assert.Equal(t, Milliseconds(300000), s.Stripe.TimestampTolerance)
	assert.Equal(t, "Stripe-Signature", s.CredentialHeader())
	assert.Equal(t, Milliseconds(60000), cfg.Sources["stripe-fast"].HTTP.Auth.Stripe.TimestampTolerance)

	for _, name := range []string{"svix", "plain"} {
		w := cfg.Sources[name].HTTP.Auth
		assert.Equal(t, AuthStandardWebhooks, w.Kind, name)
		require.NotNil(t, w.StandardWebhooks, name)
		assert.Equal(t, Milliseconds(300000), w.StandardWebhooks.TimestampTolerance, name)
		assert.Equal(t, "webhook-signature", w.CredentialHeader(), name)
		key, err := w.StandardWebhooks.SigningKey()
		require.NoError(t, err, name)
		assert.Len(t, key, 24, name)
	}
	assert.Equal(t, AuthHMAC, cfg.Sources["github"].HTTP.Auth.Kind, "without type, secret still selects hmac")

	out, err := cfg.MaskedYAML()
	require.NoError(t, err)
	text := string(out)
	for _, secret := range []string{"stripe-signing-secret", "whsec_other", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"} {
		assert.NotContains(t, text, secret)
	}
	assert.Contains(t, text, "      type: stripe\n      secret: Secret(***)\n      timestampTolerance: 300000\n")
	assert.Contains(t, text, "      type: standard-webhooks\n      secret: Secret(***)\n      timestampTolerance: 300000\n")
}

func TestStripeAndStandardWebhooksProblems(t *testing.T) {
	t.Parallel()
	file := minimalDatabase + `admin:
  enabled: true
  auth:
    type: stripe
    secret: whsec_admin
sources:
  nosecret:
    path: /a
    idempotencyKeyPath: $.id
    eventTypePath: $.type
    auth:
      type: stripe
      timestampTolerance: 0
  notbase64:
    path: /b
    idempotencyKeyPath: $.id
    eventTypePath: $.type
    auth:
      type: standard-webhooks
      secret: whsec_not*base64
  empty:
    path: /c
    idempotencyKeyPath: $.id
    eventTypePath: $.type
    auth:
      type: standard-webhooks
      secret: whsec_
`
	_, _, err := loadYAML(t, file, nil, nil)
	problems := problemStrings(t, err)
	assert.Equal(t, []string{
		"admin.auth.type (QUEUEBOX_ADMIN_AUTH_TYPE) is stripe, which only a source takes: admin.auth takes bearer, api-key or hmac",
		"sources.empty.auth.secret (QUEUEBOX_SOURCES_EMPTY_AUTH_SECRET) must hold a key after whsec_",
		"sources.nosecret.auth.secret (QUEUEBOX_SOURCES_NOSECRET_AUTH_SECRET) is required",
		"sources.nosecret.auth.timestampTolerance (QUEUEBOX_SOURCES_NOSECRET_AUTH_TIMESTAMPTOLERANCE) must be above 0",
		"sources.notbase64.auth.secret (QUEUEBOX_SOURCES_NOTBASE64_AUTH_SECRET) must be whsec_ followed by standard base64, or standard base64 alone: illegal base64 data at input byte 3",
	}, problems)
	for _, p := range problems {
		assert.NotContains(t, p, "not*base64")
		assert.NotContains(t, p, "whsec_admin")
	}

	a := NewInboundAuth(AuthStandardWebhooks)
	assert.Equal(t, &StandardWebhooksAuth{TimestampTolerance: 300000}, a.StandardWebhooks)
	assert.Equal(t, &StripeAuth{TimestampTolerance: 300000}, NewInboundAuth(AuthStripe).Stripe)
}
