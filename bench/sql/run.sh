#!/usr/bin/env bash
# The SQL benchmark kit's runner (issue 18): seed 003's patterns, seed 002's sysbench workloads,
# TPC-C (seed 001) and iibench (seed 000) against InnoDB, MyRocks and RIPTIDE (when it loads) on
# private MariaDB servers, one per server profile, then a Markdown report with PNG charts.
#
#   bash bench/sql/run.sh quick              # `make bench-sql`: every workload, three profiles, ~15 min on 2 cores
#   bash bench/sql/run.sh full               # the seeds' sizes (hours; see the README)
#   bash bench/sql/run.sh smoke              # `make sql-smoke`: tiny sizes, aligned profile only, a few minutes
#   bash bench/sql/run.sh integration-test   # `make sql-test`: sqlbench's unit and integration tests on a private server
#   bash bench/sql/run.sh report DIR         # redraw DIR's report from its CSV files
#
# Results go to bench/results/sql-<timestamp>/ (bench/results/sql-latest points at it): report.md,
# the CSV files, PNG charts, raw/ (every tool's output) and cnf/ (the server profiles as used).
#
# Settings through the environment:
#   SQL_ENGINES    engines to compare (default "InnoDB RocksDB RIPTIDE"; an engine the server
#                  does not offer is skipped with a line in the report)
#   SQL_PROFILES   server profiles (default for quick/full: "aligned small-cache durable";
#                  smoke: "aligned"); files bench/sql/cnf/<profile>.cnf, applied over aligned.cnf
#   SQL_WORKLOADS  workloads of the aligned profile (default "patterns sysbench tpcc iibench");
#                  small-cache runs TPC-C (twice the connections, as seed 001's second run),
#                  durable runs sysbench's oltp_write_only and the seq_insert and random_update
#                  patterns
#   SQL_KEEP_SERVER=1  leave the last server running (default: stopped after each profile)
#   SQL_<VARIABLE>  any scale variable of set_scale below, e.g. SQL_TPCC_WAREHOUSES=10,
#                  SQL_SB_TIME=60, SQL_II_LOAD_ROWS=5000000, SQL_STEP_TIMEOUT (seconds after which a
#                  hanging step is ended; smoke 300, quick 600, full 7200)
#   SQL_OUT        results directory (default bench/results/sql-<timestamp>)
set -uo pipefail

repo="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$repo"
mode="${1:-quick}"
bin="$repo/target/sqlbench"

say() { echo "bench/sql [$(date -u +%H:%M:%S)]: $*"; }
die() { echo "bench/sql: $*" >&2; exit 1; }

find_go() {
  command -v go >/dev/null 2>&1 && return 0
  [ -x /usr/local/go/bin/go ] && { export PATH="$PATH:/usr/local/go/bin"; return 0; }
  say "Go not found; installing Debian's golang-go"
  as_root apt-get update -qq && as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq golang-go
}

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; elif command -v sudo >/dev/null 2>&1; then sudo "$@"; else
    echo "bench/sql: need root (or sudo) to run: $*" >&2; return 1; fi
}

build_tools() {
  find_go
  say "building sqlbench (iibench, tpcc, patterns) into target/sqlbench/"
  (cd sqlbench && go build -o "$bin/" ./cmd/...) || die "go build failed"
}

ensure_sysbench() {
  command -v sysbench >/dev/null 2>&1 && return 0
  say "installing sysbench (Debian package)"
  as_root apt-get update -qq && as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq sysbench \
    || say "warning: sysbench could not be installed; its workloads will be skipped"
}

ensure_matplotlib() {
  python3 -c 'import matplotlib' >/dev/null 2>&1 && return 0
  say "installing matplotlib for the charts"
  python3 -m pip install --quiet matplotlib >/dev/null 2>&1 \
    || python3 -m pip install --quiet --break-system-packages matplotlib >/dev/null 2>&1 \
    || as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-matplotlib >/dev/null 2>&1 \
    || say "warning: matplotlib could not be installed; the report will have no charts"
}

