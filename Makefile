# QueueBox in Go. `make run` starts everything locally; `make test` runs every test.
GO       ?= go
BIN      := bin
PKGS     := ./...
# VERSION is stamped into the queuebox command (queuebox version): git describe, or 0.1.0-dev
# outside a git checkout.
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo 0.1.0-dev)
# Expanded once, so that every file of `make release` carries the same version.
VERSION  := $(VERSION)
VERSION_LDFLAGS := -X github.com/alternayte/queuebox/shared/service.Version=$(VERSION)
# Packages run in parallel, each test with its own database.
TESTFLAGS ?= -race -count=1 -timeout 20m

.PHONY: all help build run test test-go test-clients test-client-go test-client-ts test-bench-peers test-helm test-compose test-image release image lint lint-openapi vet fmt docs services clean

all: build

## help: lists the targets of this Makefile with what each does (the `## name:` comments)
help:
	@awk '/^## [a-zA-Z0-9_-]+:/ { sub(/^## /, ""); name = $$0; sub(/:.*/, "", name); text = $$0; sub(/^[^:]*: */, "", text); printf "  make %-18s %s\n", name, text; next } \
		/^## / && name != "" { sub(/^## /, ""); printf "  %-23s %s\n", "", $$0; next } { name = "" }' $(firstword $(MAKEFILE_LIST))

## build: the queuebox command in bin/queuebox and the demo receiver in bin/receiver
build:
	$(GO) build -ldflags "$(VERSION_LDFLAGS)" -o $(BIN)/queuebox ./local
	$(GO) build -o $(BIN)/receiver ./local/receiver

## run: a private PostgreSQL (unless QUEUEBOX_DATABASE_URL is set), the migrations, and queuebox serve
run: build
	./scripts/run-local.sh

## services: start the local services that the tests need when they are not running
services:
	./scripts/ensure-services.sh

## test: every test, against the real services on loopback: the service, the Go pull client
## (its own module) and the TypeScript pull client, the lint of docs/openapi.yaml, and the
## release image of this machine's architecture run with podman. Every part runs even when
## one before it failed; the target fails at the end, naming the parts that failed.
TEST_PARTS := vet lint-openapi test-go test-client-go test-client-ts test-bench-peers test-helm test-compose test-image

test: services
	@failed=; \
	for part in $(TEST_PARTS); do \
		$(MAKE) --no-print-directory $$part || failed="$$failed $$part"; \
	done; \
	if [ -n "$$failed" ]; then echo "make test: FAILED:$$failed" >&2; exit 1; fi; \
	echo "make test: every part passed ($(TEST_PARTS))"

## test-go: the Go tests of the service module (every package, -race), then the tracing and
## function-runtime packages again with the Lambda functions' build tag (lambda.norpc: the
## small OTLP/HTTP exporter, no gRPC). The commands that tests build and run (queuebox, the
## receiver, the capture node) are compiled first in one go command, so that tests running
## side by side do not each compile the packages they share.
test-go:
	$(GO) build ./local ./local/receiver ./capturenode
	$(GO) test $(TESTFLAGS) $(PKGS)
	$(GO) test $(TESTFLAGS) -tags lambda.norpc ./shared/tracing/... ./shared/lambdafn

## test-clients: the tests of both pull clients
test-clients: test-client-go test-client-ts

## test-bench-peers: the tests of the side-by-side bench, its own module (bench/peers): the
## harness's parts, and every system and ceiling on a few hundred messages against PostgreSQL.
test-bench-peers:
	cd bench/peers && $(GO) vet ./... && $(GO) test $(TESTFLAGS) ./...

## test-helm: vet and the test of the Helm chart (deploy/helm, its own module): renders
## deploy/helm/queuebox with Helm's Go library for the default values and every option, and
## checks every object against the Kubernetes types and the facts of local/Dockerfile. It runs
## without -race: the test renders and decodes in one goroutine, and the race build of Helm's
## and Kubernetes' packages alone took about ten minutes here.
test-helm:
	cd deploy/helm && $(GO) vet ./... && $(GO) test -count=1 -timeout 20m ./...

