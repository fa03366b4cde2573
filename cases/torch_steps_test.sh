#!/usr/bin/env bash
# A user's run over many steps, end to end: real torch.distributed jobs (gloo, one process per rank)
# of harness/python/examples/scratch_train.py, recorded with equiv_capture.StepRecorder, judged by
# `equiv compare` as a training curve plus the steps captured in full. Honest layouts (tp 2, dp 2
# against 1, bf16 and fp32, 20 steps of Adam) must be "rounding" and exit 0; each bug that only
# shows over steps must exit 1 with its class or its finding, within the steps README states; a
# malformed light record, runs with no common steps and a run of many steps against a run of one
# must be one error line, exit 2, nothing written. Then the Python API on these runs
# (cases/python_api_test.py).
#   torch_steps_test.sh EQUIV PYTHON     (skipped, 77, without torch)
set -u
equiv=$1 py=$2
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0

full="--steps 20 --full-steps 1,10"
{
    for dtype in bf16 fp32; do
        echo "$dtype-tp1 --dtype $dtype $full"
        echo "$dtype-tp2 --dtype $dtype --tp 2 $full"
        echo "$dtype-dp2 --dtype $dtype --dp 2 $full"
    done
    echo "clip_local --dtype bf16 --tp 2 --bug clip_local $full"
    echo "wd_every_rank --dtype bf16 --tp 4 --bug wd_every_rank $full"
    echo "lr_twice --dtype bf16 --tp 2 --bug lr_twice $full"
    echo "adam_reset --dtype bf16 --dp 2 --bug adam_reset --bug-step 5 $full"
    echo "short --dtype bf16 --steps 1"
} >"$work/jobs"
"$py" "$root/cases/torch_train.py" "$work" scratch_train <"$work/jobs"
case $? in
0) ;;
77) exit 77 ;;
*) fail=1 ;;
esac

compare() { # compare DESCRIPTION WANT_STATUS REF TEST [ARGS...]: its output in $work/out, $work/err
    local what=$1 want=$2 ref=$3 test=$4
    shift 4
    "$equiv" compare "$work/$ref" "$work/$test" "$@" >"$work/out" 2>"$work/err"
    local got=$?
    if [ "$got" -ne "$want" ]; then
        echo "FAIL: $what: exit $got, want $want"; head -3 "$work/err"; grep -m1 -E 'the curve is' "$work/out"; fail=1
    else
        echo "ok: $what (exit $got)"
    fi
}
expect() { # expect DESCRIPTION PATTERN [FILE]
    local file=${3:-$work/out}
    if grep -qE -- "$2" "$file"; then echo "ok: $1: $(grep -oE -- "$2" "$file" | head -1)"
    else echo "FAIL: $1: no /$2/ in $(basename "$file")"; fail=1; fi
}
refuse() { # refuse DESCRIPTION PATTERN REF TEST: exit 2, one error line matching, no --out
    compare "$1" 2 "$3" "$4" --out "$work/no-report"
    expect "$1: one line naming it" "^equiv: error: .*$2" "$work/err"
    [ "$(wc -l <"$work/err")" -eq 1 ] || { echo "FAIL: $1: $(wc -l <"$work/err") lines on stderr"; fail=1; }
    [ -s "$work/out" ] && { echo "FAIL: $1: printed a report"; fail=1; }
    [ -e "$work/no-report" ] && { echo "FAIL: $1: left $work/no-report"; fail=1; }
}
shows() { # shows BUG MAX: the bug shows within MAX steps (cases/steps_to_show.py)
    local line
    line=$("$py" "$root/cases/steps_to_show.py" "$equiv" "$work/bf16-tp1" "$work/$1")
    local n
    n=$(sed -n 's/^shows at step \([0-9]*\):.*/\1/p' <<<"$line")
    if [ -n "$n" ] && [ "$n" -le "$2" ]; then echo "ok: $1 shows within $2 steps: $line" | cut -c1-220
    else echo "FAIL: $1: want it shown within $2 steps: $line"; fail=1; fi
}

# Honest layouts: the curve is rounding, every captured step within
for dtype in bf16 fp32; do
    for layout in tp2 dp2; do
        compare "$dtype $layout vs tp1, 20 steps of Adam" 0 "$dtype-tp1" "$dtype-$layout"
        expect "$dtype $layout: rounding" 'pass: the curve is \*\*rounding\*\*'
        expect "$dtype $layout: steps 1 and 10 compared layer by layer" '^equiv: 2 comparisons, [0-9]+ tensors, all as expected'
    done
