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
runs=0 failures=0 errors=0
# One copy, damaged at one offset at a time and mended from the dump after, and bash's own reads:
# two processes fewer per offset than a fresh copy, a line count and a removal.
cp "$dump" "$work/bad.h5"
for off in $offsets; do
    printf '\xff' | dd of="$work/bad.h5" bs=1 seek="$off" conv=notrunc status=none
    timeout 60 "$equiv" compare "$work/bad.h5" "$dump" --out "$work/out" >/dev/null 2>"$work/stderr"
    status=$?
    runs=$((runs + 1))
    mapfile -t err_lines <"$work/stderr"
    lines=${#err_lines[@]}
    if [ "$status" -gt 2 ]; then
        echo "offset $off: exit status $status"; failures=$((failures + 1))
    elif [ "$status" -eq 2 ] && { [ "$lines" -ne 1 ] || [ -e "$work/out" ]; }; then
        echo "offset $off: error with $lines lines on stderr, or an output folder left:"; cat "$work/stderr"
        failures=$((failures + 1))
    fi
    [ "$status" -eq 2 ] && errors=$((errors + 1))
    [ -e "$work/out" ] && rm -rf "$work/out"
    dd if="$dump" of="$work/bad.h5" bs=1 skip="$off" seek="$off" count=1 conv=notrunc status=none
done
cmp -s "$dump" "$work/bad.h5" || { echo "the mended copy differs from the dump: the sweep damaged more than one byte at a time"; failures=$((failures + 1)); }
echo "$runs offsets, $errors refused with one line, $failures failures"
[ "$failures" -eq 0 ]
