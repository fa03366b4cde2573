#!/bin/sh
# The JSON reports of real runs (all as expected, and a planted bug) validate against the schema,
# and the schema rejects reports broken on purpose (schema_check.py --self-test).
#
#   reports/schema_check.sh EQUIV PYTHON SCHEMA
#
# Exit status: 0 valid, 1 a report invalid, a self-test case judged wrong or a run that did not
# exit as it should, 2 usage, 77 skipped (PYTHON has no jsonschema module).
set -u

if [ $# -ne 3 ]; then
    echo "usage: $0 EQUIV PYTHON SCHEMA" >&2
    exit 2
fi
equiv=$1 python=$2 schema=$3
check="$(dirname "$0")/schema_check.py"
work=$(mktemp -d) || exit 2
trap 'rm -rf "$work"' EXIT
failed=0

# run NAME WANT_STATUS ARGS...: equiv ARGS --format json into $work/NAME.json
run() {
    name=$1 want=$2
    shift 2
    "$equiv" "$@" --format json >"$work/$name.json"
    status=$?
    if [ "$status" -ne "$want" ]; then
        echo "schema_check.sh: equiv $* exited $status, want $want" >&2
        failed=1
    fi
}

run row_parallel 0 --case row_parallel
run gpt_tp2 0 --case gpt --tp 2
run row_parallel_truth 0 --case row_parallel --tp 4 --truth
run gpt_tp4_skip_allreduce 1 --case gpt --tp 4 --inject skip_allreduce # not as expected: exit 1
run gpt_steps 0 --case gpt --tp 2 --dtype bf16 --steps 3 # the training curve's "steps" object

"$python" "$check" "$schema" "$work/row_parallel.json" "$work/row_parallel_truth.json" "$work/gpt_tp2.json" "$work/gpt_tp4_skip_allreduce.json" \
    "$work/gpt_steps.json"
status=$?
[ "$status" -eq 77 ] && exit 77
[ "$status" -eq 0 ] || failed=1

"$python" "$check" --self-test "$schema" "$work/gpt_tp4_skip_allreduce.json" || failed=1
"$python" "$check" --self-test "$schema" "$work/gpt_steps.json" || failed=1
exit "$failed"
