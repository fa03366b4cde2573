#!/usr/bin/env bash
# A user's own training run, end to end: real torch.distributed jobs (gloo, one process per rank)
# of harness/python/examples/tiny_megatron.py, captured per rank with equiv_capture, assembled and
# judged by `equiv compare`. Honest layouts must be within; each planted bug must exit 1 with the
# place or the factor named; a broken run directory must be one line and exit 2.
#   torch_capture_test.sh EQUIV PYTHON PART...  (PART: tp, dp, sum, files; skipped, 77, without torch)
# Every part's training runs come first, each once (dp and files both judge the same dp 1 and dp 4
# runs), in one python process (cases/torch_train.py): torch is imported once and each run's ranks
# are forked from it, where a run from the command line is 2 to 5 processes each importing torch
# (about a CPU second each). Then each part's checks, in order.
set -u
equiv=$1 py=$2
parts=("${@:3}")
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0

# jobs PART: the training runs PART judges, one a line, "NAME ARGS..." (tiny_megatron.py's arguments).
jobs() {
    case $1 in
    tp)
        for dtype in fp32 bf16; do
            for tp in 1 2 4; do echo "$dtype-tp$tp --tp $tp --dtype $dtype"; done
            echo "$dtype-tp4-no-allreduce --tp 4 --dtype $dtype --bug no_row_allreduce"
        done
        echo "fp32-dp2-tp2 --dp 2 --tp 2"
        echo "fp32-tp2-tp-group --tp 2 --groups tp"
        echo "fp32-dp2-tp2-tp-group --dp 2 --tp 2 --groups tp"
        ;;
    dp)
        for dp in 1 2 4; do echo "ddp$dp --dp $dp"; done
        echo "ddp4-grad-div-world --dp 4 --bug grad_div_world"
        echo "ddp2-desync --dp 2 --bug desync_param --params"
        echo "ddp1-params --dp 1 --params"
        ;;
    sum)
        echo "sum1 --dp 1 --convention sum"
        echo "sum4 --dp 4 --convention sum"
        echo "sum4-local-count --dp 4 --convention sum --bug local_count"
        ;;
    files)
        echo "ddp1 --dp 1"
        echo "ddp4 --dp 4"
        ;;
    *) echo "unknown part '$1'" >&2; return 2 ;;
    esac
}
# Every part's runs first, each once (dp and files share ddp1 and ddp4), all in one python process
# (cases/torch_train.py: torch imported once, each run's ranks forked from it).
for part in "${parts[@]}"; do jobs "$part" || exit 2; done >"$work/jobs.all"
awk '!seen[$0]++' "$work/jobs.all" >"$work/jobs"
dup=$(awk '{print $1}' "$work/jobs" | sort | uniq -d)
[ -z "$dup" ] && [ -s "$work/jobs" ] || { echo "FAIL: the parts' runs: none, or a name given two sets of arguments: $dup"; exit 1; }
shared=$(($(wc -l <"$work/jobs.all") - $(wc -l <"$work/jobs")))
[ "$shared" -gt 0 ] && echo "ok: $shared training runs shared between parts"
"$py" "$root/cases/torch_train.py" "$work" <"$work/jobs"
case $? in
0) ;;
77) exit 77 ;; # it said what this python lacks
*) fail=1 ;;
esac

compare() { # compare DESCRIPTION WANT_STATUS REF TEST [ARGS...]: equiv compare, its output in $work/out
    local what=$1 want=$2 ref=$3 test=$4
    shift 4
    "$equiv" compare "$work/$ref" "$work/$test" "$@" >"$work/out" 2>"$work/err"
    local got=$?
    if [ "$got" -ne "$want" ]; then
        echo "FAIL: $what: exit $got, want $want"; head -3 "$work/err"; grep -E "Where it starts" "$work/out"; fail=1
    else
        echo "ok: $what (exit $got)"
    fi
}
expect() { # expect DESCRIPTION PATTERN [FILE]
    local file=${3:-$work/out}
    if grep -qE -- "$2" "$file"; then echo "ok: $1: $(grep -oE -- "$2" "$file" | head -1)"
    else echo "FAIL: $1: no /$2/ in $(basename "$file")"; fail=1; fi
}

