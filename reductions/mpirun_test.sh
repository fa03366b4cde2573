#!/usr/bin/env bash
# mpirun_test.sh MPIRUN NP PROGRAM [ARGS...]: PROGRAM on NP ranks under MPIRUN, its exit status the
# test's. MPIRUN "none" (meson found no mpirun): exit 77, meson's skip.
set -u
mpirun=$1 np=$2
shift 2
if [ "$mpirun" = none ]; then
    echo "no mpirun on this machine: skipped"
    exit 77
fi
exec "$mpirun" -np "$np" "$@"
