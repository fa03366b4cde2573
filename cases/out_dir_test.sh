#!/usr/bin/env bash
# --out is written all or nothing (harness/driver/out_dir.h). Parts:
#   full       a run whose files do not fit (a file-size limit stands in for a full disk) fails with
#              one line and leaves nothing: not the dumps written before the failure, no temporary,
#              not the missing parents of --out it made
#   fsize      the same under `ulimit -f` as a shell sets it, SIGXFSZ not ignored: the write fails
#              (equiv ignores the signal), one line, exit 2, nothing on stdout, nothing left
#   reports    compare --out and diff --out whose files do not fit (ulimit -f 0): one line, exit 2,
#              no report on stdout (it is printed only once --out is written), nothing left
#   phase_times EQUIV_PHASE_TIMES=/dev/full, the phase table unwritable: one line, exit 2, no report
#              on stdout, nothing in --out (the table is written before the report and --out)
#   signal     SIGTERM and SIGINT during a run remove everything the run had written, the missing
#              parents of --out it made included
#   parents    an --out under missing folders is made with them (mkdir -p)
#   stale      private folders and temporary files of dead runs are removed by the next run
#   symlink    a symlink planted at an output name is replaced, never followed
#   concurrent two runs into one --out at once leave one whole report set
#   keep       a failing rerun leaves the earlier run's files as they were
#   early      an --out that cannot be made (under a plain file) fails at once, before any run
#   out_dir_test.sh EQUIV PART [TESTDATA_DUMP GOOD_REPORT]   (reports: a dump and a report to diff)
set -u
equiv=$1 part=$2 dump=${3:-} report=${4:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
empty() { [ -z "$(ls -A "$1")" ] || fail "$1 is not empty: $(ls -A "$1" | head -5 | tr '\n' ' ')"; }
out="$work/out"
mkdir "$out"

case $part in
full)
    # 200 KB per file: row_parallel's bf16 dumps (120 KB) fit, its fp32 dumps (232 KB) do not
    (ulimit -f 200; trap '' XFSZ; exec "$equiv" --case row_parallel --tp 2 --out "$out/new/run") >/dev/null 2>"$work/err"
    status=$?
    [ "$status" -eq 2 ] || fail "exit status $status, want 2"
    [ "$(wc -l <"$work/err")" -eq 1 ] || fail "stderr: $(cat "$work/err")"
    grep -q "File too large\|No space" "$work/err" || fail "stderr does not say why: $(cat "$work/err")"
    empty "$out"
    ;;
fsize)
    # gpt's bf16 dumps are about 0.5 MB: the first one does not fit in 100 KB
    (ulimit -f 100; exec "$equiv" --case gpt --dp 2 --tp 2 --out "$out/new/run") >"$work/stdout" 2>"$work/err"
    status=$?
    [ "$status" -eq 2 ] || fail "exit status $status, want 2 (153: ended by SIGXFSZ)"
    [ "$(wc -l <"$work/err")" -eq 1 ] || fail "stderr: $(cat "$work/err")"
    grep -q "^equiv: error: .*File too large" "$work/err" || fail "stderr does not say why: $(cat "$work/err")"
    [ ! -s "$work/stdout" ] || fail "printed a report before failing"
    empty "$out"
    ;;
reports)
    # Under `ulimit -f 0` no file can be written; standard output and error go through pipes
    # (`cat`, outside the limit) so that they can. pipefail: the status is equiv's.
    set -o pipefail
    for cmd in "compare $dump $dump" "diff $report $report"; do
        # shellcheck disable=SC2086
        ( (ulimit -f 0; exec "$equiv" $cmd --out "$out/new") 2>&1 1>&3 | cat >"$work/err") 3>&1 |
            cat >"$work/stdout"
        status=$?
        [ "$status" -eq 2 ] || fail "${cmd%% *}: exit status $status, want 2"
        [ "$(wc -l <"$work/err")" -eq 1 ] || fail "${cmd%% *}: stderr: $(cat "$work/err")"
        [ ! -s "$work/stdout" ] || fail "${cmd%% *}: printed its report, then failed: $(head -c 200 "$work/stdout")"
        empty "$out"
    done
    ;;
phase_times)
    for cmd in "--case row_parallel --tp 2 --out $out/new" "compare $dump $dump"; do
        # shellcheck disable=SC2086
        EQUIV_PHASE_TIMES=/dev/full "$equiv" $cmd >"$work/stdout" 2>"$work/err"
        status=$?
        [ "$status" -eq 2 ] || fail "$cmd: exit status $status, want 2"
        [ "$(wc -l <"$work/err")" -eq 1 ] && grep -q "EQUIV_PHASE_TIMES" "$work/err" ||
            fail "$cmd: stderr: $(cat "$work/err")"
        [ ! -s "$work/stdout" ] || fail "$cmd: printed its report, then failed: $(head -c 200 "$work/stdout")"
        empty "$out"
    done
    ;;
