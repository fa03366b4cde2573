#!/usr/bin/env bash
# A planted bug must make the run fail (exit 1) and the report must name it: the tensor where the
# divergence starts and, where the bug is a uniform factor, the factor.
#   inject_test.sh EQUIV WANT-PATTERN -- ARGS...    (WANT-PATTERN: an extended regex the report must match)
set -u
equiv=$1 want=$2
shift 3
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$equiv" "$@" >"$out" 2>&1
status=$?
fail=0
if [ "$status" -ne 1 ]; then echo "FAIL: exit $status, want 1 (the planted bug was not caught)"; fail=1; fi
if grep -qE -- "$want" "$out"; then
    echo "ok: report names it: $(grep -oE -- "$want" "$out" | head -1)"
else
    echo "FAIL: report lacks /$want/"; grep -E "Where it starts|NOT as expected" "$out" | head -5; fail=1
fi
exit "$fail"
