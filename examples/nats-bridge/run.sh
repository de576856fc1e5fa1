#!/usr/bin/env bash
# examples/nats-bridge/run.sh: creates the JetStream stream EXAMPLE_ORDERS on the machine's
# NATS at 127.0.0.1:4222, starts queuebox serve with queuebox.yml, publishes one JSON message
# to example.orders.created, and prints the inbox row that QueueBox stored. See README.md.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../internal/bridge.sh
. "$here/../internal/bridge.sh"

bridge_start nats-bridge 18083
id=${QUEUEBOX_EXAMPLE_ID:-$(date +%s)-$$}
servers=nats://127.0.0.1:4222
stream=EXAMPLE_ORDERS

bridge_build publish ./examples/internal/publish
bridge_build stream ./examples/nats-bridge/stream
bridge_database

# QueueBox never creates a stream. The script deletes it at exit only when it created it.
created=$("$bridge_work/stream" -servers "$servers" -name "$stream" -subjects 'example.orders.>') ||
  bridge_fail "creating stream $stream on NATS at $servers; start NATS with JetStream with: make services (scripts/ensure-services.sh)"
bridge_log "$created"
if [ "$created" = "stream $stream created" ]; then
  bridge_on_exit "'$bridge_work/stream' -servers '$servers' -name '$stream' -delete >/dev/null && bridge_log 'deleted stream $stream'"
fi

bridge_serve "$here/queuebox.yml"

"$bridge_work/publish" -broker nats -url "$servers" -to example.orders.created \
  -body "{\"id\":\"evt-$id\",\"customerId\":\"cust-7\",\"type\":\"order.created\",\"total\":4200}" ||
  bridge_fail "publishing to NATS at $servers"

bridge_show_row orders-stream "evt-$id"
