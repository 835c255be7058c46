# `make test` is the README's test command and what CI runs (.ci/run).
GO ?= go
TEST_TIMEOUT ?= 18m

.PHONY: test services vet run generate build rules

## test: start/install Redis, MariaDB and Chromium if needed, then vet and run every test with -race.
## Tests that need an installed part fail rather than skip (SURGE_TEST_REQUIRE_ALL). The local
## Redis Cluster is stopped afterwards, passed or failed (the next run starts a fresh one).
test: services vet
	SURGE_TEST_REQUIRE_ALL=1 $(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) ./...; \
	rc=$$?; bash scripts/stop-redis-cluster.sh; exit $$rc

## services: make sure the real services the tests use are installed and running, and the
## graphql-http audit and the JavaScript clients the tests drive (npm), and promtool (deploy/ rules) are installed
services:
	bash scripts/ensure-redis.sh
	bash scripts/ensure-redis-cluster.sh
	bash scripts/ensure-mariadb.sh
	bash scripts/ensure-chromium.sh
	bash scripts/ensure-graphql-http.sh
	bash scripts/ensure-js-clients.sh
	bash scripts/ensure-promtool.sh

## rules: check deploy/'s Prometheus config and alert rules with promtool, and run their unit
## tests (make test runs these too, in deploy/deploy_test.go, with the live-metrics check)
rules:
	promtool check config deploy/prometheus/prometheus.yml
	promtool test rules deploy/prometheus/alerts_test.yml

vet:
	$(GO) vet ./...

## run: the server on the embedded default (in-process Redis + SQLite, demo data)
run:
	$(GO) run ./cmd/surge

## generate: regenerate ent and gqlgen code (commit the result)
generate:
	$(GO) generate ./...

build:
	CGO_ENABLED=0 $(GO) build -o bin/surge ./cmd/surge
