#!/usr/bin/env bash
# expect_error.sh catches each broken promise: a stand-in for equiv that breaks one (exit status 1,
# two lines, no newline, no 'equiv: error: ' prefix, another message, output on stdout, a file left
# in the output folder) must fail its kind, a kind that keeps them all must pass, and a failing
# kind fails the run though a passing one follows. A NAME=VALUE prefix reaches that run only.
#   expect_error_selftest.sh EXPECT_ERROR
set -u
expect_error=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/equiv" <<'FAKE'
#!/usr/bin/env bash
case $1 in
keeps) echo "equiv: error: the bad thing" >&2; exit 2 ;;
status1) echo "equiv: error: the bad thing" >&2; exit 1 ;;
two_lines) printf 'equiv: error: the bad thing\nand more\n' >&2; exit 2 ;;
no_newline) printf 'equiv: error: the bad thing' >&2; exit 2 ;;
no_prefix) echo "error: the bad thing" >&2; exit 2 ;;
stdout) echo "a report"; echo "equiv: error: the bad thing" >&2; exit 2 ;;
file_left) touch "$2/.partial"; echo "equiv: error: the bad thing" >&2; exit 2 ;;
env_seen) [ "${EQ_SELFTEST_VAR:-}" = "a b" ] && { echo "equiv: error: the bad thing" >&2; exit 2; }
          echo "equiv: error: no EQ_SELFTEST_VAR" >&2; exit 2 ;;
esac
FAKE
chmod +x "$work/equiv"
fail=0
bash "$expect_error" "$work/equiv" keeps "the bad thing" -- keeps @OUT@ >/dev/null || { echo "FAIL: a kept promise failed"; fail=1; }
for broken in status1 two_lines no_newline no_prefix stdout file_left; do
    if bash "$expect_error" "$work/equiv" "$broken" "the bad thing" -- "$broken" @OUT@ >"$work/log"; then
        echo "FAIL: $broken passed"; fail=1
    else
        echo "ok: $broken caught: $(grep '^FAIL: '"$broken" "$work/log")"
    fi
done
bash "$expect_error" "$work/equiv" wrong "another message" -- keeps ';' right "the bad thing" -- keeps >/dev/null &&
    { echo "FAIL: a wrong message followed by a right one passed"; fail=1; }
bash "$expect_error" "$work/equiv" env "the bad thing" -- "EQ_SELFTEST_VAR=a b" env_seen @OUT@ >/dev/null ||
    { echo "FAIL: a NAME=VALUE prefix did not reach the run"; fail=1; }
bash "$expect_error" "$work/equiv" env "the bad thing" -- "EQ_SELFTEST_VAR=a b" keeps ';' without "the bad thing" -- \
    env_seen @OUT@ >/dev/null && { echo "FAIL: a NAME=VALUE prefix reached the next kind"; fail=1; }
exit $fail
