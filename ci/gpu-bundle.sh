#!/usr/bin/env bash
# Packs a CUDA build and the shared libraries it needs for a GPU machine that has the NVIDIA
# driver, CUDA and NCCL but no Debian packages (no HDF5, OpenBLAS, inih, jansson, Open MPI):
#   ci/gpu-bundle.sh BUILD_DIR [BASE_EQUIV] -> .gpu/bundle.tar.xz (.gpu/ is git-ignored)
# BASE_EQUIV, optional: another equiv binary to time against (e.g. main's before a change).
# On the GPU machine, ci/gpu-run-bundle.sh unpacks it and runs ci/gpu-check.sh on it.
# cuBLAS, cuBLASLt and NCCL are left out (over 800 MB together): the GPU machine's own are used.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$(cd "$1" && pwd)
base=${2:-}
stage=$root/.gpu/stage
rm -rf "$stage" && mkdir -p "$stage/build" "$stage/lib" "$stage/base"
bins=(equiv backend_cuda_test ops_cuda_test fold_cuda_test nccl_transport_test gemm_cuda_bench)
for b in "${bins[@]}"; do [ -x "$build/$b" ] && cp "$build/$b" "$stage/build/"; done
[ -n "$base" ] && cp "$base" "$stage/base/equiv"
# OpenBLAS is opened with dlopen (harness/base/openblas.h), so ldd of the binaries does not show it:
# the file the build found (EQUIV_OPENBLAS_PATH in equiv_config.h, named by its SONAME) goes in with
# the libraries it loads; on the GPU machine equiv finds it by that SONAME on LD_LIBRARY_PATH.
openblas=$(sed -n 's/^#define EQUIV_OPENBLAS_PATH "\(.*\)"$/\1/p' "$build/equiv_config.h")
if [ ! -f "$openblas" ]; then
    echo "gpu-bundle.sh: no OpenBLAS at '$openblas' (EQUIV_OPENBLAS_PATH in $build/equiv_config.h)" >&2
    exit 1
fi
cp -L "$openblas" "$stage/lib/"
# Every library the binaries and OpenBLAS load, except the C library's own, the driver's and the
# ones above.
shopt -s nullglob
for b in "$stage"/build/* "$stage"/base/* "$openblas"; do ldd "$b"; done | awk '/=> \//{print $3}' | sort -u |
    grep -Ev '/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*|libnccl|libcublas[^/]*|libcuda)\.so' |
    while read -r lib; do cp -L "$lib" "$stage/lib/"; done
# Open MPI's runtime, relocated with OPAL_PREFIX: its plugins, orted and help texts.
ompi=/usr/lib/x86_64-linux-gnu/openmpi
if [ -d "$ompi/lib/openmpi3" ]; then
    mkdir -p "$stage/mpi/lib/x86_64-linux-gnu/openmpi/lib" "$stage/mpi/bin" "$stage/mpi/share"
    cp -a "$ompi/lib/openmpi3" "$stage/mpi/lib/x86_64-linux-gnu/openmpi/lib/"
    cp -L /usr/bin/orted "$stage/mpi/bin/" 2>/dev/null || true
    cp -a /usr/share/openmpi "$stage/mpi/share/" 2>/dev/null || true
fi
tar -C "$root/.gpu" -cJf "$root/.gpu/bundle.tar.xz" stage
du -h "$root/.gpu/bundle.tar.xz"
