#!/usr/bin/env bash
# equiv diff end to end: the PR comment between a clean run (base) and the same run with a planted
# bug (head) must exit 1, call the regressed tensors new failures with the bug's factor, and carry
# the collapsible details and the Mermaid chart of the regressed gradients; base against itself
# must exit 0 with no regression, in one line and a collapsed table; --out writes comment.md equal
# to what was printed.
#   diff_test.sh EQUIV
set -u
equiv=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
check() { # check DESCRIPTION COMMAND...
    local what=$1
    shift
    if "$@"; then echo "ok: $what"; else echo "FAIL: $what"; fail=1; fi
}
run=(--case gpt --dp 8 --tp 2 --dtype fp32)
"$equiv" "${run[@]}" --out "$work/base" >/dev/null || { echo "FAIL: the clean run is not as expected"; exit 1; }
"$equiv" "${run[@]}" --inject grad_avg_twice --out "$work/head" >/dev/null
[ $? -eq 1 ] || { echo "FAIL: the planted bug was not caught by the run itself"; exit 1; }

"$equiv" diff "$work/base/report.json" "$work/head/report.json" --out "$work/comment" >"$work/regressed.md"
status=$?
check "a planted bug is a regression (exit $status, want 1)" test "$status" -eq 1
check "the verdict comes first" grep -qE '^\*\*equiv: [0-9]+ regressions\*\*' <(head -1 "$work/regressed.md")
check "the regressed gradients are new failures" grep -qE '`layers/[0-9]+/[a-z0-9_]+_grad` \| new failure' "$work/regressed.md"
check "the factor is named" grep -q 'uniform scale x0.125 = 1/8' "$work/regressed.md"
check "collapsible details" grep -q '<details><summary>gpt fp32 dp8-tp2' "$work/regressed.md"
check "a Mermaid chart of base against head" grep -q 'xychart-beta' "$work/regressed.md"
check "the chart follows the regressed gradients, named in the text" \
    grep -qE 'Lines, in the order the chart draws them: 1\. `[a-z0-9_]+_grad` in base, 2\. `[a-z0-9_]+_grad` in head' \
    "$work/regressed.md"
check "--out writes comment.md as printed" cmp -s "$work/regressed.md" "$work/comment/comment.md"

"$equiv" diff "$work/base/report.json" "$work/base/report.json" >"$work/same.md"
status=$?
check "a run against itself is no regression (exit $status, want 0)" test "$status" -eq 0
check "and says so" grep -q 'no divergence regressions' "$work/same.md"
check "in one line, the table of cells collapsed under it" \
    test "$(sed -n '1p;3p' "$work/same.md" | tr '\n' '|')" = "**equiv: no divergence regressions** (1 cell compared)|<details><summary>1 cell</summary>|"
check "and nothing after the table" test "$(tail -1 "$work/same.md")" = "</details>"
# compare's own report of a run of no case (README's minimal file: its loss has no layer, -1 in
# the JSON) is read by diff
if /usr/bin/python3 -c 'import h5py' 2>/dev/null; then
    /usr/bin/python3 - "$work/minimal.h5" <<'PY'
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "w") as f:
    f.attrs["dp"], f.attrs["tp"] = 1, 1
    f["blocks.0.fc1.out"] = np.linspace(-1, 1, 64, dtype=np.float32).reshape(8, 8)
    f["blocks.0.fc1.out"].attrs["role"] = "activation"
    f["loss"] = np.array([2.5], dtype=np.float32)
    f["loss"].attrs["role"] = "loss"
PY
    "$equiv" compare "$work/minimal.h5" "$work/minimal.h5" --out "$work/minimal" >/dev/null
    check "the minimal file's compare is as expected" test $? -eq 0
    "$equiv" diff "$work/minimal/report.json" "$work/minimal/report.json" >"$work/minimal.md" 2>"$work/minimal.err"
    status=$?
    check "diff reads compare's report of a tensor of no layer (exit $status, want 0: $(head -c 200 "$work/minimal.err"))" \
        test "$status" -eq 0
    check "and finds no regression" grep -q 'no divergence regressions' "$work/minimal.md"
else
    echo "FAIL: /usr/bin/python3 has no h5py (ci/install-deps installs python3-h5py)"; fail=1
fi

# A comment standard output cannot take is an error: one line, exit 2, no --out; the same for
# --list, --help and --version
if [ -w /dev/full ]; then
    full_fails() { # full_fails DESCRIPTION ARGS...: equiv ARGS > /dev/full exits 2 with one line on stderr
        local what=$1
        shift
        "$equiv" "$@" >/dev/full 2>"$work/full.err"
        local status=$? lines
        lines=$(wc -l <"$work/full.err")
        check "$what to a full standard output: exit $status, want 2; $lines line(s) on stderr" \
            test "$status" -eq 2 -a "$lines" -eq 1
        check "$what: the line says why" grep -q '^equiv: error: cannot write .*standard output' "$work/full.err"
    }
    full_fails "diff" diff "$work/base/report.json" "$work/head/report.json"
    full_fails "diff --out" diff "$work/base/report.json" "$work/head/report.json" --out "$work/full-out"
    check "diff --out to a full standard output leaves no --out" test ! -e "$work/full-out"
    full_fails "--list" --list
    full_fails "--help" --help
    full_fails "--version" --version
else
    echo "ok: skipped the /dev/full checks (no writable /dev/full)"
fi
exit "$fail"