for part in "${parts[@]}"; do
case $part in
tp) # (a) Megatron-style column- and row-parallel linears, tp 2 and 4 against tp 1, bf16 and fp32
    for dtype in fp32 bf16; do
        compare "$dtype tp2 vs tp1" 0 "$dtype-tp1" "$dtype-tp2"
        expect "$dtype tp2: every tensor as expected" "all as expected"
        compare "$dtype tp4 vs tp1" 0 "$dtype-tp1" "$dtype-tp4"
        # The bound applies where a GEMM's operands are bit-identical in both runs: layer 0's q, k, v
        # always; the row-parallel projection where they came out identical too (bf16 here: torch's
        # CPU fp32 GEMM over a column slice rounds differently from the full one, so fp32 ctx differs).
        expect "$dtype tp4: a column-parallel GEMM held to its rounding bound" \
            '^\| (rounding|bit-exact)[^|]* \| [-0-9]+ \| blocks\.0\.attn\.q\.out \| 64 \| 1 -> 1 \|'
        [ "$dtype" = bf16 ] && expect "bf16 tp4: the row-parallel GEMM (K split 4 ways) held to its bound" \
            '^\| rounding[^|]* \| [-0-9]+ \| blocks\.0\.attn\.proj\.out \| 64 \| 1 -> 4 \|'
        compare "$dtype tp4 without the row-parallel all-reduce" 1 "$dtype-tp1" "$dtype-tp4-no-allreduce"
        expect "$dtype: the first divergent layer named" \
            'Where it starts \(the first not as expected, in capture order\): `blocks\.0\.attn\.proj\.out`'
        expect "$dtype: the ranks' partials disagree where they should be replicated" \
            'blocks\.0\.attn\.proj\.out \(activation\) should be replicated over tp but differs'
        # the JSON report of a user's run (source, environment, findings) validates against the schema
        "$equiv" compare "$work/$dtype-tp1" "$work/$dtype-tp4-no-allreduce" --out "$work/$dtype-report" >/dev/null 2>&1
        if "$py" - "$work/$dtype-report/report.json" "$root/reports/report.schema.json" <<'PY'
import json, sys
import jsonschema
report, schema = (json.load(open(p)) for p in sys.argv[1:])
jsonschema.validate(report, schema)
c = report["comparisons"][0]
assert c["test"]["source"] == "torch" and c["test"]["world_size"] == 4, c["test"]
assert any("should be replicated over tp" in f for f in c["findings"]), c.get("findings")
PY
        then echo "ok: $dtype: report.json of a user's run matches reports/report.schema.json, findings included"
        else echo "FAIL: $dtype: report.json of a user's run"; fail=1; fi
    done
    # dp x tp together: activations split over dp along the batch and over tp along the hidden dim
    compare "fp32 dp2-tp2 vs tp1" 0 "fp32-tp1" "fp32-dp2-tp2"
    # Capture given tp_group alone: dp = world / tp, the dp rank from the global rank
    compare "fp32 tp2, Capture given tp_group alone, vs tp1" 0 "fp32-tp1" "fp32-tp2-tp-group"
    expect "assembled as tp 2" "Test run: written by torch, 2 ranks assembled"
    compare "fp32 dp2-tp2, Capture given tp_group alone, vs tp1" 0 "fp32-tp1" "fp32-dp2-tp2-tp-group"
    expect "assembled as dp 2 x tp 2" "### fp32-dp2-tp2-tp-group fp32 dp2-tp2 vs dp1-tp1"
    ;;
