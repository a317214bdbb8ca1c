#!/usr/bin/env bash
# Measures RocksDB settings one at a time with short benchtool runs (issue 20, part 2). Each
# variant of ROCKSDB_BENCH_TUNING (see crates/riptide-bench/src/engine/rocksdb_engine.rs) runs
# each workload ROUNDS times, the variants taking turns round by round (so that a change of the
# machine's load hits every variant alike); prints the median ops/s and the spread (min-max) per
# (workload, variant) as a Markdown table.
# Usage: bash bench/rocksdb-tuning.sh [ROUNDS] [VARIANT ...]   (after `make bench-build`)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-target/bench/release/riptide-bench}
ROUNDS=${1:-5}
shift || true
DB=${DB:-target/bench-db}
mkdir -p "$DB"
if [ $# -gt 0 ]; then
  variants=("$@")
else
  variants=(
    "cache=lru"
    "cache=hyper_clock"
    "cache=hyper_clock,pipelined_write=true"
    "cache=hyper_clock,data_block_hash_index=true"
    "cache=hyper_clock,bytes_per_sync=1048576"
  )
fi
workloads=(
  "read_random_1M_t8|-w read -p random -o 1000000 -t 8"
  "seek_random_500K_t8|-w seek -p random -o 500000 -t 8"
  "batch_1_200K_t8|-w write -p random -o 200000 -t 8 -b 1"
  "batch_1000_1M_t8|-w write -p random -o 1000000 -t 8 -b 1000"
  "mixed_random_500K_t8_b1000|-w mixed -p random -o 500000 -t 8 -b 1000"
)
printf '| workload |'; for v in "${variants[@]}"; do printf ' %s |' "$v"; done; printf '\n'
printf '|---|'; for _ in "${variants[@]}"; do printf -- '---:|'; done; printf '\n'
for entry in "${workloads[@]}"; do
  name=${entry%%|*}; args=${entry#*|}
  declare -A rates=()
  for _ in $(seq "$ROUNDS"); do
    for index in "${!variants[@]}"; do
      # shellcheck disable=SC2086
      line=$(ROCKSDB_BENCH_TUNING="${variants[$index]}" nice -n 10 "$BIN" run -e rocksdb $args -d "$DB" \
        --progress-seconds 0 | grep ' ops/s over ')
      rates[$index]+="$(echo "$line" | sed -E 's/.*: ([0-9,]+) ops\/s over.*/\1/' | tr -d ,) "
    done
  done
  printf '| %s |' "$name"
  for index in "${!variants[@]}"; do
    sorted=$(printf '%s\n' ${rates[$index]} | sort -n)
    median=$(echo "$sorted" | sed -n "$(( (ROUNDS + 1) / 2 ))p")
    printf ' %s (%s-%s) |' "$median" "$(echo "$sorted" | head -1)" "$(echo "$sorted" | tail -1)"
  done
  printf '\n'
  unset rates
done