## test-compose: vet and the test of the Docker Compose files (deploy/compose, its own module):
## loads every Compose file of the repository with the Compose loader (compose-go), alone and
## in the combinations that the files document (docker-compose.yml with the override or the
## release file) and with each profile they declare; fails on an error or a warning.
test-compose:
	cd deploy/compose && $(GO) vet ./... && $(GO) test -count=1 ./...

## test-image: the release image (docs/releasing.md) for this machine's architecture only:
## scripts/ensure-podman.sh (installs podman and runc from Debian when they are missing), the
## tests of deploy/image (its own module: the image matches local/Dockerfile's queuebox
## stage), then `make image` into bin/test-image and test/image (build tag image), which loads
## the archive into podman and runs it as its user against the test PostgreSQL.
TEST_IMAGE_DIR := $(BIN)/test-image

test-image:
	./scripts/ensure-podman.sh
	cd deploy/image && $(GO) vet ./... && $(GO) test -count=1 ./...
	$(MAKE) --no-print-directory image VERSION='$(VERSION)' IMAGE_ARCHES=$(HOST_ARCH) IMAGE_OUT=$(TEST_IMAGE_DIR)
	$(GO) vet -tags image ./test/image
	QUEUEBOX_IMAGE_ARCHIVE=$(CURDIR)/$(TEST_IMAGE_DIR)/queuebox-image-$(VERSION)-linux-$(HOST_ARCH).tar \
	QUEUEBOX_IMAGE_VERSION='$(VERSION)' $(GO) test -tags image -count=1 -timeout 15m ./test/image

## test-client-go: vet and the tests of the Go client (clients/go, its own module); the outbox
## tests build ./local and run queuebox serve (or QUEUEBOX_TEST_BINARY), the replace test builds a module offline
test-client-go:
	cd clients/go && $(GO) vet ./... && $(GO) test $(TESTFLAGS) ./...

## test-client-ts: the tests of the TypeScript client (clients/typescript, Node.js 20, npm ci); the enqueue
## tests build ./local with Go and run queuebox serve (or QUEUEBOX_TEST_BINARY); npm pack and examples/worker.mjs
test-client-ts:
	@command -v npm >/dev/null || { echo "make test needs Node.js 20 or later and npm for clients/typescript (apt-get install -y nodejs npm)"; exit 1; }
	cd clients/typescript && npm ci --no-audit --no-fund && npm test

## vet: go vet of the service module
vet:
	$(GO) vet $(PKGS)

## docs: regenerates the reference pages of docs/reference from the code (tools/refdocs): the
## configuration keys, the metrics, the HTTP routes, the tables and the command line. It needs
## the test PostgreSQL server (`make services` starts it; QUEUEBOX_TEST_DATABASE_URL names
## another), on which it migrates a database of its own and drops it; a test of `make test`
## fails while a committed page differs from what it writes.
docs:
	$(GO) run ./tools/refdocs

## lint: vet, and fails when gofmt would change a file
lint: vet
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

## lint-openapi: lints docs/openapi.yaml with the Redocly CLI pinned in tools/openapi-lint
## (package.json and package-lock.json, installed with npm ci; Node.js 20.19 or later), the
## recommended ruleset and tools/openapi-lint/redocly.yaml; fails on any error or warning.
OPENAPI_LINT_DIR := tools/openapi-lint

lint-openapi:
	@command -v npm >/dev/null || { echo "make lint-openapi needs Node.js 20.19 or later and npm (apt-get install -y nodejs npm)"; exit 1; }
	cd $(OPENAPI_LINT_DIR) && npm ci --ignore-scripts --no-audit --no-fund --prefer-offline
	node $(OPENAPI_LINT_DIR)/lint.mjs docs/openapi.yaml

