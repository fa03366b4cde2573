#!/usr/bin/env bash
# run_fuzz.sh PROGRAM SEEDS WORK SECONDS [DICT]: the fuzz test suite's runner (fuzz/meson.build).
#
# Runs a libFuzzer harness for SECONDS from the seed corpus SEEDS, which libFuzzer only reads (it
# writes new inputs into the first corpus folder it is given: WORK/corpus, emptied first). A
# finding (crash, hang over 10 s, leak, RSS over 2 GB, sanitizer report) is written to
# WORK/artifacts/ and fails the test with libFuzzer's exit status. SECONDS 0: the seeds are run
# once each and nothing is mutated (a harness whose fuzzing is not yet expected to be clean still
# checks its corpus).
set -uo pipefail
if [ $# -lt 4 ]; then
    echo "usage: $0 PROGRAM SEEDS WORK SECONDS [DICT]" >&2
    exit 2
fi
prog=$(cd "$(dirname "$1")" && pwd)/$(basename "$1") seeds=$2 work=$3 seconds=$4 dict=${5:-}
rm -rf "$work"
mkdir -p "$work/corpus" "$work/artifacts" || exit 2
opts=(-rss_limit_mb=2048 -timeout=10 -artifact_prefix="$work/artifacts/" -print_final_stats=1)
[ -n "$dict" ] && opts+=(-dict="$dict")
if [ "$seconds" -eq 0 ]; then
    opts+=(-runs=0)
else
    opts+=(-max_total_time="$seconds")
fi
"$prog" "${opts[@]}" "$work/corpus" "$seeds"
status=$?
if [ $status -ne 0 ]; then
    echo "run_fuzz: $(basename "$prog") failed (exit $status); findings in $work/artifacts:"
    ls -l "$work/artifacts"
    echo "run_fuzz: reproduce with: $prog $work/artifacts/FILE (fuzz/README.md)"
fi
exit $status