dp) # (b) DDP, dp 2 and 4 against dp 1 with a fixed global batch; gradients averaged once too often
    compare "DDP dp2 vs dp1" 0 ddp1 ddp2
    compare "DDP dp4 vs dp1" 0 ddp1 ddp4
    expect "dp4: the assembled run says what it is" "Test run: written by torch, 4 ranks assembled"
    compare "DDP dp4, gradients divided by the world size once more" 1 ddp1 ddp4-grad-div-world
    expect "the gradients' factor named" '`blocks\.[01]\.[a-z0-9.]*\.grad` \(grad\): OUTSIDE, expected within: uniform scale x0\.25 = 1/4'
    if grep -E '\.out` \(activation\): OUTSIDE' "$work/out" >/dev/null; then
        echo "FAIL: an activation reported outside: the bug is in the gradients only"; fail=1
    else
        echo "ok: no activation reported"
    fi
    # a parameter that differs between dp ranks is a finding of its own
    compare "DDP dp2 with a weight that differs on dp rank 1" 1 ddp1-params ddp2-desync
    expect "the replica that differs named" \
        'blocks\.0\.fc1\.weight \(param\) should be replicated over dp but differs: rank 1 \(dp 1, tp 0\)'
    ;;
sum) # (c) the loss normalised by the global count, gradients SUM-all-reduced; the bug: the local count
    compare "SUM convention dp4 vs dp1" 0 sum1 sum4
    compare "loss over the local count at dp4" 1 sum1 sum4-local-count
    expect "the loss's factor named" '`loss` \(loss\): OUTSIDE, expected within: uniform scale x4 '
    expect "the gradients' factor named" '\.grad` \(grad\): OUTSIDE, expected within: uniform scale x4 '
    # the same comparison under the table entries and --atol/--rtol a user may choose
    compare "--atol/--rtol: a tolerance named on the command line" 1 sum1 sum4-local-count --atol 1e-6 --rtol 1e-3
    expect "the report names it" 'Tolerance `--atol 1e-06 --rtol 0.001`'
    compare "--tolerance NAME" 0 sum1 sum4 --tolerance fp32_grads_measured
    ;;
files) # a run directory that cannot be assembled: one line, exit 2, nothing written
    compare "a run of no case gets the default for its dtype" 0 ddp1 ddp4
    expect "the report names the default" 'Tolerance `default_fp32`'
    mkdir "$work/missing" && cp "$work"/ddp4/rank0000[013].h5 "$work/missing/"
    compare "a rank missing" 2 ddp1 missing --out "$work/no-report"
    expect "one line naming it" '^equiv: error: .*a run of 4 ranks .* but 3 files: rank 2 is missing' "$work/err"
    compare "one rank's file alone" 2 ddp1 ddp4/rank00002.h5
    expect "told to give the directory" "rank 2's file of a run of 4 ranks: compare the directory" "$work/err"
    mkdir "$work/mixed" && cp "$work"/ddp4/rank0000[0-3].h5 "$work/mixed/" && cp "$work/ddp1/rank00000.h5" "$work/mixed/rank00004.h5"
    compare "a file of another run among the ranks" 2 ddp1 mixed
    expect "the disagreement named" 'dp 1, tp 1, world_size 1, but .* says dp 4' "$work/err"
    mkdir "$work/empty"
    compare "an empty directory" 2 ddp1 empty
    # equiv_capture writes a rank's file under a hidden temporary name and renames it at write(): what a
    # step that died leaves is skipped, beside complete files or alone
    mkdir "$work/with-tmp" "$work/died" && cp "$work"/ddp4/rank0000[0-3].h5 "$work/with-tmp/"
    head -c 4096 "$work/ddp4/rank00001.h5" >"$work/with-tmp/.rank00001.h5.tmp.12345"
    cp "$work/with-tmp/.rank00001.h5.tmp.12345" "$work/died/"
    compare "a temporary file left by a step that died, beside the ranks' files" 0 ddp1 with-tmp
    expect "not read" "Test run: written by torch, 4 ranks assembled"
    compare "a run directory holding only a temporary file" 2 ddp1 died
    "$py" - "$work/ddp4" "$work/bad-shard" <<'PY'
