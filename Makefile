# Waybill: the two commands of the README, and a few helpers.
#   make run    install what is missing, build, start the demo (SQLite + in-process broker)
#   make test   install what is missing, build, run every test (Swift + browser)

SWIFT ?= swift
RELEASE_BIN = $(shell $(SWIFT) build -c release --show-bin-path 2>/dev/null)
DEBUG_BIN = $(shell $(SWIFT) build --show-bin-path 2>/dev/null)

.PHONY: run test deps test-deps build build-release swift-test browser-test bench clean

run: deps build-release
	$(RELEASE_BIN)/waybill demo

test: test-deps build swift-test browser-test

deps:
	@scripts/install-deps.sh

test-deps:
	@scripts/install-deps.sh --test

build:
	$(SWIFT) build --build-tests

build-release:
	$(SWIFT) build -c release --product waybill

# The client library's virtual-time tests run on their own: they yield a lot and would compete
# with the end-to-end servers for the two cooperative threads of a small machine.
swift-test:
	$(SWIFT) test --skip-build --filter WaybillClientTests
	$(SWIFT) test --skip-build --skip WaybillClientTests

browser-test:
	WAYBILL_BIN=$(DEBUG_BIN)/waybill scripts/browser-tests.sh

bench: build-release
	scripts/bench.sh

clean:
	rm -rf .build
