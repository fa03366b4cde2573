#!/usr/bin/env bash
# Faults under mpirun (reductions/mpi_watch.h): rank 0 working alone is no collective timeout, and a
# rank that is killed or stopped is named in one equiv line, once.
#   mpi_fault_test.sh MPIRUN EQUIV PART...       (MPIRUN "none": skipped, exit 77)
# Several parts run one after the other, one job at a time (cases/meson.build runs them all in one
# test, so that no two of these timed jobs share the machine). PART
#   root_alone    EQUIV_COLLECTIVE_TIMEOUT_S=$limit (1.5 s, below), and rank 0 spends longer than
#                 that alone in the dp1-tp1 runs (the reference and --truth's fp64 run): the job
#                 passes with a report, on standard output (with --out its dumps at this size were
#                 769 MB, 2 s of writing outside the runs the check times; the MPI value tests
#                 check --out).
#   killed        kill -9 of rank 2 mid-run: one line naming rank 2 and its pid.
#   killed_root   kill -9 of rank 0 while the others wait for its reference: one line naming rank 0.
#   stopped       kill -STOP of rank 2 mid-run, $limit s limit: one line naming rank 2 as stopped, exit 2.
#   stopped_root  kill -STOP of rank 0 while the others wait for its reference: one line naming it.
#   leftovers_stopped   10 tries with --out, two lanes of 5 at once: kill -STOP of rank 2 as soon
#                 as rank 0's private folder (.equiv-tmp.*) is in --out, 1 s limit: exit status 2,
#                 one line naming rank 2, and neither --out nor the folder left (the watchdog's
#                 _exit removes them first).
#   leftovers_launcher  the same with SIGTERM (5) and SIGINT (5) to mpirun once rank 0's private
#                 folder is there: one line, that the launcher (mpirun, its pid) ended the job, none
#                 naming a rank as the sender, and nothing left; then a SIGTERM from this script to
#                 rank 1: "rank 1 (pid P on HOST) was ended by SIGTERM from bash, pid $$". No
#                 collective limit in play: a test of its own beside the others.
# Each run is plain mpirun (no -q): its own messages stay, and equiv's lines are counted among them.
set -u
mpirun=$1 equiv=$2
parts=("${@:3}")
if [ "$mpirun" = none ]; then
    echo "no mpirun or no MPI in this build: skipped"
    exit 77
fi
work=$(mktemp -d)
victim=""
cleanup() {
    # a stopped or surviving rank of a failed check must not outlive the test
    if [ -n "$victim" ]; then kill -CONT "$victim" 2>/dev/null; kill -9 "$victim" 2>/dev/null; fi
    [ -n "${job:-}" ] && kill -9 "$job" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT
fail=0 n_bad=0
bad() { echo "FAIL: ${part:-}: $*"; fail=1; n_bad=$((n_bad + 1)); }

# with_seq SEQ: row_parallel with a size "wait" between ci and docs (docs' features, SEQ x 2 rows):
# its dp1-tp1 runs take seconds, not minutes.
mkdir -p "$work/cases"
with_seq() {
    sed "s/^\\[size\\.ci\\]/[size.wait]\\nseq = $1\\nbatch = 2\\nin_features = 4096\\nout_features = 1024\\n\\n&/" \
        "$(dirname "$0")/row_parallel.ini" >"$work/cases/row_parallel.ini"
}
with_seq 1536
wait_args=(--cases-dir "$work/cases" --case row_parallel --size wait --dtype bf16 --comm mpi)

# rank_pid RANK: that rank's pid among mpirun's children (its OMPI_COMM_WORLD_RANK says), once the
# rank's watch is armed (it catches SIGTERM: /proc/PID/status SigCgt bit 14); waits up to 30 s.
rank_pid() {
    local c i
    for ((i = 0; i < 300; i++)); do
        for c in $(pgrep -P "$job"); do
            tr '\0' '\n' <"/proc/$c/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$1" || continue
            local mask
            mask=$(awk '/^SigCgt:/ {print $2}' "/proc/$c/status" 2>/dev/null)
            [ -n "$mask" ] && (((0x$mask >> 14) & 1)) && { echo "$c"; return 0; }
        done
        sleep 0.1
    done
    return 1
}

# start NP ARGS...: the job in the background ($job), its outputs in $work/out.txt and err.txt.
start() {
    local np=$1
    shift
    t0=$(date +%s)
    "$mpirun" -np "$np" "$equiv" "$@" >"$work/out.txt" 2>"$work/err.txt" &
    job=$!
}

# finish: waits for the job; $status, $elapsed (since the start), $after (since the fault, once
# fault() was called); every 'equiv:' line but -v's 'ran' lines in $lines.
finish() {
    wait "$job"
    status=$?
    job=""
    elapsed=$(($(date +%s) - t0))
    after=$(($(date +%s) - ${t_fault:-$t0}))
    lines=$(cat "$work/out.txt" "$work/err.txt" | grep '^equiv:' | grep -v '^equiv: ran ')
    if [ -n "$victim" ]; then # the launcher ends every rank, the stopped one too (an exit takes a moment)
        local state i
        for ((i = 0; i < 50; i++)); do
            state=$(awk '{print $3}' "/proc/$victim/stat" 2>/dev/null)
            case "$state" in "" | Z | X) break ;; esac
            sleep 0.1
        done
        case "$state" in
        "" | Z | X) ;;
        *)
            bad "rank $rank (pid $victim) outlived the job (state $state)"
            kill -CONT "$victim" 2>/dev/null
            kill -9 "$victim" 2>/dev/null
            ;;
        esac
        victim="" # its pid stays in $pid for the checks
    fi
}

