#!/usr/bin/env bash
# Runs MariaDB's generic storage_engine suite and its trx and parts sub-suites (Debian's mariadb-test) against RIPTIDE and, in the
# same run, against InnoDB, and compares the engines test by test: the suite's expected results
# are partly stale in 10.11 (InnoDB itself fails many), so what matters is the tests InnoDB
# passes and RIPTIDE does not.
#
#   bash mariadb/mysql-test/run-storage-engine.sh [test ...]
#
# Uses the private mysql-test tree of run.sh (var/mtr-home); our overlay
# (mariadb/mysql-test/storage_engine/) becomes mysql-test/plugin/riptide/storage_engine/ there.
# Writes var/mtr/storage_engine.txt: one line per test with both engines' outcomes.
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
home="$root/var/mtr-home"
# run.sh builds the private tree and plugin directory; run one quick test of ours to set it up.
bash "$root/mariadb/mysql-test/run.sh" engine >/dev/null 2>&1 || { echo "run.sh engine failed" >&2; exit 1; }
export RIPTIDE_PLUGIN_DIR="$home/plugin"
# mtr applies an engine's .rdiff files with patch, which refuses symlinks: the suite's own files
# are real copies here (the rest of the tree stays symlinks).
if [ -L "$home/mysql-test/suite/storage_engine/1st.result" ]; then
  rm -rf "$home/mysql-test/suite/storage_engine"
  cp -r /usr/share/mysql/mysql-test/suite/storage_engine "$home/mysql-test/suite/storage_engine"
fi
overlay="$home/mysql-test/plugin/riptide/storage_engine"
rm -rf "$home/mysql-test/plugin/riptide"
mkdir -p "$overlay"
cp -r "$root"/mariadb/mysql-test/storage_engine/* "$overlay/"
rm -f "$overlay/trx/README" "$overlay/last-run.txt"
# The GAMMA start-up warning is expected (as in our own suite).
cat >"$overlay/suite.pm" <<'EOF'
package My::Suite::Riptide_SE;
@ISA = qw(My::Suite);
push @::global_suppressions, qr/Plugin 'RIPTIDE' is of maturity level gamma while the server is stable/;
bless { };
EOF
log="$root/var/mtr/storage_engine.log"
(cd "$home/mysql-test" && perl mariadb-test-run.pl \
  --suite=storage_engine-riptide,storage_engine-innobase,storage_engine/trx-riptide,storage_engine/trx-innobase,storage_engine/parts-riptide,storage_engine/parts-innobase \
  --vardir="$root/var/mtr/var-se" --force --max-test-fail=0 --parallel=1 --retry=0 --testcase-timeout=5 \
  --suite-timeout=120 "$@") >"$log" 2>&1
report="$root/var/mtr/storage_engine.txt"
awk '
  /^storage_engine(\/(trx|parts))?-(riptide|innobase)\.[^ ]+ +.*\[ (pass|fail|skipped|disabled|retry-fail) \]/ {
    split($1, a, "."); engine = a[1]; sub("storage_engine(/(trx|parts))?-", "", engine);
    test = substr($1, length(a[1]) + 2);
    if (a[1] ~ /\/trx/) test = "trx/" test;
    if (a[1] ~ /\/parts/) test = "parts/" test;
    match($0, /\[ [a-z-]+ \]/); outcome = substr($0, RSTART + 2, RLENGTH - 4);
    result[test, engine] = outcome; tests[test] = 1
  }
  END {
    for (t in tests) printf "%-40s innodb=%-9s riptide=%s\n", t, result[t, "innobase"], result[t, "riptide"]
  }' "$log" | sort >"$report"
echo "storage_engine: $(grep -c 'innodb=pass' "$report") InnoDB passes, $(grep -c 'riptide=pass' "$report") RIPTIDE passes"
echo "InnoDB passes, RIPTIDE does not:"
grep 'innodb=pass' "$report" | grep -v 'riptide=pass' || echo "  (none)"
echo "RIPTIDE passes, InnoDB does not: $(grep 'riptide=pass' "$report" | grep -vc 'innodb=pass')"
