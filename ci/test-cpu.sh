#!/usr/bin/env bash
# The suite's CPU time per test (issue 13: the suite is CPU-bound on 2 cores, so wall time alone
# hides where it goes): `meson test` with every test under /usr/bin/time, then the N tests with the
# most CPU (user + sys, the test's processes and all they waited for), heaviest first, and totals.
#
#   ci/test-cpu.sh BUILD_DIR [N] [-- MESON_TEST_ARGS...]     (N: 15; e.g. -- --num-processes 2)
#
# Prints the table after meson's own output; the raw lines are left in BUILD_DIR/meson-logs/cpu.tsv
# ("wall user sys<TAB>status<TAB>command"). Exit status: meson test's.
set -uo pipefail
if [ "${1:-}" = --wrap ]; then # the wrapper: one test's command under /usr/bin/time
    shift
    times=$(mktemp)
    /usr/bin/time -f '%e %U %S' -o "$times" "$@"
    status=$?
    printf '%s\t%s\t%s\n' "$(tail -n 1 "$times")" "$status" "$(printf '%s' "$*" | tr '\n' ' ')" >>"$EQUIV_CPU_LOG" # one line
    rm -f "$times"
    exit "$status"
fi
build=${1:?usage: ci/test-cpu.sh BUILD_DIR [N] [-- MESON_TEST_ARGS...]}
top=15
shift
if [ $# -gt 0 ] && [ "$1" != -- ]; then top=$1; shift; fi
[ "${1:-}" = -- ] && shift
[ -x /usr/bin/time ] || { echo "ci/test-cpu.sh: needs /usr/bin/time (apt-get install time)"; exit 2; }
log="$build/meson-logs/cpu.tsv"
mkdir -p "$build/meson-logs" && : >"$log"
EQUIV_CPU_LOG=$(realpath "$log") meson test -C "$build" --wrapper "$(realpath "$0") --wrap" "$@"
status=$?
# Each line's command is matched to its test by the command meson logged (after the wrapper).
python3 - "$log" "$build/meson-logs/testlog-test-cpu.sh.json" "$top" <<'PY'
import json, sys
log, testlog, top = sys.argv[1], sys.argv[2], int(sys.argv[3])
names = {}
for line in open(testlog):
    t = json.loads(line)
    names.setdefault(" ".join(t["command"][2:]).replace("\n", " "), []).append(t["name"])  # [wrapper, --wrap, command...]
rows = []
for line in open(log):
    times, status, command = line.rstrip("\n").split("\t")
    wall, user, sys_ = map(float, times.split())
    name = " or ".join(sorted(set(names.get(command, [command[:60]]))))  # the same command twice: both names
    rows.append((user + sys_, wall, user, sys_, name))
print(f"{len(rows)} tests: CPU {sum(r[0] for r in rows):.1f} s (user {sum(r[2] for r in rows):.1f}, "
      f"sys {sum(r[3] for r in rows):.1f}), sum of the tests' wall times {sum(r[1] for r in rows):.1f} s")
print(f"{'cpu s':>7} {'wall s':>7} {'user':>6} {'sys':>6}  test")
for cpu, wall, user, sys_, name in sorted(rows, reverse=True)[:top]:
    print(f"{cpu:7.1f} {wall:7.1f} {user:6.1f} {sys_:6.1f}  {name}")
PY
exit "$status"
