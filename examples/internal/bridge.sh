# The steps that the three bridge examples share; each examples/*-bridge/run.sh sources this
# file and calls, in order:
#
#   bridge_start NAME PORT         a work directory, the cleanup on exit, the port of serve
#   bridge_build NAME PACKAGE      a Go program of the example into the work directory
#   bridge_database                a fresh database (or QUEUEBOX_DATABASE_URL)
#   bridge_serve CONFIG            queuebox serve in the background, until /health/ready is 200
#   bridge_show_row SOURCE KEY     waits for the inbox row and prints it
#
# and registers its own cleanups with bridge_on_exit. Everything started here is stopped when
# the script exits, whatever the reason: serve, then the programs of the example, then the
# database is dropped (unless QUEUEBOX_EXAMPLE_KEEP=1).
#
# Environment:
#   QUEUEBOX_BIN               the queuebox binary; without it run.sh builds bin/queuebox
#                              with `go build` (which does nothing when it is up to date)
#   QUEUEBOX_DATABASE_URL      use this database (jdbc:postgresql:// or postgresql://) instead of
#                              creating one; QUEUEBOX_DATABASE_USERNAME/PASSWORD go with it
#   PGHOST PGPORT PGUSER       the PostgreSQL server where the fresh database is created
#                              (default 127.0.0.1, 5432, postgres)
#   QUEUEBOX_SERVER_HTTPPORT   the port of serve (each example has a fixed default)
#   QUEUEBOX_EXAMPLE_KEEP=1    keep the created database and print how to open it
#   QUEUEBOX_EXAMPLE_TIMEOUT   seconds to wait for readiness and for the row (default 60)

bridge_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
bridge_cleanups=()

# bridge_on_exit CMD... registers a command to run at exit; the last registered runs first.
bridge_on_exit() {
  bridge_cleanups+=("$*")
}

