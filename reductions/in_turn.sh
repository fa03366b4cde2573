#!/usr/bin/env bash
# Runs jobs one after the other, as one test: the timed multi-process checks (collective limits of
# 1 to 1.5 s), so that no two of them share the machine, while the test itself runs beside the rest
# of the suite instead of alone (meson's is_parallel: false stops every other test meanwhile).
#   in_turn.sh LABEL COMMAND [ARGS...] [';' LABEL COMMAND [ARGS...]]...
# Each job's output is kept, under a '== LABEL' line, then its outcome and wall time. Every job
# runs, also after a failure. Exit status: 0 when every job passed or was skipped (77), 77 when all
# were skipped, 1 when any failed, 2 for a job without a command.
set -u
fail=0 ran=0 skipped=0
run_job() { # LABEL COMMAND [ARGS...]
    local label=$1
    shift
    echo "== $label"
    local start=$EPOCHREALTIME
    "$@"
    local status=$?
    local took
    took=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN {printf "%.1f s", b - a}')
    ran=$((ran + 1))
    case $status in
    0) echo "== $label: ok ($took)" ;;
    77) echo "== $label: skipped ($took)"; skipped=$((skipped + 1)) ;;
    *) echo "== $label: FAIL (exit status $status, $took)"; fail=1 ;;
    esac
}
job=()
for arg in "$@" ';'; do
    if [ "$arg" = ';' ]; then
        [ ${#job[@]} -eq 0 ] && continue
        [ ${#job[@]} -ge 2 ] || { echo "in_turn.sh: a job needs a label and a command (got: ${job[*]:-nothing})"; exit 2; }
        run_job "${job[@]}"
        job=()
    else
        job+=("$arg")
    fi
done
[ "$fail" -ne 0 ] && exit 1
[ "$skipped" -eq "$ran" ] && exit 77
exit 0
