#!/bin/bash
# `meson install` puts the case files, tolerances and envelopes under <datadir>/equiv, and the
# installed binary, with no EQUIV_HOME, reads them there and not from the source tree it was built
# in. Usage: install_test.sh SOURCE_ROOT BUILD_ROOT
set -u
src=$1 build=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

DESTDIR="$tmp/dest" meson install -C "$build" --no-rebuild --quiet >"$tmp/install.log" 2>&1 ||
    { cat "$tmp/install.log"; fail "meson install --destdir failed"; }
exe=$(find "$tmp/dest" -type f -name equiv -perm -u+x | head -1)
[ -n "$exe" ] || fail "no installed equiv under $tmp/dest"
data=$(dirname "$exe")/../share/equiv
[ -d "$data" ] || data=$(find "$tmp/dest" -type d -path '*/equiv/cases' | head -1 | xargs -r dirname)
[ -d "$data/cases" ] || fail "no installed cases folder"

# Every case file of the source tree is installed (the list in cases/meson.build cannot rot).
for f in "$src"/cases/*.ini; do
    [ -f "$data/cases/$(basename "$f")" ] || fail "$(basename "$f") is not installed"
done
[ -f "$data/golden/tolerances.ini" ] || fail "golden/tolerances.ini is not installed"
for f in "$src"/golden/envelopes/*.json; do
    [ -f "$data/golden/envelopes/$(basename "$f")" ] || fail "envelope $(basename "$f") is not installed"
done

# Moved away from the build tree, the installed binary runs a case from its installed data.
cd "$tmp" || fail "cd"
env -u EQUIV_HOME "$exe" --case row_parallel --tp 2 >"$tmp/run.out" 2>&1 ||
    { cat "$tmp/run.out"; fail "installed binary could not run row_parallel"; }
env -u EQUIV_HOME "$exe" --list >"$tmp/list.out" 2>&1 || fail "--list failed"
grep -q "^  mlp_stack " "$tmp/list.out" || { cat "$tmp/list.out"; fail "--list lacks mlp_stack"; }

# It reads the installed copy, not the source tree: remove one installed case and it is gone.
rm "$data/cases/mlp_stack.ini"
env -u EQUIV_HOME "$exe" --list >"$tmp/list2.out" 2>&1
if grep -q "^  mlp_stack " "$tmp/list2.out"; then fail "--list still shows mlp_stack: the source tree was read"; fi
# And EQUIV_HOME still wins over the installed data.
EQUIV_HOME="$src" "$exe" --list 2>&1 | grep -q "^  mlp_stack " || fail "EQUIV_HOME=$src was not used"
echo "installed data found and used"
