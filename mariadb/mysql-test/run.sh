#!/usr/bin/env bash
# Runs the RIPTIDE mtr suite (mariadb/mysql-test/riptide/) with Debian's mariadb-test against
# the installed server and our plugin (mariadb/build/ha_riptide.so, built by `make plugin`).
#
#   bash mariadb/mysql-test/run.sh [mtr options] [test ...]     # e.g. `crud`, `--record crud`
#
# mtr writes .reject files next to the results and resolves its home from the real path of
# its script, so it runs in a private tree, var/mtr-home/: bin, sbin, share and lib are
# symlinks to /usr, mysql-test is a tree of symlinks to Debian's (cp -rs) with a real copy of
# mariadb-test-run.pl, and the suite is copied into it for each run (with --record, the new
# results are copied back into the repository). Logs go to var/mtr/. Prints a cargo-style
# `test result:` line.
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
home="$root/var/mtr-home"
suite_src="$root/mariadb/mysql-test/riptide"
plugin="${RIPTIDE_PLUGIN:-$root/mariadb/build/ha_riptide.so}"
[ -f "$plugin" ] || { echo "mariadb/mysql-test/run.sh: $plugin is not built (make plugin)" >&2; exit 1; }
command -v mariadb-test >/dev/null || [ -d /usr/share/mysql/mysql-test ] || {
  echo "mariadb/mysql-test/run.sh: Debian's mariadb-test is not installed (bash mariadb/setup.sh)" >&2; exit 1; }

if [ ! -f "$home/mysql-test/mariadb-test-run.pl" ] || [ -L "$home/mysql-test/mariadb-test-run.pl" ]; then
  rm -rf "$home"
  mkdir -p "$home"
  for dir in bin sbin share lib; do ln -s "/usr/$dir" "$home/$dir"; done
  cp -rs /usr/share/mysql/mysql-test "$home/mysql-test"
  rm "$home/mysql-test/mariadb-test-run.pl"
  cp /usr/share/mysql/mysql-test/mariadb-test-run.pl "$home/mysql-test/mariadb-test-run.pl"
fi
# A plugin directory of Debian's plugins and ours.
mkdir -p "$home/plugin"
find "$home/plugin" -maxdepth 1 -type l -delete
for so in /usr/lib/mysql/plugin/*.so; do ln -s "$so" "$home/plugin/$(basename "$so")"; done
ln -sf "$plugin" "$home/plugin/ha_riptide.so"
export RIPTIDE_PLUGIN_DIR="$home/plugin"

suite="$home/mysql-test/suite/riptide"
rm -rf "$suite"
cp -r "$suite_src" "$suite"

# --compare-innodb: run the suite's tests with ENGINE=InnoDB instead (a copy, suite
# riptide_innodb, results recorded under var/), then show how RIPTIDE's results differ, to
# check new results by hand against the server's reference engine.
if [ "${1:-}" = "--compare-innodb" ]; then
  shift
  other="$home/mysql-test/suite/riptide_innodb"
  rm -rf "$other"
  cp -r "$suite_src" "$other"
  rm -f "$other"/r/*.result
  echo "--loose-innodb" >>"$other/suite.opt"
  sed -i 's/ENGINE=RIPTIDE/ENGINE=InnoDB/g; s/ENGINE = .RIPTIDE./ENGINE = '"'"'InnoDB'"'"'/g' "$other"/t/*.test "$other"/include/type_index.inc
  (cd "$home/mysql-test" && perl mariadb-test-run.pl --suite=riptide_innodb --vardir="$root/var/mtr/var-innodb" \
    --force --parallel=1 --retry=0 --record "$@") >"$root/var/mtr/innodb.log" 2>&1
  for result in "$other"/r/*.result; do
    name="$(basename "$result")"
    echo "=== $name: InnoDB (<) vs RIPTIDE (>)"
    diff <(sed 's/InnoDB/ENGINE/g' "$result") <(sed 's/RIPTIDE/ENGINE/g' "$suite_src/r/$name" 2>/dev/null || true)
  done
  exit 0
fi

record=0
for arg in "$@"; do [ "$arg" = "--record" ] && record=1; done
# mtr passes a test that has no result file (it only prints the output): refuse that here.
if [ "$record" -eq 0 ]; then
  for test in "$suite_src"/t/*.test; do
    name="$(basename "$test" .test)"
    if [ ! -f "$suite_src/r/$name.result" ]; then
      echo "mariadb/mysql-test/run.sh: $name has no r/$name.result (record it with --record after checking the output)" >&2
      echo "test result: FAILED. 0 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out"
      exit 1
    fi
  done
fi
mkdir -p "$root/var/mtr"
log="$root/var/mtr/run.log"
(cd "$home/mysql-test" && perl mariadb-test-run.pl --suite=riptide --vardir="$root/var/mtr/var" \
  --force --max-test-fail=0 --parallel=1 --retry=0 --testcase-timeout=10 --suite-timeout=60 "$@") 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
if [ "$record" -eq 1 ]; then
  cp "$suite"/r/*.result "$suite_src/r/" 2>/dev/null || true
fi
passed=$(grep -cE '^riptide\.[^ ]+ +.*\[ pass \]' "$log" || true)
failed=$(grep -cE '^riptide\.[^ ]+ +.*\[ (fail|retry-fail) \]' "$log" || true)
skipped=$(grep -cE '^riptide\.[^ ]+ +.*\[ skipped \]' "$log" || true)
if [ "$status" -ne 0 ] && [ "$failed" -eq 0 ]; then failed=1; fi
echo "test result: $([ "$failed" -eq 0 ] && echo ok || echo FAILED). $passed passed; $failed failed; $skipped ignored; 0 measured; 0 filtered out"
[ "$failed" -eq 0 ]
