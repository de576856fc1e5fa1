#!/usr/bin/env bash
# examples/rabbitmq-bridge/run.sh: starts queuebox serve with queuebox.yml (a RabbitMQ source
# on the machine's RabbitMQ at 127.0.0.1:5672), publishes one JSON message to the queue, and
# prints the inbox row that QueueBox stored. See README.md.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../internal/bridge.sh
. "$here/../internal/bridge.sh"

bridge_start rabbitmq-bridge 18081
id=${QUEUEBOX_EXAMPLE_ID:-$(date +%s)-$$}
amqp_url=amqp://guest:guest@127.0.0.1:5672/
queue=example-incoming-orders

bridge_build publish ./examples/internal/publish
bridge_database
# serve declares the queue (declareQueue: true) and is ready once it consumes from it.
bridge_serve "$here/queuebox.yml"

"$bridge_work/publish" -broker rabbitmq -url "$amqp_url" -to "$queue" \
  -body "{\"messageId\":\"msg-$id\",\"orderId\":\"order-42\",\"type\":\"order.created\",\"total\":4200}" ||
  bridge_fail "publishing to RabbitMQ at $amqp_url; start it with: make services (scripts/ensure-services.sh)"

bridge_show_row orders-queue "msg-$id"
