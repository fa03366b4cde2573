#!/usr/bin/env bash
# FSDP2 end to end (harness/python/examples/fsdp2.py): fully_shard over a one-dimensional mesh of 2,
# the capture given no group, assembled and judged as the DDP run's: within against one process;
# the loss divided by dp twice: exit 1, a uniform factor of 1/2 named. Skipped (77) where torch has no
# fully_shard (Debian's torch 1.13; torch >= 2.4 has it) or lacks gloo or h5py.
#   torch_fsdp_test.sh EQUIV PYTHON
set -u
equiv=$1 py=$2
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$py" -c "import torch.distributed as d, h5py, numpy; assert d.is_gloo_available()" 2>/dev/null ||
    { echo "skip: $py lacks torch (with gloo), h5py or numpy"; exit 77; }
fail=0
for run in "f1" "f2 --dp 2" "f2-bug --dp 2 --bug loss_div_twice"; do
    set -- $run
    name=$1
    shift
    "$py" "$root/harness/python/examples/fsdp2.py" --out "$work/$name" "$@" >"$work/$name.log" 2>&1
    status=$?
    [ "$status" -eq 77 ] && { cat "$work/$name.log"; exit 77; }
    [ "$status" -eq 0 ] || { echo "FAIL: fsdp2.py $run: exit $status"; tail -5 "$work/$name.log"; exit 1; }
done
"$equiv" compare "$work/f1" "$work/f2" >"$work/out" 2>&1
status=$?
[ "$status" -eq 0 ] && echo "ok: fully_shard dp 2 within one process" ||
    { echo "FAIL: fully_shard dp 2 vs one process: exit $status"; grep -E "Verdict|error" "$work/out" | head -3; fail=1; }
grep -q "dp2-tp1 vs dp1-tp1" "$work/out" && echo "ok: the mesh is dp" || { echo "FAIL: the heading is not dp2-tp1"; fail=1; }
"$equiv" compare "$work/f1" "$work/f2-bug" >"$work/out-bug" 2>&1
status=$?
[ "$status" -eq 1 ] && grep -qF "x0.5" "$work/out-bug" && echo "ok: the loss divided twice: exit 1, x0.5" ||
    { echo "FAIL: the loss divided twice: exit $status"; grep -E "Verdict|error" "$work/out-bug" | head -3; fail=1; }
exit $fail
