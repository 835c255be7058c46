# `make test` is the README's test command and what CI runs (.ci/run).
GO ?= go
TEST_TIMEOUT ?= 18m

.PHONY: test services test-services vet run generate build rules

## test: check the tools (Go, a C compiler for -race, make, Node.js 20+, npm; installed with
## apt-get where it can, else named one per line with how to get them), start/install Redis,
## MariaDB and Chromium if needed, then vet and run every test with -race.
## Tests that need an installed part fail rather than skip (SURGE_TEST_REQUIRE_ALL). The local
## Redis Cluster (SURGE_CLUSTER_PORTS, default 7101-7103) is started if it is not running, its
## address passed to the tests, and stopped afterwards, passed or failed, only if this run
## started it: one that was running before is left to whoever uses it (with-redis-cluster.sh).
## So are the two setups the failover tests kill masters on, a Cluster with replicas (7111-7116)
## and a master + replica + 3 Sentinels (7121-7122, 26391-26393) (with-redis-failover.sh).
test: test-services vet
	bash scripts/with-redis-cluster.sh bash scripts/with-redis-failover.sh \
		env SURGE_TEST_REQUIRE_ALL=1 $(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) ./...

## services: make sure the real services the tests use are installed and running, and the
## graphql-http audit and the JavaScript clients the tests drive (npm), and promtool (deploy/ rules) are installed;
## the local Redis Cluster and the failover setups too (left running: scripts/stop-redis-cluster.sh
## and scripts/stop-redis-failover.sh stop them)
services: test-services
	bash scripts/ensure-redis-cluster.sh
	bash scripts/ensure-redis-failover.sh

## test-services: what make test needs before it starts (the tools first), but the Redis Cluster and
## the failover setups, which with-redis-cluster.sh and with-redis-failover.sh start (and stop) around the tests
test-services:
	bash scripts/ensure-tools.sh
	bash scripts/ensure-redis.sh
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

## run: the server on the embedded default (in-process Redis + SQLite, demo data). It builds
## bin/surge first and says so: the first build compiles every dependency, a minute or two
## with nothing else to show (go run would print nothing until the server listens).
run:
	@echo "make run: building bin/surge (the first build compiles every dependency: a minute or two)"
	CGO_ENABLED=0 $(GO) build -o bin/surge ./cmd/surge
	./bin/surge

## generate: regenerate ent and gqlgen code (commit the result)
generate:
	$(GO) generate ./...

build:
	CGO_ENABLED=0 $(GO) build -o bin/surge ./cmd/surge
