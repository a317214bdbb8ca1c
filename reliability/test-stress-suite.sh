#!/usr/bin/env bash
# make test-stress-suite: runs the whole workspace test suite STRESS_RUNS times (default 10),
# each time as STRESS_COPIES copies at once (default 2), optionally beside STRESS_LOAD busy
# loops (default 0), and reports every failing test binary. A test whose outcome depends on the
# machine's load (a sleep that decides an order, a timed assertion) fails here sooner or later;
# see crates/riptide/tests/README.md for the rule it breaks.
#
# The test binaries are built once (`cargo test --workspace --no-run`, the profile `make test`
# uses) in a target directory of their own (target/test-stress-suite unless CARGO_TARGET_DIR is
# set), so that building or testing in the work tree meanwhile cannot replace a binary under a
# run, and run directly, each from its package's directory as cargo runs them, because two
# `cargo test` commands on one target directory would wait for each other's lock. Doc tests are
# not run (they force no interleaving). Logs of failed binaries stay under
# <target directory>/test-stress-suite/; one ledger line records the result.
set -uo pipefail
cd "$(dirname "$0")/.."
source reliability/common.sh
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target/test-stress-suite}"
runs="${STRESS_RUNS:-10}"
copies="${STRESS_COPIES:-2}"
load="${STRESS_LOAD:-0}"
logs="$(cargo_target_dir)/test-stress-suite"
rm -rf "$logs"
mkdir -p "$logs"

# "<package directory> <executable>" per test binary.
binaries="$logs/binaries.txt"
cargo test --workspace --no-run --message-format=json 2>/dev/null | python3 -c '
import json, os, sys
for line in sys.stdin:
    try:
        message = json.loads(line)
    except ValueError:
        continue
    if message.get("reason") == "compiler-artifact" and message.get("profile", {}).get("test") and message.get("executable"):
        print(os.path.dirname(message["manifest_path"]), message["executable"])
' >"$binaries" || { echo "test-stress-suite: the build failed"; exit 2; }
count="$(wc -l <"$binaries")"
[ "$count" -gt 0 ] || { echo "test-stress-suite: no test binaries found"; exit 2; }
echo "test-stress-suite: $count test binaries, $runs runs of $copies copies at once, $load busy loops beside"

burners=()
for _ in $(seq 1 "$load"); do
  ( while :; do :; done ) &
  burners+=("$!")
done
stop_burners() { [ "${#burners[@]}" -gt 0 ] && kill "${burners[@]}" 2>/dev/null; }
trap stop_burners EXIT

# One copy of the suite: every binary in turn; prints one line per failed binary.
run_copy() {
  local run="$1" copy="$2" directory executable name log
  while read -r directory executable; do
    name="$(basename "$executable")"
    log="$logs/run$run-copy$copy-$name.log"
    if (cd "$directory" && "$executable") >"$log" 2>&1; then
      rm -f "$log"
    else
      echo "FAIL run $run copy $copy: $name (log: $log)"
      grep -E '^test .* FAILED$|panicked at' "$log" | head -5 | sed 's/^/    /'
    fi
  done <"$binaries"
}

failures=0
started="$(date +%s)"
for run in $(seq 1 "$runs"); do
  pids=()
  outputs=()
  for copy in $(seq 1 "$copies"); do
    output="$logs/run$run-copy$copy.summary"
    run_copy "$run" "$copy" >"$output" &
    pids+=("$!")
    outputs+=("$output")
  done
  for pid in "${pids[@]}"; do wait "$pid"; done
  run_failures="$(cat "${outputs[@]}" | grep -c '^FAIL' || true)"
  cat "${outputs[@]}"
  failures=$((failures + run_failures))
  echo "run $run/$runs: $run_failures failed binaries ($(( $(date +%s) - started )) s so far)"
done
suites=$((runs * copies))
echo "test-stress-suite: $suites suite runs ($runs x $copies at once, $load busy loops), $failures failed binaries"
ledger_append "test-stress-suite" "-" "$suites suite runs (${copies} at once, ${load} busy loops)" "$failures"
[ "$failures" -eq 0 ]