# one_line REGEX: equiv printed exactly one line, and it matches.
one_line() {
    local n
    n=$(printf '%s' "$lines" | grep -c '^equiv:')
    [ "$n" -eq 1 ] || bad "$n equiv lines, want 1:"$'\n'"$lines"
    printf '%s\n' "$lines" | grep -Eq "$1" || bad "the line does not match '$1':"$'\n'"$lines"
}

# until_alone: waits (up to 120 s) until rank 0 has finished the layout's run (-v's line) and goes on alone.
until_alone() {
    local i
    for ((i = 0; i < 1200; i++)); do
        grep -q '^equiv: ran row_parallel bf16 dp1-tp. (mpi)' "$work/err.txt" && return 0
        kill -0 "$job" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}

# until_private_folder OUT: waits (up to 30 s) until rank 0's private folder is in OUT (harness/driver/out_dir.h).
until_private_folder() {
    local i
    for ((i = 0; i < 3000; i++)); do
        compgen -G "$1/.equiv-tmp.*" >/dev/null && return 0
        kill -0 "$job" 2>/dev/null || return 1
        sleep 0.01
    done
    return 1
}

# The collective limit of the timed parts. Short, because every second of it is waited out (and
# root_alone's rank 0 must work alone for longer than it); the transport's own fault runs, in
# turn with these (cases/meson.build), hold 1 s limits beside the same load.
limit=1.5
alone_seq="" # the size at which root_alone found rank 0 alone longer than the limit
for part in "${parts[@]}"; do
failed_before=$n_bad t_fault="" victim=""
with_seq 1536 # root_alone may have made it larger
case "$part" in
root_alone)
    export EQUIV_COLLECTIVE_TIMEOUT_S=$limit
    # The check proves something only if rank 0 is alone for longer than the limit: on a machine
    # where the dp1-tp1 runs take less, a larger size. Their time grows with seq, so the next size
    # is the first doubling expected to take the limit and a fifth, not the next doubling.
    seq=6144 # rank 0 alone about 2 s on a 2-core AVX-512 machine
    for attempt in 1 2 3 4; do
        with_seq "$seq"
        start 2 "${wait_args[@]}" --tp 2 --truth -v
        finish
        alone=$(awk '/^equiv: ran row_parallel .* dp1-tp1 \(sim\) in/ {s += $(NF - 1)} END {print s + 0}' "$work/err.txt")
        [ "$status" -ne 0 ] && break
        awk -v s="$alone" -v l="$limit" 'BEGIN {exit !(s > l)}' && { alone_seq=$seq; break; }
        [ "$seq" -ge 24576 ] && break
        next=$(awk -v s="$alone" -v q="$seq" -v l="$limit" 'BEGIN {if (s <= 0) {print 2 * q; exit} while (q < 24576 && (s < 1.2 * l || n == 0)) {q *= 2; s *= 2; n++} print q}')
        echo "rank 0's dp1-tp1 runs took $alone s at seq $seq, not more than the $limit s limit: seq $next"
        seq=$next
    done
    awk -v s="$alone" -v l="$limit" 'BEGIN {exit !(s > l)}' || bad "rank 0's dp1-tp1 runs took $alone s, not more than the $limit s limit"
    [ "$status" -eq 0 ] || bad "exit status $status, want 0"
    printf '%s\n' "$lines" | grep -q '^equiv: error' && bad "equiv said: $lines"
    [ "$(grep -c '^## equiv report' "$work/out.txt")" -eq 1 ] || bad "no report (or more than one) on stdout"
    [ "$fail" -eq 0 ] && echo "ok: rank 0 alone ${alone} s in its dp1-tp1 runs (seq $seq) under a $limit s limit; exit status 0 after ${elapsed} s, one report"
    ;;
