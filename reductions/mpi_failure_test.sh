#!/usr/bin/env bash
# mpi_failure_test.sh MPIRUN NP PATTERN MAX_SECONDS PROGRAM [ARGS...]: PROGRAM on NP ranks must end
# with exit status 2 within MAX_SECONDS, and its standard error must hold one 'equiv: error:' line,
# matching PATTERN (grep -E): a failing or hanging rank is one error naming the rank, never a hang.
# MPIRUN "none": skipped (77).
set -u
mpirun=$1 np=$2 pattern=$3 max_seconds=$4
shift 4
if [ "$mpirun" = none ]; then
    echo "no mpirun on this machine: skipped"
    exit 77
fi
err=$(mktemp)
trap 'rm -f "$err"' EXIT
start=$(date +%s)
# The outer timeout only keeps a broken build from hanging CI; the check is the bound below.
timeout $((max_seconds * 3)) "$mpirun" -np "$np" "$@" 2>"$err"
status=$?
elapsed=$(($(date +%s) - start))
cat "$err" >&2
[ "$status" -eq 77 ] && exit 77 # the program has no MPI
fail=0
if [ "$status" -ne 2 ]; then echo "exit status $status, want 2"; fail=1; fi
if [ "$elapsed" -gt "$max_seconds" ]; then echo "took ${elapsed} s, want <= ${max_seconds} s"; fail=1; fi
if ! grep -Eq "$pattern" "$err"; then echo "standard error does not match: $pattern"; fail=1; fi
lines=$(grep -c '^equiv: error:' "$err")
if [ "$lines" -ne 1 ]; then echo "$lines 'equiv: error:' lines, want 1"; fail=1; fi
[ "$fail" -eq 0 ] && echo "exit status 2 after ${elapsed} s, message matches"
exit $fail
