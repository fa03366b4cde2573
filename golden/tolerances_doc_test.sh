#!/usr/bin/env bash
# Every entry of golden/tolerances.ini has its section in golden/README.md, a heading
# "### `NAME`", and that section quotes the entry's numbers as the table holds them
# ("atol = 1e-3", "rtol = 1e-3", and "scale = ref_rms" where the entry sets it), so the page a
# reader has cannot drift from the table equiv reads. A section for an entry the table no longer
# has fails too.
#
#   golden/tolerances_doc_test.sh TOLERANCES_INI README_MD
set -uo pipefail
ini=${1:?usage: tolerances_doc_test.sh TOLERANCES_INI README_MD}
doc=${2:?usage: tolerances_doc_test.sh TOLERANCES_INI README_MD}
fail=0
bad() { echo "FAIL: $*"; fail=1; }

# The section of README_MD under "### `NAME`", up to the next heading of level 1 to 3.
section() {
    awk -v head="### \`$1\`" '
        $0 == head { inside = 1; next }
        inside && /^#{1,3} / { exit }
        inside { print }
    ' "$doc"
}

# NAME<TAB>KEY<TAB>VALUE for atol, rtol and scale of every entry (inih's syntax: "key = value").
entries=$(awk '
    /^[ \t]*[;#]/ { next }
    /^\[[^]]+\]/ { name = $0; sub(/^\[/, "", name); sub(/\].*$/, "", name); print name "\t-\t-"; next }
    name != "" && /=/ {
        key = $0; sub(/=.*/, "", key); gsub(/[ \t]/, "", key)
        value = $0; sub(/^[^=]*=[ \t]*/, "", value); sub(/[ \t]+$/, "", value)
        if (key == "atol" || key == "rtol" || key == "scale") print name "\t" key "\t" value
    }
' "$ini")
[ -n "$entries" ] || { echo "FAIL: no entry in $ini"; exit 1; }

n=0
while IFS=$'\t' read -r name key value; do
    text=$(section "$name")
    if [ "$key" = - ]; then
        n=$((n + 1))
        [ -n "$text" ] || bad "$ini has [$name]; $doc has no section '### \`$name\`' (or an empty one)"
        continue
    fi
    [ -n "$text" ] || continue
    grep -qF -- "$key = $value" <<<"$text" || bad "$doc, section $name: does not quote '$key = $value' from $ini"
done <<<"$entries"

# Sections for entries that are gone.
while read -r heading; do
    name=${heading#'### `'}
    name=${name%'`'}
    grep -q "^\[$name\]" "$ini" || bad "$doc has a section for '$name', which $ini does not have"
done < <(grep -E '^### `[A-Za-z0-9_.-]+`$' "$doc")

[ "$fail" -eq 0 ] && echo "ok: $n entries of $ini, each with its section and numbers in $doc"
exit "$fail"
