#!/usr/bin/env bash
# Dumps record the GEMM kernel that actually ran and the CPU model (fp32 bits depend on both): a run
# forced onto the ordered C GEMM says so, and the CPU is the one /proc/cpuinfo names. And what ran,
# from which source, when: the command line as given, the git revision equiv was built from (the
# source tree's HEAD where it is a git checkout), the time in UTC (SOURCE_DATE_EPOCH where set).
# And the NCCL placement a run set (--nccl-channels, --nccl-proto), absent where it set none.
#   provenance_test.sh EQUIV PYTHON [SOURCE_ROOT]
set -u
equiv=$1 py=$2 src=${3:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
EQUIV_CPU_GEMM=ordered "$equiv" --case row_parallel --tp 2 --dtype fp32 --out "$work/ordered" >/dev/null || exit 1
EQUIV_CPU_GEMM=blas "$equiv" --case row_parallel --tp 2 --dtype fp32 --out "$work/blas" >/dev/null || exit 1
SOURCE_DATE_EPOCH=86400 "$equiv" --case row_parallel --tp 2 --dtype fp32 --seed 7 --out "$work/it's here" >/dev/null ||
    exit 1
"$equiv" --case row_parallel --tp 2 --dtype bf16 --nccl-channels 3 --nccl-proto ll128 --out "$work/nccl" >/dev/null ||
    exit 1
head=""
[ -n "$src" ] && head=$(git -C "$src" rev-parse HEAD 2>/dev/null)
"$py" - "$work" "$equiv" "$head" <<'PY'
import h5py, sys, time
work, equiv, head = sys.argv[1:4]
fails = 0
with h5py.File(f"{work}/it's here/row_parallel-fp32-dp1-tp1-seed7.h5") as f:
    got = {k: f.attrs.get(k) for k in ("command", "git_revision", "created_utc")}
print(f"provenance: {got}")
want_command = f"{equiv} --case row_parallel --tp 2 --dtype fp32 --seed 7 --out '{work}/it'\\''s here'"
if got["command"] != want_command:
    print(f"  FAIL: command {got['command']!r}, want {want_command!r}"); fails += 1
if got["created_utc"] != "1970-01-02T00:00:00Z":
    print(f"  FAIL: created_utc {got['created_utc']!r} under SOURCE_DATE_EPOCH=86400, want 1970-01-02T00:00:00Z"); fails += 1
if not got["git_revision"] or (head and not got["git_revision"].startswith(head)):
    print(f"  FAIL: git_revision {got['git_revision']!r}, want the source tree's HEAD {head!r}"); fails += 1
with h5py.File(f"{work}/blas/row_parallel-fp32-dp1-tp2.h5") as f:
    created = f.attrs["created_utc"]
try:
    time.strptime(created, "%Y-%m-%dT%H:%M:%SZ")
except ValueError:
    print(f"  FAIL: created_utc {created!r} is not ISO 8601 UTC"); fails += 1
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "unknown")
for kind, want in (("ordered", "fp32 GEMM: ordered C"), ("blas", "fp32 GEMM: OpenBLAS")):
    with h5py.File(f"{work}/{kind}/row_parallel-fp32-dp1-tp2.h5") as f:
        kernel, got_cpu = f.attrs["gemm_kernel"], f.attrs["cpu"]
    print(f"{kind}: gemm_kernel={kernel!r} cpu={got_cpu!r}")
    if want not in kernel or "OpenBLAS core" not in kernel:
        print(f"  FAIL: want '{want}' and the OpenBLAS core in gemm_kernel"); fails += 1
    if got_cpu != cpu:
        print(f"  FAIL: cpu {got_cpu!r}, /proc/cpuinfo says {cpu!r}"); fails += 1
with h5py.File(f"{work}/nccl/row_parallel-bf16-dp1-tp2-nccl_ch3-nccl_ll128.h5") as f:
    got = (f.attrs.get("nccl_channels"), f.attrs.get("nccl_proto"))
print(f"nccl: {got}")
if got != (3, "ll128"):
    print(f"  FAIL: nccl_channels, nccl_proto {got}, want (3, 'll128')"); fails += 1
with h5py.File(f"{work}/blas/row_parallel-fp32-dp1-tp2.h5") as f:
    if "nccl_channels" in f.attrs or "nccl_proto" in f.attrs:
        print("  FAIL: a run without --nccl-* records nccl attributes"); fails += 1
sys.exit(1 if fails else 0)
PY
