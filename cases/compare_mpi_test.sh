#!/usr/bin/env bash
# `equiv compare --comm mpi` under `mpirun -np 4` against the same compare in one process, on a
# user's run of more tensors than one batch holds (cases/compare_mpi_fixture.py: 2142 tensors, 5
# batches of at most 512, spread over the processes: batch b on rank b % 4).
#   compare_mpi_test.sh MPIRUN EQUIV PYTHON   (MPIRUN "none", or no h5py: skipped, exit 77)
# For each test run, the exit status is the one process's, and standard output and report.md,
# report.json and report.html are the same bytes (the reports hold no timing lines): rank 0 alone
# printed and wrote, and it merged every rank's batches in order.
#   test      off by rounding: exit 0 (also under -np 3: 5 batches over 3 ranks, uneven)
#   scaled    one activation x 1.001, in batch 1 (rank 1's): exit 1, named where it starts
#   replica   a parameter's dp copies differ, in batch 3 (rank 3's): exit 1, the finding listed
#   damaged   an activation in batch 2 (rank 2's) fails its checksum: exit 2 on every rank, one
#             'equiv: error:' line, from rank 2, naming the file; no --out left
# And --comm nccl is refused by compare (exit 2, one line).
set -u
mpirun=$1 equiv=$2 python=$3
if [ "$mpirun" = none ]; then
    echo "no mpirun or no MPI in this build: skipped"
    exit 77
fi
"$python" -c 'import h5py, numpy' 2>/dev/null || { echo "no h5py or numpy: skipped"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
"$python" "$(dirname "$0")/compare_mpi_fixture.py" "$work" || { echo "FAIL: the fixture"; exit 1; }

# same NP RUN WANT [ARGS...]: one process and NP processes compare ref with RUN, exit status WANT.
same() {
    local np=$1 run=$2 want=$3
    shift 3
    local one="$work/one-$run-$np" many="$work/many-$run-$np" status
    "$equiv" compare "$work/ref" "$work/$run" --out "$one" "$@" >"$one.txt" 2>"$one.err"
    status=$?
    [ "$status" -eq "$want" ] || { bad "$run, one process: exit status $status, want $want"; cat "$one.err"; }
    "$mpirun" -np "$np" "$equiv" compare "$work/ref" "$work/$run" --comm mpi --out "$many" "$@" \
        >"$many.txt" 2>"$many.err"
    status=$?
    [ "$status" -eq "$want" ] || { bad "$run, $np processes: exit status $status, want $want"; cat "$many.err"; }
    grep -q '^equiv: ' "$many.err" && { bad "$run, $np processes: equiv said:"; grep '^equiv: ' "$many.err"; }
    cmp -s "$one.txt" "$many.txt" || bad "$run, $np processes: standard output differs from one process's"
    local f
    for f in report.md report.json report.html; do
        cmp -s "$one/$f" "$many/$f" || bad "$run, $np processes: $f differs from one process's"
    done
    [ "$(ls "$many" | tr '\n' ' ')" = "report.html report.json report.md " ] ||
        bad "$run, $np processes: --out holds $(ls "$many" | tr '\n' ' ')"
    [ "$fail" -eq 0 ] && echo "ok: $run on $np processes: exit status $status, the reports the same bytes as one process's"
}
same 4 test 0
same 3 test 0 --format json
same 4 scaled 1
grep -q 'it starts at `blocks.900.out`' "$work/many-scaled-4/report.md" ||
    bad "scaled: the report does not say it starts at blocks.900.out"
same 4 replica 1
grep -q '^- test run: blocks.1600.weight (param) should be replicated over dp' "$work/many-replica-4/report.md" ||
    bad "replica: the report lists no finding for blocks.1600.weight"

# A damaged file read by rank 2: one line from it, exit status 2, no --out.
out="$work/many-damaged"
"$mpirun" -np 4 "$equiv" compare "$work/ref" "$work/damaged" --comm mpi --out "$out" >"$out.txt" 2>"$out.err"
status=$?
lines=$(grep -c '^equiv: ' "$out.err")
[ "$status" -eq 2 ] || bad "damaged, 4 processes: exit status $status, want 2"
[ "$lines" -eq 1 ] || { bad "damaged, 4 processes: $lines lines from equiv, want 1:"; cat "$out.err"; }
grep -q '^equiv: error: rank 2: .*/damaged/rank00001.h5: reading dataset blocks.1200.out' "$out.err" ||
    bad "damaged, 4 processes: the line names not rank 2, the file and the dataset: $(grep '^equiv' "$out.err")"
[ -s "$out.txt" ] && bad "damaged, 4 processes: a report printed"
[ -e "$out" ] && bad "damaged, 4 processes: $out left"
[ "$fail" -eq 0 ] && echo "ok: damaged on 4 processes: $(grep '^equiv' "$out.err")"

# compare runs under sim and mpi only
"$equiv" compare "$work/ref" "$work/test" --comm nccl >/dev/null 2>"$work/nccl.err"
status=$?
[ "$status" -eq 2 ] && [ "$(grep -c '^equiv: error: compare takes --comm sim' "$work/nccl.err")" -eq 1 ] ||
    { bad "compare --comm nccl: exit status $status:"; cat "$work/nccl.err"; }
exit "$fail"