# ---- scales -------------------------------------------------------------------------------
SCALE_VARIABLES="PAT_ROWS PAT_OPS PAT_THREADS PAT_MAX_SECONDS SB_TABLES SB_SIZE SB_THREADS SB_TIME SB_SETTLE
  TPCC_WAREHOUSES TPCC_BUILD_THREADS TPCC_CONNECTIONS TPCC_SMALL_CONNECTIONS TPCC_RAMPUP TPCC_DURATION TPCC_REPORT
  II_LOAD_ROWS II_LOAD_WRITERS II_LOAD_DURATION II_MIXED_DURATION II_MIXED_WRITERS II_MIXED_RATE II_QUERY_THREADS
  II_QPS II_QUERY_START II_REPORT STEP_TIMEOUT"

set_scale() {
  case "$1" in
    full) # the seeds' sizes
      PAT_ROWS=100000 PAT_OPS=100000 PAT_THREADS=4 PAT_MAX_SECONDS=600
      SB_TABLES=4 SB_SIZE=500000 SB_THREADS=8 SB_TIME=120 SB_SETTLE=60
      TPCC_WAREHOUSES=40 TPCC_BUILD_THREADS=8 TPCC_CONNECTIONS=8 TPCC_SMALL_CONNECTIONS=16
      TPCC_RAMPUP=1m TPCC_DURATION=2m TPCC_REPORT=10s
      II_LOAD_ROWS=30000000 II_LOAD_WRITERS=16 II_LOAD_DURATION=20m II_MIXED_DURATION=15m
      II_MIXED_WRITERS=8 II_MIXED_RATE=30000 II_QUERY_THREADS=8 II_QPS=300 II_QUERY_START=1000000
      II_REPORT=10s STEP_TIMEOUT=7200 ;;
    quick) # about 15 minutes on 2 cores for three engines
      PAT_ROWS=20000 PAT_OPS=10000 PAT_THREADS=2 PAT_MAX_SECONDS=15
      SB_TABLES=4 SB_SIZE=20000 SB_THREADS=4 SB_TIME=15 SB_SETTLE=3
      TPCC_WAREHOUSES=2 TPCC_BUILD_THREADS=2 TPCC_CONNECTIONS=4 TPCC_SMALL_CONNECTIONS=8
      TPCC_RAMPUP=5s TPCC_DURATION=30s TPCC_REPORT=5s
      II_LOAD_ROWS=200000 II_LOAD_WRITERS=4 II_LOAD_DURATION=60s II_MIXED_DURATION=20s
      II_MIXED_WRITERS=2 II_MIXED_RATE=5000 II_QUERY_THREADS=2 II_QPS=100 II_QUERY_START=1000
      II_REPORT=2s STEP_TIMEOUT=600 ;;
    smoke) # every code path, tiny sizes
      PAT_ROWS=2000 PAT_OPS=1000 PAT_THREADS=2 PAT_MAX_SECONDS=10
      SB_TABLES=2 SB_SIZE=2000 SB_THREADS=2 SB_TIME=4 SB_SETTLE=1
      TPCC_WAREHOUSES=1 TPCC_BUILD_THREADS=2 TPCC_CONNECTIONS=2 TPCC_SMALL_CONNECTIONS=4
      TPCC_RAMPUP=2s TPCC_DURATION=8s TPCC_REPORT=2s
      II_LOAD_ROWS=20000 II_LOAD_WRITERS=2 II_LOAD_DURATION=30s II_MIXED_DURATION=6s
      II_MIXED_WRITERS=1 II_MIXED_RATE=2000 II_QUERY_THREADS=2 II_QPS=50 II_QUERY_START=100
      II_REPORT=2s STEP_TIMEOUT=300 ;;
    *) die "unknown scale '$1' (quick, full, smoke, integration-test, report DIR)" ;;
  esac
}

