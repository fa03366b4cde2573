#!/usr/bin/python3
"""The JSON report's shapes, argmax position and fitted factor, read back from `equiv compare` of a
dump against a copy of it with a difference planted at a known place (reports/report_json.c).

    json_fields_test.py EQUIV SCHEMA.json DUMP.h5

DUMP.h5 holds layers/00/out (fp32 [32, 2, 128]), layers/00/weight ([128, 256]) and layers/00/input.
  1. +1 at out[5, 1, 77]: the result's shape is the dataset's, argmax_index is [5, 1, 77] and
     metrics.argmax its flat index; the bit-exact weight has its shape and argmax_index null; the
     difference is no uniform factor (factor_name null).
  2. out x 0.125: fitted_factor 0.125 and factor_name "1/8".
  3. out x 3: factor_name "3".
Every report validates against the schema. Exit 0 pass, 1 fail, 77 skipped (no jsonschema).
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

try:
    import h5py
    import numpy as np
    from jsonschema import Draft202012Validator
except ImportError as e:
    print(f"json_fields_test: skipped: {e}")
    sys.exit(77)

failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print(f"FAIL: {what}")


def report(equiv, ref, test, validator):
    run = subprocess.run([equiv, "compare", ref, test, "--format", "json"], capture_output=True, text=True)
    check(run.returncode == 1, f"equiv compare of a planted difference exited {run.returncode}, want 1: {run.stderr}")
    doc = json.loads(run.stdout)
    errors = sorted(validator.iter_errors(doc), key=str)
    check(not errors, f"report does not match the schema: {errors[0].message if errors else ''}")
    return {r["path"]: r for r in doc["comparisons"][0]["results"]}


def planted(src, dst, change):
    shutil.copyfile(src, dst)
    with h5py.File(dst, "r+") as f:
        data = f["layers/00/out"][...]
        f["layers/00/out"][...] = change(data)


def main():
    if len(sys.argv) != 4:
        print("usage: json_fields_test.py EQUIV SCHEMA DUMP", file=sys.stderr)
        return 2
    equiv, schema_path, dump = sys.argv[1:]
    with open(schema_path, encoding="utf-8") as f:
        validator = Draft202012Validator(json.load(f))
    work = tempfile.mkdtemp()
    try:
        ref = os.path.join(work, "ref.h5")
        shutil.copyfile(dump, ref)
        with h5py.File(ref, "r") as f:
            out_shape = list(f["layers/00/out"].shape)
            weight_shape = list(f["layers/00/weight"].shape)
        check(out_shape == [32, 2, 128], f"the dump's out is {out_shape}, the test wants [32, 2, 128]")

        where = (5, 1, 77)

        def bump(data):
            data[where] += np.float32(1.0)
            return data

        test = os.path.join(work, "one.h5")
        planted(ref, test, bump)
        results = report(equiv, ref, test, validator)
        out, weight = results["layers/00/out"], results["layers/00/weight"]
        check(out["shape"] == out_shape, f"out's shape {out['shape']}, want {out_shape}")
        check(out["argmax_index"] == list(where), f"out's argmax_index {out['argmax_index']}, want {list(where)}")
        flat = int(np.ravel_multi_index(where, out_shape))
        check(out["metrics"]["argmax"] == flat, f"out's argmax {out['metrics']['argmax']}, want {flat}")
        check(out["factor_name"] is None, f"one element off is named factor {out['factor_name']!r}")
        check(weight["shape"] == weight_shape, f"weight's shape {weight['shape']}, want {weight_shape}")
        check(weight["argmax_index"] is None, f"bit-exact weight's argmax_index {weight['argmax_index']}, want null")

        for scale, name in ((0.125, "1/8"), (3.0, "3")):
            test = os.path.join(work, f"scaled{scale}.h5")
            planted(ref, test, lambda data: data * np.float32(scale))
            out = report(equiv, ref, test, validator)["layers/00/out"]
            check(out["factor_name"] == name, f"x{scale}: factor_name {out['factor_name']!r}, want {name!r}")
            check(abs(out["fitted_factor"] - scale) < 1e-6 * scale,
                  f"x{scale}: fitted_factor {out['fitted_factor']}, want {scale}")
    finally:
        shutil.rmtree(work)
    if failures:
        return 1
    print("ok: shapes, argmax_index and the fitted factor read back from the JSON report")
    return 0


if __name__ == "__main__":
    sys.exit(main())
