#!/usr/bin/python3
"""Validates equiv JSON reports against reports/report.schema.json (JSON Schema draft 2020-12).

    schema_check.py SCHEMA.json REPORT.json...      one line per report: "ok: PATH" or "INVALID: PATH: why"
    schema_check.py --self-test SCHEMA.json [REPORT.json]
        takes REPORT (or a small built-in report), checks that it validates, then breaks a copy of
        it in memory one way at a time (a result without "metrics", a string where a number
        belongs, ...) and checks that the schema rejects each, and accepts what report_json.c
        may legitimately write ("NaN" for a metric, a seed above INT64_MAX as a string).

Exit status: 0 all valid (self-test: every case judged right), 1 a report invalid or not JSON
(self-test: a case judged wrong), 2 usage, a bad schema or an unreadable file, 77 skipped: the jsonschema module (Debian
python3-jsonschema) is missing or too old for draft 2020-12 (77 is meson's "skipped").
"""
import copy
import json
import sys

try:
    import jsonschema
    from jsonschema import Draft202012Validator
except ImportError:
    print("schema_check: skipped: the python3 jsonschema module (4.0 or later) is not installed")
    sys.exit(77)


def reject_constant(name):
    # report_json.c writes non-finite values as strings; a bare NaN or Infinity token is not JSON
    raise ValueError(f"{name} is not JSON (equiv writes the string \"{name}\")")


def load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f, parse_constant=reject_constant)


def where(error):
    return "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)


def first_error(validator, document):
    """The most relevant error, as one line, or None when the document is valid."""
    error = jsonschema.exceptions.best_match(validator.iter_errors(document))
    if error is None:
        return None
    message = " ".join(error.message.split())
    return f"at {where(error)}: {message[:300]}"


def check_files(validator, paths):
    status = 0
    for path in paths:
        try:
            document = load(path)
        except OSError as e:
            print(f"ERROR: {path}: cannot read it: {e.strerror}")
            status = 2
            continue
        except ValueError as e:
            print(f"INVALID: {path}: not JSON: {' '.join(str(e).split())}")
            status = max(status, 1)
            continue
        error = first_error(validator, document)
        if error is None:
            print(f"ok: {path}")
        else:
            print(f"INVALID: {path}: {error}")
            status = max(status, 1)
    return status


def minimal_report(schema):
    """One comparison of one bit-exact tensor, as report_json.c writes it: every metric the schema
    requires (reports/report_columns.c lists them), 0 unless set below."""
    run = {"case": "row_parallel", "model": "row_parallel", "size": "ci", "dtype": "fp32", "dp": 1, "tp": 1,
           "transport": "sim", "algorithm": "ring", "backend": "cpu", "seed": 1234, "version": "0.1.0",
           "grads": "avg", "injected": "none"}
    tolerance = {"name": "fp32_1_layer", "atol": 1e-5, "rtol": 0.0, "scale": "absolute", "source": "seed 002"}
    metrics = {key: 0 for key in schema["$defs"]["metrics"]["required"]}
    metrics.update({"count": 64, "n_finite": 64, "argmax": -1, "cosine": 1.0, "ls_scale": 1.0, "mean_ratio": 1.0,
                    "worst_rel": 0.0})
    result = {"path": "layers/00/input", "layer": 0, "name": "input", "role": "input", "expect": "bit_exact",
              "observed": "bit-exact", "as_expected": True, "diagnosis": "bit-exact", "shape": [4, 16],
              "argmax_index": None, "fitted_factor": 1.0, "factor_name": None, "metrics": metrics}
    comparison = {"reference": run, "test": dict(run, tp=2), "tolerance": tolerance, "grad_tolerance": tolerance,
                  "expect": "within", "tensors": 1, "unexpected": 0, "results": [result]}
    return {"equiv_report": 1, "version": "0.1.0", "thresholds": [1e-4, 1e-3, 5e-3, 1e-2],
            "comparisons": [comparison],
            "summary": {"comparisons": 1, "tensors": 1, "unexpected": 0,
                        "line": "equiv: 1 comparisons, 1 tensors, all as expected"}}


def first_result(d):
    return d["comparisons"][0]["results"][0]


# The steps object of a --steps run (reports/report_steps.c), two steps of one parameter.
MINIMAL_STEPS = {
    "n_steps": 2, "optimizer": {"name": "adam", "lr": 1e-3, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8},
    "class": "rounding", "expected": ["identical", "rounding"], "as_expected": True,
    "why": "drift 0.01 of the distance trained", "loss_rel": 1e-5, "drift": 0.01, "growth_exponent": 0.5,
    "grad_ratio": 1.0001, "grad_ratio_step": 2, "frozen": 0,
    "points": [{"step": t, "loss_ref": 2.0, "loss_test": 2.0, "loss_rel": 0.0, "grad_norm_ref": 1.0,
                "grad_norm_test": 1.0, "grad_ratio": 1.0, "param_dist": 1e-5, "trained_dist": 1e-3,
                "param_max_abs": 1e-6, "drift": 0.01} for t in (1, 2)],
    "params": [{"path": "layers/00/w", "drift": [0.01, 0.01]}],
}


def steps(d):
    """The first comparison's steps object, a minimal one added where the report has none."""
    return d["comparisons"][0].setdefault("steps", copy.deepcopy(MINIMAL_STEPS))


