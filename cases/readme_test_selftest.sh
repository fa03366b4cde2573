#!/usr/bin/env bash
# readme_test.sh must fail where README.md would fail a newcomer: small READMEs, each with one
# planted fault, must fail it naming the README line; a clean one must pass.
#
#   cases/readme_test_selftest.sh README_TEST EQUIV_BINARY
set -uo pipefail
readme_test=${1:?usage: readme_test_selftest.sh README_TEST EQUIV_BINARY}
exe=${2:?usage: readme_test_selftest.sh README_TEST EQUIV_BINARY}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0

# check NAME WANT_STATUS WANT_TEXT README_BODY: runs readme_test.sh on a source tree holding the
# README only (cases/ and golden/ are not needed by ./equiv --list's error path or by true/false).
check() {
    local name=$1 want=$2 text=$3 body=$4 src="$work/$1"
    mkdir -p "$src"
    printf '%s\n' "$body" >"$src/README.md"
    bash "$readme_test" "$src" "$exe" >"$work/$name.out" 2>&1
    local got=$?
    if [ "$got" -ne "$want" ] || ! grep -qF -- "$text" "$work/$name.out"; then
        echo "FAIL: $name: status $got (want $want), output lacks '$text':"
        cat "$work/$name.out"
        fail=1
    else
        echo "ok: $name: $(tail -n 1 "$work/$name.out")"
    fi
}

fence='```'
check clean 0 "3 README commands ran in order" "# t
$fence sh
true                     # a comment
# a comment line alone
false                    # exit 1: a planted failure, as README says
./equiv --case x --size docs   # [docs size]
ci/test
$fence
$fence python
print('ran')
$fence"
check failing_command 1 "README.md:4: 'false' ended with status 1, README says 0" "# t
$fence sh
true
false
true
$fence"
check wrong_exit 1 "README.md:2: 'true   # exit 1: should fail' ended with status 0, README says 1" "$fence sh
true   # exit 1: should fail
$fence"
check untagged_docs 1 "needs the tag [docs size]" "$fence sh
./equiv --case gpt --size docs
$fence"
check untagged_gpu 1 "needs the tag [gpu]" "$fence sh
./equiv --case gpt --backend cuda   # [docs size]
$fence"
check untagged_mpi 1 "needs the tag [mpi] or [slurm]" "$fence sh
mpirun -np 4 ./build/equiv --case gpt --tp 4 --comm mpi
$fence"
check continued_line 1 "README.md:2: 'true &&  false'" "$fence sh
true && \\
false
$fence"
if [ -x /usr/bin/python3 ]; then
    check failing_python 1 "README.md:5: the python block failed" "$fence sh
true
$fence
$fence python
raise SystemExit(3)
$fence"
fi
check fragment 0 "1 README commands ran in order" "$fence python
undefined_name()   # [fragment]
$fence
$fence sh
./equiv --list > /dev/null || true
$fence"
exit $fail