bridge_cleanup() {
  local rc=$? i
  trap - EXIT INT TERM
  for ((i = ${#bridge_cleanups[@]} - 1; i >= 0; i--)); do
    eval "${bridge_cleanups[i]}" || true
  done
  rm -rf "$bridge_work"
  exit "$rc"
}

# bridge_log MESSAGE prints a step of the example.
bridge_log() {
  echo "[$bridge_name] $*"
}

# bridge_fail MESSAGE prints the message and the end of the serve log, and exits 1.
bridge_fail() {
  echo "[$bridge_name] FAILED: $*" >&2
  if [ -s "$bridge_work/serve.log" ]; then
    echo "[$bridge_name] the last lines of the queuebox serve log:" >&2
    tail -n 30 "$bridge_work/serve.log" >&2
  fi
  exit 1
}

# bridge_stop PID NAME stops a background process: SIGTERM, then SIGKILL after 10 s.
bridge_stop() {
  local pid=$1 name=$2 i
  kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid" 2>/dev/null || return 0
  for ((i = 0; i < 100; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    echo "[$bridge_name] $name did not stop within 10 s; killing it" >&2
    kill -KILL "$pid" 2>/dev/null || true
  fi
  wait "$pid" 2>/dev/null || true
  bridge_log "stopped $name"
}

# bridge_port_free PORT fails when something already listens on 127.0.0.1:PORT.
bridge_port_free() {
  if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then
    bridge_fail "something already listens on 127.0.0.1:$1; stop it or choose another port ($2)"
  fi
}

# bridge_start NAME PORT
bridge_start() {
  bridge_name=$1
  bridge_port=${QUEUEBOX_SERVER_HTTPPORT:-$2}
  bridge_timeout=${QUEUEBOX_EXAMPLE_TIMEOUT:-60}
  bridge_work=$(mktemp -d "${TMPDIR:-/tmp}/queuebox-$bridge_name.XXXXXX")
  trap bridge_cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  command -v go >/dev/null || bridge_fail "the example needs Go (go build) on the PATH"
  command -v psql >/dev/null || bridge_fail "the example needs psql (apt-get install -y postgresql-client)"
  command -v curl >/dev/null || bridge_fail "the example needs curl"
  if [ -n "${QUEUEBOX_BIN:-}" ]; then
    bridge_bin=$QUEUEBOX_BIN
  else
    bridge_bin=$bridge_root/bin/queuebox
    bridge_log "building bin/queuebox (go build ./local)"
    (cd "$bridge_root" && go build -o bin/queuebox ./local) || bridge_fail "building bin/queuebox"
  fi
  [ -x "$bridge_bin" ] || bridge_fail "$bridge_bin is not an executable"
}

# bridge_build NAME PACKAGE builds the Go program PACKAGE (relative to the repository) as
# $bridge_work/NAME.
bridge_build() {
  (cd "$bridge_root" && go build -o "$bridge_work/$1" "$2") || bridge_fail "building $2"
}

# bridge_database sets QUEUEBOX_DATABASE_URL (and the username and password) for serve and
# bridge_psql for psql: the given database, or a fresh one dropped at exit.
bridge_database() {
  if [ -n "${QUEUEBOX_DATABASE_URL:-}" ]; then
    bridge_psql_url=${QUEUEBOX_DATABASE_URL#jdbc:}
    export PGUSER=${QUEUEBOX_DATABASE_USERNAME:-${PGUSER:-postgres}}
    [ -n "${QUEUEBOX_DATABASE_PASSWORD:-}" ] && export PGPASSWORD=$QUEUEBOX_DATABASE_PASSWORD
    bridge_log "using the database of QUEUEBOX_DATABASE_URL"
  else
    export PGHOST=${PGHOST:-127.0.0.1} PGPORT=${PGPORT:-5432} PGUSER=${PGUSER:-postgres}
    local db
    db="qb_example_${bridge_name//-/_}_$(date +%s)_$$"
    psql -X -q -d postgres -v ON_ERROR_STOP=1 -c "CREATE DATABASE $db" >/dev/null 2>"$bridge_work/psql.err" ||
      bridge_fail "PostgreSQL at $PGHOST:$PGPORT (user $PGUSER): CREATE DATABASE failed: $(cat "$bridge_work/psql.err").
Start it with: pg_ctlcluster --skip-systemctl-redirect \$(ls /etc/postgresql) main start (or make services),
or set QUEUEBOX_DATABASE_URL to an existing database"
    if [ "${QUEUEBOX_EXAMPLE_KEEP:-}" = 1 ]; then
      bridge_on_exit "echo '[$bridge_name] kept the database: psql -h $PGHOST -p $PGPORT -U $PGUSER $db'"
    else
      bridge_on_exit "psql -X -q -d postgres -c 'DROP DATABASE IF EXISTS $db WITH (FORCE)' >/dev/null && bridge_log 'dropped database $db'"
    fi
    bridge_psql_url="postgresql://$PGHOST:$PGPORT/$db"
    export QUEUEBOX_DATABASE_URL="jdbc:postgresql://$PGHOST:$PGPORT/$db"
    export QUEUEBOX_DATABASE_USERNAME=$PGUSER
    export QUEUEBOX_DATABASE_PASSWORD=${PGPASSWORD:-trust-auth}
    bridge_log "created database $db on $PGHOST:$PGPORT"
  fi
}

# bridge_serve CONFIG starts queuebox serve with CONFIG on $bridge_port and waits until
# /health/ready answers 200 (the database migrated and the broker source consuming).
bridge_serve() {
  bridge_port_free "$bridge_port" "QUEUEBOX_SERVER_HTTPPORT"
  export QUEUEBOX_CONFIG_FILE=$1
  export QUEUEBOX_SERVER_HTTPPORT=$bridge_port
  "$bridge_bin" serve >"$bridge_work/serve.log" 2>&1 &
  bridge_serve_pid=$!
  bridge_on_exit "bridge_stop $bridge_serve_pid 'queuebox serve'"
  bridge_log "started queuebox serve (pid $bridge_serve_pid) with ${1#"$bridge_root"/} on 127.0.0.1:$bridge_port"
  local deadline=$((SECONDS + bridge_timeout)) ready
  while :; do
    kill -0 "$bridge_serve_pid" 2>/dev/null || bridge_fail "queuebox serve exited"
    if ready=$(curl -fsS "http://127.0.0.1:$bridge_port/health/ready" 2>/dev/null); then
      break
    fi
    [ "$SECONDS" -lt "$deadline" ] || bridge_fail "queuebox serve was not ready within ${bridge_timeout} s: $(curl -sS "http://127.0.0.1:$bridge_port/health/ready" 2>&1)"
    sleep 0.2
  done
  bridge_log "ready: $ready"
}

# bridge_show_row SOURCE KEY waits until the inbox holds the row of SOURCE with
# idempotency_key KEY and prints it.
bridge_show_row() {
  local source=$1 key=$2 deadline=$((SECONDS + bridge_timeout)) n
  while :; do
    n=$(psql -X -At -v ON_ERROR_STOP=1 -v source="$source" -v key="$key" "$bridge_psql_url" 2>"$bridge_work/psql.err" <<'SQL'
SELECT count(*) FROM inbox WHERE source = :'source' AND idempotency_key = :'key';
SQL
    ) || bridge_fail "reading the inbox: $(cat "$bridge_work/psql.err")"
    [ "$n" = 1 ] && break
    [ "$SECONDS" -lt "$deadline" ] || bridge_fail "no inbox row of source $source with idempotency_key $key within ${bridge_timeout} s"
    sleep 0.2
  done
  bridge_log "the inbox row:"
  psql -X -x -v ON_ERROR_STOP=1 -v source="$source" -v key="$key" "$bridge_psql_url" <<'SQL'
SELECT source, idempotency_key, aggregate_id, event_type, consumption, state, payload
  FROM inbox WHERE source = :'source' AND idempotency_key = :'key';
SQL
}
