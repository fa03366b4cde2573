#!/usr/bin/env bash
# The probe's expectations in its --dp 16 report: the case file's per-tensor lines are listed
# ("Expected per tensor"), the counts and per-unit values come out bit-exact and the rest within,
# exit 0. Then the check bites: the same run with a reordered buffer (tok_emb.sum_X) declared
# bit_exact in a copy of the case folder fails (exit 1) on that tensor.
#   probe_report_test.sh EQUIV CASES_DIR
set -u
equiv=$1 cases=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }

"$equiv" --case probe --dp 16 --dtype fp32 >"$work/report.md" 2>&1
status=$?
[ "$status" -eq 0 ] || bad "probe dp16 fp32: exit status $status, want 0"
grep -qF 'Expected per tensor (the case file): `B_E`, `B_U`, `L_X`, `L_Y`, `logp_E`: bit_exact.' "$work/report.md" ||
    bad "the report does not list the case file's bit_exact tensors"
for t in B_E B_U L_X L_Y logp_E; do
    grep -qE "^\| pass \| 4 \| $t \| bit-exact \(expected bit_exact\) \|" "$work/report.md" || bad "$t not reported bit-exact"
done
for t in bars_dot V_X V_Y sum_w sum_wS H_upd; do
    grep -qE "^\| pass \| 4 \| $t \| within \|" "$work/report.md" || bad "$t not reported within"
done
grep -qE '^\| pass \| 0 \| tok_emb.sum_X \| within \|' "$work/report.md" || bad "tok_emb.sum_X not reported within"

mkdir -p "$work/home/cases" && cp -r "$cases"/*.ini "$work/home/cases/" && cp -r "$cases/../golden" "$work/home/"
printf 'tok_emb.sum_X = bit_exact\n' >>"$work/home/cases/probe.ini" # [expect.any] is the file's last section
EQUIV_HOME="$work/home" "$equiv" --case probe --dp 16 --dtype fp32 >"$work/strict.md" 2>&1
status=$?
[ "$status" -eq 1 ] || bad "a reordered buffer declared bit_exact: exit status $status, want 1"
grep -qE '^\| \*\*FAIL\*\* \| 0 \| tok_emb.sum_X \| within \(expected bit_exact\) \|' "$work/strict.md" ||
    bad "the strict run does not fail tok_emb.sum_X: $(grep 'tok_emb.sum_X' "$work/strict.md" | head -1)"
[ "$fail" -eq 0 ] && echo "ok: probe dp16 report shows its expectations, and a wrong bit_exact line is caught"
exit "$fail"
