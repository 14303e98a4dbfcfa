# laneway developer targets. `make test` runs the whole suite against a real
# Kafka 4.x broker and Redis started (and stopped) by scripts/testenv.sh.

GO ?= go

.PHONY: build run test test-short env-up env-down

BIN ?= bin/laneway

build:
	$(GO) build -o $(BIN) ./cmd/laneway

run:
	$(GO) run ./cmd/laneway serve

# Real Kafka + Redis, go test -race ./... ; pass ARGS="./engine/... -run X" to narrow.
test:
	bash scripts/testenv.sh test $(ARGS)
	bash deploy/validate/install-promtool.sh
	cd deploy/validate && $(GO) test -count=1 ./...

# No services: tests that need Kafka/Redis skip without LANEWAY_TEST_* set.
test-short:
	env -u LANEWAY_TEST_KAFKA_BROKERS -u LANEWAY_TEST_REDIS_URL $(GO) test -race ./...

env-up:
	bash scripts/testenv.sh up

env-down:
	bash scripts/testenv.sh down
