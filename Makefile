# Riptide: the two commands that work on a fresh machine are `make test` and `make bench`.
CARGO ?= cargo
RESULTS_DIR := bench/results

.PHONY: test-sql plugin sql-engine-test sql-crash-test sql sql-stop sql-test sql-smoke bench-sql test capi-test capi-bench bench setup fmt lint unit bench-core bench-deps bench-build bench-riptide bench-longrun bench-durability bench-report bench-compare clean soak fuzz sanitize loom test-stress-suite

## setup: check the toolchain (Rust with rustfmt and clippy) is present.
setup:
	@command -v $(CARGO) >/dev/null || { echo "cargo not found: install Rust (rustup) first"; exit 1; }
	@$(CARGO) fmt --version >/dev/null && $(CARGO) clippy --version >/dev/null

## test: formatting, lints with warnings as errors, every test of the workspace, the C ABI's C
## tests, the SQL layer's tests (`test-sql`) and the loom models at their default bounds (a
## --cfg loom build of its own in target/loom: 2 to 2.5 minutes from scratch on 2 cores, about
## 40 s once built; no ledger line, unlike `make loom`).
LOOM_TEST = RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom $(CARGO) test -p riptide --release --lib loom_models
test: setup
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	$(CARGO) test --workspace
	bash crates/riptide-capi/tests/run-c-tests.sh
	$(MAKE) --no-print-directory test-sql
	$(LOOM_TEST)

## test-sql: the SQL layer's tests on a real MariaDB (installed at the version whose source
## builds the plugin, by mariadb/setup.sh): the plugin is built, ENGINE=RIPTIDE's mtr suite runs,
## the kill -9 crash test runs SQL_TEST_CRASH_CYCLES cycles without and with the binary log
## (default 2 each; `make sql-crash-test` runs more), and sqlbench's gofmt, go vet, unit tests and integration tests run against a
## private server at a tiny scale (InnoDB, MyRocks, RIPTIDE). Part of `test`.
SQL_TEST_CRASH_CYCLES ?= 2
test-sql: plugin
	bash mariadb/mysql-test/run.sh
	bash mariadb/tests/crash.sh $(SQL_TEST_CRASH_CYCLES)
	CRASH_BINLOG=1 bash mariadb/tests/crash.sh $(SQL_TEST_CRASH_CYCLES)
	bash bench/sql/run.sh integration-test

## capi-test: the C side of the C ABI's tests (also run by `test`): builds libriptide.a/.so, runs
## a C program calling every function and misuse case under ASan and UBSan (and from several
## threads), a C++ smoke test and the README's C example. Installs gcc/g++ when missing.
capi-test:
	bash crates/riptide-capi/tests/run-c-tests.sh

## capi-bench: ns per put and get through the C ABI vs the Rust API (release build, not in `test`).
capi-bench:
	bash crates/riptide-capi/bench/run.sh

## test-stress-suite: the workspace's tests STRESS_RUNS times (default 10), STRESS_COPIES copies
## at once (default 2), beside STRESS_LOAD busy loops (default 0); reports every failure and
## appends a ledger line. Shows that no test depends on the machine's load
## (crates/riptide/tests/README.md). About 4 minutes per run of two copies on 2 cores.
STRESS_RUNS ?= 10
STRESS_COPIES ?= 2
STRESS_LOAD ?= 0
test-stress-suite: setup
	STRESS_RUNS=$(STRESS_RUNS) STRESS_COPIES=$(STRESS_COPIES) STRESS_LOAD=$(STRESS_LOAD) bash reliability/test-stress-suite.sh

