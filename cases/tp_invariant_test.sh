#!/usr/bin/env bash
# --algo tp_invariant: every tp rank continues the previous one's fp32 sum over K, so the number of
# tp ranks must not change a bit. For one case and dtype, runs the layouts below under
# tp_invariant and compares every dump with --expect bit_exact:
#   dp1-tp2 and dp1-tp4 against the dp1-tp1 reference, and against each other;
#   dp2-tp2 against dp2-tp1 (the same replicas; the data-parallel reduction is not over tp, so
#   a dp layout is compared with the dp layout of tp 1, not with dp1-tp1).
#   tp_invariant_test.sh EQUIV CASE DTYPE
set -u
equiv=$1 case_name=$2 dtype=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
run() { # run LAYOUT-DIR DP TP: the layout's dumps (reference and layout) into $work/DIR
    if ! "$equiv" run --case "$case_name" --dtype "$dtype" --dp "$2" --tp "$3" --algo tp_invariant \
        --out "$work/$1" >"$work/$1.log" 2>&1; then
        if [ ! -d "$work/$1" ]; then echo "FAIL: run $1 wrote nothing"; cat "$work/$1.log"; exit 1; fi
    fi
}
dump() { # dump DIR LAYOUT: the dump of that layout's run in DIR
    echo "$work/$1/$case_name-$dtype-$2-tp_invariant.h5" # named for the cell, its --algo included
}
same() { # same A B: equiv compare --expect bit_exact must pass
    if "$equiv" compare "$1" "$2" --expect bit_exact >"$work/cmp.log" 2>&1; then
        echo "ok: bit-exact: $(basename "$(dirname "$1")")/$(basename "$1") = $(basename "$(dirname "$2")")/$(basename "$2")"
    else
        echo "FAIL: not bit-exact: $1 vs $2"; grep -E "Where it starts" "$work/cmp.log" | head -2; fail=1
    fi
}
run tp2 1 2
run tp4 1 4
run dp2tp1 2 1
run dp2tp2 2 2
ref=$(dump tp2 dp1-tp1)
same "$ref" "$(dump tp2 dp1-tp2)"
same "$ref" "$(dump tp4 dp1-tp4)"
same "$(dump tp2 dp1-tp2)" "$(dump tp4 dp1-tp4)"
same "$(dump dp2tp1 dp2-tp1)" "$(dump dp2tp2 dp2-tp2)"
exit "$fail"