killed | killed_root)
    export EQUIV_COLLECTIVE_TIMEOUT_S=60
    rank=2
    [ "$part" = killed_root ] && rank=0
    start 4 "${wait_args[@]}" --tp 4 -v
    victim=$(rank_pid "$rank") || { bad "rank $rank never armed its watch"; exit 1; }
    pid=$victim
    [ "$part" = killed_root ] && { until_alone || bad "rank 0 never went on alone"; }
    t_fault=$(date +%s)
    kill -9 "$pid"
    finish
    [ "$status" -ne 0 ] || bad "exit status 0 after rank $rank was killed"
    one_line "^equiv: error: rank $rank \\(pid $pid on [^)]+\\) was killed by a signal or crashed"
    [ "$after" -le 15 ] || bad "the job ended $after s after the kill"
    [ "$fail" -eq 0 ] && echo "ok: exit status $status ${after} s after the kill (${elapsed} s in all): $lines"
    ;;
stopped | stopped_root)
    export EQUIV_COLLECTIVE_TIMEOUT_S=$limit
    rank=2 want="it did not arrive at "
    [ "$part" = stopped_root ] && rank=0 want="rank [123] heard nothing from it for $limit s \\(EQUIV_COLLECTIVE_TIMEOUT_S\\) while it waited for rank 0's references"
    # rank 0 must still be working alone a second after it went on alone, when the stop comes: at
    # seq 1536 its runs take under a second, and at the size where root_alone (run before it) found
    # them just longer than the limit they took about a second under load. So twice that size
    # (without root_alone: 12288); rank 0's work past the stop is never done, so it costs little.
    [ "$part" = stopped_root ] && with_seq $((2 * ${alone_seq:-6144}))
    start 4 "${wait_args[@]}" --tp 4 --truth -v
    victim=$(rank_pid "$rank") || { bad "rank $rank never armed its watch"; exit 1; }
    pid=$victim
    if [ "$part" = stopped_root ]; then
        until_alone || bad "rank 0 never went on alone"
        sleep 1 # alone already: the wait is carried by its signs of life, then they stop
    fi
    t_fault=$(date +%s)
    kill -STOP "$pid"
    finish
    [ "$status" -eq 2 ] || bad "exit status $status, want 2"
    one_line "^equiv: error: rank $rank \\(pid $pid on [^)]+\\) is stopped \\(SIGSTOP, or a debugger holds it\\): $want"
    [ "$after" -le 40 ] || bad "the job ended $after s after the stop"
    [ "$fail" -eq 0 ] && echo "ok: exit status 2 ${after} s after the stop (${elapsed} s in all): $lines"
    ;;
