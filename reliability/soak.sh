#!/usr/bin/env bash
# make soak: runs the kill -9 loop, the power-loss sweep, the I/O-error sweep, the
# metamorphic tests and the isolation history checker for SOAK_MINUTES in total (35 %, 20 %,
# 15 %, 20 %, 10 %: the checker's share split over its six level and mode configurations), with
# seeds that change from run to run (or
# SOAK_SEED), in a release build, then the memory cap's process test with 4 GiB written
# (SOAK_RSS_WRITE_MIB), then the loom models (reliability/loom.sh, about a minute
# beyond SOAK_MINUTES once built), and appends one line per harness to reliability/ledger.tsv.
# Exits non-zero if any harness failed; the failure lines name the seed to replay.
set -uo pipefail
cd "$(dirname "$0")/.."
source reliability/common.sh
minutes="${1:-${SOAK_MINUTES:-10}}"
seed="${SOAK_SEED:-$(( $(date +%s) % 1000000 ))}"
cargo build --release -p riptide-stress || exit 2
binary="$(cargo_target_dir)/release/riptide-stress"
share() { awk -v total="$minutes" -v part="$1" 'BEGIN { printf "%.3f", total * part }'; }
log="$(mktemp)"
status=0
echo "soak: $minutes minutes from seed $seed"
"$binary" crash --seed "$seed" --minutes "$(share 0.35)" --threads 4 | tee "$log" || status=1
ledger_from_output "$log"
"$binary" power-loss --seed "$seed" --minutes "$(share 0.2)" | tee "$log" || status=1
ledger_from_output "$log"
"$binary" io-errors --seed "$seed" --minutes "$(share 0.15)" | tee "$log" || status=1
ledger_from_output "$log"
"$binary" metamorphic --seed "$seed" --minutes "$(share 0.2)" --steps 3000 | tee "$log" || status=1
ledger_from_output "$log"
isolation_seconds=$(awk -v total="$minutes" 'BEGIN { printf "%.1f", total * 60 * 0.1 / 6 }')
"$binary" isolation --seed "$seed" --seconds "$isolation_seconds" | tee "$log" || status=1
ledger_from_output "$log"
rm -f "$log"
# The memory cap's process test (tests/memory_cap.rs) in its long form: 4 GiB written under a
# 64 MiB cap, the process's peak RSS against cap + 10 % + 32 MiB.
rss_mib="${SOAK_RSS_WRITE_MIB:-4096}"
if RIPTIDE_RSS_WRITE_MIB="$rss_mib" cargo test --release -p riptide --test memory_cap -- --exact the_process_stays_within_the_cap --nocapture | tee "$log"; then
  ledger_append "memory-cap-rss" "-" "${rss_mib} MiB written" 0
else
  ledger_append "memory-cap-rss" "-" "${rss_mib} MiB written" 1
  status=1
fi
rm -f "$log"
bash reliability/loom.sh || status=1
echo "ledger: $(wc -l <reliability/ledger.tsv) lines in reliability/ledger.tsv"
exit "$status"
