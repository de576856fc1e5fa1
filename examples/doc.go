// Package examples holds the runnable examples of QueueBox and their tests. The package
// itself has no API: pull/ is the pull-worker SQL contract, and rabbitmq-bridge/,
// kafka-bridge/ and nats-bridge/ each hold a queuebox.yml and a run.sh that reads one
// message of that broker into the inbox. bridges_test.go runs each run.sh, so `make test`
// proves that the examples work.
package examples