# ---- servers ------------------------------------------------------------------------------
server_name() { echo "sqlbench-$1"; }

start_server() {
  # start_server PROFILE: a fresh datadir, the profile's option file; RIPTIDE is dropped (and
  # the report says so) when the server will not start with it.
  local profile="$1" name
  name="$(server_name "$profile")"
  local cnf="$out/cnf/$profile.cnf"
  mkdir -p "$out/cnf"
  cat bench/sql/cnf/aligned.cnf >"$cnf"
  if [ "$profile" != aligned ]; then
    [ -f "bench/sql/cnf/$profile.cnf" ] || die "no profile bench/sql/cnf/$profile.cnf"
    printf '\n# ---- overrides of profile %s ----\n' "$profile" >>"$cnf"
    cat "bench/sql/cnf/$profile.cnf" >>"$cnf"
  fi
  bash mariadb/server.sh stop "$name" >/dev/null 2>&1
  rm -rf "var/$name/data"
  riptide_note=""
  local seen
  seen="$(wc -l <"var/$name/error.log" 2>/dev/null || echo 0)"
  if ! MARIADB_CNF="$cnf" bash mariadb/server.sh start "$name" >"$out/raw/server-$profile.log" 2>&1; then
    if [ -f mariadb/build/ha_riptide.so ]; then
      local why
      why="$(tail -n +"$((seen + 1))" "var/$name/error.log" 2>/dev/null | grep -m1 -E '\[ERROR\]' | cut -c1-200)"
      riptide_note="the server did not start with mariadb/build/ha_riptide.so (${why:-see raw/server-$profile.log}); started without it"
      say "$riptide_note"
      bash mariadb/server.sh stop "$name" >/dev/null 2>&1
      rm -rf "var/$name/data"
      RIPTIDE_PLUGIN=/nonexistent/ha_riptide.so MARIADB_CNF="$cnf" bash mariadb/server.sh start "$name" >>"$out/raw/server-$profile.log" 2>&1 \
        || { cat "$out/raw/server-$profile.log"; die "the server of profile $profile does not start"; }
    else
      cat "$out/raw/server-$profile.log"; die "the server of profile $profile does not start"
    fi
  fi
  socket="$repo/var/$name/mariadbd.sock"
  datadir="$repo/var/$name/data"
}

stop_server() {
  local name
  name="$(server_name "$1")"
  bash mariadb/server.sh stop "$name" >/dev/null 2>&1
  [ -n "${out:-}" ] && cp "var/$name/error.log" "$out/raw/server-$1.error.log" 2>/dev/null
  return 0
}

# ensure_alive PROFILE: when the server died (an engine crashed it), the death is recorded as a
# failure and the server restarted on the same datadir, so the remaining workloads still run.
ensure_alive() {
  local profile="$1" name
  name="$(server_name "$profile")"
  bash mariadb/server.sh status "$name" >/dev/null 2>&1 && return 0
  local why
  why="$(grep -iE 'signal|assert|error' "var/$name/error.log" 2>/dev/null | tail -n 1 | cut -c1-200)"
  why="${why:-mariadbd is not running; its error log says nothing}"
  say "the server of profile $profile is down ($why); restarting it"
  echo "$profile-server-died,1,\"${why//\"/\'}\"" >>"$out/failures.csv"
  cp "var/$name/error.log" "$out/raw/server-$profile.died-$(date +%s).error.log" 2>/dev/null
  local plugin_env=()
  [ -n "$riptide_note" ] && plugin_env=(RIPTIDE_PLUGIN=/nonexistent/ha_riptide.so)
  env "${plugin_env[@]}" MARIADB_CNF="$out/cnf/$profile.cnf" bash mariadb/server.sh start "$name" >>"$out/raw/server-$profile.log" 2>&1 \
    || say "the server of profile $profile does not restart; the remaining steps will fail"
}

sql() { mariadb --no-defaults -S "$socket" -u root -N -B -e "$1"; }

