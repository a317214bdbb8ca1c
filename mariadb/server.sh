#!/usr/bin/env bash
# A private MariaDB server for development and benchmarks: Debian's mariadbd on a datadir, socket
# and port of its own under var/NAME/ in the repository, so it never touches a system server.
#
#   bash mariadb/server.sh start  [NAME]   # start (first start: mariadb-install-db), wait, print how to connect
#   bash mariadb/server.sh stop   [NAME]   # clean shutdown (mariadb-admin), kill after a timeout
#   bash mariadb/server.sh status [NAME]   # exit 0 and print the connection when it runs, 3 when not
#
# NAME defaults to `sql`. Everything lives in var/NAME/: data/ (the datadir), plugin/ (symlinks to
# Debian's plugins, so ha_rocksdb.so loads, plus ha_riptide.so when mariadb/build/ha_riptide.so
# exists), mariadbd.sock, mariadbd.pid, port, error.log.
#
# Settings through the environment:
#   MARIADB_CNF         an option file read instead of none (`--defaults-file`); plugin options in it
#                       should carry the `loose-` prefix so a missing plugin is not a start error
#   MARIADB_EXTRA_ARGS  more mariadbd options, split on spaces, after everything else
#   MARIADB_PORT        a TCP port to use (default: the last one if free, else a free one)
#   RIPTIDE_PLUGIN      the RIPTIDE plugin (default mariadb/build/ha_riptide.so)
#   MARIADB_START_TIMEOUT, MARIADB_STOP_TIMEOUT  seconds to wait (default 120 and 120)
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
command="${1:-}"
name="${2:-sql}"
case "$name" in
  *[!A-Za-z0-9_.-]* | "") echo "mariadb/server.sh: bad NAME '$name' (letters, digits, _ . - only)" >&2; exit 2 ;;
esac

base="$repo/var/$name"
datadir="$base/data"
plugin_dir="$base/plugin"
socket="$base/mariadbd.sock"
pid_file="$base/mariadbd.pid"
port_file="$base/port"
error_log="$base/error.log"
riptide_plugin="${RIPTIDE_PLUGIN:-$repo/mariadb/build/ha_riptide.so}"
start_timeout="${MARIADB_START_TIMEOUT:-120}"
stop_timeout="${MARIADB_STOP_TIMEOUT:-120}"

say() { echo "mariadb/server.sh [$name]: $*"; }

server_pid() {
  # The pid of the running server, or nothing: the pid file must name a live mariadbd.
  [ -s "$pid_file" ] || return 1
  local pid
  pid="$(cat "$pid_file")"
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
  case "$(cat "/proc/$pid/comm" 2>/dev/null || true)" in
    mariadbd | mysqld) echo "$pid" ;;
    *) return 1 ;;
  esac
}

answers() {
  mariadb-admin --no-defaults --socket="$socket" --user=root --connect-timeout=2 ping >/dev/null 2>&1
}

