#!/usr/bin/env bash
# ENGINE=RIPTIDE crash test: with riptide_flush_log_at_trx_commit=1, kill -9 of mariadbd under a
# concurrent write load loses no committed transaction and leaves every table consistent with
# its indexes.
#
#   bash mariadb/tests/crash.sh [CYCLES]        # default 3; make sql-crash-test
#
# A private server (mariadb/server.sh, NAME crash, a fresh datadir) gets a table with a primary
# key, a non-unique, a unique and a string index. Each cycle starts WRITERS client processes;
# writer w runs transactions n = 1, 2, ...: BEGIN; insert row w*10^7+n; bump its counter row
# (id -w) to n; update the k and s of an earlier row of its own; COMMIT; then prints "ok n".
# A line "ok n" is printed only after COMMIT returned, so transaction n was acknowledged. After a
# random 2-5 s the server is killed with SIGKILL, restarted, and checked:
#   - every acknowledged insert is there, and each counter is at least its last acknowledged n
#     (at most one more: a commit may land without its acknowledgement);
#   - each secondary index has as many entries as the primary, with the same sums and checksums
#     (COUNT, SUM(k), BIT_XOR(CRC32(s)) read through each index with FORCE INDEX);
#   - CHECK TABLE (every row's entries present and pointing back at it) says OK.
# With CRASH_BINLOG=1 the server also writes a binary log (sync_binlog=1), so every commit is a
# two-phase commit between RIPTIDE and the binlog, and each restart's recovery decides the
# transactions a kill left prepared; then one more check: the engine holds exactly the
# transactions the binlog holds (its row count equals the rows the binlog inserted into the
# table, read back with mariadb-binlog), neither a commit the binlog lost nor a binlogged one
# the engine lost.
# Prints a cargo-style `test result:` line; the logs stay in var/crash/. With CRASH_LEDGER=1
# (make sql-crash-test) it appends a `sql-crash` line to reliability/ledger.tsv.
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
cycles="${1:-3}"
writers="${CRASH_WRITERS:-2}"
binlog="${CRASH_BINLOG:-0}"
name=crash
[ "$binlog" = 1 ] && name=crash-binlog
dir="var/$name"
client=(mariadb --no-defaults -S "$dir/mariadbd.sock" -u root --batch --skip-column-names)
passed=0
failed=0
all_acknowledged=0
fail() { failed=$((failed + 1)); echo "crash test: FAILED: $*"; }
finish() {
  bash mariadb/server.sh stop "$name" >/dev/null 2>&1 || true
  if [ "${CRASH_LEDGER:-0}" = 1 ]; then
    # shellcheck source=../../reliability/common.sh
    source reliability/common.sh
    harness=sql-crash
    [ "$binlog" = 1 ] && harness=sql-crash-binlog
    ledger_append "$harness" - "$((passed + failed)) kill cycles, $all_acknowledged transactions acknowledged" "$failed"
  fi
  echo "test result: $([ "$failed" -eq 0 ] && echo ok || echo FAILED). $passed passed; $failed failed; 0 ignored; 0 measured; 0 filtered out"
}
trap finish EXIT

[ -f mariadb/build/ha_riptide.so ] || { fail "mariadb/build/ha_riptide.so is not built (make plugin)"; exit 1; }
bash mariadb/server.sh stop "$name" >/dev/null 2>&1 || true
rm -rf "$dir"
export MARIADB_EXTRA_ARGS="--riptide-flush-log-at-trx-commit=1 --riptide-lock-wait-timeout=10"
if [ "$binlog" = 1 ]; then
  MARIADB_EXTRA_ARGS+=" --log-bin=crash-bin --sync-binlog=1 --binlog-format=ROW"
fi

# Rows the binary log inserted into crash.c, over every binlog file the server lists.
binlog_inserts() {
  local files=()
  while read -r file; do files+=("$dir/data/$(basename "$file")"); done <"$dir/data/crash-bin.index"
  mariadb-binlog --no-defaults --base64-output=decode-rows -v "${files[@]}" 2>/dev/null |
    grep -c '^### INSERT INTO `crash`.`c`'
}
start() { bash mariadb/server.sh start "$name" >/dev/null || { tail -20 "$dir/error.log"; return 1; }; }
start || { fail "the server did not start"; exit 1; }
"${client[@]}" -e "CREATE DATABASE crash; CREATE TABLE crash.c (id BIGINT PRIMARY KEY, k INT NOT NULL,
  u BIGINT NULL, s VARCHAR(40) CHARACTER SET utf8mb4, KEY kk (k), UNIQUE KEY uu (u), KEY ks (s)) ENGINE=RIPTIDE" ||
  { fail "cannot create the table"; exit 1; }
