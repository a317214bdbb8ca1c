#!/usr/bin/env bash
# sysbench OLTP figures for ENGINE=RIPTIDE beside InnoDB and MyRocks, on one private server
# (mariadb/server.sh, NAME sysbench-engines) with a 256 MiB cache for every engine and no binlog.
#
#   bash mariadb/bench/sysbench.sh [DURATION_S] [MODES] [ENGINES] [WORKLOADS]
#     DURATION_S  seconds per run (default 60)
#     MODES       "relaxed synced" (default): the log flushed about once a second (the
#                 *_flush_log_at_trx_commit = 2 of each engine), or synced at every commit (= 1)
#     ENGINES     "RIPTIDE InnoDB ROCKSDB" (default)
#     WORKLOADS   "oltp_read_write oltp_read_only oltp_write_only oltp_update_non_index"
#
# 4 tables x 100,000 rows, 2 threads (SYSBENCH_TABLES, SYSBENCH_ROWS, SYSBENCH_THREADS). Each
# engine gets its own database, prepared once. Prints one line per run (tps, qps, p95 latency,
# errors) and writes them as CSV to var/sysbench-engines/results.csv.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
duration="${1:-60}"
modes="${2:-relaxed synced}"
engines="${3:-RIPTIDE InnoDB ROCKSDB}"
workloads="${4:-oltp_read_write oltp_read_only oltp_write_only oltp_update_non_index}"
tables="${SYSBENCH_TABLES:-4}"
rows="${SYSBENCH_ROWS:-100000}"
threads="${SYSBENCH_THREADS:-2}"
name=sysbench-engines
dir="var/$name"
command -v sysbench >/dev/null || { echo "sysbench is not installed (apt-get install sysbench)" >&2; exit 1; }

export MARIADB_EXTRA_ARGS="--innodb-buffer-pool-size=256M --rocksdb-block-cache-size=268435456
  --riptide-block-cache-size=268435456 --max-connections=200 --innodb-log-file-size=512M
  --riptide-flush-log-at-trx-commit=1 --skip-log-bin"
bash mariadb/server.sh start "$name" >/dev/null
socket="$dir/mariadbd.sock"
sql() { mariadb --no-defaults -S "$socket" -u root -N -e "$1"; }
results="$dir/results.csv"
[ -f "$results" ] || echo "time,engine,mode,workload,duration_s,threads,tps,qps,p95_ms,errors" >"$results"

for engine in $engines; do
  db="sb_$(echo "$engine" | tr 'A-Z' 'a-z')"
  if [ "$(sql "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = '$db'")" != "$tables" ]; then
    sql "DROP DATABASE IF EXISTS $db; CREATE DATABASE $db"
    echo "sysbench: preparing $tables x $rows rows in $engine"
    sysbench oltp_common --db-driver=mysql --mysql-socket="$socket" --mysql-user=root --mysql-db="$db" \
      --mysql-storage-engine="$engine" --tables="$tables" --table-size="$rows" --threads="$threads" prepare >/dev/null
    for t in $(seq 1 "$tables"); do sql "ANALYZE TABLE $db.sbtest$t" >/dev/null; done
  fi
  for mode in $modes; do
    flush=2
    [ "$mode" = "synced" ] && flush=1
    sql "SET GLOBAL innodb_flush_log_at_trx_commit = $flush; SET GLOBAL rocksdb_flush_log_at_trx_commit = $flush;
         SET GLOBAL riptide_flush_log_at_trx_commit = $flush"
    for workload in $workloads; do
      out="$(sysbench "$workload" --db-driver=mysql --mysql-socket="$socket" --mysql-user=root --mysql-db="$db" \
        --tables="$tables" --table-size="$rows" --threads="$threads" --time="$duration" --report-interval=0 \
        --mysql-ignore-errors=1213,1205,1062 run 2>&1)" || { echo "$out" | tail -20; exit 1; }
      tps=$(echo "$out" | awk '/transactions:/ {gsub(/\(/, "", $3); print $3}')
      qps=$(echo "$out" | awk '/queries:/ && /per sec/ {gsub(/\(/, "", $3); print $3}')
      p95=$(echo "$out" | awk '/95th percentile:/ {print $3}')
      errors=$(echo "$out" | awk '/ignored errors:/ {print $3}')
      printf 'sysbench: %-8s %-8s %-22s %9s tps %10s qps  p95 %7s ms  errors %s\n' "$engine" "$mode" "$workload" "$tps" "$qps" "$p95" "$errors"
      echo "$(date -u +%FT%TZ),$engine,$mode,$workload,$duration,$threads,$tps,$qps,$p95,$errors" >>"$results"
    done
  done
done
