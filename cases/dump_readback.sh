#!/usr/bin/env bash
# Dumps written by a run, read back with h5py and checked against an independent numpy
# recomputation (harness/dump_readback_test.py).
#   dump_readback.sh EQUIV PYTHON SCRIPT
set -u
equiv=$1 py=$2 script=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$equiv" --case column_parallel --tp 4 --out "$work" >/dev/null || exit 1
"$equiv" --case row_parallel --tp 4 --out "$work" >/dev/null || exit 1
"$py" "$script" "$work"/*.h5
