#!/usr/bin/env bash
# make sanitize: the stress driver (a timed multi-threaded run, then a short kill -9 loop) under
# AddressSanitizer, then a timed run under ThreadSanitizer, with the nightly toolchain.
# ThreadSanitizer needs the standard library rebuilt with it (-Zbuild-std, component rust-src);
# when that cannot be installed the TSan run is skipped with the reason printed.
# SANITIZE_SECONDS sets each run's length (default 60).
set -uo pipefail
cd "$(dirname "$0")/.."
source reliability/common.sh
seconds="${SANITIZE_SECONDS:-60}"
target_triple="$(rustc -vV | sed -n 's/^host: //p')"
binary="$(cargo_target_dir)/$target_triple/debug/riptide-stress"
if ! cargo +nightly --version >/dev/null 2>&1; then
  echo "make sanitize needs the nightly toolchain (rustup toolchain install nightly); skipped." >&2
  exit 2
fi
status=0
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

echo "== AddressSanitizer =="
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1"
if RUSTFLAGS="-Zsanitizer=address" cargo +nightly build -p riptide-stress --target "$target_triple"; then
  "$binary" run --path "$work/asan" --seed 7 --threads 4 --duration-ms "$((seconds * 1000))" --journal none || status=1
  "$binary" crash --seed 7 --cycles 20 --threads 4 --max-run-ms 500 --path "$work/asan-crash" || status=1
else
  status=1
fi

echo "== ThreadSanitizer =="
if ! rustup component list --toolchain nightly --installed 2>/dev/null | grep -q '^rust-src'; then
  rustup component add rust-src --toolchain nightly >/dev/null 2>&1 || true
fi
if rustup component list --toolchain nightly --installed 2>/dev/null | grep -q '^rust-src'; then
  export TSAN_OPTIONS="halt_on_error=1"
  if RUSTFLAGS="-Zsanitizer=thread" cargo +nightly build -Zbuild-std -p riptide-stress --target "$target_triple"; then
    "$binary" run --path "$work/tsan" --seed 8 --threads 4 \
      --duration-ms "$((seconds * 1000))" --journal none || status=1
  else
    status=1
  fi
else
  echo "SKIPPED ThreadSanitizer: the nightly rust-src component (needed by -Zbuild-std) cannot be installed here." >&2
fi
exit "$status"
