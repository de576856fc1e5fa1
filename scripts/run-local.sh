#!/usr/bin/env bash
# make run: starts QueueBox locally on a fresh machine.
#
# When QUEUEBOX_DATABASE_URL is not set, it starts a private PostgreSQL cluster (port 55432,
# QUEUEBOX_LOCAL_PG_PORT) with the machine's initdb and pg_ctl, creates the role queuebox
# (password queuebox) and its database queuebox, as spec/32 and spec/33 expect, applies the
# migrations with `queuebox migrate`, and starts `queuebox serve` with local/queuebox.yml.
# The cluster lives under .local/pg of the checkout, or, when the postgres user cannot enter the
# checkout (a clone under /root), in /var/tmp/queuebox-local-<hash of the checkout path>, owned
# by postgres. Stop it with Ctrl-C; the cluster keeps running for the next run
# (`scripts/run-local.sh stop` stops it; `scripts/run-local.sh setup` only prepares it).
#
# For a test that runs the tutorials against this script (test/tutorials), three variables move
# what would collide with a developer's `make run`: QUEUEBOX_LOCAL_DIR (the cluster's folder),
# QUEUEBOX_LOCAL_BIN (the folder of queuebox and receiver, default bin/) and
# QUEUEBOX_LOCAL_RECEIVER_ADDR (default 127.0.0.1:8088); QUEUEBOX_SERVER_HTTPPORT and
# QUEUEBOX_CONFIG_FILE move the rest, as for any run.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
state="$root/.local"
pgport="${QUEUEBOX_LOCAL_PG_PORT:-55432}"

pgbin=""
for d in /usr/lib/postgresql/*/bin; do
  [ -x "$d/initdb" ] && pgbin="$d"
done
as_pg() {
  if [ "$(id -u)" = 0 ]; then (cd / && runuser -u postgres -- "$@"); else "$@"; fi
}

# pgdir is where the cluster lives: .local/pg of the checkout when the postgres user can reach
# it, else a folder of /var/tmp named for the checkout, so that two checkouts never share one.
pgdir="${QUEUEBOX_LOCAL_DIR:-$state/pg}"
if [ -z "${QUEUEBOX_LOCAL_DIR:-}" ] && [ "$(id -u)" = 0 ] && ! runuser -u postgres -- test -x "$root" 2>/dev/null; then
  hash=$(printf '%s' "$root" | sha256sum | cut -c1-12)
  pgdir="/var/tmp/queuebox-local-$hash"
fi
pgdata="$pgdir/data"
pgsock="$pgdir/run"

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
  mkdir -p "$pgdir"
  if [ "$(id -u)" = 0 ]; then chown postgres "$pgdir"; chmod 700 "$pgdir"; fi
  if [ "$pgdir" != "$state/pg" ] && [ -z "${QUEUEBOX_LOCAL_DIR:-}" ]; then
    echo "run-local: the postgres user cannot enter $root, so the cluster lives in $pgdir"
  fi
  if [ ! -f "$pgdata/PG_VERSION" ]; then
    echo "run-local: creating a private PostgreSQL cluster in $pgdata"
    as_pg "$pgbin/initdb" -D "$pgdata" -U postgres --auth=trust >/dev/null
  fi
  as_pg mkdir -p "$pgsock"
  if ! as_pg "$pgbin/pg_ctl" -D "$pgdata" status >/dev/null 2>&1; then
    echo "run-local: starting PostgreSQL on 127.0.0.1:$pgport"
    as_pg "$pgbin/pg_ctl" -D "$pgdata" -l "$pgdir/postgresql.log" -w \
      -o "-p $pgport -k $pgsock -c listen_addresses=127.0.0.1 -c wal_level=logical" start >/dev/null
  fi
  # The role and the database of the tutorials (spec/32, spec/33): queuebox/queuebox.
  pgq() { psql -h 127.0.0.1 -p "$pgport" -U postgres -v ON_ERROR_STOP=1 "$@"; }
  if ! pgq -tAc "SELECT 1 FROM pg_roles WHERE rolname = 'queuebox'" | grep -q 1; then
    pgq -qc "CREATE ROLE queuebox LOGIN PASSWORD 'queuebox'"
  fi
  if ! pgq -tAc "SELECT 1 FROM pg_database WHERE datname = 'queuebox'" | grep -q 1; then
    pgq -qc "CREATE DATABASE queuebox OWNER queuebox"
  fi
  export QUEUEBOX_DATABASE_URL="jdbc:postgresql://127.0.0.1:$pgport/queuebox"
  echo "run-local: database $QUEUEBOX_DATABASE_URL (psql -h 127.0.0.1 -p $pgport -U queuebox -d queuebox)"
fi

if [ "${1:-}" = setup ]; then
  exit 0
fi

bindir="${QUEUEBOX_LOCAL_BIN:-$root/bin}"
export QUEUEBOX_CONFIG_FILE="${QUEUEBOX_CONFIG_FILE:-$root/local/queuebox.yml}"

# The demo receiver prints every request it gets: `delivered POST /webhook {...}`.
if [ "${QUEUEBOX_LOCAL_RECEIVER:-on}" = on ]; then
  "$bindir/receiver" -addr "${QUEUEBOX_LOCAL_RECEIVER_ADDR:-127.0.0.1:8088}" &
  receiver=$!
  trap 'kill $receiver 2>/dev/null || true' EXIT
fi

"$bindir/queuebox" migrate
"$bindir/queuebox" serve
