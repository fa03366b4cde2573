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
# layout is not bit-exact to this one's.
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
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
h5diff=$(command -v h5diff || true)

# run_pair DP DTYPE [EXTRA...]: both transports, then the checks above; last_status the mpi run's.
run_pair() {
    local dp=$1 dtype=$2
    shift 2
    local tag="dp$dp-$dtype$(printf '%s' "$*" | tr -c 'a-z0-9_' '-')" args=(--case probe --dp "$dp" --tp 1 --dtype "$dtype" "$@")
    "$equiv" "${args[@]}" --out "$work/sim-$tag" >"$work/sim-$tag.txt" 2>&1
    local sim_status=$?
    # the cell's dump: named for its layout and what the run set (--algo, --inject: harness/run_cell.h)
    local dump
    dump=$(cd "$work/sim-$tag" && ls -- probe-$dtype-dp$dp-tp1.h5 probe-$dtype-dp$dp-tp1-*.h5 2>/dev/null | head -n 1)
    "$mpirun" -np "$dp" "$equiv" "${args[@]}" --comm mpi --out "$work/mpi-$tag" >"$work/mpi-$tag.txt" 2>"$work/mpi-$tag.err"
    last_status=$?
    [ "$last_status" -eq "$sim_status" ] || { bad "$tag: mpi exit status $last_status, sim $sim_status"; cat "$work/mpi-$tag.err"; }
    local reports files
    reports=$(grep -c '^## equiv report' "$work/mpi-$tag.txt")
    [ "$reports" -eq 1 ] || bad "$tag: $reports reports printed, want 1 (rank 0 only)"
    files=$(cd "$work/mpi-$tag" && ls | tr '\n' ' ')
    [ "$files" = "$(cd "$work/sim-$tag" && ls | tr '\n' ' ')" ] || bad "$tag: mpi wrote '$files'"
    if [ -n "$h5diff" ]; then
        "$h5diff" "$work/sim-$tag/$dump" "$work/mpi-$tag/$dump" /layers /layers >/dev/null ||
            bad "$tag: h5diff finds the mpi dump's /layers differ from the sim dump's"
    fi
    "$equiv" compare "$work/sim-$tag/$dump" "$work/mpi-$tag/$dump" --expect bit_exact >/dev/null ||
        bad "$tag: equiv compare finds the mpi dump not bit-exact to the sim dump"
    [ "$fail" -eq 0 ] && echo "ok: probe $tag: mpi = sim bit for bit (exit status $last_status)"
}
want_failed() { [ "$last_status" -eq 1 ] || bad "$1: exit status $last_status, want 1 (the injected bug found)"; }

# Each bug under both transports: same dump, exit 1 (var_fp32 shows in fp64 runs).
if want bugs; then
for bug in local_count ddp_sync rank_sampling bars_dot_one_rank; do
    run_pair 4 fp32 --inject "$bug"
    want_failed "probe --inject $bug"
done
run_pair 4 fp64 --inject var_fp32
want_failed "probe --inject var_fp32"
fi
[ "$part" = bugs ] && exit $fail

# dp 2: U splits 10/9; dp 4: E 6 each, U 5/5/5/4 (uneven).
for dtype in bf16 fp32 fp64; do run_pair 2 "$dtype"; done
run_pair 4 fp32

# The check bites: the dp 4 mpi dump against the dp 2 sim dump (the buffers summed in another order).
"$equiv" compare "$work/sim-dp2-fp32/probe-fp32-dp2-tp1.h5" "$work/mpi-dp4-fp32/probe-fp32-dp4-tp1.h5" \
    --expect bit_exact >/dev/null
status=$?
[ "$status" -eq 1 ] || bad "mpi dp 4 vs sim dp 2 compared bit_exact: exit status $status, want 1"

# Errors under mpirun: exit status 2, one 'equiv: error:' line, nothing written.
rm -rf "$work/err-out"
"$mpirun" -np 4 "$equiv" --case probe --dp 2 --tp 2 --comm mpi --out "$work/err-out" >"$work/err.txt" 2>"$work/err.err"
status=$?
[ "$status" -eq 2 ] || bad "probe dp2-tp2 under mpi: exit status $status, want 2"
[ "$(grep -c '^equiv: error: ' "$work/err.err")" -eq 1 ] || { bad "probe dp2-tp2: not one error line"; cat "$work/err.err"; }
grep -q "data parallel only" "$work/err.err" || bad "probe dp2-tp2: $(grep '^equiv' "$work/err.err")"
[ -e "$work/err-out" ] && bad "probe dp2-tp2: $work/err-out written"
exit $fail
