#!/usr/bin/env bash
# The steps of README.md, checked: two webhooks with two event types reach two receivers, and
# neither receiver gets the topic of the other. Needs Docker with the Compose plugin and curl;
# run from anywhere. It stops and deletes the stack when it exits.
set -euo pipefail
cd "$(dirname "$0")"
compose() { docker compose -f docker-compose.yml "$@"; }
trap 'compose down -v >/dev/null 2>&1 || true' EXIT

compose up -d --build
for _ in $(seq 1 60); do
	curl -fsS http://localhost:18081/health >/dev/null 2>&1 && break
	sleep 2
done
curl -fsS http://localhost:18081/health >/dev/null

post() {
	curl -fsS -X POST http://localhost:18081/inbox/stripe -H 'Content-Type: application/json' -d "$1"
	echo
}
post '{"id":"e1","type":"analytics.payment.succeeded"}'
post '{"id":"e2","type":"audit.payment.succeeded"}'

# Wait up to 60 s for each receiver to print its event.
wait_for() {
	local service=$1 want=$2
	for _ in $(seq 1 60); do
		compose logs "$service" | grep -q "$want" && return 0
		sleep 1
	done
	echo "FAIL: $service never received $want" >&2
	compose logs "$service" >&2
	return 1
}
wait_for analytics '"id":"e1"'
wait_for audit '"id":"e2"'
if compose logs analytics | grep -q '"id":"e2"'; then echo "FAIL: analytics received e2" >&2; exit 1; fi
if compose logs audit | grep -q '"id":"e1"'; then echo "FAIL: audit received e1" >&2; exit 1; fi
echo "OK: analytics got e1, audit got e2, and neither got the other's"
