"""equiv_capture.compare and assert_equivalent (harness/python/equiv_capture/compare.py) on real
runs: the verdict, where it starts, the factor, the curve and the report paths; the AssertionError
and its summary; finding the binary (argument, $EQUIV, PATH) and saying when it cannot; exit status
2 as EquivError.

    python_api_test.py EQUIV WORK    (WORK: cases/torch_steps_test.sh's runs)   exit 0 / 1
"""
import os
import subprocess
import sys

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "harness", "python"))
import equiv_capture  # noqa: E402
from equiv_capture import EquivError, EquivNotFound  # noqa: E402

failures = 0


def check(cond, what):
    global failures
    print(f"{'ok' if cond else 'FAIL'}: python API: {what}")
    failures += not cond


def raises(kind, call, pattern):
    try:
        call()
    except kind as e:
        return pattern in str(e), str(e)
    except Exception as e:  # noqa: BLE001 -- the wrong kind
        return False, f"{type(e).__name__}: {e}"
    return False, "nothing raised"


def minimal(path, scale):
    with h5py.File(path, "w") as f:
        f.attrs["dp"], f.attrs["tp"] = 1, 1
        f["blocks.0.out"] = np.linspace(-1, 1, 24, dtype=np.float32).reshape(4, 6) * np.float32(scale)
        f["blocks.0.out"].attrs["role"] = "activation"


def main():
    equiv, work = sys.argv[1:]
    os.environ["EQUIV"] = os.path.abspath(equiv)
    run = lambda name: os.path.join(work, name)  # noqa: E731

    r = equiv_capture.compare(run("bf16-tp1"), run("bf16-tp2"), out=os.path.join(work, "api-ok"))
    check(r.passed and r.verdict == "pass" and r.where is None and not r.unexpected, f"honest tp2: {r!r}")
    check(r.curve is not None and r.curve["class"] == "rounding", "honest tp2: the curve is rounding")
    check(all(os.path.isfile(p) for p in r.report_paths.values()), "the report paths exist")
    check(equiv_capture.assert_equivalent(run("bf16-tp1"), run("bf16-tp2")).passed, "assert_equivalent passes it")

    r = equiv_capture.compare(run("bf16-tp1"), run("clip_local"))
    check(not r.passed and r.curve["class"] == "factor" and r.findings, f"clip_local: fail, factor, findings: {r!r}")
    ok, text = raises(AssertionError, lambda: equiv_capture.assert_equivalent(run("bf16-tp1"), run("clip_local")),
                      "training curve: factor")
    check(ok and "is not equivalent to" in text and "equiv: 2 comparisons" in text,
          f"assert_equivalent raises with the summary: {text.splitlines()[:3]}")

    minimal(run("min-ref.h5"), 1.0)
    minimal(run("min-x2.h5"), 2.0)
    r = equiv_capture.compare(run("min-ref.h5"), run("min-x2.h5"))
    check(r.where == "blocks.0.out" and r.factor is not None and abs(r.factor - 2.0) < 1e-6,
          f"a planted factor 2: where {r.where}, factor {r.factor}")
    check(len(r.unexpected) == 1 and r.unexpected[0]["observed"] == "OUTSIDE", "the tensor not as expected listed")

    ok, text = raises(EquivError, lambda: equiv_capture.compare(run("bf16-tp1"), run("no-such-run")), "equiv: error:")
    check(ok, f"a run that cannot be read: EquivError with equiv's line: {text}")

    # finding the binary: $EQUIV, PATH, the argument; none: a clear message
    env = dict(os.environ, PATH="/usr/bin:/bin")
    env.pop("EQUIV")
    code = ("import equiv_capture, sys\n"
            "try:\n    equiv_capture.compare('a', 'b')\n"
            "except equiv_capture.EquivNotFound as e:\n    print(e); sys.exit(3)\n")
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "harness", "python")
    done = subprocess.run([sys.executable, "-c", code], env=dict(env, PYTHONPATH=path), capture_output=True, text=True)
    check(done.returncode == 3 and "set EQUIV=/path/to/equiv" in done.stdout and "PATH" in done.stdout,
          f"no binary anywhere: {done.stdout.strip()}")
    bindir = os.path.dirname(os.path.abspath(equiv))
    from equiv_capture.compare import find_equiv
    os.environ.pop("EQUIV")
    saved = os.environ["PATH"]
    os.environ["PATH"] = f"{bindir}:/usr/bin:/bin"
    check(find_equiv() == os.path.join(bindir, "equiv"), "found on PATH")
    os.environ["PATH"] = "/usr/bin:/bin"
    ok, text = raises(EquivNotFound, lambda: find_equiv("/nonexistent/equiv"), "not an executable file")
    check(ok, f"a wrong equiv= named: {text}")
    os.environ["EQUIV"] = "/nonexistent/equiv"
    ok, text = raises(EquivNotFound, find_equiv, "$EQUIV names '/nonexistent/equiv'")
    check(ok, f"a wrong $EQUIV named: {text}")
    check(find_equiv(equiv) == os.path.abspath(equiv) or os.path.samefile(find_equiv(equiv), equiv), "the argument first")
    os.environ["PATH"] = saved
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