## fmt: gofmt -w on every Go file
fmt:
	gofmt -w $$(git ls-files '*.go')

## clean: removes bin/
clean:
	rm -rf $(BIN)

## bench: the outbox delivery benchmark (bench/README.md); prints a table and writes its JSON
## results to BENCH_OUT, by default bench/results/local (ignored by git), so that a run does not
## overwrite the committed results by accident; BENCH_OUT=bench/results updates them on purpose.
## The outbox backlog runs first with tracing on at 100 % sampling (outbox-tracing.json), to
## compare with outbox.json, and the inbox bench second, both before the outbox's scale phase
## leaves the disk busy (it cut the inbox's rate by a third at 20:48 on 2026-12-06). Not part of `make test`. Pass flags with BENCHFLAGS="-rows 20000"; the broker sources' bench
## takes SOURCEBENCHFLAGS="-rounds 3", the inbox relay's bench RELAYBENCHFLAGS="-rows 5000".
BENCH_OUT ?= bench/results/local

.PHONY: bench
bench:
	@mkdir -p $(BENCH_OUT)
	@echo "make bench: writing the results to $(BENCH_OUT) (BENCH_OUT=bench/results replaces the committed ones)"
	$(GO) run ./bench/cmd/outboxbench -phases backlog -keys 0 -explore-rows 0 -tracing local -out $(BENCH_OUT)/outbox-tracing.json $(BENCHFLAGS)
	$(GO) run ./bench/cmd/inboxbench -out $(BENCH_OUT)/inbox.json $(INBOXBENCHFLAGS)
	$(GO) run ./bench/cmd/outboxbench -out $(BENCH_OUT)/outbox.json $(BENCHFLAGS)
	$(GO) run ./bench/cmd/sourcebench -out $(BENCH_OUT)/sources.json $(SOURCEBENCHFLAGS)
	$(GO) run ./bench/cmd/relaybench -out $(BENCH_OUT)/relay.json $(RELAYBENCHFLAGS)
	$(GO) run ./bench/lambda -out $(BENCH_OUT)/lambda.json
	cd clients/go && $(GO) run ./internal/pullbench -out $(abspath $(BENCH_OUT))/pull.json -settings 10x1,50x8 $(PULLBENCHFLAGS)

## bench-peers: QueueBox's outbox delivery (defaults, tuned, and tuned in the claim mode lock)
## beside River and Watermill (both schema adapters) doing the same job to the same loopback
## receiver, and beside a stateless ceiling at 64 and 128 requests (bench/README.md, "Side by
## side"): 100,000 messages, no keys and 1,000 keys, three interleaved rounds, medians; prints a
## table and writes bench/results/peers.json. The peers live in their own module, bench/peers,
## so the service never depends on them. Not part of `make test` nor of `make bench` (about 14
## minutes before the lock variant came in; -lock=false leaves it out); writes to BENCH_OUT as
## `make bench` does. Flags: PEERSFLAGS="-rows 5000 -rounds 1".
PEERSFLAGS ?=

.PHONY: bench-peers
bench-peers:
	@mkdir -p $(BENCH_OUT)
	cd bench/peers && $(GO) vet ./... && $(GO) run . -out $(abspath $(BENCH_OUT))/peers.json $(PEERSFLAGS)

