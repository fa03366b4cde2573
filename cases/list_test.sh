#!/usr/bin/env bash
# equiv --list names every algorithm, backend and comm, and what this build lacks as "not built".
#   list_test.sh EQUIV HAVE_MPI HAVE_NCCL HAVE_CUDA   (each 1 or 0: the build's features)
# The names and which comm runs which algorithm are the documented ones (equiv --help, README):
# --algo mpi is MPI's own all-reduce (--comm mpi only), --algo tp_invariant chains the tp ranks in
# one process (--comm sim only), NCCL runs ring, tree and fp32acc (NVLS) only.
set -u
equiv=$1 have_mpi=$2 have_nccl=$3 have_cuda=$4
fail=0
bad() { echo "FAIL: $*"; fail=1; }
out=$("$equiv" --list) || { echo "FAIL: --list exit status $?"; exit 1; }
# section NAME: the lines of the section "NAME:" (its rows, indented, with their continuation lines)
section() { printf '%s\n' "$out" | awk -v s="$1:" '$0 == s { on = 1; next } on && !/^  / { exit } on'; }
# row SECTION NAME: the row of NAME in SECTION, with its continuation line (if any)
row() { section "$1" | awk -v n="$2" '$1 == n && /^  [^ ]/ { on = 1; print; next } on && /^   / { print; next } { on = 0 }'; }

for a in ring tree fp32acc seq mpi tp_invariant; do
    [ -n "$(row algorithms "$a")" ] || bad "--list has no algorithm row '$a'"
done
for b in cpu cuda; do [ -n "$(row backends "$b")" ] || bad "--list has no backend row '$b'"; done
for c in sim mpi nccl; do [ -n "$(row comms "$c")" ] || bad "--list has no comm row '$c'"; done

# which comm runs which algorithm, both ways round
runs() { row comms "$1" | grep -o 'algorithms: [^;]*' | sed 's/^algorithms: //'; }
[ "$(runs sim)" = "ring tree fp32acc seq tp_invariant" ] || bad "sim runs '$(runs sim)'"
[ "$(runs mpi)" = "ring tree fp32acc seq mpi" ] || bad "mpi runs '$(runs mpi)'"
[ "$(runs nccl)" = "ring tree fp32acc" ] || bad "nccl runs '$(runs nccl)'"
comms_of() { row algorithms "$1" | grep -o '(--comm [^)]*)'; }
[ "$(comms_of mpi)" = "(--comm mpi)" ] || bad "algorithm mpi: '$(comms_of mpi)'"
[ "$(comms_of tp_invariant)" = "(--comm sim)" ] || bad "algorithm tp_invariant: '$(comms_of tp_invariant)'"
[ "$(comms_of ring)" = "(--comm sim mpi nccl)" ] || bad "algorithm ring: '$(comms_of ring)'"

# "not built" exactly where the build lacks the feature
built() { # built SECTION NAME WANT(1/0)
    local r
    r=$(row "$1" "$2")
    if [ "$3" = 1 ]; then
        case $r in *"not built"*) bad "$1 $2 is built but --list says: $r" ;; esac
    else
        case $r in *"not built"*) ;; *) bad "$1 $2 is not built but --list says: $r" ;; esac
    fi
}
built comms sim 1
built comms mpi "$have_mpi"
built comms nccl "$have_nccl"
built backends cpu 1
built backends cuda "$have_cuda"
[ "$fail" -eq 0 ] || { printf '%s\n' "$out" | sed -n '/^algorithms:/,$p'; exit 1; }
echo "ok: --list names every algorithm, backend and comm, and what this build lacks"
