#!/usr/bin/env bash
# The CLI end to end: a run with --out leaves complete dumps and reports and nothing else,
# `equiv compare` on its dumps reproduces the verdict, and differences planted into a dump
# (with h5py, as a user editing a file would) are caught and named.
#   cli_test.sh EQUIV
set -u
equiv=$1
py=/usr/bin/python3
. "$(dirname "${BASH_SOURCE[0]}")/check_lib.sh" # $work, $fail, check
expect_output() { # expect_output DESCRIPTION PATTERN
    if grep -qE -- "$2" "$work/stdout"; then echo "ok: $1"; else echo "FAIL: $1: no /$2/ in output"; fail=1; fi
}

run="$work/run"
check "row_parallel tp4 run" 0 "$equiv" --case row_parallel --tp 4 --out "$run"
expect_output "per-layer table printed, verdict first" '^\| verdict \| Layer \|'
expect_output "summary line printed" 'as expected'
for f in row_parallel-bf16-dp1-tp1.h5 row_parallel-bf16-dp1-tp4.h5 row_parallel-fp32-dp1-tp1.h5 \
         row_parallel-fp32-dp1-tp4.h5 report.md report.json report.html; do
    if [ -s "$run/$f" ]; then echo "ok: wrote $f"; else echo "FAIL: $f missing"; fail=1; fi
done
extra=$(ls -A "$run" | grep -vE '^(row_parallel-(bf16|fp32)-dp1-tp[14]\.h5|report\.(md|json|html))$')
if [ -n "$extra" ]; then echo "FAIL: unexpected files in --out: $extra"; fail=1; fi

# The same step run again writes byte-identical dumps (deterministic numerics, no modification
# times). The root records the command line and when the file was written: the same command (the
# same relative --out, from another directory) at the same SOURCE_DATE_EPOCH gives the same bytes.
mkdir -p "$work/first" "$work/again"
equiv_abs=$(cd "$(dirname "$equiv")" && pwd)/$(basename "$equiv")
(cd "$work/first" && SOURCE_DATE_EPOCH=1700000000 "$equiv_abs" --case row_parallel --tp 4 --out run >/dev/null) ||
    { echo "FAIL: row_parallel tp4 run (for the rerun)"; fail=1; }
check "row_parallel tp4 run again" 0 env -C "$work/again" SOURCE_DATE_EPOCH=1700000000 "$equiv_abs" --case row_parallel \
    --tp 4 --out run
