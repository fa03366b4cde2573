#!/usr/bin/env bash
# tolerances_doc_test.sh must fail on what it exists to catch: an entry without its section, a
# number changed in the table but not on the page, a section for an entry that is gone.
#
#   golden/tolerances_doc_selftest.sh TOLERANCES_DOC_TEST TOLERANCES_INI README_MD
set -uo pipefail
check=${1:?usage: tolerances_doc_selftest.sh TOLERANCES_DOC_TEST TOLERANCES_INI README_MD}
ini=${2:?}
doc=${3:?}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0

expect_fail() { # expect_fail WHAT WANT_TEXT INI DOC
    if bash "$check" "$3" "$4" >"$work/out" 2>&1; then
        echo "FAIL: $1: passed"; fail=1
    elif ! grep -qF -- "$2" "$work/out"; then
        echo "FAIL: $1: output lacks '$2':"; cat "$work/out"; fail=1
    else
        echo "ok: $1: $(head -n 1 "$work/out")"
    fi
}

bash "$check" "$ini" "$doc" >"$work/out" 2>&1 || { echo "FAIL: the real files fail:"; cat "$work/out"; fail=1; }
printf '%s\n' '[new_entry]' 'atol = 1' 'rtol = 0' 'source = x' | cat "$ini" - >"$work/extra.ini"
expect_fail "an entry without a section" "no section '### \`new_entry\`'" "$work/extra.ini" "$doc"
sed '/^\[fp32_1_layer\]/,/^\[/ s/^atol = 1e-3$/atol = 2e-3/' "$ini" >"$work/changed.ini"
grep -q '^atol = 2e-3$' "$work/changed.ini" || { echo "FAIL: could not plant a changed atol"; fail=1; }
expect_fail "a changed atol" "does not quote 'atol = 2e-3'" "$work/changed.ini" "$doc"
sed '/^\[default_fp64\]/,$d' "$ini" >"$work/fewer.ini"
expect_fail "a section for a removed entry" "section for 'default_fp64'" "$work/fewer.ini" "$doc"
exit "$fail"
