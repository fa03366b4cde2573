#!/usr/bin/env bash
# On a GPU machine without Debian packages: unpacks .gpu/bundle.tar.xz (ci/gpu-bundle.sh), finds
# the machine's own cuBLAS and NCCL, and runs ci/gpu-check.sh on the bundle's build, logging to
# OUT_DIR (default gpu-check/). Then, when the bundle holds a base binary, times the gpt docs run
# on it too (the same command), for a before/after of a change.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${1:-gpu-check}
mkdir -p "$out" /tmp/equiv-gpu
tar -C /tmp/equiv-gpu -xJf "$root/.gpu/bundle.tar.xz"
stage=/tmp/equiv-gpu/stage
libs=$stage/lib
for name in libcublas.so.13 libnccl.so.2; do
    found=$(find /usr/local/cuda*/ /usr/lib /opt /usr/local/lib -name "$name" 2>/dev/null | head -1)
    [ -n "$found" ] && libs=$libs:$(dirname "$found") && echo "using $found"
done
# $stage/lib first: the bundle's libraries, OpenBLAS among them (equiv opens it by its SONAME
# there, harness/base/openblas.h, where the build machine's path to it does not exist).
export LD_LIBRARY_PATH=$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export OPAL_PREFIX=$stage/mpi OMPI_MCA_ess_singleton_isolated=1 PATH=$stage/mpi/bin:$PATH
export EQUIV_HOME=$root EQUIV_GPU_BUILD=$stage/build EQUIV_GPU_PREBUILT=1
bash "$root/ci/gpu-check.sh" "$out"
status=$?
if [ -x "$stage/base/equiv" ]; then
    echo "== base binary: gpt docs forward-only tp4 bf16 on cuda (before the change)"
    t0=$SECONDS
    EQUIV_CUDA_TIMES=1 timeout "${EQUIV_GPU_DOCS_TIMEOUT:-1800}" "$stage/base/equiv" --case gpt --size docs --tp 4 \
        --dtype bf16 --forward-only --backend cuda --out "$out/gpt-docs-base" 2>&1 | tail -5 | tee -a "$out/log"
    echo "[wall $((SECONDS - t0)) s]" | tee -a "$out/log"
fi
exit "$status"
