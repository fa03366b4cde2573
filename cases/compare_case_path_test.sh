#!/usr/bin/env bash
# `equiv compare` takes tolerance and expectation from a case file only when the dump's "case"
# attribute names a file in the cases directory: a dump whose case reads
# "../../<somewhere>/row_parallel" must not load <somewhere>/row_parallel.ini (here a malformed one,
# which would end the comparison with an error if it were loaded).
#   compare_case_path_test.sh EQUIV PYTHON
set -u
equiv=$1 py=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$equiv" --case row_parallel --tp 2 --dtype fp32 --out "$work/run" >/dev/null || exit 1
mkdir "$work/outside"
printf '[case]\nmodel = row_parallel\nthis is not ini\n' >"$work/outside/row_parallel.ini"
cases_dir="${EQUIV_HOME:?}/cases"
up=$(realpath --relative-to="$cases_dir" "$work/outside")
for f in dp1-tp1 dp1-tp2; do cp "$work/run/row_parallel-fp32-$f.h5" "$work/$f.h5"; done
"$py" - "$work/dp1-tp1.h5" "$work/dp1-tp2.h5" "$up/row_parallel" <<'PY'
import h5py, sys
for path in sys.argv[1:3]:
    with h5py.File(path, "r+") as f:
        f.attrs["case"] = sys.argv[3]
PY
"$equiv" compare "$work/dp1-tp1.h5" "$work/dp1-tp2.h5" >"$work/report.md" 2>"$work/err"
status=$?
cat "$work/err"
if [ "$status" -eq 2 ]; then echo "FAIL: compare loaded the case file outside the cases directory"; exit 1; fi
grep -q "default_fp32" "$work/report.md" || { echo "FAIL: the report does not use the dtype's default"; exit 1; }
# the same dumps with their real case name take the case's own tolerance
"$equiv" compare "$work/run/row_parallel-fp32-dp1-tp1.h5" "$work/run/row_parallel-fp32-dp1-tp2.h5" >"$work/own.md" || exit 1
grep -q "default_fp32" "$work/own.md" && { echo "FAIL: a known case fell back to the default"; exit 1; }
echo "ok: a dump's case attribute cannot reach outside the cases directory"
