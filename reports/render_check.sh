#!/bin/sh
# Renders an HTML report with headless Chromium and checks that the screenshot is a non-empty PNG:
# the page (inline CSS and SVG) at least loads and paints in a real browser.
#
#   reports/render_check.sh REPORT.html [OUT.png]
#
# Exit status: 0 rendered, 1 rendering failed or the PNG is empty, 2 usage, 77 skipped (no
# Chromium installed; 77 is what meson and automake read as "skipped").
set -u

if [ $# -lt 1 ] || [ $# -gt 2 ]; then
    echo "usage: $0 REPORT.html [OUT.png]" >&2
    exit 2
fi
html=$1
if [ ! -f "$html" ]; then
    echo "render_check: no such file: $html" >&2
    exit 2
fi
case $html in
    /*) ;;
    *) html=$PWD/$html ;; # Chromium turns an absolute path into a file:// URL, escaped
esac

browser=
for candidate in chromium chromium-browser google-chrome; do
    if command -v "$candidate" >/dev/null 2>&1; then
        browser=$candidate
        break
    fi
done
if [ -z "$browser" ]; then
    echo "render_check: skipped: Chromium is not installed"
    exit 77
fi

scratch=
if [ $# -eq 2 ]; then
    png=$2
else
    scratch=$(mktemp -d "${TMPDIR:-/tmp}/render_check.XXXXXX") || exit 1
    png=$scratch/screenshot.png
fi
rm -f "$png"

# A stuck browser must not hang CI: give it a minute where timeout(1) exists.
limit=
if command -v timeout >/dev/null 2>&1; then limit="timeout 60"; fi
$limit "$browser" --headless --disable-gpu --no-sandbox --screenshot="$png" --window-size=1400,2000 \
    "$html" >/dev/null 2>&1
status=$?

result=0
if [ ! -s "$png" ]; then
    echo "render_check: $browser wrote no screenshot of $html (exit $status)" >&2
    result=1
elif [ "$(head -c 4 "$png" | tail -c 3)" != "PNG" ]; then
    echo "render_check: $png is not a PNG" >&2
    result=1
else
    where=" in $png"
    if [ -n "$scratch" ]; then where=" (discarded)"; fi
    echo "render_check: $html rendered: $(wc -c <"$png") bytes of PNG$where"
fi
if [ -n "$scratch" ]; then rm -rf "$scratch"; fi
exit $result
