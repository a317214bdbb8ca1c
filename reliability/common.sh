# Shared by the reliability scripts: the ledger, and the commit being tested.
# Sourced, not run. Every function writes nothing but its result.

LEDGER="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/ledger.tsv"

# Where cargo puts its output: CARGO_TARGET_DIR when set (relative to the repository root,
# where every script runs), target otherwise.
cargo_target_dir() {
  echo "${CARGO_TARGET_DIR:-target}"
}

# The commit under test, with "-dirty" when the work tree has changes (read-only git calls).
# The ledger itself does not count: the first line a run appends would otherwise mark every
# later harness of the same run as dirty.
ledger_commit() {
  local commit
  commit="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  if ! git diff --quiet HEAD -- . ':(exclude)reliability/ledger.tsv' 2>/dev/null; then
    commit="${commit}-dirty"
  fi
  echo "$commit"
}

# Appends one ledger line: harness, seed range, count with unit, failures.
ledger_append() {
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$(ledger_commit)" "$1" "$2" "$3" "$4" >>"$LEDGER"
}

# Appends the LEDGER lines a riptide-stress command printed (in file $1).
ledger_from_output() {
  grep -P '^LEDGER\t' "$1" | while IFS=$'\t' read -r _ harness seeds count failures; do
    ledger_append "$harness" "$seeds" "$count" "$failures"
  done
}
