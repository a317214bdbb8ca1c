#!/usr/bin/env bash
# Runs the engine's criterion benches and the multi-threaded loader, and writes a Markdown
# report under bench/results/<timestamp>/, with bench/results/latest pointing at it.
set -euo pipefail
cd "$(dirname "$0")/.."
stamp=$(date -u +%Y%m%dT%H%M%SZ)
out="bench/results/$stamp"
mkdir -p "$out"
ln -sfn "$stamp" bench/results/latest
cargo build --release -p riptide --examples --benches >/dev/null
{
  echo "# Riptide core benchmark ($stamp)"
  echo
  echo "Commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown); machine: $(nproc) cores."
  echo
  echo "## Loader (examples/loader.rs)"
  echo
  echo '| workload | keys | threads | batch | ops/s |'
  echo '|---|---|---|---|---|'
} > "$out/report.md"
for spec in "seq 1000000 2 100" "random 1000000 2 100" "random 400000 2 1" "random 400000 8 1"; do
  set -- $spec
  dir=$(mktemp -d)
  line=$(cargo run --release -q -p riptide --example loader -- --pattern "$1" --keys "$2" --threads "$3" --batch "$4" --dir "$dir" | tail -1)
  rm -rf "$dir"
  echo "$line" | tee -a "$out/loader.csv"
  ops=$(echo "$line" | awk -F, '{print $NF}')
  echo "| $1 write | $2 | $3 | $4 | $ops |" >> "$out/report.md"
done
echo >> "$out/report.md"
echo "## Criterion micro-benchmarks" >> "$out/report.md"
echo >> "$out/report.md"
echo '```' >> "$out/report.md"
cargo bench -q -p riptide --bench memtable --bench sstable -- --warm-up-time 1 --measurement-time 3 2>&1 \
  | grep -E "^[a-z].*|time:" | tee -a "$out/report.md"
echo '```' >> "$out/report.md"
echo "report: $out/report.md"
