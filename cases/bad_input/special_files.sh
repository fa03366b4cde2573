#!/usr/bin/env bash
# Runs expect_error.sh with placeholders in its arguments standing for files a repository cannot
# hold: @MANY@ a folder of 65 copies of a case (more than `equiv list` and `equiv matrix` take),
# @FIFO@ a FIFO no one writes to (opening it for reading would wait for ever), @FIFO_CASES@ a
# cases folder whose fifo.ini is such a FIFO.
#   special_files.sh EXPECT_ERROR CASE_FILE EQUIV KIND MESSAGE-PART -- ARGS...
set -u
expect_error=$1 kase=$2
shift 2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/many" "$tmp/fifo_cases"
for i in $(seq -w 1 65); do cp "$kase" "$tmp/many/case_$i.ini"; done
mkfifo "$tmp/fifo" "$tmp/fifo_cases/fifo.ini"
args=()
for a in "$@"; do
    a=${a//@MANY@/$tmp/many}
    a=${a//@FIFO_CASES@/$tmp/fifo_cases}
    args+=("${a//@FIFO@/$tmp/fifo}")
done
timeout 60 bash "$expect_error" "${args[@]}"
