#!/usr/bin/env bash
# Dumps record the GEMM kernel that actually ran and the CPU model (fp32 bits depend on both): a run
# forced onto the ordered C GEMM says so, and the CPU is the one /proc/cpuinfo names.
#   provenance_test.sh EQUIV PYTHON
set -u
equiv=$1 py=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
EQUIV_CPU_GEMM=ordered "$equiv" --case row_parallel --tp 2 --dtype fp32 --out "$work/ordered" >/dev/null || exit 1
EQUIV_CPU_GEMM=blas "$equiv" --case row_parallel --tp 2 --dtype fp32 --out "$work/blas" >/dev/null || exit 1
"$py" - "$work" <<'PY'
import h5py, sys
work = sys.argv[1]
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "unknown")
fails = 0
for kind, want in (("ordered", "fp32 GEMM: ordered C"), ("blas", "fp32 GEMM: OpenBLAS")):
    with h5py.File(f"{work}/{kind}/row_parallel-fp32-dp1-tp2.h5") as f:
        kernel, got_cpu = f.attrs["gemm_kernel"], f.attrs["cpu"]
    print(f"{kind}: gemm_kernel={kernel!r} cpu={got_cpu!r}")
    if want not in kernel or "OpenBLAS core" not in kernel:
        print(f"  FAIL: want '{want}' and the OpenBLAS core in gemm_kernel"); fails += 1
    if got_cpu != cpu:
        print(f"  FAIL: cpu {got_cpu!r}, /proc/cpuinfo says {cpu!r}"); fails += 1
sys.exit(1 if fails else 0)
PY
