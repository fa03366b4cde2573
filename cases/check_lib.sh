# Sourced by the end-to-end tests that check exit statuses: a scratch folder removed on exit
# ($work), the running verdict ($fail) and check().
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
check() { # check DESCRIPTION WANT_STATUS COMMAND...: COMMAND's output in $work/stdout, $work/stderr
    local what=$1 want=$2
    shift 2
    "$@" >"$work/stdout" 2>"$work/stderr"
    local got=$?
    if [ "$got" -ne "$want" ]; then
        echo "FAIL: $what: exit $got, want $want"; cat "$work/stderr"; fail=1
    else
        echo "ok: $what (exit $got)"
    fi
}
