#!/usr/bin/env bash
# examples/cdc/smoke-test.sh: PostgreSQL logical capture end to end, without Docker. It shows
# the three claims of spec/08-capture-changes.md:
#
#   1. capture wakes delivery: with the reconciliation pass ten minutes apart (queuebox.yml),
#      a new outbox row reaches the receiver within the timeout only because capture woke
#      delivery;
#   2. the position survives a restart: QueueBox stops, a row commits while it is down, and the
#      restarted process resumes from the position in its state directory (no new slot, no new
#      state, no recovery) and delivers that row and the next;
#   3. a second owner is refused: a second process with the same identity reports that the
#      identity has an owner, and delivery goes on.
#
# It needs a PostgreSQL server with wal_level = logical: by default the private cluster of
# `make run` (`scripts/run-local.sh setup` starts it on 127.0.0.1:55432), or the one of
# PGHOST, PGPORT, PGUSER (and PGPASSWORD), for example the Compose stack's PostgreSQL on
# 15433 (README.md). It creates a fresh database there and drops it, with its replication
# slot, when it exits; it stops every process it started.
#
# Environment:
#   QUEUEBOX_BIN, QUEUEBOX_RECEIVER_BIN   the queuebox and receiver commands; without them the
#                                         script builds both with go build
#   QUEUEBOX_SERVER_HTTPPORT              the first process's port (default 18082)
#   QUEUEBOX_CDC_SECOND_PORT              the second process's port (default 18083)
#   QUEUEBOX_CDC_RECEIVER_PORT            the receiver's port (default 18093)
#   QUEUEBOX_EXAMPLE_TIMEOUT              seconds to wait for each step (default 60)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)

export PGHOST=${PGHOST:-127.0.0.1} PGPORT=${PGPORT:-55432} PGUSER=${PGUSER:-postgres}
port=${QUEUEBOX_SERVER_HTTPPORT:-18082}
port2=${QUEUEBOX_CDC_SECOND_PORT:-18083}
rport=${QUEUEBOX_CDC_RECEIVER_PORT:-18093}
timeout=${QUEUEBOX_EXAMPLE_TIMEOUT:-60}
work=$(mktemp -d "${TMPDIR:-/tmp}/queuebox-cdc.XXXXXX")
db=""
pids=()

log() { echo "[cdc] $*"; }

