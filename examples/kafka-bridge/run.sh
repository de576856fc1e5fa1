#!/usr/bin/env bash
# examples/kafka-bridge/run.sh: starts an in-process Kafka broker (kfake/main.go) on
# 127.0.0.1:19092 with the topic orders, starts queuebox serve with queuebox.yml, produces one
# JSON record to orders, and prints the inbox row that QueueBox stored. See README.md.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../internal/bridge.sh
. "$here/../internal/bridge.sh"

bridge_start kafka-bridge 18082
id=${QUEUEBOX_EXAMPLE_ID:-$(date +%s)-$$}
kafka_port=19092

bridge_build publish ./examples/internal/publish
bridge_build kfake ./examples/kafka-bridge/kfake
bridge_database

# The broker: kfake with the topic orders, stopped at exit.
bridge_port_free "$kafka_port" "kfake -port"
"$bridge_work/kfake" -port "$kafka_port" -topic orders -partitions 1 >"$bridge_work/kfake.log" 2>&1 &
kfake_pid=$!
bridge_on_exit "bridge_stop $kfake_pid kfake"
for ((i = 0; i < 100; i++)); do
  kill -0 "$kfake_pid" 2>/dev/null || bridge_fail "kfake exited: $(cat "$bridge_work/kfake.log")"
  (exec 3<>"/dev/tcp/127.0.0.1/$kafka_port") 2>/dev/null && break
  sleep 0.1
done
bridge_log "$(cat "$bridge_work/kfake.log") (pid $kfake_pid)"

bridge_serve "$here/queuebox.yml"

"$bridge_work/publish" -broker kafka -url "127.0.0.1:$kafka_port" -to orders \
  -body "{\"id\":\"evt-$id\",\"customerId\":\"cust-7\",\"type\":\"order.created\",\"total\":4200}" ||
  bridge_fail "producing to kfake at 127.0.0.1:$kafka_port"

bridge_show_row orders-topic "evt-$id"
