// Package tutorials runs the tutorials of the handbook (spec/32-deliver-your-first-outbox-message.md
// and spec/33-receive-a-webhook.md) as a newcomer without Docker would: it extracts their shell
// blocks, maps each Docker Compose command to its local equivalent of
// docs/tutorials-without-docker.md, runs them against scripts/run-local.sh (what `make run`
// starts: a private PostgreSQL cluster with the role and database queuebox, the demo receiver
// and queuebox serve) on private ports, and checks the outputs that the pages document.
//
// The package has no code of its own; its test is the point. The steps that need a pull client
// (the Go, TypeScript and C# workers of spec/33) are skipped, and the test names them.
package tutorials
