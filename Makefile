# laneway developer targets. `make test` runs the whole suite against a real
# Kafka 4.x broker and Redis started (and stopped) by scripts/testenv.sh.

GO ?= go
# staticcheck's version, fetched through the module proxy by `make check`.
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2

.PHONY: build run check test test-short sim mutants soak env-up env-down

BIN ?= bin/laneway

build:
	$(GO) build -o $(BIN) ./cmd/laneway

run:
	$(GO) run ./cmd/laneway serve

# gofmt, go vet, staticcheck and tidy modules (the root module and
# deploy/validate's).
check:
	@out="$$(gofmt -l $$(git ls-files '*.go'))"; if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...
	$(GO) mod tidy -diff
	cd deploy/validate && $(GO) vet ./... && $(GO) run $(STATICCHECK) ./... && $(GO) mod tidy -diff

# Real Kafka + Redis, go test -race ./... ; pass ARGS="./engine/... -run X" to narrow.
test: check
	bash scripts/testenv.sh test $(ARGS)
	$(MAKE) sim
	$(MAKE) mutants
	bash deploy/validate/install-promtool.sh
	cd deploy/validate && $(GO) test -count=1 ./...

# The partition owner's simulator over 10,000 seeds (the race run above
# takes a sample); a failing seed prints the command that replays it.
sim:
	$(GO) test -count=1 -timeout 15m ./partition/sim -run Sim -seeds 10000 -v
	$(GO) test -count=1 -tags simbug ./partition/sim -run CopyBug -v

# The oracle's strength: every planted bug of partition/sim/mutants.txt must
# fail the simulator within the seeds CI runs (each run stops at its first
# failing seed); about 50 s on the 2-core machine. MUTANTS="a b" runs only
# those.
mutants:
	bash scripts/mutants.sh

# Millions of seeds, for a soak before a release: make soak FIRST=1 SEEDS=1000000
FIRST ?= 1
SEEDS ?= 1000000
soak:
	$(GO) test -count=1 -timeout 0 ./partition/sim -run Sim -first $(FIRST) -seeds $(SEEDS) -max-failed 20 -v

# No services: tests that need Kafka/Redis skip without LANEWAY_TEST_* set.
test-short:
	env -u LANEWAY_TEST_KAFKA_BROKERS -u LANEWAY_TEST_REDIS_URL $(GO) test -race ./...

env-up:
	bash scripts/testenv.sh up

env-down:
	bash scripts/testenv.sh down
