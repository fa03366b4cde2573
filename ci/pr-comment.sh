#!/usr/bin/env bash
# The pull-request check: runs the equiv matrix on the base and the head commit (each built in its
# own git worktree) and writes the PR comment: what the change did to every layer's divergence.
#
#   ci/pr-comment.sh BASE_REF [HEAD_REF] [OUT_DIR]
#
# OUT_DIR (default pr-comment/) gets base/ and head/ (matrix.md, matrix.json, matrix.html,
# report.json) and comment.md, ready to post. Exit status: 0 no regression, 1 a regression
# (a new failure, a layer whose divergence grew, a tensor no longer bit-exact), 2 an error.
set -uo pipefail
base_ref=${1:?usage: ci/pr-comment.sh BASE_REF [HEAD_REF] [OUT_DIR]}
head_ref=${2:-HEAD}
root=$(git rev-parse --show-toplevel) || exit 2
out=$(realpath -m "${3:-pr-comment}")
work=$(mktemp -d)
cleanup() {
    for side in base head; do git -C "$root" worktree remove --force "$work/$side" >/dev/null 2>&1; done
    rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$out"

run_side() { # run_side NAME REF
    local side=$1 ref=$2 tree="$work/$1"
    git -C "$root" worktree add --detach "$tree" "$ref" >/dev/null 2>&1 || { echo "cannot check out $ref" >&2; return 2; }
    (cd "$tree" && meson setup build >/dev/null && ninja -C build equiv >/dev/null) || { echo "$ref does not build" >&2; return 2; }
    rm -rf "${out:?}/$side"
    echo "equiv: matrix at $side ($ref: $(git -C "$tree" rev-parse --short HEAD))" >&2
    # A cell not as expected is the matrix's exit 1; the diff below judges the change, so go on.
    EQUIV_HOME="$tree" "$tree/build/equiv" matrix -v --out "$out/$side"   # -v: progress lines in the CI log
    local status=$?
    [ "$status" -le 1 ] || return 2
}

run_side base "$base_ref" || exit 2
run_side head "$head_ref" || exit 2
"$work/head/build/equiv" diff "$out/base/report.json" "$out/head/report.json" >"$out/comment.md"
status=$?
echo "equiv: PR comment in $out/comment.md (diff exit $status)" >&2
exit "$status"
