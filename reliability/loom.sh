#!/usr/bin/env bash
# make loom (and make soak): runs the loom models of the engine's lock-free and hand-off code
# (the memtable skiplist and arena, the write queue, table-file reference counting, the
# transactions' lock manager), built
# with --cfg loom in target/loom so that the normal build is untouched, and appends one line
# to reliability/ledger.tsv with the executions explored. LOOM_MAX_PREEMPTIONS overrides each
# model's own preemption bound (2 for the skiplist, 3 for the others); a higher bound explores
# more schedules and takes much longer (the skiplist model: about 35 s at 2, 5 minutes at 3).
# Exits non-zero if a model failed; loom's message names the failing check.
set -uo pipefail
cd "$(dirname "$0")/.."
source reliability/common.sh
log="$(mktemp)"
started=$(date +%s)
# The same build and filter as the loom step of `make test` (the Makefile's LOOM_TEST).
RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p riptide --release --lib loom_models \
  -- --nocapture 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
# With --nocapture a model's "loom: N executions" line may share a line with cargo's "test ..."
# line, so neither is anchored.
executions=$(grep -oP 'loom: \K[0-9]+(?= executions)' "$log" | awk '{ total += $1 } END { print total + 0 }')
models=$(grep -oP '^test \S*loom_models::\S+' "$log" | sort -u | wc -l)
failed=$(grep -oP 'test result: \w+\. [0-9]+ passed; \K[0-9]+(?= failed)' "$log" | awk '{ total += $1 } END { print total + 0 }')
if [ "$status" -ne 0 ] && [ "$failed" -eq 0 ]; then
  # A deadlock found by loom aborts the test process before it reports the test as failed.
  failed=1
fi
ledger_append loom - "${executions} executions, ${models} models, bound ${LOOM_MAX_PREEMPTIONS:-default}" "$failed"
echo "loom: ${executions} executions of ${models} models in $(( $(date +%s) - started )) s, ${failed} failed"
rm -f "$log"
exit "$status"
