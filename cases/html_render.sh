#!/usr/bin/env bash
# The HTML report of a real run renders in headless Chromium (reports/render_check.sh; skipped,
# exit 77, where Chromium is not installed).
#   html_render.sh EQUIV RENDER_CHECK
set -u
equiv=$1 render=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$equiv" --case gpt --dp 2 --tp 2 --out "$work/run" >/dev/null || exit 1
bash "$render" "$work/run/report.html" "$work/report.png"
