#!/usr/bin/env bash
# The C side of the ABI's tests (`make capi-test`, part of `make test`):
#  1. builds libriptide.a / libriptide.so (debug, in the workspace's target directory);
#  2. checks that tests/c/abi_test.c calls every function the header declares;
#  3. builds tests/c/abi_test.c with AddressSanitizer and UBSan against the static library and
#     runs it (every function, every misuse case, several threads);
#  4. builds the C++ smoke test against the shared library and runs it;
#  5. extracts the C example of the README's "C API" section, builds it with -Werror and runs it.
# Prints cargo-style "test result:" lines (counted by .ci/run) and exits non-zero on any failure.
set -euo pipefail
root="$(cd "$(dirname "$0")/../../.." && pwd)"
crate="$root/crates/riptide-capi"
cd "$root"

# The compilers come from Debian; install them when missing (CI's machine is a fresh Debian).
missing=()
command -v gcc >/dev/null 2>&1 || missing+=(gcc)
command -v g++ >/dev/null 2>&1 || missing+=(g++)
if [ "${#missing[@]}" -gt 0 ]; then
  apt-get update -qq && apt-get install -y -qq "${missing[@]}"
fi

target="${CARGO_TARGET_DIR:-$root/target}"
${CARGO:-cargo} build -p riptide-capi
lib="$target/debug"
work="$(mktemp -d "${TMPDIR:-/tmp}/riptide-capi-build-XXXXXX")"
trap 'rm -rf "$work"' EXIT

passed=0
failed=0
record() { # name status
  if [ "$2" -eq 0 ]; then echo "test c_abi::$1 ... ok"; passed=$((passed + 1))
  else echo "test c_abi::$1 ... FAILED"; failed=$((failed + 1)); fi
}

# 2. Every declared function is exercised by the C test.
uncovered=()
for name in $(grep -oE '\briptide_[a-z0-9_]+\(' "$crate/include/riptide.h" | tr -d '(' | sort -u); do
  grep -q "\\b$name(" "$crate/tests/c/abi_test.c" || uncovered+=("$name")
done
if [ "${#uncovered[@]}" -gt 0 ]; then echo "functions the C test never calls: ${uncovered[*]}"; fi
record header_functions_all_called "${#uncovered[@]}"

# Native libraries a Rust static library needs, as rustc reports them.
native_libs="-lpthread -ldl -lm -lrt -lgcc_s -lc"
common_flags=(-I"$crate/include" -Wall -Wextra -Werror -g)

# 3. The ABI test under ASan + UBSan, linked statically.
status=0
gcc -std=c11 -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE "${common_flags[@]}" -fsanitize=address,undefined \
  -fno-sanitize-recover=undefined -fno-omit-frame-pointer \
  "$crate/tests/c/abi_test.c" "$lib/libriptide.a" $native_libs -o "$work/abi_test" || status=$?
if [ "$status" -eq 0 ]; then
  ASAN_OPTIONS="detect_leaks=1:abort_on_error=0" UBSAN_OPTIONS="print_stacktrace=1" "$work/abi_test" || status=$?
fi
[ "$status" -eq 0 ] || { echo "abi_test failed (status $status)"; failed=$((failed + 1)); }

# 4. The C++ smoke test, against the shared library.
status=0
g++ -std=c++17 "${common_flags[@]}" "$crate/tests/c/smoke_test.cc" -L"$lib" -lriptide -Wl,-rpath,"$lib" \
  -o "$work/smoke_test" || status=$?
[ "$status" -eq 0 ] && { "$work/smoke_test" || status=$?; }
[ "$status" -eq 0 ] || { echo "smoke_test failed (status $status)"; failed=$((failed + 1)); }

# 5. The README's C example, exactly as printed.
awk '/^## C API/ {in_section = 1} in_section && /^```c$/ {in_code = 1; next} in_code && /^```$/ {exit}
     in_code {print}' README.md >"$work/readme_example.c"
status=0
if [ ! -s "$work/readme_example.c" ]; then echo "no C example found in README.md's C API section"; status=1; fi
[ "$status" -eq 0 ] && { gcc -std=c11 "${common_flags[@]}" "$work/readme_example.c" "$lib/libriptide.a" $native_libs \
  -o "$work/readme_example" || status=$?; }
[ "$status" -eq 0 ] && { (cd "$work" && ./readme_example >/dev/null) || status=$?; }
record readme_example_compiles_and_runs "$status"

echo
if [ "$failed" -eq 0 ]; then result=ok; else result=FAILED; fi
echo "test result: $result. $passed passed; $failed failed; 0 ignored; 0 measured; 0 filtered out; finished in ${SECONDS}s"
echo
[ "$failed" -eq 0 ]