# The engines of SQL_ENGINES the server offers; the others get a line in engines.csv.
detect_engines() {
  local profile="$1" engine support
  engines=()
  for engine in ${SQL_ENGINES:-InnoDB RocksDB RIPTIDE}; do
    support="$(sql "SELECT SUPPORT FROM information_schema.ENGINES WHERE UPPER(ENGINE) = UPPER('$engine')" 2>/dev/null)"
    case "$support" in
      YES | DEFAULT)
        engines+=("$engine")
        echo "$profile,$engine,loaded,$(engine_version "$engine")" >>"$out/engines.csv" ;;
      *)
        local why="not offered by the server (SHOW ENGINES: ${support:-absent})"
        if [ "$engine" = RIPTIDE ] && [ ! -f mariadb/build/ha_riptide.so ]; then
          why="mariadb/build/ha_riptide.so is not built"
        fi
        [ "$engine" = RIPTIDE ] && [ -n "$riptide_note" ] && why="$riptide_note"
        say "skipping $engine in profile $profile: $why"
        echo "$profile,$engine,skipped,\"${why//\"/\'}\"" >>"$out/engines.csv" ;;
    esac
  done
}

engine_version() {
  case "$1" in
    RocksDB) echo "MyRocks $(sql "SELECT PLUGIN_VERSION FROM information_schema.PLUGINS WHERE PLUGIN_NAME='ROCKSDB'") (RocksDB $(sql "SELECT @@rocksdb_git_hash" 2>/dev/null | cut -c1-12))" ;;
    RIPTIDE) echo "RIPTIDE plugin $(sql "SELECT PLUGIN_VERSION FROM information_schema.PLUGINS WHERE PLUGIN_NAME='RIPTIDE'") (ha_riptide.so of $(date -u -r mariadb/build/ha_riptide.so +%FT%TZ 2>/dev/null))" ;;
    InnoDB) echo "InnoDB of MariaDB $(sql "SELECT @@version")" ;;
    *) echo "$1" ;;
  esac
}

engine_dir() {
  case "$1" in
    RocksDB) echo "$datadir/#rocksdb" ;;
    RIPTIDE) echo "$datadir/riptide" ;;
    *) echo "" ;;
  esac
}

lower() { echo "$1" | tr '[:upper:]' '[:lower:]'; }

# wait_for PID SECONDS: true once PID has exited, false when it still runs after SECONDS.
wait_for() {
  local waited=0
  while kill -0 "$1" 2>/dev/null; do
    [ "$waited" -ge $(($2 * 5)) ] && return 1
    sleep 0.2
    waited=$((waited + 1))
  done
  return 0
}

