#!/usr/bin/env bash
# Runs equiv on bad input and checks the promise made for it: exit status 2, exactly one line on
# standard error ("equiv: error: ... MESSAGE-PART ..."), nothing on standard output, and no file
# left in the output folder.
#   expect_error.sh EQUIV MESSAGE-PART -- ARGS...      (ARGS may use @OUT@ for a fresh folder)
set -u
equiv=$1 part=$2
shift 3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
out="$work/out"
mkdir "$out"
args=()
for a in "$@"; do args+=("${a//@OUT@/$out}"); done
args=("${args[@]//@WORK@/$work}")
"$equiv" "${args[@]}" >"$work/stdout" 2>"$work/stderr"
status=$?
fail=0
if [ "$status" -ne 2 ]; then echo "exit status $status, want 2"; fail=1; fi
lines=$(wc -l <"$work/stderr")
if [ "$lines" -ne 1 ]; then echo "stderr has $lines lines, want 1:"; cat "$work/stderr"; fail=1; fi
if ! grep -q '^equiv: error: ' "$work/stderr"; then echo "stderr does not start with 'equiv: error: '"; fail=1; fi
if ! grep -qF -- "$part" "$work/stderr"; then echo "stderr lacks '$part':"; cat "$work/stderr"; fail=1; fi
if [ -s "$work/stdout" ]; then echo "stdout not empty:"; head -5 "$work/stdout"; fail=1; fi
left=$(find "$out" -mindepth 1 | head -5)
if [ -n "$left" ]; then echo "files left behind: $left"; fail=1; fi
[ "$fail" -eq 0 ] && echo "ok: $(cat "$work/stderr")"
exit "$fail"
