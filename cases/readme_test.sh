#!/usr/bin/env bash
# README.md's commands, top to bottom, as a newcomer on a fresh clone runs them.
#
#   cases/readme_test.sh SOURCE_ROOT EQUIV_BINARY
#
# Every ```sh block of README.md is read line by line (a line ending in '\' goes on with the next;
# lines that are only a comment are skipped) and every ```python block is one program; they run in
# README's order, in a copy of the source tree (the files git tracks, and untracked ones it does
# not ignore), with the built EQUIV_BINARY standing in for `./equiv` and `./build/equiv` (nothing
# is built, nothing installed) and /usr/bin/python3 for `python3`. The first command that fails
# ends its lane, named with its README line, its status and its output.
#
# Two lanes at once, each in a copy of its own, each running its commands in README's order: a
# section marked `<!-- readme_test: lane 2 -->` (an HTML comment, unseen on the rendered page)
# goes to lane 2, every other one to lane 1. Mark only a section whose commands need nothing an
# earlier section made (files under runs/, say) and leave nothing a later one needs: its commands
# would fail in lane 2's copy, so a wrong mark shows on the first run.
#
# Marker convention, in README.md:
#   - A sh line whose trailing comment holds one of these tags is not run:
#       [gpu]        needs a CUDA device (--backend cuda, --comm nccl)
#       [mpi]        needs mpirun with as many slots as ranks
#       [slurm]      needs a Slurm cluster
#       [docs size]  runs the source documents' shapes (--size docs): minutes, not seconds
#     A line that uses one of those things without its tag fails the test, so that a new command
#     cannot slip past the tags.
#   - A sh line whose trailing comment says `exit N` must end with status N (a planted bug: 1);
#     every other command must end with 0.
#   - A python block holding the tag [fragment] (a piece of someone's script, not a program) is
#     not run.
#   - Skipped by name, because they install packages or build: ci/install-deps, ci/test,
#     ci/pr-comment.sh (it builds base and head in worktrees; cases/diff_test.sh covers the diff).
#   - torchrun lines are skipped, with the reason, where torchrun cannot start a one-process job.
set -uo pipefail
src=${1:?usage: readme_test.sh SOURCE_ROOT EQUIV_BINARY}
exe=$(realpath "${2:?usage: readme_test.sh SOURCE_ROOT EQUIV_BINARY}")
readme="$src/README.md"
[ -f "$readme" ] || { echo "FAIL: no $readme"; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The copy: what a clone of this tree holds (lane 1's; lane 2's is a copy of it).
repo="$work/repo1"
mkdir -p "$repo"
if git -C "$src" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    # tar keeps symlinks as links (cases/bad_input holds one to /dev/zero); a deleted file is left out
    (cd "$src" && git ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' f; do
        if [ -e "$f" ] || [ -L "$f" ]; then printf "%s\0" "$f"; fi
    done | tar --null --no-recursion -T - -cf -) | tar -C "$repo" -xf - || { echo "FAIL: cannot copy $src"; exit 1; }
else
    (cd "$src" && tar --exclude='./build*' --exclude='./.git' -cf - .) | tar -C "$repo" -xf - ||
        { echo "FAIL: cannot copy $src"; exit 1; }
fi
# ./equiv and ./build/equiv are the binary already built; python3 is the one with numpy, h5py, torch.
mkdir -p "$work/bin"
[ -x /usr/bin/python3 ] && ln -s /usr/bin/python3 "$work/bin/python3"
export PATH="$work/bin:$PATH"
cp -a "$repo" "$work/repo2"
for lane in 1 2; do
    copy="$work/repo$lane"
    printf '#!/usr/bin/env bash\nexport EQUIV_HOME="%s"\nexec "%s" "$@"\n' "$copy" "$exe" >"$copy/equiv"
    chmod +x "$copy/equiv"
    mkdir -p "$copy/build"
    ln -s "$exe" "$copy/build/equiv"
done

# README.md -> $work/commands: one record per command, "LANE<TAB>sh<TAB>LINE<TAB>TEXT" or
# "LANE<TAB>py<TAB>LINE<TAB>FILE".
awk -v dir="$work" '
    function emit(rec) { print lane "\t" rec }
    function flush_sh() { if (pending != "") emit("sh\t" start "\t" pending); pending = "" }
    BEGIN { lane = 1 }
    !inside && /^## / { lane = 1 }
    !inside && /^<!-- readme_test: lane 2 -->/ { lane = 2 }
    /^[ \t]*```/ {
        if (!inside) {
            lang = $0; sub(/^[ \t]*```[ \t]*/, "", lang); sub(/[ \t].*$/, "", lang)
            inside = 1
            if (lang == "python") { nblock++; file = dir "/block" nblock ".py"; printf "" >file; pystart = NR + 1 }
            next
        }
        flush_sh()
        if (lang == "python") { close(file); emit("py\t" pystart "\t" file) }
        inside = 0; lang = ""; next
    }
    inside && lang == "python" { print >file; next }
    inside && (lang == "sh" || lang == "bash") {
        line = $0
        if (pending == "") {
            if (line ~ /^[ \t]*(#|$)/) next
            start = NR
        }
        if (line ~ /\\$/) { sub(/\\$/, "", line); pending = pending line " "; next }
        pending = pending line
        flush_sh()
    }
' "$readme" >"$work/commands"

n_run=0 n_skipped=0
skip() { n_skipped=$((n_skipped + 1)); echo "skip  README.md:$1 ($2): $3"; }
fail() { echo "FAIL: README.md:$1: $2"; exit 1; }

# run_lane LANE: that lane's commands in its own copy; its last line "RUN SKIPPED" (or a FAIL line).
run_lane() (
lane=$1
repo="$work/repo$lane"
export EQUIV_HOME="$repo"
while IFS=$'\t' read -r cmd_lane kind line text; do
    [ "$cmd_lane" = "$lane" ] || continue
    if [ "$kind" = py ]; then
        if grep -q '\[fragment\]' "$text"; then skip "$line" "a fragment" "python block"; continue; fi
        [ -x /usr/bin/python3 ] || { skip "$line" "no /usr/bin/python3" "python block"; continue; }
        if ! (cd "$repo" && timeout 120 /usr/bin/python3 "$text") </dev/null >"$work/out$lane" 2>&1; then
            tail -n 30 "$work/out$lane"
            fail "$line" "the python block failed:
$(cat "$text")"
        fi
        n_run=$((n_run + 1))
        echo "ok    README.md:$line python block"
        continue
    fi
    comment=""
    case "$text" in *" #"*) comment="#${text#* #}" ;; esac
    tag=$(printf '%s' "$comment" | grep -o '\[\(gpu\|mpi\|slurm\|docs size\)\]' | head -n 1)
    # The things a tag stands for, each with the tag it needs.
    needs=""
    case "$text" in *"--backend cuda"* | *"--comm nccl"*) needs="[gpu]" ;; esac
    case "$text" in *"--size docs"*) [ -z "$needs" ] && needs="[docs size]" ;; esac
    case "$text" in mpirun* | srun*) [ -z "$needs" ] && needs="[mpi] or [slurm]" ;; esac
    if [ -n "$needs" ] && { [ -z "$tag" ] || [[ "$needs" != *"$tag"* ]]; }; then
        fail "$line" "'$text' needs the tag $needs in its comment"
    fi
    if [ -n "$tag" ]; then skip "$line" "$tag" "$text"; continue; fi
    case "$text" in
    ci/install-deps* | ci/test* | ci/pr-comment.sh*) skip "$line" "installs or builds" "$text"; continue ;;
    esac
    # torchrun is PyTorch's launcher: where it cannot start a one-process job (Debian's torch 1.13
    # under Python 3.11 fails inside its own argument handling), its lines are skipped, saying why.
    case "$text" in
    torchrun*)
        if [ -z "${torchrun_broken+set}" ]; then
            printf 'pass\n' >"$work/noop$lane.py"
            torchrun_broken=""
            (cd "$work" && timeout 60 torchrun --nproc_per_node 1 "noop$lane.py") </dev/null >"$work/torchrun$lane.log" 2>&1 ||
                torchrun_broken=$(grep -v '^[[:space:]]*$' "$work/torchrun$lane.log" | tail -n 1)
        fi
        if [ -n "$torchrun_broken" ]; then skip "$line" "torchrun does not start here: $torchrun_broken" "$text"; continue; fi
        ;;
    esac
    want=0
    if [[ "$comment" =~ exit\ ([0-9]+) ]]; then want=${BASH_REMATCH[1]}; fi
    started=$EPOCHREALTIME
    (cd "$repo" && timeout 120 bash -c "$text") </dev/null >"$work/out$lane" 2>&1
    got=$?
    if [ "$got" -ne "$want" ]; then
        tail -n 30 "$work/out$lane"
        fail "$line" "'$text' ended with status $got, README says $want"
    fi
    n_run=$((n_run + 1))
    echo "ok    README.md:$line $text  ($(awk -v a="$started" -v b="$EPOCHREALTIME" 'BEGIN {printf "%.2f", b - a}') s)"
done <"$work/commands"
echo "$n_run $n_skipped"
)

run_lane 1 >"$work/lane1.log" &
run_lane 2 >"$work/lane2.log"
wait
failed=0 n_run=0 n_skipped=0
for lane in 1 2; do
    echo "-- lane $lane"
    head -n -1 "$work/lane$lane.log"
    last=$(tail -n 1 "$work/lane$lane.log")
    case "$last" in
    FAIL:*) echo "$last"; failed=1 ;;
    *) read -r r k <<<"$last"; n_run=$((n_run + r)) n_skipped=$((n_skipped + k)) ;;
    esac
done
[ "$failed" -eq 0 ] || exit 1
[ "$n_run" -gt 0 ] || fail 1 "no command found in README.md's sh and python blocks"
echo "ok: $n_run README commands ran in order (in two lanes), $n_skipped skipped by their tags"
