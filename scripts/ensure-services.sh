#!/usr/bin/env bash
# Starts the local services that the tests need when they are not running: PostgreSQL on
# 127.0.0.1:5432, RabbitMQ on 127.0.0.1:5672 and NATS with JetStream on 127.0.0.1:4222. The
# machine image installs them from Debian's packages; this script only starts them, waits for
# their ports, and says plainly what to install when one is missing (then it exits non-zero:
# the broker tests fail, not skip, without their broker).
#
# QUEUEBOX_TEST_DATABASE_URL set: the tests use that database and PostgreSQL is not checked.
# ENSURE_SERVICES_TIMEOUT: seconds to wait for each port (default 60; RabbitMQ takes 10-20 s).
set -euo pipefail

timeout_s="${ENSURE_SERVICES_TIMEOUT:-60}"
failed=0

listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

wait_for() { # port name
  local deadline=$((SECONDS + timeout_s))
  until listening "$1"; do
    if [ "$SECONDS" -ge "$deadline" ]; then
      echo "ensure-services: $2 did not start listening on 127.0.0.1:$1 within ${timeout_s}s" >&2
      return 1
    fi
    sleep 0.5
  done
  echo "ensure-services: $2 is listening on 127.0.0.1:$1"
}

missing() { # name install-hint
  echo "ensure-services: $1 is not running and not installed; install it with: $2" >&2
  failed=1
}

start() { # port name command...
  local port=$1 name=$2
  shift 2
  echo "ensure-services: starting $name"
  if ! "$@"; then
    echo "ensure-services: starting $name failed: $*" >&2
    failed=1
    return
  fi
  wait_for "$port" "$name" || failed=1
}

if [ -z "${QUEUEBOX_TEST_DATABASE_URL:-}" ] && ! listening 5432; then
  if command -v pg_ctlcluster >/dev/null 2>&1 && [ -d /etc/postgresql ] && [ -n "$(ls /etc/postgresql)" ]; then
    start 5432 PostgreSQL pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | sort -V | tail -n1)" main start
  else
    missing PostgreSQL "apt-get install -y postgresql"
  fi
fi

if ! listening 5672; then
  if command -v rabbitmq-server >/dev/null 2>&1; then
    start 5672 RabbitMQ rabbitmq-server -detached
  else
    missing RabbitMQ "apt-get install -y rabbitmq-server"
  fi
fi

if ! listening 4222; then
  nats=$(command -v nats-server || true)
  [ -z "$nats" ] && [ -x /usr/sbin/nats-server ] && nats=/usr/sbin/nats-server
  if [ -n "$nats" ] && command -v start-stop-daemon >/dev/null 2>&1; then
    mkdir -p /var/lib/nats-server
    start 4222 "NATS JetStream" start-stop-daemon --start --oknodo --background --exec "$nats" -- \
      -a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server -l /var/log/nats-server.log
  else
    missing "NATS JetStream" "apt-get install -y nats-server"
  fi
fi

# The console's browser test (shared/localserver) drives Debian's Chromium; install it when it is
# missing (a fresh machine of this kind has apt and the Debian mirror, not the package). apt waits
# up to ten minutes for another apt or dpkg that holds its lock (an install at boot, say).
if [ -z "${QUEUEBOX_CHROMIUM:-}" ] && ! command -v chromium >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "ensure-services: installing chromium for the console's browser test (apt-get)"
    if ! (apt-get -o DPkg::Lock::Timeout=600 install -y -q chromium >/tmp/queuebox-chromium-install.log 2>&1 ||
          { apt-get -o DPkg::Lock::Timeout=600 update -q >>/tmp/queuebox-chromium-install.log 2>&1 &&
            apt-get -o DPkg::Lock::Timeout=600 install -y -q chromium >>/tmp/queuebox-chromium-install.log 2>&1; }); then
      echo "ensure-services: installing chromium failed; see /tmp/queuebox-chromium-install.log" >&2
      failed=1
    fi
  else
    missing Chromium "apt-get install -y chromium"
  fi
fi

# deploy/monitoring_test.go runs promtool on deploy/prometheus/; fetch it (unpacked, not
# installed) when it is not there yet.
if ! "$(dirname "$0")/ensure-promtool.sh"; then
  failed=1
fi

exit "$failed"
