#!/usr/bin/env bash
# `equiv bench --quick` (every workload at a tiny size): the table has its columns and one row per
# workload, each row's shares of wall time sum to 100%, the GEMM FLOPs counted for row_parallel
# are those its shapes imply, --out holds the same as JSON, --only picks, and an unknown workload
# is one error line with exit status 2. Speed itself is never asserted here.
#   bench_test.sh EQUIV
set -u
equiv=${1:?usage: bench_test.sh EQUIV}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }

"$equiv" bench --quick --out "$work/out" >"$work/stdout" 2>"$work/stderr"
status=$?
cat "$work/stdout"
[ "$status" -eq 0 ] || { bad "equiv bench --quick: exit $status"; cat "$work/stderr"; exit 1; }

columns="workload wall_s cpu_s peak_MiB gemm_GF/s %peak gemmcpu% blascpu% inputs% gemm% collectives% bound% compare% dumps% report% other%"
header=$(grep -m1 '^workload ' "$work/stdout")
[ "$(echo $header)" = "$columns" ] || bad "header is '$(echo $header)', want '$columns'"
grep -q '^equiv bench --quick: SGEMM peak [0-9.]* GFLOP/s' "$work/stdout" || bad "no SGEMM peak line"

workloads="row_parallel_bf16 row_parallel_fp32 gpt_bench gpt_docs_fwd spd_docs"
for w in $workloads; do
    row=$(grep "^$w " "$work/stdout")
    [ -n "$row" ] || { bad "no row for $w"; continue; }
    # 16 fields; the last 8 are the shares of wall time (inputs .. other), printed to 0.1: they
    # sum to 100 within 8 x 0.05 of rounding; blascpu% (8th) is a share of CPU time, at most 100
    echo "$row" | awk -v w="$w" '
        NF != 16 { printf "FAIL: %s: %d fields, want 16\n", w, NF; exit 1 }
        $8 < 0 || $8 > 100 { printf "FAIL: %s: blascpu%% %s outside [0, 100]\n", w, $8; exit 1 }
        { s = 0; for (i = 9; i <= 16; i++) { if ($i < 0) { printf "FAIL: %s: share %s < 0\n", w, $i; exit 1 } s += $i }
          if (s < 99.6 || s > 100.4) { printf "FAIL: %s: shares sum to %.2f, want 100\n", w, s; exit 1 }
          if ($2 <= 0 || $4 <= 0) { printf "FAIL: %s: wall %s s, peak %s MiB\n", w, $2, $4; exit 1 } }' || fail=1
done
[ "$(grep -c '^[a-z_0-9]* *[0-9]' "$work/stdout")" -eq 5 ] || bad "want 5 rows"

# row_parallel ci (cases/row_parallel.ini): tokens 32 x 2 = 64, out 128, in 256. The reference
# is one GEMM, tp 4 four with K / 4 each: 2 x (2 x 64 x 128 x 256) = 8388608 FLOPs in all.
json="$work/out/bench.json"
[ -f "$json" ] || bad "no bench.json under --out"
flops=$(grep -A40 '"name": "row_parallel_bf16"' "$json" | sed -n 's/.*"gemm_flops": \([0-9.e+]*\).*/\1/p' | head -n 1)
[ "$(awk -v f="$flops" 'BEGIN { print (f == 8388608) }')" = 1 ] || bad "row_parallel_bf16 gemm_flops '$flops', want 8388608"
# every GEMM of a run is a BLAS call (the CPU backend's and the rounding bound's): time inside them
blas=$(grep -A40 '"name": "row_parallel_bf16"' "$json" | sed -n 's/.*"blas_cpu_s": \([0-9.e+-]*\).*/\1/p' | head -n 1)
[ "$(awk -v b="$blas" 'BEGIN { print (b > 0) }')" = 1 ] || bad "row_parallel_bf16 blas_cpu_s '$blas', want > 0"
[ "$(grep -c '"share_of_wall_pct"' "$json")" -eq 5 ] || bad "bench.json: want 5 workloads"

# --only picks (and leaves the rest out)
"$equiv" bench --quick --only spd_docs,row_parallel_fp32 >"$work/only" 2>&1 || bad "--only: exit $?"
rows=$(grep -c '^[a-z_0-9]* *[0-9]' "$work/only")
[ "$rows" -eq 2 ] && grep -q '^spd_docs ' "$work/only" && grep -q '^row_parallel_fp32 ' "$work/only" ||
    bad "--only spd_docs,row_parallel_fp32 printed $rows rows"

# an unknown workload: exit 2, one line on standard error, nothing on standard output, no --out
"$equiv" bench --quick --only row_parallel_bf16,nosuch --out "$work/bad" >"$work/bad.stdout" 2>"$work/bad.stderr"
status=$?
[ "$status" -eq 2 ] || bad "--only nosuch: exit $status, want 2"
[ "$(wc -l <"$work/bad.stderr")" -eq 1 ] && grep -q "^equiv: error: --only: unknown workload 'nosuch'" "$work/bad.stderr" ||
    { bad "--only nosuch: stderr:"; cat "$work/bad.stderr"; }
[ -s "$work/bad.stdout" ] && bad "--only nosuch: wrote to stdout"
[ -e "$work/bad" ] && bad "--only nosuch: created --out"

[ "$fail" -eq 0 ] && echo "ok: equiv bench --quick"
exit "$fail"
