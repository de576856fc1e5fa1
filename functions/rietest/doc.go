// Package rietest runs the built Lambda functions of functions/ under the AWS Lambda Runtime
// Interface Emulator (aws-lambda-rie) on loopback and invokes them over its HTTP API, as the
// Lambda service would: the function is built as `make lambda` builds it (static, no cgo,
// -tags lambda.norpc), but for the host's architecture, and named bootstrap.
//
// The package's tests run the inbox, poll, relay and admin functions against a real PostgreSQL;
// bench/lambda uses the same helpers to measure cold-start and warm invoke times. The folder
// holds no main.go, so `make lambda` does not take it for a function.
//
// InstallEmulator installs the pinned emulator with `go install` into a cache folder when it
// is not there yet, so a fresh machine needs only the Go module proxy.
package rietest
