#!/usr/bin/env bash
# --comm mpi end to end: `mpirun -np 4 equiv ... --comm mpi` against the same run on --comm sim.
#   mpi_cli_test.sh MPIRUN EQUIV [PART]   (MPIRUN "none": skipped, exit 77)
# PART (default: all of them, in this order), each a test of its own in cases/meson.build so that
# two run at once:
#   linear        row_parallel and column_parallel: layouts, dtypes, algorithms, planted bugs, and
#                 the check shown to bite (an mpi ring dump against a sim tree dump)
#   mlp_stack     mlp_stack's layouts and dtypes, a planted bug
#   gpt           gpt's layouts and dtypes, forward and backward
#   gpt_variants  gpt under the sum convention, forward only, planted bugs
#   spd           spd in both gradient conventions, a planted bug
#   errors        bad input under mpirun: one line, exit status 2
# For each case, layout, dtype and algorithm checked: the mpi run's exit status is the sim run's,
# only rank 0 printed a report and wrote files, and its dump equals the sim dump bit for bit
# (h5diff of /layers, and `equiv compare --expect bit_exact`). Then the check is shown to bite (a
# dump of another algorithm is caught), and errors under mpirun are one line, exit status 2.
set -u
mpirun=$1 equiv=$2 part=${3:-all}
case $part in
all | linear | mlp_stack | gpt | gpt_variants | spd | errors) ;;
*) echo "mpi_cli_test.sh: unknown part '$part'"; exit 2 ;;
esac
want() { [ "$part" = all ] || [ "$part" = "$1" ]; } # want PART: this run checks PART
checks=0 # runs and error cases checked: a part that checks nothing fails
if [ "$mpirun" = none ]; then
    echo "no mpirun or no MPI in this build: skipped"
    exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }

# run_pair CASE DP TP DTYPE ALGO [EXTRA...]: both transports, then the checks above.
run_pair() {
    local kase=$1 dp=$2 tp=$3 dtype=$4 algo=$5
    checks=$((checks + 1))
    shift 5
    local tag="$kase-dp$dp-tp$tp-$dtype-$algo$(printf '%s' "$*" | tr -c 'a-z0-9_' '-')" args=(--case "$kase" --dp "$dp" --tp "$tp" --dtype "$dtype" --algo "$algo" "$@")
    "$equiv" "${args[@]}" --out "$work/sim-$tag" >"$work/sim-$tag.txt" 2>&1
    local sim_status=$?
    # the cell's dump: named for its layout and what the run set (--algo, --inject: harness/run_cell.h)
    local dump
    dump=$(cd "$work/sim-$tag" && ls -- $kase-$dtype-dp$dp-tp$tp.h5 $kase-$dtype-dp$dp-tp$tp-*.h5 2>/dev/null | head -n 1)
    "$mpirun" -np $((dp * tp)) "$equiv" "${args[@]}" --comm mpi --out "$work/mpi-$tag" >"$work/mpi-$tag.txt" 2>"$work/mpi-$tag.err"
    local mpi_status=$?
    last_status=$mpi_status
    [ "$mpi_status" -eq "$sim_status" ] || { bad "$tag: mpi exit status $mpi_status, sim $sim_status"; cat "$work/mpi-$tag.err"; }
    local reports
    reports=$(grep -c '^## equiv report' "$work/mpi-$tag.txt")
    [ "$reports" -eq 1 ] || bad "$tag: $reports reports printed, want 1 (rank 0 only)"
    local files
    files=$(cd "$work/mpi-$tag" && ls | tr '\n' ' ')
    [ "$files" = "$(cd "$work/sim-$tag" && ls | tr '\n' ' ')" ] || bad "$tag: mpi wrote '$files'"
    if [ -n "$h5diff" ]; then
        "$h5diff" "$work/sim-$tag/$dump" "$work/mpi-$tag/$dump" /layers /layers >/dev/null ||
            bad "$tag: h5diff finds the mpi dump's /layers differ from the sim dump's"
    fi
    "$equiv" compare "$work/sim-$tag/$dump" "$work/mpi-$tag/$dump" --expect bit_exact >/dev/null ||
        bad "$tag: equiv compare finds the mpi dump not bit-exact to the sim dump"
    [ "$fail" -eq 0 ] && echo "ok: $tag: mpi = sim bit for bit (exit status $mpi_status)"
}

h5diff=$(command -v h5diff || true)
# want_failed TAG: the run before it found its injected bug (exit status 1 under both transports).
want_failed() { [ "$last_status" -eq 1 ] || bad "$1: exit status $last_status, want 1 (the injected bug found)"; }