fail() {
  echo "[cdc] FAIL: $*" >&2
  local f
  for f in "$work"/*.log; do
    [ -s "$f" ] || continue
    echo "[cdc] the last lines of $(basename "$f"):" >&2
    tail -n 15 "$f" >&2
  done
  exit 1
}

# stop PID NAME: SIGTERM, then SIGKILL after 30 s.
stop() {
  local pid=$1 name=$2 i
  kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid" 2>/dev/null || return 0
  for ((i = 0; i < 300; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    echo "[cdc] $name did not stop within 30 s; killing it" >&2
    kill -KILL "$pid" 2>/dev/null || true
  fi
  wait "$pid" 2>/dev/null || true
  log "stopped $name"
}

cleanup() {
  local rc=$? i
  trap - EXIT INT TERM
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
    stop "${pids[i]%%:*}" "${pids[i]#*:}"
  done
  if [ -n "$db" ]; then
    # A replication slot keeps its database: drop the slot first.
    psql -X -q -d postgres -c "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = '$db'" >/dev/null 2>&1 || true
    psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null && log "dropped database $db"
  fi
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# wait_for SECONDS DESCRIPTION COMMAND...: runs COMMAND until it succeeds.
wait_for() {
  local deadline=$((SECONDS + $1)) what=$2
  shift 2
  until "$@"; do
    [ "$SECONDS" -lt "$deadline" ] || fail "$what within $timeout s"
    sleep 0.2
  done
}

port_free() {
  if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then
    fail "something already listens on 127.0.0.1:$1; stop it or set $2"
  fi
}

command -v psql >/dev/null || fail "the smoke test needs psql (apt-get install -y postgresql-client)"
command -v curl >/dev/null || fail "the smoke test needs curl"
wal_level=$(psql -X -At -d postgres -c "SHOW wal_level" 2>"$work/psql.err") ||
  fail "PostgreSQL at $PGHOST:$PGPORT (user $PGUSER) does not answer: $(cat "$work/psql.err").
Start make run's cluster with scripts/run-local.sh setup, or set PGHOST and PGPORT"
[ "$wal_level" = logical ] || fail "PostgreSQL at $PGHOST:$PGPORT runs with wal_level = $wal_level; capture needs logical"
port_free "$port" QUEUEBOX_SERVER_HTTPPORT
port_free "$port2" QUEUEBOX_CDC_SECOND_PORT
port_free "$rport" QUEUEBOX_CDC_RECEIVER_PORT

qb=${QUEUEBOX_BIN:-}
receiver=${QUEUEBOX_RECEIVER_BIN:-}
if [ -z "$qb" ] || [ -z "$receiver" ]; then
  command -v go >/dev/null || fail "set QUEUEBOX_BIN and QUEUEBOX_RECEIVER_BIN, or put Go on the PATH to build them"
  log "building queuebox and receiver (go build ./local ./local/receiver)"
  (cd "$root" && go build -o "$work/queuebox" ./local && go build -o "$work/receiver" ./local/receiver) || fail "go build"
  qb=$work/queuebox receiver=$work/receiver
fi

db="qb_example_cdc_$(date +%s)_$$"
psql -X -q -d postgres -v ON_ERROR_STOP=1 -c "CREATE DATABASE $db" >/dev/null
log "created database $db on $PGHOST:$PGPORT"
q() { psql -X -At -v ON_ERROR_STOP=1 -d "$db" "$@"; }

# queuebox.yml names the Compose hosts; the variables point it at this machine.
export QUEUEBOX_CONFIG_FILE=$here/queuebox.yml
export QUEUEBOX_DATABASE_URL="jdbc:postgresql://$PGHOST:$PGPORT/$db"
export QUEUEBOX_DATABASE_USERNAME=$PGUSER
export QUEUEBOX_DATABASE_PASSWORD=${PGPASSWORD:-trust-auth}
export QUEUEBOX_DESTINATIONS_RECEIVER_BASEURL="http://127.0.0.1:$rport"

# The tables first, then the publication that names the outbox table (QueueBox never creates
# it), as the Compose stack's migrate and publication services do.
"$qb" migrate >"$work/migrate.log" 2>&1 || fail "queuebox migrate"
q -q -f "$here/publication.sql" || fail "creating the publication"
log "migrated, and created the publication queuebox_outbox"

"$receiver" -addr "127.0.0.1:$rport" >"$work/receiver.log" 2>&1 &
pids+=("$!:receiver")

# serve NAME PORT STATE_DIR starts queuebox serve in the background; its pid goes to $serve_pid.
serve() {
  mkdir -p "$3"
  QUEUEBOX_SERVER_HTTPPORT=$2 QUEUEBOX_OUTBOX_CAPTURE_STATEDIRECTORY=$3 "$qb" serve >>"$work/$1.log" 2>&1 &
  serve_pid=$!
  pids+=("$serve_pid:$1")
  log "started $1 (pid $serve_pid) on 127.0.0.1:$2 with the state directory $3"
}

capture_up() { curl -s "http://127.0.0.1:$1/health/ready" | grep -q '"outbox-capture":{"status":"up"'; }
delivered() { [ "$(grep -c "\"orderId\":\"$1\"" "$work/receiver.log")" -ge 1 ]; }
insert() {
  q -q -c "INSERT INTO outbox (topic, key, payload) VALUES ('order.created', '$1', '{\"orderId\":\"$1\"}')" || fail "inserting $1"
  log "inserted the outbox row $1"
}

# 1. Capture wakes delivery.
serve first "$port" "$work/state"
first=$serve_pid
wait_for "$timeout" "capture of the first process was not streaming (outbox-capture up in /health/ready)" capture_up "$port"
grep -q "capture created the replication slot" "$work/first.log" || fail "the first start did not create the replication slot"
insert o-1
wait_for "$timeout" "the receiver did not get o-1 (the reconciliation pass is ten minutes away: capture did not wake delivery)" delivered o-1
log "OK 1: capture woke delivery: o-1 reached the receiver"

# 2. The position survives a restart.
[ -s "$work/state/offsets.dat" ] && [ -s "$work/state/identity" ] || fail "the state directory holds no offsets.dat and identity"
states=$(q -c "SELECT count(*) FROM queuebox_capture_state")
stop "$first" first
insert o-2
serve second-start "$port" "$work/state"
restarted=$serve_pid
wait_for "$timeout" "capture of the restarted process was not streaming" capture_up "$port"
if grep -q "capture created the replication slot" "$work/second-start.log"; then fail "the restart created a new slot"; fi
if grep -q "recorded a new state" "$work/second-start.log"; then fail "the restart recorded a new capture state"; fi
if grep -q "needs recovery" "$work/second-start.log"; then fail "the restart reports that capture needs recovery"; fi
[ "$(q -c "SELECT count(*) FROM queuebox_capture_state")" = "$states" ] || fail "the restart changed queuebox_capture_state"
wait_for "$timeout" "the receiver did not get o-2, written while QueueBox was down" delivered o-2
insert o-3
wait_for "$timeout" "the receiver did not get o-3 after the restart" delivered o-3
log "OK 2: the position survived the restart: same slot and state, o-2 and o-3 delivered"

# 3. A second owner is refused.
serve second-owner "$port2" "$work/state-second-owner"
# The readiness answer that showed the refusal is kept for the log line: between two retries
# of the lock the component may report another state.
owner_refused() {
  refusal=$(curl -s "http://127.0.0.1:$port2/health/ready")
  grep -q "already has an owner" <<<"$refusal"
}
wait_for "$timeout" "the second process did not report that the identity has an owner" owner_refused
capture_up "$port" || fail "the first owner stopped capturing when the second started"
insert o-4
wait_for "$timeout" "the receiver did not get o-4 while a second process ran" delivered o-4
log "OK 3: a second owner is refused: $(grep -o 'the capture identity [a-z0-9_-]* already has an owner' <<<"$refusal" | head -n 1)"

# Every row once, and sent.
for key in o-1 o-2 o-3 o-4; do
  n=$(grep -c "\"orderId\":\"$key\"" "$work/receiver.log")
  [ "$n" = 1 ] || fail "the receiver got $key $n times"
done
wait_for "$timeout" "not every outbox row is sent" test "$(q -c "SELECT count(*) FROM outbox WHERE state = 'sent'")" = 4
[ "$restarted" != "" ] && log "OK: o-1 to o-4 each delivered once and sent"
