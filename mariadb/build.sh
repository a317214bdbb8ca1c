#!/usr/bin/env bash
# Builds mariadb/build/ha_riptide.so: the MariaDB set-up (mariadb/setup.sh, idempotent), the C
# ABI's static library in release mode, then the plugin with cmake. Rebuilds take seconds.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
bash mariadb/setup.sh >/dev/null
cache="${RIPTIDE_MARIADB_CACHE:-/var/cache/riptide-mariadb}"
# shellcheck disable=SC1091
. "$cache/env"
export PATH="$HOME/.cargo/bin:$PATH"
target="${CARGO_TARGET_DIR:-$root/target}"
cargo build --release -q -p riptide-capi --lib
cmake -S mariadb -B mariadb/build -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DMARIADB_SOURCE="$MARIADB_SOURCE" -DRIPTIDE_LIBRARY="$target/release/libriptide.a" >/dev/null
cmake --build mariadb/build -j2 -- --no-print-directory
echo "mariadb/build.sh: built mariadb/build/ha_riptide.so for MariaDB $MARIADB_VERSION"
