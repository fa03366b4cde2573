#!/usr/bin/env bash
# Many steps end to end (--steps N, harness/driver/train.h) on gpt at its ci size, bf16:
#   1. dp2-tp2, 6 Adam steps at the defaults: the curve is rounding, exit 0; the run's dumps are
#      those of the same run without --steps (the hash of every dataset's bytes); report.json (with
#      its "steps" object) passes the schema.
#   2. The same at lr 0.03: the reference's loss falls at every step. Independent reason: the
#      targets are N(0, 1) noise independent of the input, so the loss is about 1 + E[lnf_out^2],
#      and Adam moves every lnf_gamma toward 0 by about lr a step: the expected loss falls by about
#      2 lr = 0.06 a step, three times the batch-to-batch spread of a 16x16x64 mean (about 0.02).
#   3. --inject grad_avg_twice at dp2 (gradients divided by dp = 2 once more): with SGD the curve is
#      a factor with grad norm ratio 0.5 (the bug's definition) and drift 0.5 (every update halved);
#      with Adam still a factor through the gradient norm, though the weights drift less than
#      under rounding (Adam divides the factor out of its updates). Both exit 1 (step 1's gradients
#      fail their tolerance), the curve as expected.
#   4. dp1-tp1 against itself, and dp1-tp2 under --algo tp_invariant (bit-identical to tp 1 by
#      construction: README), are identical at every step.
#   steps_test.sh EQUIV
set -u
equiv=$1
py=/usr/bin/python3
here=$(cd "$(dirname "$0")" && pwd)
. "$(dirname "${BASH_SOURCE[0]}")/check_lib.sh" # $work, $fail, check
# curve JSON PYTHON-EXPRESSION DESCRIPTION: the expression holds of s, the first comparison's
# "steps" object of report JSON, with p = s["points"]
curve() {
    if "$py" - "$1" "$2" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))["comparisons"][0]["steps"]
p = s["points"]
ok = eval(sys.argv[2])
if not ok:
    print(f"  class {s['class']}, drift {s['drift']}, grad ratio {s['grad_ratio']}, loss_rel {s['loss_rel']}, "
          f"losses {[q['loss_ref'] for q in p]}: {s['why']}")
sys.exit(0 if ok else 1)
EOF
    then echo "ok: $3"; else echo "FAIL: $3 ($2)"; fail=1; fi
}

base=(--case gpt --dtype bf16 --dp 2 --tp 2)
check "dp2-tp2 6 steps" 0 "$equiv" "${base[@]}" --steps 6 --out "$work/steps"
check "dp2-tp2 one step" 0 "$equiv" "${base[@]}" --out "$work/one"
curve "$work/steps/report.json" 's["class"] == "rounding" and s["as_expected"] and s["n_steps"] == 6 and len(p) == 6' \
    "dp2-tp2 bf16: rounding"
curve "$work/steps/report.json" 's["optimizer"] == {"name": "adam", "lr": 0.001, "beta1": 0.9, "beta2": 0.999, "eps": 1e-08}' \
    "Adam with torch's defaults recorded"
if "$py" -c 'import json, sys
c = json.load(open(sys.argv[1]))["comparisons"][0]
sys.exit(0 if all((c[r]["steps"], c[r]["optimizer"], c[r]["lr"]) == (6, "adam", 0.001) for r in ("reference", "test")) else 1)' \
    "$work/steps/report.json"; then echo "ok: both run objects record steps, optimizer and lr"
else echo "FAIL: the run objects lack steps 6, adam, lr 0.001"; fail=1; fi
if grep -q '^#### Training curve: 6 steps, adam' "$work/steps/report.md"; then echo "ok: report.md has the curve"
else echo "FAIL: report.md lacks the training curve"; fail=1; fi
if grep -q '<svg' "$work/steps/report.html" && grep -q 'data-name="drift"' "$work/steps/report.html"; then
    echo "ok: report.html plots the drift"
else echo "FAIL: report.html lacks the drift chart"; fail=1; fi
for f in gpt-bf16-dp1-tp1.h5 gpt-bf16-dp2-tp2.h5; do
    if "$py" - "$here" "$work/one/$f" "$work/steps/$f" <<'EOF'
import sys
sys.path.insert(0, sys.argv[1])
from dump_checksums import dump_digest
sys.exit(0 if dump_digest(sys.argv[2]) == dump_digest(sys.argv[3]) else 1)
EOF
    then echo "ok: $f of --steps 6 holds the datasets of the run without --steps"
    else echo "FAIL: $f differs between --steps 6 and one step"; fail=1; fi
done
"$py" "$here/../reports/schema_check.py" "$here/../reports/report.schema.json" "$work/steps/report.json"
status=$?
if [ "$status" -eq 0 ]; then echo "ok: report.json of --steps 6 passes the schema"
elif [ "$status" -ne 77 ]; then echo "FAIL: report.json of --steps 6 fails the schema"; fail=1; fi

check "dp2-tp2 6 steps at lr 0.03" 0 "$equiv" "${base[@]}" --steps 6 --lr 0.03 --format json
cp "$work/stdout" "$work/descent.json"
curve "$work/descent.json" 'all(b["loss_ref"] < a["loss_ref"] for a, b in zip(p, p[1:])) and s["class"] == "rounding"' \
    "the reference's loss falls at every step"

bug=(--case gpt --dtype bf16 --dp 2 --inject grad_avg_twice --steps 6 --format json)
check "grad_avg_twice sgd" 1 "$equiv" "${bug[@]}" --optimizer sgd
cp "$work/stdout" "$work/sgd.json"
curve "$work/sgd.json" 's["class"] == "factor" and s["as_expected"] and abs(s["grad_ratio"] - 0.5) < 0.01 and abs(s["drift"] - 0.5) < 0.05' \
    "grad_avg_twice under SGD: factor, grad ratio 0.5, drift 0.5"
check "grad_avg_twice adam" 1 "$equiv" "${bug[@]}"
cp "$work/stdout" "$work/adam.json"
curve "$work/adam.json" 's["class"] == "factor" and s["as_expected"] and abs(s["grad_ratio"] - 0.5) < 0.01 and s["drift"] < 0.1' \
    "grad_avg_twice under Adam: factor through the gradient norm, the weights barely drift"
if grep -q '"line": "equiv: 1 comparison, 116 tensors, [0-9]* NOT as expected' "$work/adam.json"; then
    echo "ok: the injected bug's run is not as expected"
else echo "FAIL: the summary of the injected bug's run"; fail=1; fi

check "dp1-tp1 against itself" 0 "$equiv" --case gpt --dtype bf16 --dp 1 --tp 1 --steps 4 --format json
cp "$work/stdout" "$work/self.json"
curve "$work/self.json" 's["class"] == "identical" and s["drift"] == 0 and s["loss_rel"] == 0' "dp1-tp1 against itself: identical"
check "dp1-tp2 tp_invariant" 0 "$equiv" --case gpt --dtype bf16 --tp 2 --algo tp_invariant --steps 4 --format json
cp "$work/stdout" "$work/invariant.json"
curve "$work/invariant.json" 's["class"] == "identical" and s["drift"] == 0' "dp1-tp2 under tp_invariant: identical"
exit "$fail"
