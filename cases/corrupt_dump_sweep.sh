#!/usr/bin/env bash
# Flips one byte (to 0xff) at each chosen offset of a dump and runs `equiv compare` on it against
# the intact file: every run must end by itself (exit 0, 1 or 2, never a signal, never the time
# limit) and an error must be one line. Before equiv read files in a child process, offsets 189,
# 191, 245 and 317 of row_parallel's fp32 dp1-tp1 dump crashed it inside libhdf5 and 235 took 8 GB.
#   corrupt_dump_sweep.sh EQUIV DUMP FIRST LAST STRIP [OFFSET...]
# sweeps FIRST..LAST every STRIP bytes, plus the OFFSETs given.
set -u
equiv=$1 dump=$2 first=$3 last=$4 stride=$5
shift 5
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
size=$(stat -c %s "$dump")
[ "$last" -lt "$size" ] || last=$((size - 1))
offsets=$(seq "$first" "$stride" "$last"; for o in "$@"; do echo "$o"; done)
# A damaged file can make libhdf5 loop (offset 2208 does): the reader's limit ends it, with one
# error line and exit status 2, which this sweep accepts like any refusal. An intact read of this
# 240 KB file takes ~20 ms, so 1 s costs no coverage, and a read slowed past it on a loaded machine
# is still a one-line refusal, not a failure; the looping child burns CPU until then.
export EQUIV_READ_TIMEOUT_S=${EQUIV_READ_TIMEOUT_S:-1}
# Two workers, each with its own copy, damaged at one offset at a time and mended from the dump
# after (bash's own reads for the rest: no process per offset but dd, equiv and its limit), every
# other offset each: on 2 cores the sweep takes half the time where the other core is idle.
sweep() { # WORKER OFFSET...: one line per failure, then "RUNS ERRORS FAILURES"
    local worker=$1 runs=0 failures=0 errors=0 off status lines err_lines
    shift
    local bad="$work/bad$worker.h5" out="$work/out$worker" err="$work/stderr$worker"
    cp "$dump" "$bad"
    for off in "$@"; do
        printf '\xff' | dd of="$bad" bs=1 seek="$off" conv=notrunc status=none
        timeout 60 "$equiv" compare "$bad" "$dump" --out "$out" >/dev/null 2>"$err"
        status=$?
        runs=$((runs + 1))
        mapfile -t err_lines <"$err"
        lines=${#err_lines[@]}
        if [ "$status" -gt 2 ]; then
            echo "offset $off: exit status $status"; failures=$((failures + 1))
        elif [ "$status" -eq 2 ] && { [ "$lines" -ne 1 ] || [ -e "$out" ]; }; then
            echo "offset $off: error with $lines lines on stderr, or an output folder left:"; cat "$err"
            failures=$((failures + 1))
        fi
        [ "$status" -eq 2 ] && errors=$((errors + 1))
        [ -e "$out" ] && rm -rf "$out"
        dd if="$dump" of="$bad" bs=1 skip="$off" seek="$off" count=1 conv=notrunc status=none
    done
    cmp -s "$dump" "$bad" || { echo "worker $worker: the mended copy differs from the dump"; failures=$((failures + 1)); }
    echo "$runs $errors $failures"
}
mapfile -t all <<<"$offsets"
halves=([0]="" [1]="")
for i in "${!all[@]}"; do halves[$((i % 2))]+=" ${all[$i]}"; done
# shellcheck disable=SC2086 # the offsets are words
sweep 0 ${halves[0]} >"$work/log0" &
sweep 1 ${halves[1]} >"$work/log1"
wait
runs=0 errors=0 failures=0
for w in 0 1; do
    head -n -1 "$work/log$w"
    read -r r e f < <(tail -n 1 "$work/log$w")
    runs=$((runs + r)) errors=$((errors + e)) failures=$((failures + f))
done
echo "$runs offsets, $errors refused with one line, $failures failures"
[ "$failures" -eq 0 ]
