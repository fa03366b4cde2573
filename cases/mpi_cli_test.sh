#!/usr/bin/env bash
# --comm mpi end to end: `mpirun -np 4 equiv ... --comm mpi` against the same run on --comm sim.
#   mpi_cli_test.sh MPIRUN EQUIV [PART]   (MPIRUN "none": skipped, exit 77)
# PART (default: all of them), each a test of its own in cases/meson.build so that two run at once:
#   linear        row_parallel and column_parallel: layouts, dtypes, algorithms, planted bugs, and
#                 the check shown to bite (an mpi ring dump against a sim tree dump)
#   mlp_stack     mlp_stack's layouts and dtypes, a planted bug
#   gpt           gpt's layouts and dtypes, forward and backward
#   gpt_variants  gpt under the sum convention, forward only, planted bugs
#   spd           spd in both gradient conventions, a planted bug
#   errors        bad input under mpirun: one line, exit status 2 (the cases at once, in the
#                 background); MPMD launches whose ranks 2 and 3 run another setting (12 kinds):
#                 one line naming it, exit status 2 at the start, no --out left
# For each case, layout, dtype and algorithm checked: the mpi run's exit status is the sim run's,
# only rank 0 printed a report and wrote files, and its dump equals the sim dump bit for bit
# (h5diff of /layers, and `equiv compare --expect bit_exact`). Then the check is shown to bite (a
# dump of another algorithm is caught), and errors under mpirun are one line, exit status 2.
# A run checks both dtypes where it can (cases/mpi_pair_lib.sh: an mpirun's start is its cost).
set -u
mpirun=$1 equiv=$2 part=${3:-all}
case $part in
all | linear | mlp_stack | gpt | gpt_variants | spd | errors) ;;
*) echo "mpi_cli_test.sh: unknown part '$part'"; exit 2 ;;
esac
want() { [ "$part" = all ] || [ "$part" = "$1" ]; } # want PART: this run checks PART
if [ "$mpirun" = none ]; then
    echo "no mpirun or no MPI in this build: skipped"
    exit 77
fi
. "$(dirname "${BASH_SOURCE[0]}")/mpi_pair_lib.sh" # $work, $fail, $checks, sim_run, mpi_check, pair, ...

if want errors; then # in the background while the other parts run
expect_error 2 "needs 4 processes" --case row_parallel --tp 4 --comm mpi
expect_error 4 "needs 8 processes" --case spd --dp 2 --tp 4 --comm mpi
expect_error 4 "add --grads sum" --case spd --dp 4 --comm mpi --inject faith_every_rank
expect_error 4 "give --dp and --tp" --case row_parallel --comm mpi
expect_error 3 "does not divide" --case row_parallel --tp 3 --dp 1 --comm mpi
# every rank must run the same settings: ranks 2 and 3 run others (the first that differs is named)
g=(--case gpt --tp 4 --comm mpi)
expect_mismatch "--seed 7" "--seed 1234" "${g[@]}" --seed 7
expect_mismatch "--case column_parallel" "--case gpt" --case column_parallel --tp 4 --comm mpi
expect_mismatch "--size docs" "--size ci" "${g[@]}" --size docs
expect_mismatch "--dtype fp32" "every dtype of the case (no --dtype)" "${g[@]}" --dtype fp32
expect_mismatch "--dp 2" "--dp 1" --case gpt --dp 2 --tp 2 --comm mpi
expect_mismatch "--algo tree" "--algo ring" "${g[@]}" --algo tree
expect_mismatch "--grads sum" "--grads avg" "${g[@]}" --grads sum
expect_mismatch "--numerics megatron" "the size's numerics (no --numerics)" "${g[@]}" --numerics megatron
expect_mismatch "--inject skip_allreduce" "no --inject" "${g[@]}" --inject skip_allreduce
expect_mismatch "--forward-only" "no --forward-only" "${g[@]}" --forward-only
expect_mismatch "--backend cuda" "--backend cpu" "${g[@]}" --backend cuda
mkdir -p "$work/other-cases" && { cat "$(dirname "$0")/gpt.ini"; echo "# another line"; } >"$work/other-cases/gpt.ini"
expect_mismatch "the case file $work/other-cases/gpt.ini (content digest *)" \
    "the case file */gpt.ini (content digest *)" "${g[@]}" --cases-dir "$work/other-cases"