# step LABEL COMMAND...: runs a workload, its output to raw/LABEL.log; a failure is recorded in
# failures.csv and the run goes on with the next workload.
step() {
  local label="$1"; shift
  local log="$out/raw/$label.log"
  say "$label"
  local started status pid
  started=$(date +%s)
  # A step that hangs (an engine that never answers) is ended after STEP_TIMEOUT seconds.
  timeout --signal=TERM --kill-after=30 "$STEP_TIMEOUT" "$@" >"$log" 2>&1 &
  pid=$!
  current_step_pid=$pid
  # Long steps show progress: every 30 s the last line their tool printed.
  while ! wait_for "$pid" 30; do
    say "  ... $(( $(date +%s) - started )) s: $(tail -n 1 "$log" | cut -c1-160)"
  done
  wait "$pid"
  status=$?
  current_step_pid=""
  if [ "$status" -ne 0 ]; then
    local why
    why="$(grep -E 'error|Error|ERROR|FAIL|fatal|FATAL|panic' "$log" | tail -n 1 | cut -c1-300)"
    if [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then
      why="timed out after ${STEP_TIMEOUT} s (STEP_TIMEOUT); ${why}"
    fi
    say "  FAILED (exit $status): ${why:-see raw/$label.log}"
    echo "$label,$status,\"${why//\"/\'}\"" >>"$out/failures.csv"
  else
    say "  done in $(( $(date +%s) - started )) s"
  fi
  return "$status"
}

record_config() {
  local profile="$1"
  sql "SHOW GLOBAL VARIABLES WHERE Variable_name REGEXP '^(version|tx_isolation|transaction_isolation|log_bin|innodb_buffer_pool_size|innodb_log_file_size|innodb_log_buffer_size|innodb_flush_log_at_trx_commit|innodb_flush_log_at_timeout|innodb_doublewrite|innodb_flush_method|innodb_compression_algorithm|innodb_read_io_threads|innodb_write_io_threads|innodb_lock_wait_timeout|rocksdb_block_cache_size|rocksdb_default_cf_options|rocksdb_max_background_jobs|rocksdb_flush_log_at_trx_commit|rocksdb_lock_wait_timeout|rocksdb_deadlock_detect|riptide_.*)$'" \
    >"$out/cnf/$profile.effective.tsv" 2>/dev/null
}

# ---- workloads ----------------------------------------------------------------------------
run_patterns() {
  local profile="$1" engine="$2" which="${3:-}"
  local db="patterns_$(lower "$engine")"
  step "$profile-$engine-patterns" "$bin/patterns" -dsn "root@unix($socket)/$db" -table "patterns_$(lower "$engine")" \
    -table-options "ENGINE=$engine" -rows "$PAT_ROWS" -ops "$PAT_OPS" -threads "$PAT_THREADS" -max-seconds "$PAT_MAX_SECONDS" \
    -engine-dir "$(engine_dir "$engine")" -patterns "$which" -out "$out" -label "$profile/$engine"
}

sysbench_args() {
  local engine="$1"
  echo --db-driver=mysql --mysql-socket="$socket" --mysql-user=root --mysql-db="sbtest_$(lower "$engine")" \
    --mysql-storage-engine="$(lower "$engine")" --tables="$SB_TABLES" --table-size="$SB_SIZE"
}

run_sysbench() {
  # run_sysbench PROFILE ENGINE WORKLOAD...: for each workload, as seed 002: prepare (timed), settle,
  # run; deadlocks and lock wait timeouts ignored (counted as errors); cleanup.
  local profile="$1" engine="$2"; shift 2
  command -v sysbench >/dev/null 2>&1 || { echo "$profile-$engine-sysbench,127,\"sysbench is not installed\"" >>"$out/failures.csv"; return; }
  local db="sbtest_$(lower "$engine")" workload
  for workload in "$@"; do
    sql "DROP DATABASE IF EXISTS $db; CREATE DATABASE $db"
    local label="$profile-$engine-sysbench-$workload"
    local started ended
    started=$(date +%s.%N)
    # shellcheck disable=SC2046
    step "$label-prepare" sysbench "$workload" $(sysbench_args "$engine") --threads="$SB_THREADS" prepare || continue
    ended=$(date +%s.%N)
    sleep "$SB_SETTLE"
    # shellcheck disable=SC2046
    if step "$label" sysbench "$workload" $(sysbench_args "$engine") --threads="$SB_THREADS" --time="$SB_TIME" \
      --report-interval=1 --percentile=95 --mysql-ignore-errors=1213,1205,1180,1020 --db-ps-mode=auto run; then
      python3 bench/sql/parse_sysbench.py "$out/raw/$label.log" "$profile/$engine" "$workload" "$SB_TABLES" "$SB_SIZE" \
        "$SB_THREADS" "$(awk -v a="$started" -v b="$ended" 'BEGIN {printf "%.2f", b - a}')" "$out"
    fi
    sql "DROP DATABASE IF EXISTS $db"
  done
}

run_tpcc() {
  local profile="$1" engine="$2" connections="$3"
  local dsn="root@unix($socket)/tpcc_$(lower "$engine")"
  step "$profile-$engine-tpcc-load" "$bin/tpcc" load -dsn "$dsn" -warehouses "$TPCC_WAREHOUSES" -threads "$TPCC_BUILD_THREADS" \
    -table-options "ENGINE=$engine" -out "$out" -label "$profile/$engine" || return
  step "$profile-$engine-tpcc-run" "$bin/tpcc" run -dsn "$dsn" -connections "$connections" -rampup "$TPCC_RAMPUP" \
    -duration "$TPCC_DURATION" -report-every "$TPCC_REPORT" -out "$out" -label "$profile/$engine"
  local check_log="$out/raw/$profile-$engine-tpcc-check.log"
  if step "$profile-$engine-tpcc-check" "$bin/tpcc" check -dsn "$dsn"; then
    echo "$profile/$engine,pass," >>"$out/tpcc_check.csv"
  elif grep -q "DO NOT HOLD" "$check_log"; then
    echo "$profile/$engine,FAIL,\"conditions $(grep -oE 'FAIL +condition +[0-9]+' "$check_log" | grep -oE '[0-9]+$' | paste -sd, -) do not hold (raw/$profile-$engine-tpcc-check.log)\"" >>"$out/tpcc_check.csv"
  else
    echo "$profile/$engine,not run,\"the check could not run: $(tail -n 1 "$check_log" | cut -c1-160 | tr '"' "'")\"" >>"$out/tpcc_check.csv"
  fi
  sql "DROP DATABASE IF EXISTS tpcc_$(lower "$engine")"
}

run_iibench() {
  local profile="$1" engine="$2"
  local e tasks
  e="$(lower "$engine")"
  tasks="$out/iibench/$profile-$e.toml"
  mkdir -p "$out/iibench"
  # Seed 000's queue for one engine, scaled: a load phase, then a mixed phase with throttled
  # inserts and queries on the loaded table.
  cat >"$tasks" <<EOF
[defaults]
dsn = "root@unix($socket)/iibench"
num_secondary_indexes = 3
num_char_fields = 4
length_char_fields = 100
percent_compressible = 30
rows_per_insert = 1000
report_every = "$II_REPORT"
query_limit = 10
writer_threads = $II_LOAD_WRITERS

[[task]]
name = "${e}_load"
table = "purchases_$e"
create_table = true
table_options = "ENGINE=$engine DEFAULT CHARSET=utf8mb4"
duration = "$II_LOAD_DURATION"
max_rows_total = $II_LOAD_ROWS
log_file = "${e}_load.tsv"

[[task]]
name = "${e}_mixed"
table = "purchases_$e"
create_table = false
writer_threads = $II_MIXED_WRITERS
max_rows_per_second = $II_MIXED_RATE
query_threads = $II_QUERY_THREADS
queries_per_second = $II_QPS
query_start_at_rows = $II_QUERY_START
duration = "$II_MIXED_DURATION"
log_file = "${e}_mixed.tsv"
EOF
  step "$profile-$engine-iibench" "$bin/iibench" -run-dir "$out/iibench/$profile-$e" "$tasks"
  sql "DROP TABLE IF EXISTS iibench.purchases_$e"
}

# Ctrl-C or SIGTERM: the running tool is ended (it writes what it measured), the profile's
# server stopped, and the report drawn from what was measured so far.
current_step_pid=""
current_profile=""
on_interrupt() {
  trap - INT TERM
  say "interrupted: ending the current step and stopping the server"
  [ -n "$current_step_pid" ] && kill -TERM "$current_step_pid" 2>/dev/null && wait "$current_step_pid" 2>/dev/null
  [ -n "$current_profile" ] && stop_server "$current_profile"
  if [ -n "${out:-}" ] && [ -f "$out/run.env" ]; then
    echo "interrupted=$(date -u +%FT%TZ)" >>"$out/run.env"
    python3 bench/sql/report.py "$out" >/dev/null 2>&1 && say "partial report: $out/report.md"
  fi
  exit 130
}

# ---- the comparison -----------------------------------------------------------------------
compare() {
  local scale="$1"
  set_scale "$scale"
  # Any scale variable can be set from the environment with an SQL_ prefix, e.g.
  # SQL_TPCC_WAREHOUSES=10 or SQL_SB_TIME=60.
  local variable override
  for variable in $SCALE_VARIABLES; do
    override="SQL_$variable"
    if [ -n "${!override:-}" ]; then
      printf -v "$variable" '%s' "${!override}"
      say "$variable=${!variable} (from $override)"
    fi
  done
  local profiles="${SQL_PROFILES:-aligned small-cache durable}"
  [ "$scale" = smoke ] && profiles="${SQL_PROFILES:-aligned}"
  local workloads="${SQL_WORKLOADS:-patterns sysbench tpcc iibench}"
  out="${SQL_OUT:-bench/results/sql-$(date -u +%Y%m%dT%H%M%SZ)}"
  mkdir -p "$out/raw" "$out/cnf"
  out="$(cd "$out" && pwd)"
  case "$out" in
    "$repo"/bench/results/sql-*) ln -sfn "$(basename "$out")" bench/results/sql-latest ;;
  esac
  bash mariadb/setup.sh >"$out/raw/setup.log" 2>&1 || { tail -n 20 "$out/raw/setup.log"; die "mariadb/setup.sh failed"; }
  build_tools
  ensure_sysbench
  ensure_matplotlib
  echo "profile,engine,status,detail" >"$out/engines.csv"
  echo "step,exit_status,detail" >"$out/failures.csv"
  echo "label,result,detail" >"$out/tpcc_check.csv"
  {
    echo "scale=$scale"
    echo "profiles=$profiles"
    echo "workloads=$workloads"
    echo "started=$(date -u +%FT%TZ)"
    echo "loadavg_start=$(cut -d' ' -f1-3 /proc/loadavg)"
    for v in $SCALE_VARIABLES; do
      echo "$v=${!v}"
    done
  } >"$out/run.env"
  machine_info >"$out/machine.txt"
  say "scale $scale, profiles: $profiles; results in $out"
  local profile engine
  trap on_interrupt INT TERM
  for profile in $profiles; do
    current_profile="$profile"
    start_server "$profile"
    record_config "$profile"
    detect_engines "$profile"
    for engine in "${engines[@]}"; do
      case "$profile" in
        aligned)
          for workload in $workloads; do
            ensure_alive "$profile"
            case "$workload" in
              patterns) run_patterns "$profile" "$engine" ;;
              sysbench) run_sysbench "$profile" "$engine" oltp_read_write oltp_read_only oltp_write_only oltp_update_non_index oltp_delete ;;
              tpcc) run_tpcc "$profile" "$engine" "$TPCC_CONNECTIONS" ;;
              iibench) run_iibench "$profile" "$engine" ;;
              *) die "unknown workload $workload" ;;
            esac
          done ;;
        small-cache) ensure_alive "$profile"; run_tpcc "$profile" "$engine" "$TPCC_SMALL_CONNECTIONS" ;;
        durable)
          ensure_alive "$profile"; run_sysbench "$profile" "$engine" oltp_write_only
          ensure_alive "$profile"; run_patterns "$profile" "$engine" seq_insert,random_update ;;
        *) ensure_alive "$profile"; run_sysbench "$profile" "$engine" oltp_read_write ;;
      esac
    done
    [ -n "${SQL_KEEP_SERVER:-}" ] || stop_server "$profile"
    current_profile=""
  done
  trap - INT TERM
  echo "finished=$(date -u +%FT%TZ)" >>"$out/run.env"
  echo "loadavg_end=$(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/run.env"
  python3 bench/sql/report.py "$out" || say "warning: the report could not be written completely"
  say "report: $out/report.md"
  if [ "$(wc -l <"$out/failures.csv")" -gt 1 ]; then
    say "some steps failed (see the report's Failures section):"
    tail -n +2 "$out/failures.csv" | cut -c1-200
  fi
  if grep -q ',FAIL,' "$out/tpcc_check.csv"; then
    say "TPC-C CONSISTENCY CHECK FAILED:"; grep ',FAIL,' "$out/tpcc_check.csv"
    return 1
  fi
}

