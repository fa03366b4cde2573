#!/usr/bin/env bash
# The checks that need a GPU, for whoever has one at hand (CI has none: there the CUDA tests exit
# 77, skipped). Builds with CUDA, then prints, command by command:
#   1. the CUDA unit tests, verbose: cuBLAS GEMM vs CPU (max |d| / bound per shape and dtype), the
#      device fold vs reductions/fold.c bit for bit, the device ops vs the CPU ops (bit-identical
#      counts for GELU and softmax);
#   2. NCCL with one rank (and with every GPU of this node under mpirun when there are several;
#      with 4 or more, mlp_stack and gpt at tp 4 under --comm nccl against sim);
#   3. GPU vs CPU per case: the same layout run with --backend cpu and --backend cuda, the two
#      dumps compared (`equiv compare`) in fp32 and bf16;
#   4. the docs sizes on the GPU: row_parallel --size docs and gpt --size docs (forward only,
#      each under a time limit).
#   5. where the GPU time goes (EQUIV_CUDA_TIMES=1 on the docs runs: copies, cuBLAS, kernels) and
#      cuBLAS's throughput on the docs GEMM shapes against this GPU's square-GEMM peak
#      (gemm_cuda_bench).
# Usage: ci/gpu-check.sh [OUT_DIR]   (default gpu-check/); everything is also logged in OUT_DIR/log.
# A machine without meson (or EQUIV_GPU_PREBUILT=1) runs a build made elsewhere, as it is:
# EQUIV_GPU_BUILD names its folder (equiv, the tests, gemm_cuda_bench); EQUIV_HOME the source tree.
# EQUIV_GPU_DOCS_TIMEOUT (seconds, default 1800) limits each docs run.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
out=${1:-gpu-check}
mkdir -p "$out"
exec > >(tee "$out/log") 2>&1
status=0

run() { # run CMD...: print it, run it, print its exit status
    echo
    echo "\$ $*"
    "$@"
    local rc=$?
    if [ "$rc" -eq 77 ]; then echo "[exit 77: skipped, no CUDA device]"; return 0; fi
    echo "[exit $rc]"
    [ "$rc" -eq 0 ] || status=1
    return 0
}

echo "== device"
run nvidia-smi --query-gpu=name,compute_cap,memory.total,driver_version --format=csv
build=${EQUIV_GPU_BUILD:-build-gpu} # an existing build folder may be named
if [ "${EQUIV_GPU_PREBUILT:-}" = 1 ] || ! command -v meson >/dev/null; then
    [ -x "$build/equiv" ] || { echo "no meson here and no prebuilt $build/equiv"; exit 1; }
    echo "(prebuilt: $build)"
else
    if [ -f "$build/build.ninja" ]; then meson configure "$build" -Dcuda=enabled >/dev/null; else
        meson setup "$build" -Dcuda=enabled -Dwerror=true >/dev/null || { echo "meson setup failed"; exit 1; }
    fi
    meson compile -C "$build" >/dev/null || { echo "build failed"; exit 1; }
fi
docs_timeout=${EQUIV_GPU_DOCS_TIMEOUT:-1800}
equiv="$build/equiv"

echo "== 1. CUDA unit tests"
for t in backend_cuda_test ops_cuda_test fold_cuda_test; do run "$build/$t"; done
"$build/backend_cuda_test" >/dev/null 2>&1
if [ $? -eq 77 ]; then
    echo
    echo "gpu-check: no CUDA device visible here; the remaining checks need one"
    exit 0
fi

echo "== 2. NCCL"
if [ -x "$build/nccl_transport_test" ]; then
    run "$build/nccl_transport_test"
    gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
    if [ "$gpus" -gt 1 ] && command -v mpirun >/dev/null; then
        as_root=()
        [ "$(id -u)" -eq 0 ] && as_root=(--allow-run-as-root)
        run mpirun "${as_root[@]}" -np "$gpus" "$build/nccl_transport_test"
    fi
    if [ "$gpus" -ge 4 ] && command -v mpirun >/dev/null; then
        # The stacked cases one process per GPU (tp 4, NCCL collectives), against the sim run of
        # the same layout: CPU GEMMs on both, so what differs is NCCL's reduction order against the
        # emulated ring (equal bit for bit where NCCL runs one ring in rank order); then the GEMMs
        # on cuBLAS too.
        as_root=()
        [ "$(id -u)" -eq 0 ] && as_root=(--allow-run-as-root)
        for kase in mlp_stack gpt; do
            dir="$out/$kase-nccl"
            mkdir -p "$dir"
            run "$equiv" --case "$kase" --tp 4 --dtype bf16 --out "$dir/sim"
            run mpirun "${as_root[@]}" -np 4 "$build/equiv" --case "$kase" --tp 4 --dtype bf16 --comm nccl \
                --out "$dir/nccl"
            run "$equiv" compare "$dir/sim/$kase-bf16-dp1-tp4.h5" "$dir/nccl/$kase-bf16-dp1-tp4.h5" --expect within \
                --out "$dir/sim-vs-nccl"
            run mpirun "${as_root[@]}" -np 4 "$build/equiv" --case "$kase" --tp 4 --dtype bf16 --comm nccl \
                --backend cuda --out "$dir/nccl-cuda"
        done
    fi
else
    echo "(not built: the NCCL transport needs cuda, nccl and mpi at meson setup)"
fi

echo "== 3. GPU vs CPU, per case (tp 4, fp32 and bf16)"
for kase in column_parallel row_parallel mlp_stack gpt; do
    for dtype in fp32 bf16; do
        dir="$out/$kase-$dtype"
        mkdir -p "$dir"
        run "$equiv" --case "$kase" --tp 4 --dtype "$dtype" --backend cpu --out "$dir/cpu"
        run "$equiv" --case "$kase" --tp 4 --dtype "$dtype" --backend cuda --out "$dir/cuda"
        # The same layout on both backends: what differs is cuBLAS's accumulation order and the
        # device erf/exp, judged by the case's tolerance table (exit 1: beyond it; read the report).
        for layout in dp1-tp1 dp1-tp4; do
            run "$equiv" compare "$dir/cpu/$kase-$dtype-$layout.h5" "$dir/cuda/$kase-$dtype-$layout.h5" \
                --expect within --out "$dir/cpu-vs-cuda-$layout"
        done
    done
done

echo "== 4. docs sizes on the GPU (wall time; EQUIV_CUDA_TIMES: where the device time goes)"
timed() { local t0=$SECONDS; run "$@"; echo "[wall $((SECONDS - t0)) s]"; }
export EQUIV_CUDA_TIMES=1
timed timeout "$docs_timeout" "$equiv" --case row_parallel --size docs --tp 4 --backend cuda --out "$out/row_parallel-docs"
timed timeout "$docs_timeout" "$equiv" --case gpt --size docs --tp 4 --dtype bf16 --forward-only --backend cuda \
    --out "$out/gpt-docs"
unset EQUIV_CUDA_TIMES

echo "== 5. cuBLAS on the docs GEMM shapes, against this GPU's square-GEMM peak"
[ -x "$build/gemm_cuda_bench" ] && run "$build/gemm_cuda_bench"

echo
[ "$status" -eq 0 ] && echo "gpu-check: every command exited 0" || echo "gpu-check: some command failed (see above)"
exit "$status"
