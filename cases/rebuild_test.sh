#!/usr/bin/env bash
# A dump is self-contained: the single-process reference is rebuilt in numpy from the dump alone
# (cases/rebuild_CASE.py) and matches it to fp32 rounding; with a hyperparameter planted wrong the
# same rebuild must not match.
#   rebuild_test.sh EQUIV PYTHON SCRIPT CASE PLANTS [EQUIV ARGS...]
# PLANTS: space-separated NAME=VALUE, each a wrong value for one of the dump's /config attributes,
# each tried alone.
set -u
equiv=$1 py=$2 script=$3 kase=$4 plants=$5
shift 5
"$py" -c 'import h5py, numpy' 2>/dev/null || { echo "no h5py or numpy for $py: skipped"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
"$equiv" --case "$kase" --dtype fp32 --tp 2 "$@" --out "$work" >/dev/null || { echo "FAIL: equiv run"; exit 1; }
# the reference's dump, named for its cell: the layout's name, then what EQUIV ARGS set ("-grads_sum")
dump=$(ls "$work/$kase-fp32-dp1-tp1".h5 "$work/$kase-fp32-dp1-tp1"-*.h5 2>/dev/null | head -n 1)
if "$py" "$script" "$dump" >"$work/rebuild.txt"; then
    echo "ok: $(tail -n 1 "$work/rebuild.txt")"
else
    echo "FAIL: the rebuild does not match the dump:"; grep -v '^ok' "$work/rebuild.txt"; fail=1
fi
for plant in $plants; do
    "$py" "$script" "$dump" --plant "$plant" >"$work/planted.txt"
    status=$?
    if [ "$status" -eq 1 ] && grep -q '^FAIL' "$work/planted.txt"; then
        echo "ok: with $plant planted: $(tail -n 1 "$work/planted.txt")"
    else
        echo "FAIL: with $plant planted the rebuild exits $status, want 1 (a mismatch)"; tail -n 3 "$work/planted.txt"
        fail=1
    fi
done
exit $fail
