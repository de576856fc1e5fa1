// Package examples holds the runnable examples of QueueBox and their tests. The package
// itself has no API: pull/ is the pull-worker SQL contract, and rabbitmq-bridge/,
// kafka-bridge/ and nats-bridge/ each hold a queuebox.yml and a run.sh that reads one
// message of that broker into the inbox. bridges_test.go runs each run.sh, so `make test`
// proves that the examples work. http-fanout/ (spec/10) runs in http_fanout_test.go with two
// local receivers, and cdc/ (spec/08, PostgreSQL logical capture) in cdc_test.go, which runs
// its smoke-test.sh against a private cluster with wal_level = logical.
package examples