# (what the copy gets, how): each must make the report invalid.
BROKEN = [
    ("a result without \"metrics\"", lambda d: first_result(d).pop("metrics")),
    ("a string where a number belongs (max_abs \"0.5\")", lambda d: first_result(d)["metrics"].update(max_abs="0.5")),
    ("a misspelt non-finite value (\"nan\")", lambda d: first_result(d)["metrics"].update(cosine="nan")),
    ("a count that is not an integer", lambda d: first_result(d)["metrics"].update(n_differ=1.5)),
    ("\"equiv_report\": 2", lambda d: d.update(equiv_report=2)),
    ("a number as the version", lambda d: d.update(version=1)),
    ("no summary", lambda d: d.pop("summary")),
    ("as_expected as a string", lambda d: first_result(d).update(as_expected="true")),
    ("an unknown role", lambda d: first_result(d).update(role="weights")),
    ("an unknown observation", lambda d: first_result(d).update(observed="close")),
    ("three thresholds", lambda d: d["thresholds"].pop()),
    ("a key report_json.c does not write", lambda d: d["comparisons"][0].update(extra=1)),
    ("a test run without its dtype", lambda d: d["comparisons"][0]["test"].pop("dtype")),
    ("a tolerance scale that does not exist", lambda d: d["comparisons"][0]["tolerance"].update(scale="relative")),
    ("a seed that is not a number", lambda d: d["comparisons"][0]["reference"].update(seed="12ab")),
    ("results not a list", lambda d: d["comparisons"][0].update(results={})),
    ("a result without its shape", lambda d: first_result(d).pop("shape")),
    ("a shape of five dimensions", lambda d: first_result(d).update(shape=[1, 2, 3, 4, 5])),
    ("the argmax as a flat number where a position belongs", lambda d: first_result(d).update(argmax_index=17)),
    ("a factor name that is a number", lambda d: first_result(d).update(factor_name=0.125)),
    ("a differs size of an unknown metric",
     lambda d: first_result(d).update(expect_size={"metric": "max", "lo": 0.0, "hi": 1.0})),
    ("a curve class that does not exist", lambda d: steps(d).update({"class": "close"})),
    ("a steps object without its points", lambda d: steps(d).pop("points")),
    ("a step point without its drift", lambda d: steps(d)["points"][0].pop("drift")),
    ("an optimizer --optimizer does not take", lambda d: steps(d)["optimizer"].update(name="rmsprop")),
    ("a parameter curve as a number", lambda d: steps(d)["params"][0].update(drift=0.01)),
]

# What report_json.c may write: each must stay valid.
ALLOWED = [
    ("NaN for max_tol_ratio", lambda d: first_result(d)["metrics"].update(max_tol_ratio="NaN")),
    ("Infinity and -Infinity", lambda d: first_result(d)["metrics"].update(max_ulp="Infinity", ref_mean="-Infinity")),
    ("a seed above INT64_MAX as its decimal string",
     lambda d: d["comparisons"][0]["reference"].update(seed="18446744073709551615")),
    ("no comparisons", lambda d: d.update(comparisons=[], version="")),
    ("an argmax position and a named factor",
     lambda d: first_result(d).update(argmax_index=[3, 7], fitted_factor=0.125, factor_name="1/8")),
    ("a differs with its size",
     lambda d: first_result(d).update(expect="differs", expect_size={"metric": "rel", "lo": 3e-4, "hi": 1e-2})),
    ("a steps object (--steps N)", steps),
    ("a sgd curve, a bug's class, a non-finite drift",
     lambda d: steps(d).update(optimizer={"name": "sgd", "lr": 0.01}, expected=["factor", "growing"],
                               drift="NaN", **{"class": "factor"})),
]


def self_test(validator, report_path):
    document = load(report_path) if report_path else minimal_report(validator.schema)
    source = report_path or "the built-in report"
    if not document.get("comparisons") or not document["comparisons"][0].get("results"):
        print(f"self-test: {source} has no result to break")
        return 2
    error = first_error(validator, document)
    if error is not None:
        print(f"self-test FAILED: {source} itself is invalid: {error}")
        return 1
    # Each case changes the top level, the first comparison or its first result: judged on the
    # report cut to its first comparison and two results (a whole 360 KB report took 1.7 s of CPU
    # to validate the cases), which is still the report, valid as a whole.
    document["comparisons"] = document["comparisons"][:1]
    document["comparisons"][0]["results"] = document["comparisons"][0]["results"][:2]
    error = first_error(validator, document)
    if error is not None:
        print(f"self-test FAILED: {source} cut to its first results is invalid: {error}")
        return 1
    wrong = 0
    for cases, want_valid in ((BROKEN, False), (ALLOWED, True)):
        for what, change in cases:
            broken = copy.deepcopy(document)
            change(broken)
            error = first_error(validator, broken)
            if (error is None) == want_valid:
                print(f"self-test: {'accepted' if want_valid else 'rejected'} {what}"
                      + (f" ({error})" if error else ""))
            else:
                print(f"self-test FAILED: {'rejected' if want_valid else 'accepted'} {what}"
                      + (f": {error}" if error else ""))
                wrong += 1
    print(f"self-test: {len(BROKEN) + len(ALLOWED) - wrong} of {len(BROKEN) + len(ALLOWED)} judged right on {source}")
    return 1 if wrong else 0


def main(argv):
    testing = len(argv) > 1 and argv[1] == "--self-test"
    args = argv[2:] if testing else argv[1:]
    if len(args) < 1 or (testing and len(args) > 2) or (not testing and len(args) < 2):
        print("usage: schema_check.py SCHEMA.json REPORT.json... | --self-test SCHEMA.json [REPORT.json]",
              file=sys.stderr)
        return 2
    try:
        schema = load(args[0])
        Draft202012Validator.check_schema(schema)
    except (OSError, ValueError, jsonschema.exceptions.SchemaError) as e:
        print(f"schema_check: bad schema {args[0]}: {' '.join(str(e).split())[:300]}", file=sys.stderr)
        return 2
    validator = Draft202012Validator(schema)
    if testing:
        return self_test(validator, args[1] if len(args) == 2 else None)
    return check_files(validator, args[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
