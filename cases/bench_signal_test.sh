#!/usr/bin/env bash
# `equiv bench` stopped by SIGTERM or SIGINT sent to its pid alone (what `timeout` does): the
# running workload's child stops too, the bench's scratch folder under $TMPDIR and its --out are
# removed, and the bench ends by the signal. Before, the child ran on and could leave hundreds of
# MB in $TMPDIR/equiv-bench.*.
#   bench_signal_test.sh EQUIV
set -u
equiv=${1:?usage: bench_signal_test.sh EQUIV}
work=$(mktemp -d)
child=""
trap '[ -n "$child" ] && kill -KILL "$child" 2>/dev/null; rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
set -m # background jobs keep SIGINT (without job control bash starts them with it ignored)
mkdir "$work/tmp"
for sig in TERM INT; do
    # gpt_docs_fwd runs for minutes: it is still running when the signal comes
    TMPDIR="$work/tmp" "$equiv" bench --only gpt_docs_fwd --out "$work/out" >/dev/null 2>&1 &
    pid=$!
    child=""
    for _ in $(seq 600); do # the SGEMM peak comes first (seconds), then the workload's child
        child=$(pgrep -P "$pid" | head -n 1)
        [ -n "$child" ] && break
        sleep 0.1
    done
    [ -n "$child" ] || { kill -KILL "$pid"; fail "SIG$sig: no workload started within 60 s"; }
    sleep 1 # into the workload: its --out and private folder are in the scratch folder
    kill -s "$sig" "$pid"
    wait "$pid"
    status=$?
    [ "$status" -eq $((128 + $(kill -l "$sig"))) ] || fail "SIG$sig: exit status $status, want death by the signal"
    for _ in $(seq 20); do # a child still running is a failure; give one that is ending a moment
        kill -0 "$child" 2>/dev/null || break
        sleep 0.1
    done
    kill -0 "$child" 2>/dev/null && fail "SIG$sig: the workload's equiv (pid $child) still runs"
    child=""
    [ -z "$(ls -A "$work/tmp")" ] || fail "SIG$sig: left in TMPDIR: $(ls -A "$work/tmp")"
    [ ! -e "$work/out" ] || fail "SIG$sig: --out left behind: $(ls -A "$work/out")"
    echo "ok: SIG$sig"
done
