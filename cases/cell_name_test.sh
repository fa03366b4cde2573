#!/usr/bin/env bash
# A dump's file name is its cell's (harness/run_cell.h): runs of different cells into one --out
# each leave their own dump, and a run at every default keeps the name it always had.
#   cell_name_test.sh EQUIV PYTHON
# `--algo tree` then `--algo ring` into one folder leave both tp 2 dumps, each holding its own
# algorithm; so do --grads sum, --inject and --seed beside them.
set -u
equiv=$1 py=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
out="$work/out"
for args in "--algo tree" "--algo ring" "--grads sum" "--inject skip_allreduce" "--seed 7"; do
    # exit 1 is a found bug (--inject): the dumps are written all the same
    "$equiv" --case row_parallel --tp 2 --dtype bf16 $args --out "$out" >/dev/null
    [ $? -le 1 ] || { echo "FAIL: equiv $args"; exit 1; }
done
"$py" - "$out" <<'PY'
import os, sys
import h5py
out = sys.argv[1]
# file name: the attributes its dump must hold
want = {
    "row_parallel-bf16-dp1-tp2.h5": {"algorithm": "ring", "grads": "avg", "injected": "none", "seed": 1234},
    "row_parallel-bf16-dp1-tp2-tree.h5": {"algorithm": "tree"},
    "row_parallel-bf16-dp1-tp2-grads_sum.h5": {"grads": "sum"},
    "row_parallel-bf16-dp1-tp2-bug_skip_allreduce.h5": {"injected": "skip_allreduce"},
    "row_parallel-bf16-dp1-tp2-seed7.h5": {"seed": 7},
}
fails = 0
names = sorted(n for n in os.listdir(out) if n.endswith(".h5"))
print(f"dumps: {names}")
for name, attrs in want.items():
    path = os.path.join(out, name)
    if not os.path.exists(path):
        print(f"FAIL: no {name}"); fails += 1; continue
    with h5py.File(path) as f:
        for key, value in attrs.items():
            got = f.attrs.get(key)
            got = got.decode() if isinstance(got, bytes) else got
            if got != value:
                print(f"FAIL: {name}: {key} = {got!r}, want {value!r}"); fails += 1
# the tp 2 dumps, one per run, and their references (dp1-tp1), nothing overwritten
tp2 = [n for n in names if "-dp1-tp2" in n]
if len(tp2) != 5:
    print(f"FAIL: {len(tp2)} tp 2 dumps for 5 runs of different cells: {tp2}"); fails += 1
print("ok: every run of its own cell left its own dump" if not fails else "FAIL")
sys.exit(1 if fails else 0)
PY
