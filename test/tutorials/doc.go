// Package tutorials runs the repository's tutorials (docs/tutorials/deliver-your-first-outbox-message.md
// and docs/tutorials/receive-a-webhook.md) as a newcomer without Docker would: it extracts their
// shell blocks, maps each Docker Compose command to its local equivalent of
// docs/tutorials-without-docker.md, runs them against scripts/run-local.sh (what `make run`
// starts: a private PostgreSQL cluster with the role and database queuebox, the demo receiver
// and queuebox serve) on private ports, and checks the outputs that the pages document.
//
// The package has no code of its own; its test is the point. It also runs the pull workers of
// Receive a webhook: the Go worker from the page's main.go with the client of the checkout (a
// replace directive), and the TypeScript worker as clients/typescript/examples/worker.mjs with
// the package packed from the checkout. The C# worker, from another repository, is skipped, and
// the test names its steps.
package tutorials