port_is_free() {
  # Nothing listens on 127.0.0.1:$1 (bash's /dev/tcp connects when something does).
  ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

choose_port() {
  local port
  if [ -n "${MARIADB_PORT:-}" ]; then echo "$MARIADB_PORT"; return; fi
  if [ -s "$port_file" ] && port_is_free "$(cat "$port_file")"; then cat "$port_file"; return; fi
  # A port derived from the name keeps servers of different names apart; probe upwards from it.
  port=$((33060 + $(printf '%s' "$name" | cksum | cut -d' ' -f1) % 2000))
  while ! port_is_free "$port"; do port=$((port + 1)); done
  echo "$port"
}

print_connection() {
  local port
  port="$(cat "$port_file" 2>/dev/null || echo '?')"
  say "running (pid $(server_pid || echo '?')), datadir $datadir"
  echo "  socket: $socket"
  echo "  port:   $port (127.0.0.1)"
  echo "  connect: mariadb -S $socket -u root"
  echo "  Go DSN:  root@unix($socket)/DATABASE"
  local engines
  engines="$(mariadb --no-defaults -S "$socket" -u root -N -e \
    "SELECT GROUP_CONCAT(ENGINE ORDER BY ENGINE) FROM information_schema.ENGINES WHERE SUPPORT IN ('YES','DEFAULT')" 2>/dev/null || true)"
  [ -n "$engines" ] && echo "  engines: $engines"
  return 0
}

link_plugins() {
  # A plugin dir of our own: Debian's plugins by symlink, and RIPTIDE's when it is built.
  mkdir -p "$plugin_dir"
  find "$plugin_dir" -maxdepth 1 -type l -delete
  local plugin
  for plugin in /usr/lib/mysql/plugin/*.so; do
    ln -s "$plugin" "$plugin_dir/$(basename "$plugin")"
  done
  if [ -f "$riptide_plugin" ]; then
    ln -sf "$riptide_plugin" "$plugin_dir/ha_riptide.so"
  fi
}

start() {
  if server_pid >/dev/null && answers; then
    say "already running"
    print_connection
    return 0
  fi
  if pid="$(server_pid)"; then
    say "a server (pid $pid) runs but does not answer; stopping it first"
    stop
  fi
  command -v mariadbd >/dev/null || [ -x /usr/sbin/mariadbd ] || {
    echo "mariadb/server.sh: mariadbd not found: run 'bash mariadb/setup.sh' first" >&2
    exit 1
  }
  mkdir -p "$base"
  local user_args=()
  if [ "$(id -u)" -eq 0 ]; then user_args=(--user=root); fi
  if [ ! -d "$datadir/mysql" ]; then
    say "creating the datadir $datadir"
    rm -rf "$datadir"
    mariadb-install-db --no-defaults --datadir="$datadir" "${user_args[@]}" \
      --auth-root-authentication-method=normal --skip-test-db >"$base/install-db.log" 2>&1 || {
      echo "mariadb/server.sh: mariadb-install-db failed; its output:" >&2
      tail -n 30 "$base/install-db.log" >&2
      exit 1
    }
  fi
  link_plugins
  local port
  port="$(choose_port)"
  echo "$port" >"$port_file"

  local args=()
  if [ -n "${MARIADB_CNF:-}" ]; then
    [ -f "$MARIADB_CNF" ] || { echo "mariadb/server.sh: MARIADB_CNF=$MARIADB_CNF does not exist" >&2; exit 1; }
    args+=("--defaults-file=$MARIADB_CNF")
  else
    args+=(--no-defaults)
  fi
  args+=(--datadir="$datadir" --socket="$socket" --port="$port" --bind-address=127.0.0.1
    --pid-file="$pid_file" --log-error="$error_log" --plugin-dir="$plugin_dir" "${user_args[@]}"
    --plugin-load-add=ha_rocksdb.so)
  if [ -f "$riptide_plugin" ]; then
    args+=(--plugin-load-add=ha_riptide.so --riptide=FORCE)
  else
    say "RIPTIDE is not available ($riptide_plugin is not built); starting with InnoDB and MyRocks only"
  fi
  if [ -n "${MARIADB_EXTRA_ARGS:-}" ]; then
    # Word splitting is the point here: the variable holds several options.
    # shellcheck disable=SC2206
    args+=($MARIADB_EXTRA_ARGS)
  fi
  echo "$(date -u +%FT%TZ) mariadbd ${args[*]}" >>"$base/starts.log"
  rm -f "$pid_file"
  # setsid detaches the server from this shell's process group, so Ctrl-C here does not stop it.
  setsid /usr/sbin/mariadbd "${args[@]}" </dev/null >>"$base/mariadbd.out" 2>&1 &
  local launched=$! waited=0
  until answers; do
    if ! kill -0 "$launched" 2>/dev/null; then
      echo "mariadb/server.sh: mariadbd exited during start; the end of $error_log:" >&2
      tail -n 30 "$error_log" >&2 2>/dev/null || true
      exit 1
    fi
    if [ "$waited" -ge $((start_timeout * 5)) ]; then
      echo "mariadb/server.sh: mariadbd did not answer within ${start_timeout}s; see $error_log" >&2
      exit 1
    fi
    sleep 0.2
    waited=$((waited + 1))
  done
  say "started"
  print_connection
}

stop() {
  local pid
  if ! pid="$(server_pid)"; then
    say "not running"
    rm -f "$pid_file"
    return 0
  fi
  say "shutting down pid $pid"
  mariadb-admin --no-defaults --socket="$socket" --user=root shutdown >/dev/null 2>&1 || kill -TERM "$pid" 2>/dev/null || true
  local waited=0
  while kill -0 "$pid" 2>/dev/null; do
    if [ "$waited" -ge $((stop_timeout * 5)) ]; then
      say "no clean shutdown within ${stop_timeout}s; killing pid $pid"
      kill -KILL "$pid" 2>/dev/null || true
      break
    fi
    sleep 0.2
    waited=$((waited + 1))
  done
  rm -f "$pid_file"
  say "stopped"
}

status() {
  if server_pid >/dev/null && answers; then
    print_connection
    return 0
  fi
  if pid="$(server_pid)"; then
    say "process $pid exists but does not answer"
  else
    say "not running"
  fi
  return 3
}

case "$command" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  *) echo "usage: bash mariadb/server.sh start|stop|status [NAME]" >&2; exit 2 ;;
esac
