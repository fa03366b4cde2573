#!/usr/bin/env bash
# Runs equiv with the given arguments (a --backend cuda run) and passes its exit status on, except
# that a run stopped only because no CUDA device is visible exits 77: meson's skip. So the GPU
# end-to-end tests run where a GPU is and are skipped, not failed, where none is.
#   gpu_or_skip.sh EQUIV ARGS...
set -u
equiv=$1
shift
err=$(mktemp)
trap 'rm -f "$err"' EXIT
"$equiv" "$@" 2>"$err"
status=$?
cat "$err" >&2
if [ "$status" -eq 2 ] && grep -q "no CUDA device" "$err"; then
    echo "skipped: no CUDA device"
    exit 77
fi
exit "$status"