machine_info() {
  echo "cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
  echo "cores=$(nproc)"
  echo "memory=$(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)"
  echo "kernel=$(uname -sr)"
  echo "os=$(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME")"
  echo "disk=$(df -hT "$repo/var" 2>/dev/null | awk 'NR == 2 {print $1 " " $2 ", " $3 " total, " $5 " free"}')"
  echo "mariadb=$(/usr/sbin/mariadbd --version 2>/dev/null | sed 's/^.*Ver //')"
  echo "mariadb_package=$(dpkg-query -W -f='${Version}' mariadb-server 2>/dev/null)"
  echo "myrocks_package=$(dpkg-query -W -f='${Version}' mariadb-plugin-rocksdb 2>/dev/null)"
  echo "sysbench=$(sysbench --version 2>/dev/null)"
  echo "go=$(go version 2>/dev/null | cut -d' ' -f3)"
  echo "commit=$(git rev-parse --short HEAD 2>/dev/null)$(git diff --quiet HEAD -- sqlbench bench/sql 2>/dev/null || echo ' (kit modified)')"
  echo "riptide_plugin=$( [ -f mariadb/build/ha_riptide.so ] && echo "mariadb/build/ha_riptide.so, built $(date -u -r mariadb/build/ha_riptide.so +%FT%TZ)" || echo 'not built')"
}

