#!/usr/bin/env bash
# Starts the local services that the tests need when they are not running: PostgreSQL on
# 127.0.0.1:5432. The machine image installs it from Debian's packages; this script only starts
# it, and says plainly what to install when it is missing.
set -euo pipefail

listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

wait_for() { # port name
  for _ in $(seq 1 60); do
    listening "$1" && return 0
    sleep 0.5
  done
  echo "ensure-services: $2 did not start listening on 127.0.0.1:$1" >&2
  return 1
}

if [ -z "${QUEUEBOX_TEST_DATABASE_URL:-}" ] && ! listening 5432; then
  if command -v pg_ctlcluster >/dev/null 2>&1 && [ -d /etc/postgresql ]; then
    echo "ensure-services: starting PostgreSQL"
    pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start
    wait_for 5432 PostgreSQL
  else
    echo "ensure-services: PostgreSQL is not running and not installed; install it with: apt-get install -y postgresql" >&2
    exit 1
  fi
fi
