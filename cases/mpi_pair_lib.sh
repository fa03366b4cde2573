# shellcheck shell=bash
# Sourced by mpi_cli_test.sh and mpi_probe_test.sh (after they set $mpirun and $equiv): a run on
# --comm sim, then the same run under mpirun on --comm mpi checked against it, and bad input under
# mpirun. A scratch folder ($work, removed on exit), the running verdict ($fail), the runs and
# error cases checked ($checks) and the last mpi run's exit status ($last_status).
#
# What one mpirun costs is its start (OpenMPI and 4 processes, ~0.3 s of CPU), not the ci-size
# run (~0.03 s): so a run covers every dtype the check needs (no --dtype: the case's dtypes, one
# dump each), and one sim run may serve the mpi runs of several layouts.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
checks=0
last_status=
bad() { echo "FAIL: $*"; fail=1; }
h5diff=$(command -v h5diff || true)

# The sim runs, by name: the arguments an mpi run repeats, its case, dtypes, layout and status.
declare -A sim_args sim_case sim_dtypes sim_layout sim_status

# sim_run NAME CASE DTYPES LAYOUT [EXTRA...]: `equiv --case CASE EXTRA` on --comm sim into
# $work/sim-NAME.
#   DTYPES  the dtypes whose dumps are checked: one is given as --dtype; several ("bf16 fp32") are
#           the case's own list, run without --dtype (each dump is looked for, so a list that no
#           longer matches the case fails)
#   LAYOUT  "DP TP", or "every": no --dp and --tp, every layout the case lists in one run that the
#           mpi runs of several layouts are checked against. Its exit status must be 0 (every
#           cell as expected), which is then each cell's status: an injected bug, whose status
#           belongs to its cell, gets a run of its own layout.
sim_run() {
    local name=$1 kase=$2 dtypes=$3 layout=$4
    shift 4
    local args=(--case "$kase") where=()
    [ -z "${sim_case[$name]:-}" ] || { bad "sim $name run twice (one folder each)"; return; }
    [ "$(wc -w <<<"$dtypes")" -eq 1 ] && args+=(--dtype "$dtypes")
    args+=("$@")
    local dp tp
    [ "$layout" = every ] || { read -r dp tp <<<"$layout" && where=(--dp "$dp" --tp "$tp"); }
    "$equiv" "${args[@]}" "${where[@]}" --out "$work/sim-$name" >"$work/sim-$name.txt" 2>&1
    local status=$?
    sim_args[$name]="${args[*]}" sim_case[$name]=$kase sim_dtypes[$name]=$dtypes
    sim_layout[$name]=$layout sim_status[$name]=$status
    if [ "$layout" = every ] && [ "$status" -ne 0 ]; then
        bad "sim $name (every layout): exit status $status, want 0 (every cell as expected)"
        cat "$work/sim-$name.txt"
    fi
}

# mpi_check NAME DP TP: sim run NAME's arguments under `mpirun -np DP*TP` on --comm mpi, into
# $work/mpi-NAME-dpDP-tpTP. Its exit status is the sim run's, only rank 0 printed a report and
# wrote files (the sim run's files of the layout), and each dtype's dump of the layout equals the
# sim dump bit for bit: h5diff of /layers, and `equiv compare --expect bit_exact`.
mpi_check() {
    local name=$1 dp=$2 tp=$3
    local kase=${sim_case[$name]} args
    local out="$work/mpi-$name-dp$dp-tp$tp" sim="$work/sim-$name"
    checks=$((checks + 1))
    read -ra args <<<"${sim_args[$name]}"
    local tag="${args[*]} --dp $dp --tp $tp" # what the report lines name
    if [ "${sim_layout[$name]}" != every ] && [ "${sim_layout[$name]}" != "$dp $tp" ]; then
        bad "$tag: sim $name ran layout ${sim_layout[$name]}"
        return
    fi
    "$mpirun" -np $((dp * tp)) "$equiv" "${args[@]}" --dp "$dp" --tp "$tp" --comm mpi --out "$out" \
        >"$out.txt" 2>"$out.err"
    last_status=$?
    if [ ! -s "$out.txt" ] && [ ! -e "$out" ]; then
        # nothing printed, nothing written: the launch failed before equiv ran (seen once on a busy
        # 2-core box, status 1, as a bug's run's): said, and launched once more
        echo "note: $tag: mpirun printed nothing (exit status $last_status); launched again. Its stderr:"
        cat "$out.err"
        "$mpirun" -np $((dp * tp)) "$equiv" "${args[@]}" --dp "$dp" --tp "$tp" --comm mpi --out "$out" \
            >"$out.txt" 2>"$out.err"
        last_status=$?
    fi
    [ "$last_status" -eq "${sim_status[$name]}" ] ||
        { bad "$tag: mpi exit status $last_status, sim ${sim_status[$name]}"; cat "$out.err"; }
    local reports files want_files
    reports=$(grep -c '^## equiv report' "$out.txt")
    [ "$reports" -eq 1 ] || { bad "$tag: $reports reports printed, want 1 (rank 0 only)"; cat "$out.err"; }
    files=$(cd "$out" && ls | tr '\n' ' ')
    want_files=$(cd "$sim" && ls | tr '\n' ' ')
    if [ "${sim_layout[$name]}" = every ]; then # the reports, and the reference's and layout's dumps
        want_files=$(cd "$sim" && ls | grep -E "^(report\.|$kase-[a-z0-9]+-dp(1-tp1|$dp-tp$tp)[.-])" | tr '\n' ' ')
    fi
    [ "$files" = "$want_files" ] || bad "$tag: mpi wrote '$files', sim '$want_files'"
    local dtype dump
    for dtype in ${sim_dtypes[$name]}; do
        # the cell's dump: named for its layout and what the run set (--algo, --inject: harness/run_cell.h)
        dump=$(cd "$sim" && ls -- "$kase-$dtype-dp$dp-tp$tp.h5" "$kase-$dtype-dp$dp-tp$tp"-*.h5 2>/dev/null | head -n 1)
        [ -n "$dump" ] || { bad "$tag: sim wrote no $dtype dump of the layout"; continue; }
        if [ -n "$h5diff" ]; then
            "$h5diff" "$sim/$dump" "$out/$dump" /layers /layers >/dev/null ||
                bad "$tag: h5diff finds the mpi $dump's /layers differ from the sim dump's"
        fi
        "$equiv" compare "$sim/$dump" "$out/$dump" --expect bit_exact >/dev/null ||
            bad "$tag: equiv compare finds the mpi $dump not bit-exact to the sim dump"
    done
    [ "$fail" -eq 0 ] && echo "ok: $tag (${sim_dtypes[$name]}): mpi = sim bit for bit (exit status $last_status)"
}