signal)
    set -m # background jobs keep SIGINT (without job control bash starts them with it ignored)
    for sig in TERM INT; do
        "$equiv" --case gpt --size docs --forward-only --tp 2 --out "$out/new/run" >/dev/null 2>&1 &
        pid=$!
        for _ in $(seq 100); do
            [ -n "$(ls -A "$out")" ] && break
            sleep 0.1
        done
        [ -n "$(ls -A "$out")" ] || fail "SIG$sig: the run made no private folder"
        sleep 0.3 # into the reference's first layers (what it wrote so far: its private folder)
        kill -s "$sig" "$pid"
        wait "$pid"
        status=$?
        [ "$status" -gt 128 ] || fail "SIG$sig: exit status $status, want death by the signal"
        empty "$out"
    done
    ;;
stale)
    sleep 0 & dead=$!
    wait "$dead"
    host=$(hostname | tr -c 'A-Za-z0-9\n' '-' | cut -c1-64)
    mkdir "$out/.equiv-tmp.$dead.$host.AbC123"
    echo partial >"$out/.equiv-tmp.$dead.$host.AbC123/gpt-bf16-dp1-tp1.h5"
    echo partial >"$out/.report.md.tmp.$dead"
    mkdir "$out/.equiv-tmp.$$.$host.Live12" # a live process's: kept
    "$equiv" --case row_parallel --tp 2 --dtype fp32 --out "$out" >/dev/null || fail "run failed"
    [ ! -e "$out/.equiv-tmp.$dead.$host.AbC123" ] || fail "a dead run's private folder was kept"
    [ ! -e "$out/.report.md.tmp.$dead" ] || fail "a dead run's temporary file was kept"
    [ -d "$out/.equiv-tmp.$$.$host.Live12" ] || fail "a live run's private folder was removed"
    [ -f "$out/report.md" ] || fail "no report"
    ;;
symlink)
    echo "outside" >"$work/outside.txt"
    ln -s "$work/outside.txt" "$out/report.md"
    ln -s "$work/outside.h5" "$out/row_parallel-fp32-dp1-tp2.h5"
    "$equiv" --case row_parallel --tp 2 --dtype fp32 --out "$out" >/dev/null || fail "run failed"
    [ "$(cat "$work/outside.txt")" = "outside" ] || fail "the run wrote through a symlink"
    [ ! -e "$work/outside.h5" ] || fail "the run created a file through a symlink"
    [ -f "$out/report.md" ] && [ ! -L "$out/report.md" ] || fail "report.md is not a plain file"
    ;;
concurrent)
    for i in 1 2 3 4 5; do
        "$equiv" --case row_parallel --tp 2 --dtype fp32 --out "$out" >/dev/null &
        "$equiv" --case row_parallel --tp 4 --dtype fp32 --out "$out" >/dev/null &
        wait
        md=$(grep -o 'dp1-tp[24]' "$out/report.md" | sort -u | tr '\n' ' ')
        json=$(grep -o '"tp": [24]' "$out/report.json" | sort -u | tr -d '"' | tr '\n' ' ')
        html=$(grep -o 'dp1-tp[24]' "$out/report.html" | sort -u | tr '\n' ' ')
        echo "round $i: md [$md] json [$json] html [$html]"
        [ "${md#dp1-tp}" = "${json#tp: }" ] && [ "$md" = "$html" ] || fail "the report set is mixed"
        [ -z "$(ls -A "$out" | grep '^\.')" ] || fail "temporaries left: $(ls -A "$out" | grep '^\.')"
    done
    ;;
keep)
    "$equiv" --case row_parallel --tp 2 --dtype fp32 --out "$out" >/dev/null || fail "first run failed"
    (cd "$out" && sha256sum ./* >"$work/before")
    "$equiv" --case row_parallel --tp 2 --dtype fp32 --tolerances "$work/none.ini" --out "$out" >/dev/null 2>&1
    [ $? -eq 2 ] || fail "the rerun did not fail"
    (cd "$out" && sha256sum ./* >"$work/after")
    cmp -s "$work/before" "$work/after" || fail "the failed rerun changed the files"
    [ -z "$(ls -A "$out" | grep '^\.')" ] || fail "temporaries left"
    ;;
parents)
    "$equiv" --case row_parallel --tp 2 --dtype fp32 --out "$out/a/b/" >/dev/null || fail "run failed"
    [ -f "$out/a/b/report.md" ] && [ -f "$out/a/b/row_parallel-fp32-dp1-tp2.h5" ] || fail "no report or dump in $out/a/b"
    ;;
early)
    # A folder under a plain file: one line, exit 2, and no cell was computed first (matrix
    # prints nothing on stdout; the gpt docs cell alone would take minutes).
    echo "not a folder" >"$work/plain"
    for cmd in "--case gpt --size docs --forward-only --tp 2" "matrix"; do
        # shellcheck disable=SC2086
        "$equiv" $cmd --out "$work/plain/out" >"$work/stdout" 2>"$work/err"
        status=$?
        [ "$status" -eq 2 ] || fail "$cmd: exit status $status, want 2"
        [ "$(wc -l <"$work/err")" -eq 1 ] || fail "$cmd: stderr: $(cat "$work/err")"
        grep -q "plain/out" "$work/err" || fail "$cmd: stderr does not name the folder: $(cat "$work/err")"
        [ ! -s "$work/stdout" ] || fail "$cmd: printed a report before failing"
    done
    ;;
*) fail "unknown part $part" ;;
esac
echo "ok: $part"