for f in "$work/first/run"/*.h5; do
    if cmp -s "$f" "$work/again/run/$(basename "$f")"; then echo "ok: $(basename "$f") byte-identical on a rerun"
    else echo "FAIL: $(basename "$f") differs on a rerun"; fail=1; fi
done

check "compare reproduces the run's verdict" 0 "$equiv" compare "$run/row_parallel-bf16-dp1-tp1.h5" \
    "$run/row_parallel-bf16-dp1-tp4.h5"
check "bf16 row-parallel all-reduce is not bit-exact" 1 "$equiv" compare --expect bit_exact \
    "$run/row_parallel-bf16-dp1-tp1.h5" "$run/row_parallel-bf16-dp1-tp4.h5"
check "a dump compared with itself is bit-exact" 0 "$equiv" compare --expect bit_exact \
    "$run/row_parallel-fp32-dp1-tp4.h5" "$run/row_parallel-fp32-dp1-tp4.h5"
check "json format" 0 "$equiv" compare --format json "$run/row_parallel-fp32-dp1-tp1.h5" "$run/row_parallel-fp32-dp1-tp4.h5"
if "$py" -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["comparisons"]' "$work/stdout"; then
    echo "ok: JSON on stdout parses"
else
    echo "FAIL: JSON on stdout does not parse"; fail=1
fi

# --truth: both runs against the fp64 run, its dump written beside theirs. The tp4 GEMM in bf16
# rounds its partials and every hop, the reference once: as accurate within 2x. A missing
# all-reduce is far less accurate than the reference.
check "mlp_stack tp4 --truth" 0 "$equiv" --case mlp_stack --tp 4 --dtype bf16 --truth --out "$work/truth"
expect_output "the truth table" '^#### Against the fp64 truth$'
expect_output "layer 0 read as accurate" '^\| as accurate[^|]* \| 0 \| out \| [0-9.e+-]+ \| [0-9.e+-]+ \| [0-9.e+-]+ \| [0-9.e+-]+ \|$'
if [ -s "$work/truth/mlp_stack-fp64-dp1-tp1.h5" ]; then echo "ok: the fp64 truth dump"; else echo "FAIL: no fp64 dump"; fail=1; fi
check "a missing all-reduce under --truth" 1 "$equiv" --case mlp_stack --tp 4 --dtype bf16 --truth --inject skip_allreduce
expect_output "read as less accurate" '^\| less accurate \(x[0-9.]+\) \| 0 \| out \|'

# Each comparison's section opens with its verdict, before its first table. The planted missing
# all-reduce starts at layer 0's attention output projection: the first row-parallel GEMM in
# capture order (the qkv GEMM before it is column-parallel and needs none).
check "gpt tp4 without the row-parallel all-reduce" 1 "$equiv" --case gpt --tp 4 --inject skip_allreduce
verdicts=$(awk '
    /^### / { section++; first = ""; next }
    section && first == "" && NF { first = $0; print first }
' "$work/stdout")
pattern='^\*\*Verdict: FAIL\.\*\* [0-9]+ of [0-9]+ tensors not as expected; it starts at `layers/00/attn_out` \(the first in capture order\): not rounding'
if [ "$(grep -cE -- "$pattern" <<<"$verdicts")" -eq 2 ] && [ "$(wc -l <<<"$verdicts")" -eq 2 ]; then
    echo "ok: both sections (bf16, fp32) open with a verdict naming layers/00/attn_out"
else
    echo "FAIL: each section's first paragraph is not its verdict naming layers/00/attn_out:"; echo "$verdicts"; fail=1
fi

# The matrix: one row per cell, and the files under --out (report.json is what `equiv diff` reads).
check "matrix of row_parallel" 0 "$equiv" matrix --case row_parallel --out "$work/matrix"
expect_output "matrix closing line" '^equiv matrix: 8 cells, all as expected$'
for f in matrix.md matrix.json matrix.html report.json; do
    if [ -s "$work/matrix/$f" ]; then echo "ok: matrix wrote $f"; else echo "FAIL: matrix did not write $f"; fail=1; fi
done

# Planted differences, written with h5py into copies of the fp32 tp4 dump.
if "$py" -c 'import h5py' 2>/dev/null; then
    plant() { # plant NAME PYTHON-EXPRESSION-ON-d (d: numpy array of layers/00/out)
        cp "$run/row_parallel-fp32-dp1-tp4.h5" "$work/$1.h5"
        "$py" - "$work/$1.h5" "$2" <<'PY'
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "r+") as f:
    d = f["layers/00/out"][...]
    exec(sys.argv[2])
    f["layers/00/out"][...] = d
PY
    }
    plant scaled8 'd *= 8'
    check "planted x8 scale is caught" 1 "$equiv" compare "$run/row_parallel-fp32-dp1-tp1.h5" "$work/scaled8.h5"
    expect_output "planted x8 scale is named" 'x8'
    plant nan 'd.flat[5] = np.nan'
    check "planted NaN is caught" 1 "$equiv" compare "$run/row_parallel-fp32-dp1-tp1.h5" "$work/nan.h5"
    expect_output "planted NaN is named" 'NaN'
    plant all_nan 'd[...] = np.nan'
    cp "$work/all_nan.h5" "$work/all_nan_ref.h5"
    check "a tensor all NaN in both runs is not a pass" 1 "$equiv" compare "$work/all_nan_ref.h5" "$work/all_nan.h5"
    expect_output "its row says NON-FINITE" '^\| \*\*FAIL\*\* \| 0 \| out \| NON-FINITE \(expected within\) \|'
    expect_output "and why" '^- `layers/00/out` \(activation\): NON-FINITE, expected within: all [0-9]+ elements NaN in both runs'
    cp "$run/row_parallel-fp32-dp1-tp4.h5" "$work/ulp_base.h5"
    plant ulp 'd.flat[17] = np.nextafter(d.flat[17], np.float32(np.inf), dtype=np.float32)'
    check "planted 1-ULP change is caught under bit_exact" 1 "$equiv" compare --expect bit_exact \
        "$work/ulp_base.h5" "$work/ulp.h5"
    # one step of element 17 (0.419, fp32 spacing 2^-25) at the tensor's scale (rms 1.008,
    # spacing 2^-23), read with h5py: 2^-2 = 0.25 ULP
    expect_output "planted 1-ULP change is named" '1 element differs, 0\.25 ULP at index 17'
    # Inside the fp32 table (atol = rtol = 1e-3) but above what rounding of this GEMM allows.
    plant hidden 'd.flat[9] += np.float32(6e-4)'
    check "a change inside the tolerance but above the rounding bound is caught" 1 "$equiv" compare \
        "$run/row_parallel-fp32-dp1-tp1.h5" "$work/hidden.h5"
    expect_output "and called not rounding" 'above the rounding-error bound'
    check "the same run unchanged is as expected" 0 "$equiv" compare \
        "$run/row_parallel-fp32-dp1-tp1.h5" "$run/row_parallel-fp32-dp1-tp4.h5"
    expect_output "with the theory table" '^\| rounding, within the 99\.9% bound \| 0 \| out \| 256 \| 1 -> 4 \|'
else
    echo "FAIL: /usr/bin/python3 has no h5py (ci/install-deps installs python3-h5py)"; fail=1
fi
exit "$fail"