mismatches_checked_in_background "${g[@]}"
fi

if want linear; then
# One sim run of every layout and both dtypes per case; an mpi run per layout, both dtypes.
for kase in row_parallel column_parallel; do
    sim_run "$kase" "$kase" "bf16 fp32" every --algo ring
    for layout in "1 4" "2 2" "2 1"; do mpi_check "$kase" $layout; done
done
for algo in tree fp32acc seq; do
    pair "row_parallel-$algo" row_parallel "bf16 fp32" "1 4" --algo "$algo"
done
pair row_parallel-skip_allreduce row_parallel bf16 "1 4" --algo ring --inject skip_allreduce
want_failed "row_parallel --inject skip_allreduce"
pair column_parallel-shard_offset column_parallel fp32 "2 2" --algo ring --inject shard_offset
want_failed "column_parallel --inject shard_offset"

# The check bites: the mpi ring's dump against sim's tree dump of the same layout.
tree="$work/sim-row_parallel-tree/row_parallel-bf16-dp1-tp4-tree.h5"
ring="$work/mpi-row_parallel-dp1-tp4/row_parallel-bf16-dp1-tp4.h5"
"$equiv" compare "$tree" "$ring" --expect bit_exact >/dev/null
status=$?
[ "$status" -eq 1 ] || bad "mpi ring vs sim tree compared bit_exact: exit status $status, want 1"
if [ -n "$h5diff" ]; then
    "$h5diff" "$tree" "$ring" /layers /layers >/dev/null && bad "h5diff finds mpi ring = sim tree"
fi
fi

# The stacked models: every process computes its own shards and replica (gpt: its heads too,
# forward and backward), and every activation, activation gradient, parameter gradient and the
# loss is gathered as sim holds them. Both dtypes in each run.
if want mlp_stack; then
sim_run mlp_stack mlp_stack "bf16 fp32" every --algo ring
for layout in "1 4" "2 2"; do mpi_check mlp_stack $layout; done
pair mlp_stack-skip_allreduce mlp_stack bf16 "1 4" --algo ring --inject skip_allreduce
want_failed "mlp_stack --inject skip_allreduce"
fi
if want gpt; then # gpt lists layouts up to dp16-tp4: a sim run per layout
for layout in "1 4" "2 2"; do
    pair "gpt-${layout/ /-}" gpt "bf16 fp32" "$layout" --algo ring
done
fi
if want gpt_variants; then
pair gpt-sum gpt bf16 "2 2" --algo ring --grads sum
pair gpt-forward gpt fp32 "2 2" --algo tree --forward-only # the loss reduced over dp as on sim
pair gpt-skip_allreduce gpt bf16 "1 4" --algo ring --inject skip_allreduce
want_failed "gpt --inject skip_allreduce"
pair gpt-grad_avg_twice gpt fp32 "2 2" --algo ring --inject grad_avg_twice
want_failed "gpt --inject grad_avg_twice"
fi
# spd: each process its replica's rows and its tp rank's partial sums over its components; the
# per-token captures gathered over dp, the gradients (total and per loss term), losses and eval
# metrics reduced as on sim. Both gradient conventions. fp32 is its only dtype; dp2-tp2 and
# dp4-tp1 are not among its layouts: a sim run per check.
if want spd; then
for layout in "1 4" "2 2" "4 1"; do
    for grads in sum avg; do
        pair "spd-${layout/ /-}-$grads" spd fp32 "$layout" --algo ring --grads "$grads"
    done
done
pair spd-faith_every_rank spd fp32 "4 1" --algo ring --grads sum --inject faith_every_rank
want_failed "spd --grads sum --inject faith_every_rank"
fi

errors_checked
[ "$checks" -gt 0 ] || bad "part '$part' checked nothing"
exit $fail
