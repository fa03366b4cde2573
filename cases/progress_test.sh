#!/usr/bin/env bash
# Progress on standard error (harness/progress.h) as a user sees it: silent when standard error is
# not a terminal, lines with -v, one line redrawn in place on a terminal (faked with util-linux
# `script`), never on standard output; a short run stays quiet with the default 2 s delay.
#
#   cases/progress_test.sh EQUIV_BINARY
set -uo pipefail
equiv=${1:?usage: progress_test.sh EQUIV_BINARY}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
run=(--case gpt --tp 2 --dtype fp32)

# Not a terminal, no -v: nothing on standard error, the report on standard output.
EQUIV_PROGRESS_AFTER_S=0 "$equiv" "${run[@]}" >"$work/out" 2>"$work/err" || bad "run failed: $(cat "$work/err")"
[ -s "$work/err" ] && bad "standard error not empty without -v: $(cat "$work/err")"
grep -q '^### gpt fp32 dp1-tp2 vs dp1-tp1' "$work/out" || bad "no report on standard output"

# -v: progress lines naming the run, its phase and (once some work is done) an estimate, one line
# each; the first call always writes (EQUIV_PROGRESS_AFTER_S=0), the later ones as the clock allows.
# A phase is lower-case words, digits and hyphens ("compare with dp1-tp1", "reduce and capture,
# site"), then a block count of the 4 layers; which phases show depends on the clock (a loaded
# machine shows more of them), so the form is checked, not the list.
EQUIV_PROGRESS_AFTER_S=0 "$equiv" "${run[@]}" -v >"$work/out-v" 2>"$work/err-v" || bad "run -v failed"
grep -q '^equiv progress: \[run 1/2\] gpt fp32 dp1-tp1, 0 s$' "$work/err-v" || bad "no line for run 1: $(cat "$work/err-v")"
phase_re='[a-z][a-z0-9-]*(,? [a-z0-9][a-z0-9-]*)*'
line_re="^equiv progress: \\[run [12]/2\\] gpt fp32 dp1-tp[12](: $phase_re( [0-9]+/4)?)?, [0-9]+ s(, about [0-9]+ s left)?\$"
grep '^equiv progress' "$work/err-v" | grep -vE "$line_re" | grep -q . &&
    bad "a progress line not of the form: $(grep '^equiv progress' "$work/err-v" | grep -vE "$line_re")"
grep -q '^equiv: ran gpt fp32 dp1-tp2 (sim) in ' "$work/err-v" || bad "no -v note"
grep -q $'\r' "$work/err-v" && bad "a carriage return in -v lines"
grep -qv '^equiv' "$work/err-v" && bad "a line of another kind on standard error: $(grep -v '^equiv' "$work/err-v")"
cmp -s "$work/out" "$work/out-v" || bad "-v changed standard output"

# The default delay (2 s) keeps a short run quiet, -v or not: its notes only.
env -u EQUIV_PROGRESS_AFTER_S "$equiv" --case row_parallel --tp 2 -v >/dev/null 2>"$work/err-short" || bad "short run"
grep -q 'equiv progress' "$work/err-short" && bad "progress on a short run: $(cat "$work/err-short")"
grep -q '^equiv: ran row_parallel' "$work/err-short" || bad "no -v note on the short run"

# matrix: silent without -v, lines with it.
EQUIV_PROGRESS_AFTER_S=0 "$equiv" matrix --case row_parallel >/dev/null 2>"$work/err-m" || bad "matrix failed"
[ -s "$work/err-m" ] && bad "matrix wrote on standard error without -v: $(cat "$work/err-m")"
EQUIV_PROGRESS_AFTER_S=0 "$equiv" matrix --case row_parallel -v >"$work/out-m" 2>"$work/err-m" || bad "matrix -v failed"
grep -q '^equiv progress: \[run [0-9]*/[0-9]*\] row_parallel ' "$work/err-m" || bad "matrix -v: $(cat "$work/err-m")"
grep -q 'equiv progress' "$work/out-m" && bad "progress on matrix's standard output"

# compare: the same (reading and comparing big dumps takes a while).
"$equiv" --case row_parallel --tp 2 --dtype fp32 --out "$work/runs" >/dev/null 2>&1 || bad "row_parallel --out failed"
dumps=("$work/runs/row_parallel-fp32-dp1-tp1.h5" "$work/runs/row_parallel-fp32-dp1-tp2.h5")
EQUIV_PROGRESS_AFTER_S=0 "$equiv" compare "${dumps[@]}" >"$work/out-c" 2>"$work/err-c" || bad "compare failed"
[ -s "$work/err-c" ] && bad "compare wrote on standard error without -v: $(cat "$work/err-c")"
EQUIV_PROGRESS_AFTER_S=0 "$equiv" compare "${dumps[@]}" -v >"$work/out-cv" 2>"$work/err-c" || bad "compare -v failed"
grep -q '^equiv progress: compare, 0 s$' "$work/err-c" || bad "compare -v: $(cat "$work/err-c")"
cmp -s "$work/out-c" "$work/out-cv" || bad "-v changed compare's standard output"

# A terminal (util-linux script gives the command a pty): the line redrawn after '\r', without the
# lines' prefix, wiped before the report; the report itself (redirected) holds none of it.
if command -v script >/dev/null 2>&1 && script -qec true /dev/null >/dev/null 2>&1; then
    script -qec "EQUIV_PROGRESS_AFTER_S=0 '$equiv' ${run[*]} >'$work/out-tty'" "$work/tty.log" >/dev/null 2>&1 ||
        bad "run on a terminal failed: $(cat "$work/tty.log")"
    grep -q $'\r\\[run 1/2\\] gpt fp32 dp1-tp1, 0 s' "$work/tty.log" || bad "no redrawn line on the terminal: $(cat -A "$work/tty.log")"
    grep -q 'equiv progress: ' "$work/tty.log" && bad "the -v prefix on a terminal"
    cmp -s "$work/out" "$work/out-tty" || bad "the report differs when standard error is a terminal"
else
    echo "skip: no util-linux script to fake a terminal"
fi

[ "$fail" -eq 0 ] && echo "ok: silent without -v, lines with -v ($(grep -c 'equiv progress' "$work/err-v") for gpt tp2 fp32), a terminal line"
exit "$fail"