if want linear; then
for dtype in bf16 fp32; do
    for layout in "1 4" "2 2" "2 1"; do
        set -- $layout
        run_pair row_parallel "$1" "$2" "$dtype" ring
        run_pair column_parallel "$1" "$2" "$dtype" ring
    done
    for algo in tree fp32acc seq; do run_pair row_parallel 1 4 "$dtype" "$algo"; done
done
run_pair row_parallel 1 4 bf16 ring --inject skip_allreduce # exit 1 under both, same dump
run_pair column_parallel 2 2 fp32 ring --inject shard_offset

# The check bites: the mpi ring's dump against sim's tree dump of the same layout.
tree="$work/sim-row_parallel-dp1-tp4-bf16-tree/row_parallel-bf16-dp1-tp4-tree.h5"
ring="$work/mpi-row_parallel-dp1-tp4-bf16-ring/row_parallel-bf16-dp1-tp4.h5"
"$equiv" compare "$tree" "$ring" --expect bit_exact >/dev/null
status=$?
[ "$status" -eq 1 ] || bad "mpi ring vs sim tree compared bit_exact: exit status $status, want 1"
if [ -n "$h5diff" ]; then
    "$h5diff" "$tree" "$ring" /layers /layers >/dev/null && bad "h5diff finds mpi ring = sim tree"
fi
fi

# The stacked models: every process computes its own shards and replica (gpt: its heads too,
# forward and backward), and every activation, activation gradient, parameter gradient and the
# loss is gathered as sim holds them.
for kase in mlp_stack gpt; do
    want "$kase" || continue
    for dtype in bf16 fp32; do
        for layout in "1 4" "2 2"; do
            set -- $layout
            run_pair "$kase" "$1" "$2" "$dtype" ring
        done
    done
done
if want mlp_stack; then
run_pair mlp_stack 1 4 bf16 ring --inject skip_allreduce
want_failed "mlp_stack --inject skip_allreduce"
fi
if want gpt_variants; then
run_pair gpt 2 2 bf16 ring --grads sum
run_pair gpt 2 2 fp32 tree --forward-only # the loss reduced over dp as on sim
run_pair gpt 1 4 bf16 ring --inject skip_allreduce
want_failed "gpt --inject skip_allreduce"
run_pair gpt 2 2 fp32 ring --inject grad_avg_twice
want_failed "gpt --inject grad_avg_twice"
fi
# spd: each process its replica's rows and its tp rank's partial sums over its components; the
# per-token captures gathered over dp, the gradients (total and per loss term), losses and eval
# metrics reduced as on sim. Both gradient conventions.
if want spd; then
for layout in "1 4" "2 2" "4 1"; do
    set -- $layout
    for grads in sum avg; do run_pair spd "$1" "$2" fp32 ring --grads "$grads"; done
done
run_pair spd 4 1 fp32 ring --grads sum --inject faith_every_rank
want_failed "spd --grads sum --inject faith_every_rank"
fi

# Errors under mpirun: exit status 2, one 'equiv: error:' line (rank 0's), nothing written.
expect_error() { # NP PART ARGS...
    local np=$1 part=$2
    checks=$((checks + 1))
    shift 2
    rm -rf "$work/err-out"
    "$mpirun" -np "$np" "$equiv" "$@" --out "$work/err-out" >"$work/err.txt" 2>"$work/err.err"
    local status=$? lines
    lines=$(grep -c '^equiv: error: ' "$work/err.err")
    [ "$status" -eq 2 ] || bad "'$*' on $np ranks: exit status $status, want 2"
    [ "$lines" -eq 1 ] || { bad "'$*': $lines error lines, want 1"; cat "$work/err.err"; }
    grep -qF -- "$part" "$work/err.err" || bad "'$*': no '$part' in: $(grep '^equiv' "$work/err.err")"
    [ -e "$work/err-out" ] && bad "'$*': $work/err-out written"
    [ "$fail" -eq 0 ] && echo "ok: error on $np ranks: $(grep '^equiv: error' "$work/err.err")"
}
if want errors; then
expect_error 2 "needs 4 processes" --case row_parallel --tp 4 --comm mpi
expect_error 4 "needs 8 processes" --case spd --dp 2 --tp 4 --comm mpi
expect_error 4 "add --grads sum" --case spd --dp 4 --comm mpi --inject faith_every_rank
expect_error 4 "give --dp and --tp" --case row_parallel --comm mpi
expect_error 3 "does not divide" --case row_parallel --tp 3 --dp 1 --comm mpi
fi
[ "$checks" -gt 0 ] || bad "part '$part' checked nothing"
exit $fail