import shutil, sys, h5py
src, dst = sys.argv[1:]
shutil.copytree(src, dst)
with h5py.File(f"{dst}/rank00001.h5", "r+") as f:
    f["blocks.0.fc1.out"].attrs["shard"] = "dp:7"
PY
    compare "a shard attribute naming a dimension the tensor lacks" 2 ddp1 bad-shard
    expect "file, dataset and what is wrong named" 'rank00001\.h5: dataset blocks\.0\.fc1\.out: shard .dp:7. splits a dimension' "$work/err"
    # any writer's minimal file: datasets with a role, the run's dp and tp; a dataset without a role is refused
    "$py" - "$work" <<'PY'
import sys, h5py, numpy as np
work = sys.argv[1]
for name, scale, role in (("min-ref.h5", 1.0, "activation"), ("min-x2.h5", 2.0, "activation"), ("min-norole.h5", 1.0, None)):
    with h5py.File(f"{work}/{name}", "w") as f:
        f.attrs["dp"], f.attrs["tp"] = 1, 1
        f["blocks.0.out"] = np.linspace(-1, 1, 24, dtype=np.float32).reshape(4, 6) * np.float32(scale)
        if role:
            f["blocks.0.out"].attrs["role"] = role
PY
    compare "the minimal file against itself" 0 min-ref.h5 min-ref.h5
    compare "the minimal file, a planted factor 2" 1 min-ref.h5 min-x2.h5
    expect "the factor named" 'blocks\.0\.out` \(activation\): OUTSIDE, expected within: uniform scale x2 '
    # a dp 2 directory whose tensors all agree but whose weight differs on dp rank 1: exit 1, and the
    # summary line says why instead of "all as expected" alone
    "$py" - "$work" <<'PY'
import os, sys, h5py, numpy as np
work = sys.argv[1]
out, w = np.linspace(-1, 1, 24, dtype=np.float32).reshape(4, 6), np.linspace(0, 1, 6, dtype=np.float32)
with h5py.File(f"{work}/min-dp1.h5", "w") as f:
    f.attrs["dp"], f.attrs["tp"] = 1, 1
    f["blocks.0.weight"], f["blocks.0.out"] = w, out
    f["blocks.0.weight"].attrs["role"], f["blocks.0.out"].attrs["role"] = "param", "activation"
os.makedirs(f"{work}/min-dp2-desync")
for r in range(2):
    with h5py.File(f"{work}/min-dp2-desync/rank{r:05d}.h5", "w") as f:
        for key, value in dict(dp=2, tp=1, world_size=2, rank=r, dp_rank=r, tp_rank=0).items():
            f.attrs[key] = value
        f["blocks.0.weight"], f["blocks.0.out"] = w + np.float32(0.01 * r), out[2 * r:2 * r + 2]
        f["blocks.0.weight"].attrs["role"], f["blocks.0.out"].attrs["role"] = "param", "activation"
        f["blocks.0.out"].attrs["shard"] = "dp:0"
PY
    compare "a weight that differs between dp ranks, every tensor as expected" 1 min-dp1.h5 min-dp2-desync
    expect "the summary line names the finding" \
        '^equiv: 1 comparison, 2 tensors, all as expected, 1 assembly finding NOT as expected \(first: min-dp2-desync fp32 dp2-tp1, test run: blocks\.0\.weight \(param\) should be replicated over dp but differs: rank 1'
    compare "a dataset without a role" 2 min-ref.h5 min-norole.h5 --out "$work/no-report"
    expect "file and dataset named" "min-norole\.h5: blocks\.0\.out has no attribute 'role'" "$work/err"
    if [ -e "$work/no-report" ]; then echo "FAIL: an input error left $work/no-report"; fail=1; fi
    ;;
esac
done
exit "$fail"