## bench: Riptide vs RocksDB vs TidesDB side by side (the benchtool, crates/riptide-bench). Installs
## what it needs (clang, libclang-dev, cmake, liblz4-dev, matplotlib), builds with RocksDB and
## TidesDB into target/bench (the first build
## compiles RocksDB: ~40 min on 2 cores; later builds reuse it), runs the suite and writes
## bench/results/<timestamp>/report.md (bench/results/latest points at it).
## SUITE=quick (default, minutes) | standard (seed 004's 8-thread suite) | large (16 threads, 4x).
## BENCH_ARGS passes more options, e.g. BENCH_ARGS="--filter range,seek" or "--engines riptide".
## BENCH_REPEAT=3 (default): rounds of every test, engines interleaved; the report shows medians.
SUITE ?= quick
BENCH_REPEAT ?= 3
BENCH_ARGS ?=
BENCH_DB_PATH ?= target/bench-db
BENCH_TARGET_DIR := target/bench
BENCH_RUSTFLAGS := -C target-cpu=native
BENCH_BIN := $(BENCH_TARGET_DIR)/release/riptide-bench

bench: setup bench-deps bench-build
	$(BENCH_BIN) suite --suite $(SUITE) --repeat $(BENCH_REPEAT) --db-path $(BENCH_DB_PATH) $(BENCH_ARGS)

## bench-deps: install the benchmark's system and Python dependencies when missing.
bench-deps:
	bash bench/install-deps.sh

## bench-build: build the benchtool with RocksDB and TidesDB (same target dir and flags every
## time, so the compiled RocksDB is reused; TidesDB's C source builds with cmake in about a minute).
bench-build:
	CARGO_TARGET_DIR=$(BENCH_TARGET_DIR) RUSTFLAGS="$(BENCH_RUSTFLAGS)" $(CARGO) build --release -p riptide-bench --features rocksdb,tidesdb

## bench-longrun: the long random-write run, Riptide then RocksDB (same build as `bench`): uniform
## 16-byte keys and 100-byte values in batches of 100 from 2 threads, far beyond the 64 MiB
## memtables, for LONGRUN_SECONDS per engine (default 600, plus settling); the report adds
## throughput over time, write stalls, write amplification, peak RSS and tail latencies.
## LONGRUN_OPERATIONS sets how many keys it may write (default 200000000, more than 10 minutes allow).
LONGRUN_SECONDS ?= 600
LONGRUN_OPERATIONS ?=
bench-longrun: setup bench-deps bench-build
	$(BENCH_BIN) suite --suite longrun --max-seconds $(LONGRUN_SECONDS) $(if $(LONGRUN_OPERATIONS),--operations $(LONGRUN_OPERATIONS)) --db-path $(BENCH_DB_PATH) $(BENCH_ARGS)

## bench-riptide: the suite on Riptide alone, without building RocksDB.
bench-riptide: setup
	CARGO_TARGET_DIR=target/bench-riptide RUSTFLAGS="$(BENCH_RUSTFLAGS)" $(CARGO) build --release -p riptide-bench
	target/bench-riptide/release/riptide-bench suite --suite $(SUITE) --engines riptide --db-path $(BENCH_DB_PATH) $(BENCH_ARGS)

## bench-durability: the kill -9 test of unsynced writes on every engine (DURABILITY_CYCLES
## cycles, default 20, of 2 writer threads each): acknowledged puts lost after SIGKILL and reopen.
DURABILITY_CYCLES ?= 20
bench-durability: setup bench-deps bench-build
	for engine in riptide rocksdb tidesdb; do $(BENCH_BIN) durability -e $$engine --cycles $(DURABILITY_CYCLES) --threads 2 --db-path $(BENCH_DB_PATH) || exit 1; done

## bench-report: redraw the charts and rewrite the report of the latest results.
bench-report: bench-build
	$(BENCH_BIN) report bench/results/latest

## bench-compare: per-test ratios between two results files, e.g.
## make bench-compare BEFORE=bench/results/A/results.csv AFTER=bench/results/latest/results.csv
bench-compare: bench-build
	$(BENCH_BIN) compare $(BEFORE) $(AFTER)

## bench-core: the engine's own criterion benches and multi-threaded loader.
bench-core:
	bash bench/run-core.sh

SOAK_MINUTES ?= 10
FUZZ_SECONDS ?= 60