leftovers_stopped | leftovers_launcher)
    # Two lanes of 5 tries at once (this script again, EQUIV_FAULT_LANE=1 and 2, each with its
    # own scratch folder): a try mostly waits (the limit, the 1 s a rank leaves its line to get
    # through, mpirun's 1 s between SIGCONT and SIGTERM), and what is checked does not depend on
    # the timing inside it. The lanes' verdicts and output are this part's.
    if [ -z "${EQUIV_FAULT_LANE:-}" ]; then
        EQUIV_FAULT_LANE=1 bash "$0" "$mpirun" "$equiv" "$part" >"$work/lane1.txt" 2>&1 &
        lane1=$!
        EQUIV_FAULT_LANE=2 bash "$0" "$mpirun" "$equiv" "$part" >"$work/lane2.txt" 2>&1
        lane2_status=$?
        wait "$lane1"
        lane1_status=$?
        sed 's/^/lane 1: /' "$work/lane1.txt"
        sed 's/^/lane 2: /' "$work/lane2.txt"
        [ "$lane1_status" -eq 0 ] && [ "$lane2_status" -eq 0 ] || bad "a lane failed (exit statuses $lane1_status, $lane2_status)"
        continue
    fi
    limit_now=60 tries=5 left=0 took=""
    [ "$part" = leftovers_stopped ] && limit_now=1
    export EQUIV_COLLECTIVE_TIMEOUT_S=$limit_now
    # A run that cannot end by itself before the fault takes effect. Stopped: rank 2 is stopped
    # within about 10 ms of rank 0's private folder, before its part of the layout's run (0.2 s
    # at seq 3072) reaches a collective. The launcher: mpirun ends the ranks 1 s after its own
    # SIGTERM, and rank 0 is alone for seconds after the layout's run at seq 6144 with --truth.
    with_seq 3072
    extra=()
    [ "$part" = leftovers_launcher ] && with_seq 6144 && extra=(--truth)
    for ((t = 1; t <= tries; t++)); do
        out="$work/$part-$t" s0=$EPOCHREALTIME # a name of its own: a leftover of another try must not count
        start 4 "${wait_args[@]}" --tp 4 "${extra[@]}" --out "$out"
        if [ "$part" = leftovers_stopped ]; then
            rank=2
            victim=$(rank_pid 2) || { bad "rank 2 never armed its watch"; exit 1; }
            pid=$victim
        fi
        until_private_folder "$out" || { bad "try $t: rank 0's private folder never appeared in $out:"; cat "$work/err.txt"; }
        if [ "$part" = leftovers_stopped ]; then
            kill -STOP "$pid"
        else
            sig=TERM
            [ $(((t + EQUIV_FAULT_LANE) % 2)) -eq 0 ] && sig=INT # 5 of each over the lanes
            launcher=$job
            kill -"$sig" "$job"
        fi
        finish
        if [ "$part" = leftovers_stopped ]; then
            [ "$status" -eq 2 ] || bad "try $t: exit status $status, want 2"
            one_line "^equiv: error: rank 2 \\(pid $pid on [^)]+\\) is stopped \\(SIGSTOP, or a debugger holds it\\)"
        else
            [ "$status" -ne 0 ] || bad "try $t (SIG$sig to mpirun): exit status 0"
            one_line "^equiv: error: the launcher \\(mpirun, pid $launcher\\) ended the job with SIGTERM to every rank while none had failed"
        fi
        if [ -e "$out" ]; then
            left=$((left + 1))
            bad "try $t: $out left: $(ls -A "$out" | tr '\n' ' ')"
        fi
        took+="$(awk -v a="$s0" -v b="$EPOCHREALTIME" 'BEGIN {printf " %.1f", b - a}')"
    done
    [ "$n_bad" -eq "$failed_before" ] && echo "ok: --out and rank 0's private folder left in $left of $tries tries (s each:$took)"
    [ "$left" -eq 0 ] || echo "--out or rank 0's private folder left in $left of $tries tries"
    if [ "$part" = leftovers_launcher ] && [ "$EQUIV_FAULT_LANE" = 1 ]; then # anyone else's signal: named with its sender
        rank=1
        start 4 "${wait_args[@]}" --tp 4
        victim=$(rank_pid 1) || { bad "rank 1 never armed its watch"; exit 1; }
        pid=$victim
        kill -TERM "$pid"
        finish
        one_line "^equiv: error: rank 1 \\(pid $pid on [^)]+\\) was ended by SIGTERM from [a-z0-9_.-]+, pid $$\$"
        [ "$n_bad" -eq "$failed_before" ] && echo "ok: a SIGTERM from this script to rank 1: $lines"
    fi
    ;;
*)
    echo "mpi_fault_test.sh: unknown part '$part'"
    exit 2
    ;;
esac
if [ "$n_bad" -ne "$failed_before" ]; then
    echo "--- standard error of $part (its last run):"
    cat "$work/err.txt"
fi
done
exit $fail
