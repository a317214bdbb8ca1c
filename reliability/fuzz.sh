#!/usr/bin/env bash
# make fuzz: runs every fuzz target for FUZZ_SECONDS (default 60) with libFuzzer, installing
# cargo-fuzz from crates.io if missing (nightly is required). New inputs go to a work corpus
# under fuzz/target/ (the committed corpus stays small); a crash's input is copied to
# fuzz/regressions/<target>/, where the stable replay test picks it up. One ledger line per
# target: executions and crashes.
#
# The decoders are safe Rust, where AddressSanitizer finds nothing the language does not already
# stop, and it costs them about seven times the executions; they run without a sanitizer. The
# API call-sequence target drives the memtable's arena and skip list, the unsafe code in the
# engine, and keeps AddressSanitizer. FUZZ_SANITIZER overrides the choice for every target.
set -uo pipefail
cd "$(dirname "$0")/.."
source reliability/common.sh
seconds="${1:-${FUZZ_SECONDS:-60}}"
if ! cargo +nightly --version >/dev/null 2>&1; then
  echo "make fuzz needs the nightly toolchain (rustup toolchain install nightly); not fuzzing." >&2
  exit 2
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
  cargo install cargo-fuzz --locked || exit 2
fi
targets="${FUZZ_TARGETS:-$(ls fuzz/fuzz_targets | sed 's/\.rs$//')}"
status=0
for target in $targets; do
  work="fuzz/target/work-corpus/$target"
  mkdir -p "$work" "fuzz/regressions/$target"
  log="$(mktemp)"
  before="$(ls fuzz/artifacts/"$target" 2>/dev/null | wc -l)"
  case "$target" in
    api_sequence) sanitizer="${FUZZ_SANITIZER:-address}" ;;
    *) sanitizer="${FUZZ_SANITIZER:-none}" ;;
  esac
  (cd fuzz && cargo +nightly fuzz run -O -s "$sanitizer" "$target" "target/work-corpus/$target" "corpus/$target" -- \
    -max_total_time="$seconds" -print_final_stats=1 -rss_limit_mb=4096 -timeout=60) >"$log" 2>&1
  executions="$(grep -oP 'stat::number_of_executed_units:\s*\K[0-9]+' "$log" | tail -1)"
  crashes=0
  for artifact in fuzz/artifacts/"$target"/*; do
    [ -f "$artifact" ] || continue
    if [ ! -f "fuzz/regressions/$target/$(basename "$artifact")" ]; then
      cp "$artifact" "fuzz/regressions/$target/"
      crashes=$((crashes + 1))
    fi
  done
  after="$(ls fuzz/artifacts/"$target" 2>/dev/null | wc -l)"
  if [ "$after" -gt "$before" ] || grep -q 'ERROR: libFuzzer\|panicked at' "$log"; then
    status=1
    [ "$crashes" -gt 0 ] || crashes=1
    grep -m5 -E 'panicked at|ERROR: libFuzzer|SUMMARY' "$log" >&2
  fi
  echo "fuzz $target: ${executions:-0} executions in ${seconds}s, $crashes new crashes"
  ledger_append "fuzz-$target" "-" "${executions:-0} execs" "$crashes"
  rm -f "$log"
done
if [ "$status" -ne 0 ]; then
  echo "crashing inputs were copied to fuzz/regressions/; 'cargo test -p riptide-stress --test fuzz_replay' replays them" >&2
fi
exit "$status"