# pair NAME CASE DTYPES "DP TP" [EXTRA...]: sim_run of that one layout, then its mpi_check.
pair() { sim_run "$@"; mpi_check "$1" $4; } # $4 unquoted: "DP TP" is mpi_check's two arguments

# want_failed WHAT: the mpi run before it found its injected bug (exit status 1, as on sim).
want_failed() { [ "$last_status" -eq 1 ] || bad "$1: exit status $last_status, want 1 (the injected bug found)"; }

# Errors under mpirun: exit status 2, one 'equiv: error:' line (rank 0's), nothing written. The
# other ranks wait a second before exiting (harness/driver/main.c), so the cases run at once, each
# in the background with files of its own; errors_checked waits for them and prints their lines.
error_jobs=()
expect_error() { # NP PART ARGS...
    local np=$1 part=$2 n=${#error_jobs[@]}
    shift 2
    checks=$((checks + 1))
    (
        fail=0
        out="$work/err-$n"
        "$mpirun" -np "$np" "$equiv" "$@" --out "$out" >"$out.txt" 2>"$out.err"
        status=$?
        lines=$(grep -c '^equiv: error: ' "$out.err")
        [ "$status" -eq 2 ] || bad "'$*' on $np ranks: exit status $status, want 2"
        [ "$lines" -eq 1 ] || { bad "'$*': $lines error lines, want 1"; cat "$out.err"; }
        grep -qF -- "$part" "$out.err" || bad "'$*': no '$part' in: $(grep '^equiv' "$out.err")"
        [ -e "$out" ] && bad "'$*': $out written"
        [ "$fail" -eq 0 ] && echo "ok: error on $np ranks: $(grep '^equiv: error' "$out.err")"
        exit "$fail"
    ) >"$work/err-$n.log" 2>&1 &
    error_jobs+=($!)
}
# MPMD launches whose ranks run different settings (reductions/world.h: the check at the start):
# `mpirun -np 2 equiv BASE : -np 2 equiv OTHER` for each try, one after the other in one background
# job beside the errors above. Each: exit status 2 within 5 s (the check, not the collective limit,
# which is 10 s here so that a build without the check fails fast), and the one 'equiv: error:'
# line "rank 2 runs SHOWN, rank 0 ROOT (...; rank 3 differs from rank 0 too): every rank must run
# the same settings" (a glob: * for a digest), and no --out left.
mismatch_tries=()
expect_mismatch() { # SHOWN ROOT OTHER...
    mismatch_tries+=("$(printf '%q ' "$@")")
}
mismatches_checked_in_background() { # BASE...
    local base=("$@") n=${#error_jobs[@]}
    checks=$((checks + ${#mismatch_tries[@]}))
    (
        fail=0 left=0 t=0
        for try in "${mismatch_tries[@]}"; do
            eval "set -- $try"
            local shown=$1 root=$2
            shift 2
            t=$((t + 1))
            out="$work/mismatch-$t"
            start=$EPOCHREALTIME
            EQUIV_COLLECTIVE_TIMEOUT_S=10 "$mpirun" -np 2 "$equiv" "${base[@]}" --out "$out" : \
                -np 2 "$equiv" "$@" --out "$out" >"$out.txt" 2>"$out.err"
            status=$?
            took=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN {printf "%.1f", b - a}')
            lines=$(grep '^equiv: ' "$out.err")
            want="equiv: error: rank 2 runs $shown, rank 0 $root (*rank 3 differs from rank 0 too): every rank must run the same settings"
            [ "$status" -eq 2 ] || bad "'$*' on ranks 2 and 3: exit status $status, want 2"
            # shellcheck disable=SC2053 # $want is a pattern
            [[ $lines == $want ]] || bad "'$*' on ranks 2 and 3: equiv said:"$'\n'"$lines"$'\n'"want: $want"
            awk -v t="$took" 'BEGIN {exit !(t <= 5)}' || bad "'$*' on ranks 2 and 3: the job took $took s"
            [ -e "$out" ] && { left=$((left + 1)); bad "'$*' on ranks 2 and 3: $out left: $(ls -A "$out" | tr '\n' ' ')"; }
        done
        [ "$fail" -eq 0 ] && echo "ok: $t MPMD launches with settings that differ on ranks 2 and 3: exit status 2, one line naming the setting, --out left in $left of $t"
        exit "$fail"
    ) >"$work/err-$n.log" 2>&1 &
    error_jobs+=($!)
}
errors_checked() {
    local n
    for n in "${!error_jobs[@]}"; do
        wait "${error_jobs[$n]}" || fail=1
        cat "$work/err-$n.log"
    done
    error_jobs=()
}