# ---- tests --------------------------------------------------------------------------------
integration_test() {
  # sqlbench's unit tests plus its integration tests on a private server with the aligned
  # profile, tiny scale, every engine that loads; the server is stopped afterwards.
  local name=sqlbench-test
  out="$(mktemp -d)"
  mkdir -p "$out/raw" "$out/cnf"
  bash mariadb/setup.sh >"$out/raw/setup.log" 2>&1 || { tail -n 20 "$out/raw/setup.log"; die "mariadb/setup.sh failed"; }
  local cnf="$out/cnf/test.cnf"
  # Small caches: the tests are tiny and the machine is shared.
  sed -e 's/= 1G$/= 128M/' -e 's/innodb_log_file_size = 512M/innodb_log_file_size = 96M/' bench/sql/cnf/aligned.cnf >"$cnf"
  bash mariadb/server.sh stop "$name" >/dev/null 2>&1
  rm -rf "var/$name/data"
  if ! MARIADB_CNF="$cnf" bash mariadb/server.sh start "$name" >"$out/raw/server.log" 2>&1; then
    if [ -f mariadb/build/ha_riptide.so ]; then
      say "the test server did not start with ha_riptide.so; testing without RIPTIDE"
      rm -rf "var/$name/data"
      RIPTIDE_PLUGIN=/nonexistent/ha_riptide.so MARIADB_CNF="$cnf" bash mariadb/server.sh start "$name" >>"$out/raw/server.log" 2>&1 \
        || { cat "$out/raw/server.log"; die "the test server does not start"; }
    else
      cat "$out/raw/server.log"; die "the test server does not start"
    fi
  fi
  trap 'bash mariadb/server.sh stop '"$name"' >/dev/null 2>&1' EXIT
  local status=0
  SQLBENCH_TEST_SOCKET="$repo/var/$name/mariadbd.sock" bash sqlbench/test.sh || status=$?
  bash mariadb/server.sh stop "$name" >/dev/null 2>&1
  trap - EXIT
  rm -rf "$out"
  return "$status"
}

case "$mode" in
  integration-test) integration_test ;;
  report)
    [ -n "${2:-}" ] || die "usage: bash bench/sql/run.sh report DIR"
    python3 bench/sql/report.py "$2" ;;
  quick | full | smoke) compare "$mode" ;;
  *) die "usage: bash bench/sql/run.sh quick|full|smoke|integration-test|report DIR" ;;
esac
