#!/usr/bin/env bash
# The SQL benchmark kit's checks for `make test`: gofmt, go vet and the Go unit tests (no server
# needed), then one cargo-style "test result:" line so .ci/run's summary counts Go's tests too.
#
# With SQLBENCH_TEST_SOCKET set to a running server's socket, the integration tests
# (internal/itest) run too, against that server, at a tiny scale, for every engine it offers
# (InnoDB, MyRocks, RIPTIDE); without it they are skipped. `bash bench/sql/run.sh
# integration-test` (`make sql-test`) starts a private server, runs this script against it and
# stops the server (about 1.5 minutes).
set -euo pipefail
cd "$(dirname "$0")"

find_go() {
  if command -v go >/dev/null 2>&1; then return 0; fi
  if [ -x /usr/local/go/bin/go ]; then export PATH="$PATH:/usr/local/go/bin"; return 0; fi
  echo "sqlbench/test.sh: Go not found; installing Debian's golang-go"
  if [ "$(id -u)" -eq 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq golang-go
  else
    sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq golang-go
  fi
}
find_go
echo "sqlbench/test.sh: $(go version)"

unformatted="$(gofmt -l .)"
if [ -n "$unformatted" ]; then
  echo "sqlbench/test.sh: gofmt would change these files (run gofmt -w on them):" >&2
  echo "$unformatted" >&2
  exit 1
fi
go vet ./...

log="$(mktemp)"
trap 'rm -f "$log"' EXIT
started=$(date +%s.%N)
set +e
go test -count=1 -v ./... >"$log" 2>&1
status=$?
set -e
finished=$(date +%s.%N)
# Package summaries and failures in full; the per-test lines only counted.
grep -E '^(ok|FAIL|---|panic|\s+--- FAIL|.*_test\.go:[0-9]+:)' "$log" | grep -vE '^\s*--- (PASS|SKIP)' || true
passed=$(grep -cE '^\s*--- PASS:' "$log" || true)
failed=$(grep -cE '^\s*--- FAIL:' "$log" || true)
skipped=$(grep -cE '^\s*--- SKIP:' "$log" || true)
if [ "$status" -ne 0 ] && [ "$failed" -eq 0 ]; then
  # A build failure or panic fails no named test; count it as one failure so the summary shows it.
  tail -n 40 "$log"
  failed=1
fi
outcome=ok
[ "$status" -eq 0 ] || outcome=FAILED
printf 'test result: %s. %d passed; %d failed; %d ignored; 0 measured; 0 filtered out; finished in %.2fs\n' \
  "$outcome" "$passed" "$failed" "$skipped" "$(awk -v a="$started" -v b="$finished" 'BEGIN {print b - a}')"
exit "$status"