done
"$equiv" compare "$work/bf16-tp1" "$work/clip_local" --out "$work/steps-report" >/dev/null 2>&1
if "$py" "$root/reports/schema_check.py" "$root/reports/report.schema.json" "$work/steps-report/report.json" >"$work/schema" 2>&1
then echo "ok: the report of two runs of many steps matches reports/report.schema.json"
else st=$?; [ "$st" -eq 77 ] && echo "skip: $(cat "$work/schema")" || { echo "FAIL: schema: $(cat "$work/schema")"; fail=1; }; fi
expect "the per-step table" '^\| 20 \| [0-9.]+ \| [0-9.]+ \|'
expect "the parameters that drifted most" 'The 5 of 12 trained parameters that diverged most'

# Bugs that only show over steps
compare "clipping by each tp rank's own norm" 1 bf16-tp1 clip_local
expect "clip_local: a factor in the gradient norm" 'FAIL\*\*: the curve is \*\*factor\*\* .*gradient norm 1\.[12][0-9]*x'
expect "clip_local: the replicated copies part" 'embed\.weight should be replicated over tp but differs from step 1'
compare "weight decay of replicated parameters on every tp rank (tp 4)" 1 bf16-tp1 wd_every_rank
expect "wd_every_rank: growing" 'FAIL\*\*: the curve is \*\*growing\*\*'
if grep -q 'should be replicated' "$work/out"; then echo "FAIL: wd_every_rank: a finding (its copies agree)"; fail=1
else echo "ok: wd_every_rank: no finding: only the curve tells it"; fi
compare "the schedule stepped twice on the last rank" 1 bf16-tp1 lr_twice
expect "lr_twice: the learning rates part at step 1" 'the learning rate differs between ranks from step 1: rank 1'
compare "the last dp rank's Adam moments reset at step 5" 1 bf16-tp1 adam_reset
expect "adam_reset: the replicas part at step 5" 'should be replicated over dp but differs from step 5: rank 1 \(dp 1, tp 0\)'
# how many steps each takes to show (README, "Does my run converge like one GPU?")
shows clip_local 2
shows wd_every_rank 12
shows lr_twice 2
shows adam_reset 5
if "$py" "$root/cases/steps_to_show.py" "$equiv" "$work/bf16-tp1" "$work/bf16-tp2" | grep -q '^not shown in 20 steps'; then
    echo "ok: honest tp2 not shown in any of its 20 steps"
else echo "FAIL: honest tp2 shown at some step"; fail=1; fi

# Bad input: one line, exit 2, nothing written
cp -r "$work/bf16-tp2" "$work/bad-json" && printf '{"equiv_steps": 1, "dp": ' >"$work/bad-json/steps/rank00001.json"
refuse "a light record cut short" 'bad-json/steps/rank00001\.json: not a light record' bf16-tp1 bad-json
cp -r "$work/bf16-tp2" "$work/bad-step" && "$py" - "$work/bad-step/steps/rank00000.json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
doc["steps"][3]["step"] = 7
json.dump(doc, open(sys.argv[1], "w"))
PY
refuse "a light record whose steps skip" 'rank00000\.json: steps\[3\] must be step 4' bf16-tp1 bad-step
cp -r "$work/bf16-tp2" "$work/bad-norm" && "$py" - "$work/bad-norm/steps/rank00001.json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
doc["steps"][0]["param_sq"][2] = "many"
json.dump(doc, open(sys.argv[1], "w"))
PY
refuse "a parameter's norm that is not a number" 'step 1: "param_sq"\[2\] must be a number' bf16-tp1 bad-norm
rm "$work/bad-norm/steps/rank00001.json"
refuse "a rank's light record missing" 'a run of 2 ranks .* but 1 light records' bf16-tp1 bad-norm
refuse "runs with no common steps" 'share 1 recorded step: a training curve needs at least 2' bf16-tp1 short
refuse "a run of many steps against a step" 'holds light records \(steps/\), .* does not' bf16-tp1 bf16-tp1/step_000001

# The Python API on these runs
"$py" "$root/cases/python_api_test.py" "$equiv" "$work" || fail=1
exit "$fail"
