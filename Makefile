# QueueBox in Go. `make run` starts everything locally; `make test` runs every test.
GO       ?= go
BIN      := bin
PKGS     := ./...
# Packages run in parallel, each test with its own database.
TESTFLAGS ?= -race -count=1 -timeout 20m

.PHONY: all build run test test-go lint vet fmt services clean

all: build

## build: the queuebox command in bin/queuebox and the demo receiver in bin/receiver
build:
	$(GO) build -o $(BIN)/queuebox ./local
	$(GO) build -o $(BIN)/receiver ./local/receiver

## run: a private PostgreSQL (unless QUEUEBOX_DATABASE_URL is set), the migrations, and queuebox serve
run: build
	./scripts/run-local.sh

## services: start the local services that the tests need when they are not running
services:
	./scripts/ensure-services.sh

## test: every test, against the real services on loopback
test: services vet test-go

test-go:
	$(GO) test $(TESTFLAGS) $(PKGS)

## vet and lint
vet:
	$(GO) vet $(PKGS)

lint: vet
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf $(BIN)
