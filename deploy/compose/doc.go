// Package compose holds no code: its test loads every Docker Compose file of the repository
// with the Compose loader (github.com/compose-spec/compose-go/v2), alone and in the
// combinations and profiles that the files document. It is a module of its own so that the
// service's module does not depend on the loader; `make test-compose` runs it.
package compose