for w in $(seq 1 "$writers"); do
  "${client[@]}" crash -e "INSERT INTO c VALUES (-$w, 0, NULL, 'counter')"
done

# The statements of writer $1 from transaction $2 on (awk writes them faster than they run).
statements() {
  awk -v w="$1" -v first="$2" 'BEGIN {
    srand(w * 7919 + first);
    for (n = first; n < first + 1000000; n++) {
      id = w * 10000000 + n;
      printf "BEGIN; INSERT INTO c VALUES (%d, %d, %d, \x27s%d\x27);", id, n % 97, id, n;
      printf " UPDATE c SET k = %d WHERE id = -%d;", n, w;
      if (n > 1) { old = w * 10000000 + 1 + int(rand() * (n - 1));
        printf " UPDATE c SET k = k + 1, s = CONCAT(\x27u\x27, k) WHERE id = %d;", old }
      printf " COMMIT; SELECT \x27ok %d\x27;\n", n;
    }
  }'
}

for cycle in $(seq 1 "$cycles"); do
  pids=()
  for w in $(seq 1 "$writers"); do
    next=$(( $("${client[@]}" crash -e "SELECT k FROM c WHERE id = -$w") + 1 ))
    statements "$w" "$next" | "${client[@]}" crash >"$dir/writer-$w.out" 2>"$dir/writer-$w.err" &
    pids+=($!)
  done
  sleep "$((2 + RANDOM % 4))"
  pid="$(cat "$dir/mariadbd.pid")"
  kill -9 "$pid"
  while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
  start || { fail "cycle $cycle: the server did not restart"; break; }

  acknowledged_total=0
  for w in $(seq 1 "$writers"); do
    last=$(grep -E '^ok [0-9]+$' "$dir/writer-$w.out" | tail -1 | cut -d' ' -f2)
    last="${last:-0}"
    first_this_cycle=$(grep -E '^ok [0-9]+$' "$dir/writer-$w.out" | head -1 | cut -d' ' -f2)
    acknowledged_total=$((acknowledged_total + last - ${first_this_cycle:-1} + 1))
    counter=$("${client[@]}" crash -e "SELECT k FROM c WHERE id = -$w")
    if [ "$counter" -lt "$last" ] || [ "$counter" -gt $((last + 1)) ]; then
      fail "cycle $cycle: writer $w acknowledged transaction $last but its counter is $counter"
    fi
    missing=$("${client[@]}" crash -e "SELECT $last - COUNT(*) FROM c WHERE id BETWEEN $w * 10000000 + 1 AND $w * 10000000 + $last")
    [ "$missing" = "0" ] || fail "cycle $cycle: writer $w lost $missing acknowledged inserts"
  done
  primary=$("${client[@]}" crash -e "SELECT COUNT(*), SUM(k), BIT_XOR(CRC32(s)), SUM(u) FROM c FORCE INDEX (PRIMARY)")
  # Each condition covers every row, as a range of its index.
  for scan in "kk:k >= -2147483648" "uu:u IS NULL OR u >= -9223372036854775807" "ks:s IS NULL OR s >= ''"; do
    index="${scan%%:*}"
    through=$("${client[@]}" crash -e "SELECT COUNT(*), SUM(k), BIT_XOR(CRC32(s)), SUM(u) FROM c FORCE INDEX ($index) WHERE ${scan#*:}")
    [ "$through" = "$primary" ] || fail "cycle $cycle: index $index gives '$through', the primary '$primary'"
  done
  check=$("${client[@]}" crash -e "CHECK TABLE c" | awk '{print $NF}' | tail -1)
  [ "$check" = "OK" ] || fail "cycle $cycle: CHECK TABLE says $check"
  rows=$(echo "$primary" | cut -f1)
  if [ "$binlog" = 1 ]; then
    logged=$(binlog_inserts)
    [ "$logged" = "$rows" ] || fail "cycle $cycle: the binlog inserted $logged rows, the engine holds $rows"
  fi
  echo "crash test: cycle $cycle: killed with $acknowledged_total transactions acknowledged this cycle; $rows rows, indexes consistent"
  all_acknowledged=$((all_acknowledged + acknowledged_total))
  passed=$((passed + 1))
done
[ "$failed" -eq 0 ]
