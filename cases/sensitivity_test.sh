#!/usr/bin/env bash
# sensitivity_test.sh PYTHON WORK [--quick] SENSITIVITY_PY EQUIV ARGS...: runs cases/sensitivity.py in a
# fresh WORK (the runs of an earlier invocation are not reused) and prints its table.
set -uo pipefail
py=$1 work=$2
shift 2
quick=()
if [ "${1:-}" = --quick ]; then quick=(--quick); shift; fi
script=$1 equiv=$2
shift 2
rm -rf "$work"
"$py" "$script" "$work" "$equiv" "${quick[@]}" "$@"
