#!/usr/bin/env bash
# `make capi-bench`: builds the release library and the Rust example, then runs the same loop of
# puts and gets through the C ABI (bench/abi_bench.c) and through the Rust API
# (examples/rust_bench.rs), each on a fresh database, and prints ns per call for both.
# BENCH_N sets the number of keys (default 200000); each side runs BENCH_ROUNDS times (default 3).
set -euo pipefail
root="$(cd "$(dirname "$0")/../../.." && pwd)"
cd "$root"
target="${CARGO_TARGET_DIR:-$root/target}"
n="${BENCH_N:-200000}"
rounds="${BENCH_ROUNDS:-3}"
${CARGO:-cargo} build --release -p riptide-capi --lib --example rust_bench
work="$(mktemp -d "${TMPDIR:-/tmp}/riptide-capi-bench-XXXXXX")"
trap 'rm -rf "$work"' EXIT
gcc -O2 -std=c11 -D_POSIX_C_SOURCE=200809L -Icrates/riptide-capi/include crates/riptide-capi/bench/abi_bench.c \
  "$target/release/libriptide.a" -lpthread -ldl -lm -lrt -lgcc_s -o "$work/abi_bench"
for round in $(seq 1 "$rounds"); do
  "$work/abi_bench" "$work/c-$round" "$n"
  "$target/release/examples/rust_bench" "$work/rust-$round" "$n"
done
