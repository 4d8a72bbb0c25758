# Waybill: the two commands of the README, and a few helpers.
#   make run    install what is missing, build, start the demo (SQLite + in-process broker)
#   make test   install what is missing, build, run every test (Swift + browser)
#   make cluster  PostgreSQL + Redis + two nodes behind nginx on port 8080 (docs/SCALING.md)

SWIFT ?= swift
RELEASE_BIN = $(shell $(SWIFT) build -c release --show-bin-path 2>/dev/null)
DEBUG_BIN = $(shell $(SWIFT) build --show-bin-path 2>/dev/null)

# The steps of `run` and `test` depend on the ones before them (the tests need the build, the
# build the libraries the deps step installs): never in parallel, even under `make -j`.
.NOTPARALLEL:

.PHONY: run test deps test-deps cluster-deps cluster build build-release swift-test browser-test release-smoke bench bench-history fuzz clean

run: deps build-release
	$(RELEASE_BIN)/waybill demo

test: test-deps build swift-test browser-test release-smoke

deps:
	@scripts/install-deps.sh

test-deps:
	@scripts/install-deps.sh --test

cluster-deps:
	@scripts/install-deps.sh --cluster

# Ctrl-C stops every process and deletes the state folder: .cluster/ (as root, when PostgreSQL
# cannot enter the clone, /tmp/waybill-cluster-PORT; WAYBILL_CLUSTER_DIR overrides; scripts/cluster.sh).
cluster: cluster-deps build-release
	WAYBILL_BIN=$(RELEASE_BIN)/waybill scripts/cluster.sh up

build:
	$(SWIFT) build --build-tests

build-release:
	SWIFT='$(SWIFT)' scripts/build-release.sh

# Four groups, one after another, so that no group's timing depends on another's load on a
# 2-core machine: the client library's virtual-time tests (they yield a lot); the in-process
# server, network and store tests; the suites that start real PostgreSQL and Redis servers; and
# the multi-node fault tests (whole clusters of processes, killed and restarted).
SERVICE_SUITES = WaybillPostgresTests|WaybillStoreConformanceTests|WaybillBrokerTests
# The service suites run at most 16 tests at once: unbounded, their cases started together up to
# 280 PostgreSQL backends and 175 runnable threads on 2 cores, and 3 of 11 runs failed, one on the
# store's 4 s statement_timeout (57014) and lock_timeout (55P03) on the shared test server
# (docs/BENCHMARKS.md, 2026-12-07 19:29–). With 16, 5 of 5 passed in 33–36 s. The option is
# Swift Testing's and marked experimental: Swift 6.3 (this project's toolchain) has it, and a
# toolchain without it fails this step at once with an unknown-option error.
SERVICE_WIDTH = --experimental-maximum-parallelization-width 16
swift-test:
	$(SWIFT) test --skip-build --filter WaybillClientTests
	$(SWIFT) test --skip-build --skip 'WaybillClientTests|$(SERVICE_SUITES)|ClusterTests'
	$(SWIFT) test --skip-build --filter '$(SERVICE_SUITES)' $(SERVICE_WIDTH)
	$(SWIFT) test --skip-build --filter ClusterTests

# The Swift tests run a debug build; this checks the release build `make run` serves (an
# optimizer-only crash once slipped past them: scripts/release-smoke.sh).
release-smoke: build-release
	scripts/release-smoke.sh $(RELEASE_BIN)/waybill

browser-test:
	WAYBILL_BIN=$(DEBUG_BIN)/waybill scripts/browser-tests.sh

bench: build-release
	scripts/bench.sh

# 100 200 orders (docs/HISTORY-BENCH.md); needs .venv-browser, which `make browser-test` makes.
bench-history: build-release
	scripts/bench-history.sh

# libFuzzer on the network-facing parsers, FUZZ_SECONDS (30) per target; not part of `make test`.
fuzz:
	scripts/fuzz.sh

clean:
	rm -rf .build
