#!/usr/bin/env bash
# The probe case (seed 004) under --comm mpi, one dp rank per process, against the same run on
# --comm sim: dp rank 0 draws the indices and broadcasts them, each process runs its shard, the
# buffers, counts and scalars are reduced over MPI, the per-unit values all-gathered.
#   mpi_probe_test.sh MPIRUN EQUIV [PART]   (MPIRUN "none": skipped, exit 77)
# PART (default: both), each a test of its own in cases/meson.build so that the two run at once:
#   layouts  dp 2 in every dtype and dp 4, the check shown to bite, an error under mpirun
#   bugs     each planted bug under both transports
# For each layout, dtype and bug checked: the mpi run's exit status is the sim run's, only rank 0
# printed a report and wrote files, and its dump equals the sim dump bit for bit (h5diff of /layers
# and `equiv compare --expect bit_exact`). Then the check is shown to bite: an mpi dump of another
# layout is not bit-exact to this one's. dp 2 runs its three dtypes in one run
# (cases/mpi_pair_lib.sh: an mpirun's start is its cost).
set -u
mpirun=$1 equiv=$2 part=${3:-all}
case $part in
all | layouts | bugs) ;;
*) echo "mpi_probe_test.sh: unknown part '$part'"; exit 2 ;;
esac
want() { [ "$part" = all ] || [ "$part" = "$1" ]; } # want PART: this run checks PART
if [ "$mpirun" = none ]; then
    echo "no mpirun or no MPI in this build: skipped"
    exit 77
fi
. "$(dirname "${BASH_SOURCE[0]}")/mpi_pair_lib.sh" # $work, $fail, $checks, sim_run, mpi_check, pair, ...

# Errors under mpirun (in the background while the runs go): exit status 2, one line, nothing written.
want layouts && expect_error 4 "data parallel only" --case probe --dp 2 --tp 2 --comm mpi

# Each bug under both transports: same dump, exit 1 (var_fp32 shows in fp64 runs).
if want bugs; then
for bug in local_count ddp_sync rank_sampling bars_dot_one_rank; do
    pair "probe-$bug" probe fp32 "4 1" --inject "$bug"
    want_failed "probe --inject $bug"
done
pair probe-var_fp32 probe fp64 "4 1" --inject var_fp32
want_failed "probe --inject var_fp32"
fi

if want layouts; then
# dp 2: U splits 10/9, in bf16, fp32 and fp64 (the case's dtypes); dp 4: E 6 each, U 5/5/5/4 (uneven).
pair probe-dp2 probe "bf16 fp32 fp64" "2 1"
pair probe-dp4 probe fp32 "4 1"

# The check bites: the dp 4 mpi dump against the dp 2 sim dump (the buffers summed in another order).
"$equiv" compare "$work/sim-probe-dp2/probe-fp32-dp2-tp1.h5" "$work/mpi-probe-dp4-dp4-tp1/probe-fp32-dp4-tp1.h5" \
    --expect bit_exact >/dev/null
status=$?
[ "$status" -eq 1 ] || bad "mpi dp 4 vs sim dp 2 compared bit_exact: exit status $status, want 1"
fi

errors_checked
[ "$checks" -gt 0 ] || bad "part '$part' checked nothing"
exit $fail
