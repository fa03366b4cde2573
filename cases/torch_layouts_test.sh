#!/usr/bin/env bash
# The layouts past dp x tp, end to end (harness/python/examples/layouts.py: gloo, one process per
# rank): sequence parallel, pipeline, context and expert parallel. Each honest layout must be within
# against the run of every size 1; each planted bug must exit 1 with its place, its factor or its
# finding named; the heading names the full layout.
#   torch_layouts_test.sh EQUIV PYTHON     (skipped, 77, where PYTHON lacks torch with gloo or h5py)
set -u
equiv=$1 py=$2
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
"$py" -c "import torch.distributed as d, h5py, numpy; assert d.is_gloo_available()" 2>/dev/null ||
    { echo "skip: $py lacks torch (with gloo), h5py or numpy"; exit 77; }

train() { # train NAME ARGS...: layouts.py --out WORK/NAME ARGS
    local name=$1
    shift
    if "$py" "$root/harness/python/examples/layouts.py" --out "$work/$name" "$@" >"$work/$name.log" 2>&1; then
        echo "ok: training run $name ($*)"
    else
        echo "FAIL: training run $name ($*)"; tail -5 "$work/$name.log"; fail=1
    fi
}
check() { # check WANT_STATUS REF TEST PATTERN...: equiv compare, its exit status and every pattern in its report
    local want=$1 ref=$2 test=$3
    shift 3
    "$equiv" compare "$work/$ref" "$work/$test" >"$work/out" 2>&1
    local got=$?
    [ "$got" -eq "$want" ] && echo "ok: $test vs $ref (exit $got)" ||
        { echo "FAIL: $test vs $ref: exit $got, want $want"; grep -E "Verdict|error" "$work/out" | head -3; fail=1; }
    for pattern in "$@"; do
        grep -qF -- "$pattern" "$work/out" && echo "ok: $test: $pattern" || { echo "FAIL: $test: no '$pattern'"; fail=1; }
    done
}

train sp1 --layout sp
train sp2 --layout sp --tp 2
train dp2-sp2 --layout sp --tp 2 --dp 2
train sp2-bug --layout sp --tp 2 --bug ln_grad_unreduced
train pp1 --layout pp
train pp2 --layout pp --pp 2
train pp4 --layout pp --pp 4
train dp2-pp2 --layout pp --pp 2 --dp 2
train pp2-div --layout pp --pp 2 --bug loss_div_twice
train pp2-mb --layout pp --pp 2 --bug wrong_microbatch
train cp1 --layout cp
train cp2 --layout cp --cp 2
train dp2-cp2 --layout cp --cp 2 --dp 2
train cp2-bug --layout cp --cp 2 --bug local_mask
train ep1 --layout ep
train ep2 --layout ep --dp 2 --ep 2
train ep4 --layout ep --dp 4 --ep 4
train dp4-ep2 --layout ep --dp 4 --ep 2
train dp4-ep2-bug --layout ep --dp 4 --ep 2 --bug expert_grad_unreduced
train ep2-route --layout ep --dp 2 --ep 2 --bug route_next

check 0 sp1 sp2 "sp2 fp32 dp1-tp2 vs dp1-tp1" "All 41 tensors as expected"
check 0 sp1 dp2-sp2 "dp2-sp2 fp32 dp2-tp2 vs dp1-tp1"
check 1 sp1 sp2-bug "blocks.0.ln.weight.grad (grad) should be replicated over tp but differs"
check 0 pp1 pp2 "pp2 fp32 dp1-tp1-pp2 vs dp1-tp1" "All 81 tensors as expected"
check 0 pp1 pp4 "dp1-tp1-pp4 vs dp1-tp1"
check 0 pp1 dp2-pp2 "dp2-tp1-pp2 vs dp1-tp1"
check 1 pp1 pp2-div "uniform scale x0.5 = 1/2"
check 1 pp1 pp2-mb 'it starts at `blocks.2.ln.out`'
check 0 cp1 cp2 "cp2 fp32 dp1-tp1-cp2 vs dp1-tp1"
check 0 cp1 dp2-cp2 "dp2-tp1-cp2 vs dp1-tp1"
check 1 cp1 cp2-bug 'it starts at `blocks.0.attn.out`'
check 0 ep1 ep2 "dp2-tp1-ep2 vs dp1-tp1"
check 0 ep1 ep4 "dp4-tp1-ep4 vs dp1-tp1"
check 0 ep1 dp4-ep2 "dp4-tp1-ep2 vs dp1-tp1"
check 1 ep1 dp4-ep2-bug "blocks.0.experts.0.w1.grad (grad) should be replicated over dp but differs: rank 2 (dp 2, tp 0, ep 0)"
check 1 ep1 ep2-route 'it starts at `blocks.0.moe.out`'

# the HTML report's section heading names the full layout too
"$equiv" compare "$work/pp1" "$work/dp2-pp2" --out "$work/html" >/dev/null 2>&1
grep -q ": dp2-tp1-pp2 vs dp1-tp1</h2>" "$work/html/report.html" && echo "ok: report.html: dp2-tp1-pp2 vs dp1-tp1" ||
    { echo "FAIL: report.html's heading: $(grep -o '<h2>[^<]*</h2>' "$work/html/report.html" | head -2)"; fail=1; }

# a rank's file with a pp it does not place itself in, and a world that does not match its groups
cp -r "$work/pp2" "$work/pp2-bad"
"$py" -c "import h5py, sys; f = h5py.File(sys.argv[1], 'a'); del f.attrs['pp_rank']" "$work/pp2-bad/rank00001.h5"
"$equiv" compare "$work/pp1" "$work/pp2-bad" >"$work/out" 2>&1
[ $? -eq 2 ] && [ "$(grep -c 'equiv: error' "$work/out")" -eq 1 ] && grep -q "needs pp_rank in its root" "$work/out" &&
    echo "ok: a rank file without pp_rank: one error, exit 2" || { echo "FAIL: pp_rank missing"; cat "$work/out"; fail=1; }
cp -r "$work/ep2" "$work/ep2-bad"
"$py" -c "import h5py, sys; f = h5py.File(sys.argv[1], 'a'); f.attrs['ep'] = 3" "$work/ep2-bad/rank00000.h5"
"$equiv" compare "$work/ep1" "$work/ep2-bad" >"$work/out" 2>&1
[ $? -eq 2 ] && [ "$(grep -c 'equiv: error' "$work/out")" -eq 1 ] && grep -q "ep 3 does not divide dp 2" "$work/out" &&
    echo "ok: ep that does not divide dp: one error, exit 2" || { echo "FAIL: ep 3"; cat "$work/out"; fail=1; }
exit $fail
