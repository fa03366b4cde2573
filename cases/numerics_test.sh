#!/usr/bin/env bash
# --numerics megatron gives gpt Megatron-Core's initialisation and says so in the dump; the
# default keeps equiv's own and writes no numerics attribute; megatron_tf32 rounds fp32 GEMM inputs
# to TF32 (its dumps differ from megatron's in fp32 only); an unknown name is one error line.
#   numerics_test.sh EQUIV PYTHON
set -u
equiv=$1 py=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for n in default megatron megatron_tf32; do
    args=()
    [ "$n" != default ] && args=(--numerics "$n")
    "$equiv" --case gpt --tp 2 --forward-only "${args[@]}" --out "$work/$n" >/dev/null || { echo "FAIL: $n run"; exit 1; }
done
err=$("$equiv" --case gpt --tp 2 --numerics nemo --out "$work/bad" 2>&1 >/dev/null)
status=$?
[ "$status" -eq 2 ] || { echo "FAIL: --numerics nemo exit $status, want 2"; exit 1; }
[ "$(printf '%s\n' "$err" | grep -c '^equiv: error: unknown numerics')" -eq 1 ] ||
    { echo "FAIL: --numerics nemo said: $err"; exit 1; }
"$py" - "$work" <<'PY'
import math, sys
import h5py, numpy as np
work = sys.argv[1]
fails = 0
def check(ok, what):
    global fails
    print(("ok: " if ok else "FAIL: ") + what)
    fails += not ok
def std(path, name):
    with h5py.File(path) as f:
        return float(np.std(f[name][()].astype(np.float64)))
L, H, F = 4, 64, 256  # cases/gpt.ini [size.ci]
for dtype in ("fp32", "bf16"):
    # a run's dump is named for its cell: "-numerics_<n>" after the layout where not the default
    d, m, t = (f"{work}/{n}/gpt-{dtype}-dp1-tp1{'' if n == 'default' else '-numerics_' + n}.h5"
               for n in ("default", "megatron", "megatron_tf32"))
    with h5py.File(d) as f:
        check("numerics" not in f.attrs, f"{dtype} default: no numerics attribute")
    for path, name in ((m, "megatron"), (t, "megatron_tf32")):
        with h5py.File(path) as f:
            check(f.attrs.get("numerics") == name, f"{dtype} {name}: numerics attribute {f.attrs.get('numerics')!r}")
    # init stds: equiv's 1/sqrt(fan_in) and /sqrt(2L) on the outputs; Megatron's 0.02 and 0.02/sqrt(2L)
    for path, want in ((d, {"qkv_weight": 1 / math.sqrt(H), "fc1_weight": 1 / math.sqrt(H),
                             "proj_weight": 1 / math.sqrt(H * 2 * L), "fc2_weight": 1 / math.sqrt(F * 2 * L)}),
                       (m, {"qkv_weight": 0.02, "fc1_weight": 0.02, "proj_weight": 0.02 / math.sqrt(2 * L),
                            "fc2_weight": 0.02 / math.sqrt(2 * L)})):
        for w, s in want.items():
            got = std(path, f"layers/00/{w}")
            check(abs(got / s - 1) < 0.05, f"{dtype} {path.split('/')[-2]} {w} std {got:.5f}, want {s:.5f}")
    # TF32 touches fp32 GEMMs only: bf16 dumps equal megatron's, fp32 ones differ past the inputs
    with h5py.File(m) as a, h5py.File(t) as b:
        same = all(np.array_equal(a[k][()].view(np.uint8), b[k][()].view(np.uint8))
                   for k in ("layers/00/qkv_weight", "layers/03/out"))
        if dtype == "bf16":
            check(same, "bf16: megatron_tf32 equals megatron (no fp32 GEMM)")
        else:
            check(np.array_equal(a["layers/00/qkv_weight"][()], b["layers/00/qkv_weight"][()]) and not same,
                  "fp32: megatron_tf32 has megatron's weights and other outputs")
sys.exit(1 if fails else 0)
PY
