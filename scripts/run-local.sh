#!/usr/bin/env bash
# make run: starts QueueBox locally on a fresh machine.
#
# When QUEUEBOX_DATABASE_URL is not set, it starts a private PostgreSQL cluster under .local/pg
# of the checkout (port 55432) with the machine's initdb and pg_ctl, creates the database
# queuebox, applies the migrations with `queuebox migrate`, and starts `queuebox serve` with
# local/queuebox.yml. Stop it with Ctrl-C; the cluster keeps running for the next run
# (`scripts/run-local.sh stop` stops it).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
state="$root/.local"
pgdata="$state/pg/data"
pgsock="$state/pg/run"
pgport="${QUEUEBOX_LOCAL_PG_PORT:-55432}"

pgbin=""
for d in /usr/lib/postgresql/*/bin; do
  [ -x "$d/initdb" ] && pgbin="$d"
done
as_pg() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

if [ "${1:-}" = stop ]; then
  [ -n "$pgbin" ] && [ -d "$pgdata" ] && as_pg "$pgbin/pg_ctl" -D "$pgdata" stop -m fast || true
  exit 0
fi

if [ -z "${QUEUEBOX_DATABASE_URL:-}" ]; then
  if [ -z "$pgbin" ]; then
    echo "make run needs PostgreSQL's initdb and pg_ctl for its private database." >&2
    echo "Install them with: apt-get install -y postgresql (or set QUEUEBOX_DATABASE_URL)." >&2
    exit 1
  fi
  mkdir -p "$state/pg"
  if [ "$(id -u)" = 0 ]; then chown postgres "$state/pg"; fi
  if [ ! -f "$pgdata/PG_VERSION" ]; then
    echo "run-local: creating a private PostgreSQL cluster in $pgdata"
    as_pg "$pgbin/initdb" -D "$pgdata" -U postgres --auth=trust >/dev/null
  fi
  as_pg mkdir -p "$pgsock"
  if ! as_pg "$pgbin/pg_ctl" -D "$pgdata" status >/dev/null 2>&1; then
    echo "run-local: starting PostgreSQL on 127.0.0.1:$pgport"
    as_pg "$pgbin/pg_ctl" -D "$pgdata" -l "$state/pg/postgresql.log" -w \
      -o "-p $pgport -k $pgsock -c listen_addresses=127.0.0.1 -c wal_level=logical" start >/dev/null
  fi
  if ! psql -h 127.0.0.1 -p "$pgport" -U postgres -tAc "SELECT 1 FROM pg_database WHERE datname = 'queuebox'" | grep -q 1; then
    psql -h 127.0.0.1 -p "$pgport" -U postgres -qc "CREATE DATABASE queuebox"
  fi
  export QUEUEBOX_DATABASE_URL="jdbc:postgresql://127.0.0.1:$pgport/queuebox"
  export QUEUEBOX_DATABASE_USERNAME=postgres
  export QUEUEBOX_DATABASE_PASSWORD=local-trust-auth
  echo "run-local: database $QUEUEBOX_DATABASE_URL (psql -h 127.0.0.1 -p $pgport -U postgres queuebox)"
fi

export QUEUEBOX_CONFIG_FILE="${QUEUEBOX_CONFIG_FILE:-$root/local/queuebox.yml}"

# The demo receiver prints every request it gets: `delivered POST /webhook {...}`.
if [ "${QUEUEBOX_LOCAL_RECEIVER:-on}" = on ]; then
  ./bin/receiver -addr 127.0.0.1:8088 &
  receiver=$!
  trap 'kill $receiver 2>/dev/null || true' EXIT
fi

./bin/queuebox migrate
./bin/queuebox serve
