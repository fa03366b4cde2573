#!/usr/bin/env bash
# Runs equiv on bad inputs and checks the promise made for each: exit status 2, exactly one line on
# standard error ("equiv: error: ... MESSAGE-PART ..."), nothing on standard output, and no file
# left in its output folder.
#   expect_error.sh EQUIV KIND MESSAGE-PART -- ARGS... [';' KIND MESSAGE-PART -- ARGS...]...
# ARGS may use @OUT@ for a fresh, empty folder and @WORK@ for a scratch folder, and may start with
# NAME=VALUE words, set in the environment of that run only (as a shell's prefix). Each kind gets an
# 'ok: KIND: the line' or 'FAIL: KIND: why' line; every kind is run, also after a failure. Exit
# status 1 if any failed, 2 for a kind without its '--'. The checks use bash itself, not a process
# each: many kinds are run in one test (cases/bad_input/meson.build).
set -u
shopt -s nullglob dotglob
equiv=$1
shift
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=0 n=0

check_one() { # KIND PART ARGS...
    local kind=$1 part=$2
    shift 2
    n=$((n + 1))
    local out="$work/out$n" scratch="$work/work$n" a args=() why=() envs=()
    mkdir "$out" "$scratch"
    while [ $# -gt 0 ] && [[ $1 =~ ^[A-Za-z_][A-Za-z0-9_]*= ]]; do
        envs+=("$1")
        shift
    done
    for a in "$@"; do
        a=${a//@OUT@/$out}
        args+=("${a//@WORK@/$scratch}")
    done
    if [ ${#envs[@]} -eq 0 ]; then "$equiv" "${args[@]}" >"$work/stdout" 2>"$work/stderr"
    else env "${envs[@]}" "$equiv" "${args[@]}" >"$work/stdout" 2>"$work/stderr"; fi
    local status=$? err="" newlines lines left
    IFS= read -r -d '' err <"$work/stderr"
    newlines=${err//[!$'\n']/}
    mapfile -t lines <"$work/stderr"
    left=("$out"/*)
    [ "$status" -eq 2 ] || why+=("exit status $status, want 2")
    [ "${#newlines}" -eq 1 ] && [[ "$err" == *$'\n' ]] ||
        why+=("stderr has ${#newlines} lines, want 1 ended by a newline: $(printf '%s | ' "${lines[@]}")")
    [[ "${lines[0]:-}" == "equiv: error: "* ]] || why+=("stderr does not start with 'equiv: error: '")
    [[ "${lines[*]}" == *"$part"* ]] || why+=("stderr lacks '$part': ${lines[*]}")
    [ -s "$work/stdout" ] && why+=("stdout not empty: $(head -c 300 "$work/stdout")")
    [ "${#left[@]}" -eq 0 ] || why+=("files left behind: ${left[*]:0:5}")
    if [ "${#why[@]}" -eq 0 ]; then
        echo "ok: $kind: ${lines[0]}"
    else
        printf 'FAIL: %s: %s\n' "$kind" "${why[@]}"
        failed=1
    fi
}

kase=()
for arg in "$@" ';'; do
    if [ "$arg" != ';' ]; then kase+=("$arg"); continue; fi
    [ ${#kase[@]} -eq 0 ] && continue
    if [ ${#kase[@]} -lt 3 ] || [ "${kase[2]}" != -- ]; then
        echo "expect_error.sh: a kind is KIND MESSAGE-PART -- ARGS... (got: ${kase[*]})"
        exit 2
    fi
    check_one "${kase[0]}" "${kase[1]}" "${kase[@]:3}"
    kase=()
done
if [ "$failed" -eq 0 ]; then echo "ok: $n bad inputs, each refused as promised"
else echo "FAIL: of $n bad inputs, those above were not refused as promised"; fi
exit "$failed"
