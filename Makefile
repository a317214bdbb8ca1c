# Riptide: the two commands that work on a fresh machine are `make test` and `make bench`.
CARGO ?= cargo
RESULTS_DIR := bench/results

.PHONY: test bench setup fmt lint unit bench-core clean

## setup: check the toolchain (Rust with rustfmt and clippy) is present.
setup:
	@command -v $(CARGO) >/dev/null || { echo "cargo not found: install Rust (rustup) first"; exit 1; }
	@$(CARGO) fmt --version >/dev/null && $(CARGO) clippy --version >/dev/null

## test: formatting, lints with warnings as errors, and every test of the workspace.
test: setup
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	$(CARGO) test --workspace

## bench: the standard benchmark (for now the engine's own benches and loader; the benchtool
## comparing against RocksDB replaces it). Results land in bench/results/<timestamp>/.
bench: setup bench-core

bench-core:
	bash bench/run-core.sh

fmt:
	$(CARGO) fmt --all

lint:
	$(CARGO) clippy --workspace --all-targets -- -D warnings

clean:
	$(CARGO) clean