## soak: the kill -9 loop, power-loss and I/O-error sweeps, metamorphic tests and isolation histories for SOAK_MINUTES in total,
## with fresh seeds (or SOAK_SEED), then the loom models (`make loom`, outside that budget);
## appends a line per harness to reliability/ledger.tsv.
soak: setup
	SOAK_MINUTES=$(SOAK_MINUTES) bash reliability/soak.sh

## fuzz: every fuzz target for FUZZ_SECONDS each (needs nightly; installs cargo-fuzz if
## missing); crashes are copied to fuzz/regressions/, one ledger line per target.
fuzz: setup
	FUZZ_SECONDS=$(FUZZ_SECONDS) bash reliability/fuzz.sh

## loom: the loom models of the memtable skiplist and arena, the write queue and table-file
## reference counting (built with --cfg loom in target/loom, so the normal build is untouched):
## every interleaving within LOOM_MAX_PREEMPTIONS preemptions (default per model, 2 or 3; one
## more takes about ten times as long), printing each model's executions; one ledger line.
## About 40 s plus the first build (about 2 minutes on 2 cores). See "Concurrency models" in
## docs/architecture.md.
loom: setup
	bash reliability/loom.sh

## sanitize: the stress driver under AddressSanitizer and ThreadSanitizer (nightly).
sanitize: setup
	bash reliability/sanitize.sh

fmt:
	$(CARGO) fmt --all

lint:
	$(CARGO) clippy --workspace --all-targets -- -D warnings

clean:
	$(CARGO) clean

## plugin: ENGINE=RIPTIDE, mariadb/build/ha_riptide.so: the MariaDB set-up (mariadb/setup.sh,
## idempotent), the release build of the C ABI's static library, then cmake (seconds once built).
plugin:
	bash mariadb/build.sh

## sql: builds the plugin and starts a private MariaDB server (InnoDB, MyRocks and RIPTIDE)
## under var/sql/; prints how to connect. `make sql-stop` shuts it down.
sql: plugin
	bash mariadb/server.sh start

## sql-engine-test: ENGINE=RIPTIDE's mtr suite (mariadb/mysql-test/riptide/) with Debian's
## mariadb-test against the installed server and the plugin (about a minute).
sql-engine-test: plugin
	bash mariadb/mysql-test/run.sh

## sql-crash-test: kill -9 of mariadbd under a concurrent RIPTIDE write load, restart, check
## row counts and every secondary index against the primary (SQL_CRASH_CYCLES, default 3), then
## the same with the binary log on (two-phase commits; the engine must hold exactly what the
## binlog holds); appends `sql-crash` and `sql-crash-binlog` ledger lines.
SQL_CRASH_CYCLES ?= 3
sql-crash-test: plugin
	CRASH_LEDGER=1 bash mariadb/tests/crash.sh $(SQL_CRASH_CYCLES)
	CRASH_LEDGER=1 CRASH_BINLOG=1 bash mariadb/tests/crash.sh $(SQL_CRASH_CYCLES)

sql-stop:
	bash mariadb/server.sh stop

## sql-test: the SQL kit's unit tests plus its integration tests against a private server
## (var/sqlbench-test/), at a tiny scale, for every engine that loads (about 1.5 minutes).
sql-test:
	bash bench/sql/run.sh integration-test

## sql-smoke: a short end-to-end run of the SQL kit (iibench, TPC-C, sysbench, seed 003's
## patterns; InnoDB, MyRocks, RIPTIDE when it loads) on a private server; report under
## bench/results/sql-<timestamp>/ (bench/results/sql-latest points at it). A few minutes.
sql-smoke:
	bash bench/sql/run.sh smoke

## bench-sql: the whole SQL comparison at the quick scale (about 15 minutes on 2 cores), with all
## three server profiles. SQL_SCALE=full for the seeds' sizes (hours); see the README.
SQL_SCALE ?= quick
bench-sql:
	bash bench/sql/run.sh $(SQL_SCALE)