## lambda: every function of functions/*/main.go as a static linux/arm64 `bootstrap`, zipped
## in bin/lambda/<name>.zip with bootstrap at the root; prints each binary's and zip's size.
## LAMBDA_CONFIG=path/to/queuebox.yml adds that file to every zip as queuebox.yml (then set
## QUEUEBOX_CONFIG_FILE=/var/task/queuebox.yml). LAMBDA_DESTINATIONS="http kafka" names the
## destination kinds that the poll function links (default: all four); each broker left out is
## the build tag queuebox_no_<kind>, and a destination of that kind then has no publisher, so
## its rows go dead. LAMBDA_JSONATA=no leaves the JSONata engine out of every function (the
## build tag queuebox_no_jsonata): smaller zips, and a function then refuses a configuration
## that holds a transform. See deploy/README.md.
LAMBDA_DIR          := $(BIN)/lambda
LAMBDA_FUNCTIONS    := $(sort $(patsubst functions/%/main.go,%,$(wildcard functions/*/main.go)))
LAMBDA_ENV          := CGO_ENABLED=0 GOOS=linux GOARCH=arm64
LAMBDA_BROKERS      := rabbitmq kafka nats
LAMBDA_DESTINATIONS ?= http $(LAMBDA_BROKERS)
ifneq ($(filter-out http $(LAMBDA_BROKERS),$(LAMBDA_DESTINATIONS)),)
$(error LAMBDA_DESTINATIONS names $(filter-out http $(LAMBDA_BROKERS),$(LAMBDA_DESTINATIONS)); the destination kinds are http $(LAMBDA_BROKERS))
endif
LAMBDA_COMMA        := ,
LAMBDA_EMPTY        :=
LAMBDA_SPACE        := $(LAMBDA_EMPTY) $(LAMBDA_EMPTY)
LAMBDA_JSONATA      ?= yes
ifeq ($(filter yes no,$(LAMBDA_JSONATA)),)
$(error LAMBDA_JSONATA is $(LAMBDA_JSONATA); it must be yes or no)
endif
LAMBDA_LEFT_OUT     := $(addprefix queuebox_no_,$(filter-out $(LAMBDA_DESTINATIONS),$(LAMBDA_BROKERS))) $(if $(filter no,$(LAMBDA_JSONATA)),queuebox_no_jsonata)
LAMBDA_TAGS         := $(subst $(LAMBDA_SPACE),$(LAMBDA_COMMA),$(strip lambda.norpc $(LAMBDA_LEFT_OUT)))
LAMBDA_FLAGS        := -tags $(LAMBDA_TAGS) -trimpath -ldflags "-s -w $(VERSION_LDFLAGS)"
LAMBDA_CONFIG       ?=

.PHONY: lambda
lambda:
	@mkdir -p $(LAMBDA_DIR)
	@for fn in $(LAMBDA_FUNCTIONS); do \
		echo "building functions/$$fn"; \
		$(LAMBDA_ENV) $(GO) build $(LAMBDA_FLAGS) -o $(LAMBDA_DIR)/$$fn/bootstrap ./functions/$$fn || exit 1; \
	done
	@$(GO) run ./deploy/cmd/lambdazip -dir $(LAMBDA_DIR) $(if $(LAMBDA_CONFIG),-config $(LAMBDA_CONFIG)) $(LAMBDA_FUNCTIONS)

# `sam build` (template.yaml: CodeUri ., Metadata BuildMethod makefile) runs
# `make build-<LogicalId>` with ARTIFACTS_DIR set; each target leaves one function's bootstrap
# (and LAMBDA_CONFIG as queuebox.yml) there. deploy/template_test.go checks that every function
# of the template has its target here.
LAMBDA_ARTIFACT = $(LAMBDA_ENV) $(GO) build $(LAMBDA_FLAGS) -o $(ARTIFACTS_DIR)/bootstrap ./functions/$(1)$(if $(LAMBDA_CONFIG), && cp $(LAMBDA_CONFIG) $(ARTIFACTS_DIR)/queuebox.yml)

.PHONY: build-PollFunction build-RelayFunction build-RetentionFunction build-InboxFunction build-AdminFunction
build-PollFunction:
	$(call LAMBDA_ARTIFACT,poll)
build-RelayFunction:
	$(call LAMBDA_ARTIFACT,relay)
build-RetentionFunction:
	$(call LAMBDA_ARTIFACT,retention)
build-InboxFunction:
	$(call LAMBDA_ARTIFACT,inbox)
build-AdminFunction:
	$(call LAMBDA_ARTIFACT,admin)

## notices: regenerates THIRD_PARTY_NOTICES.md (tools/notices) from the modules that the binaries
## link, the embedded jsonata.js and the npm package's runtime dependencies. Run it after a
## dependency changes: `go test ./tools/notices` (part of `make test`) fails while the committed
## file differs from what the generator writes now.
.PHONY: notices
notices:
	$(GO) generate ./tools/notices

## jsonata: installs the pinned npm jsonata 2.2.2 in shared/transform/jsjsonata (package.json and
## package-lock.json with its integrity hash) with `npm ci`, and checks that the committed
## jsonata.min.js that shared/transform/jsjsonata embeds is that package's file. A different
## file is replaced from the package and the target fails, so the change shows in review (then
## update jsonataSHA256 in shared/transform/jsjsonata/jsjsonata_test.go). The build itself needs
## neither npm nor this.
JSONATA_DIR := shared/transform/jsjsonata

.PHONY: jsonata
jsonata:
	cd $(JSONATA_DIR) && npm ci --ignore-scripts --no-audit --no-fund
	@pkg=$(JSONATA_DIR)/node_modules/jsonata; \
	version=$$(node -p "require('./$$pkg/package.json').version"); \
	if cmp -s $$pkg/jsonata.min.js $(JSONATA_DIR)/jsonata.min.js && cmp -s $$pkg/LICENSE $(JSONATA_DIR)/LICENSE; then \
		echo "$(JSONATA_DIR)/jsonata.min.js is the file of npm jsonata $$version"; \
		sha256sum $(JSONATA_DIR)/jsonata.min.js; \
	else \
		cp $$pkg/jsonata.min.js $$pkg/LICENSE $(JSONATA_DIR)/; \
		echo "$(JSONATA_DIR)/jsonata.min.js differed from npm jsonata $$version and was replaced:"; \
		sha256sum $(JSONATA_DIR)/jsonata.min.js; \
		echo "review it, set jsonataSHA256 in shared/transform/jsjsonata/jsjsonata_test.go, and commit"; \
		exit 1; \
	fi

## chaos: the chaos suite (test/chaos/README.md): its own PostgreSQL cluster on 127.0.0.1:55532,
## replicas of queuebox serve killed with kill -9, PostgreSQL restarts, a failing receiver, the
## relay and the Go pull client's workers killed, network partitions between a replica and
## PostgreSQL under a slow receiver; prints one table per scenario and fails on
## any lost row or order violation. Not part of `make test`. Flags: CHAOSFLAGS="-short",
## CHAOSFLAGS="-scenario kill,relay -kills 10 -rows 2000".
CHAOSFLAGS ?=

.PHONY: chaos
chaos:
	$(GO) run ./test/chaos $(CHAOSFLAGS)

## release: everything a release ships, in dist/ (ignored by git; docs/releasing.md), for
## VERSION (git describe; VERSION=v1.2.3 overrides it): queuebox and capturenode for
## linux/amd64 and linux/arm64 (static, -trimpath, the version stamped), the Lambda zips of
## `make lambda`, the container image of each architecture as a docker-archive (`make image`),
## a CycloneDX SBOM of every binary, the npm tarball of clients/typescript, and SHA256SUMS
## over all of them. Publishes nothing. RELEASE_ARCHES="amd64" builds one architecture.
DIST           := dist
RELEASE_ARCHES ?= amd64 arm64
RELEASE_BUILD  := $(BIN)/release
RELEASE_LDFLAGS = -s -w $(VERSION_LDFLAGS)
SBOM_TOOL      := github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod@v1.10.0
SBOM           := $(BIN)/tools/cyclonedx-gomod
# The time of the image and of its files: the last commit's, so one commit gives one image.
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || date +%s)
HOST_ARCH      := $(shell $(GO) env GOARCH)

release:
	@case '$(VERSION)' in ''|*/*|*' '*) echo "make release: VERSION '$(VERSION)' cannot name files; give VERSION=v1.2.3" >&2; exit 1;; esac
	@echo "make release: version $(VERSION), linux/{$(RELEASE_ARCHES)}, into $(DIST)/"
	rm -rf $(DIST) $(RELEASE_BUILD)
	mkdir -p $(DIST)
	GOBIN=$(CURDIR)/$(BIN)/tools $(GO) install $(SBOM_TOOL)
	$(MAKE) --no-print-directory image VERSION='$(VERSION)' IMAGE_ARCHES='$(RELEASE_ARCHES)' IMAGE_OUT=$(DIST)
	@set -e; for arch in $(RELEASE_ARCHES); do \
		for cmd in queuebox capturenode; do \
			out=$(DIST)/$$cmd-$(VERSION)-linux-$$arch; \
			cp $(RELEASE_BUILD)/linux-$$arch/$$cmd $$out; \
			GOOS=linux GOARCH=$$arch $(SBOM) bin -json -std -version '$(VERSION)' -output $$out.cdx.json $$out; \
		done; \
	done
	$(MAKE) --no-print-directory lambda VERSION='$(VERSION)' LAMBDA_DIR=$(RELEASE_BUILD)/lambda
	@set -e; for fn in $(LAMBDA_FUNCTIONS); do \
		out=$(DIST)/queuebox-lambda-$$fn-$(VERSION)-linux-arm64; \
		cp $(RELEASE_BUILD)/lambda/$$fn.zip $$out.zip; \
		GOOS=linux GOARCH=arm64 $(SBOM) bin -json -std -version '$(VERSION)' -output $$out.cdx.json $(RELEASE_BUILD)/lambda/$$fn/bootstrap; \
	done
	@command -v npm >/dev/null || { echo "make release needs Node.js 20 or later and npm for clients/typescript (apt-get install -y nodejs npm)"; exit 1; }
	cd clients/typescript && npm ci --no-audit --no-fund && npm pack --pack-destination $(CURDIR)/$(DIST)
	cd $(DIST) && find . -maxdepth 1 -type f ! -name SHA256SUMS -printf '%f\n' | LC_ALL=C sort | xargs sha256sum > SHA256SUMS
	@echo "make release: $$(wc -l < $(DIST)/SHA256SUMS) artefacts in $(DIST)/, listed with their SHA-256 in $(DIST)/SHA256SUMS"

## image: the container image (deploy/image) of each of IMAGE_ARCHES (default: this machine's)
## as a docker-archive, IMAGE_OUT/queuebox-image-VERSION-linux-ARCH.tar (default bin/image),
## tagged queuebox:VERSION without the v: FROM scratch, no daemon and no base image to pull.
## It builds the static queuebox, capturenode and healthprobe into bin/release/linux-ARCH and
## copies this machine's CA bundle (Debian's ca-certificates) and /usr/share/zoneinfo (tzdata).
IMAGE_ARCHES ?= $(HOST_ARCH)
IMAGE_OUT    ?= $(BIN)/image

image:
	@set -e; for arch in $(IMAGE_ARCHES); do \
		bin=$(RELEASE_BUILD)/linux-$$arch; \
		echo "building queuebox, capturenode and healthprobe for linux/$$arch"; \
		for cmd in queuebox:./local capturenode:./capturenode healthprobe:./local/healthprobe; do \
			CGO_ENABLED=0 GOOS=linux GOARCH=$$arch $(GO) build -trimpath -ldflags "$(RELEASE_LDFLAGS)" -o $$bin/$${cmd%%:*} $${cmd#*:}; \
		done; \
		$(GO) -C deploy/image run . -arch $$arch -bin $(CURDIR)/$$bin -repo $(CURDIR) -version '$(VERSION)' \
			-revision "$$(git rev-parse HEAD 2>/dev/null)" -created $(SOURCE_DATE_EPOCH) \
			-out $(abspath $(IMAGE_OUT))/queuebox-image-$(VERSION)-linux-$$arch.tar; \
	done
