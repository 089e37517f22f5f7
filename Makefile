# Quiver's build and test entry points. `make test` is the README's test
# command and what CI runs (.ci/run sets QUIVER_REQUIRE_PEERS=1 so that a
# missing peer fails the run instead of skipping its tests).

GO ?= go
GOTEST_FLAGS ?= -timeout 25m

.PHONY: all build test peers testdeps vet fuzz bench bench-links clean

all: build

build:
	$(GO) build -o bin/quiver ./cmd/quiver

# peers installs what the tests talk to: ngtcp2 and tshark from Debian, and
# the quic-go and x/net peer binaries built from the module proxy.
peers:
	./scripts/install-peers

# testdeps installs chromium (dashboard browser tests) and postgresql.
testdeps:
	./scripts/install-test-deps

vet:
	$(GO) vet ./...
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi

# The observatory's store tests run against SQLite and against a throwaway
# PostgreSQL that scripts/start-postgres starts (or reuses) by hand.
test: peers testdeps vet build
	QUIVER_PG_DSN="$${QUIVER_PG_DSN:-$$(./scripts/start-postgres)}" $(GO) test $(GOTEST_FLAGS) ./...
	cd peers/quicgo && $(GO) vet ./...

# fuzz runs every fuzz target briefly; FUZZTIME=5m for a longer session.
FUZZTIME ?= 20s
fuzz:
	./scripts/fuzz-all $(FUZZTIME)

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./quic/... ./h3/...

# bench-links measures what the tests only bound: link rates, delays and the
# relay's cost beside their configured values (the namespace ones need root).
bench-links:
	$(GO) test -run '^$$' -bench 'Namespaces|RelayAccuracyAndSpeed|RelayDelay' -benchtime 3x ./netem

clean:
	rm -rf bin
