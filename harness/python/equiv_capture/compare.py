"""`equiv compare` from Python: a verdict object for a user's tests, and an assertion.

    r = equiv_capture.compare("runs/tp1", "runs/tp2")          # a CompareResult
    r.passed, r.verdict, r.where, r.factor, r.unexpected, r.report_json
    equiv_capture.assert_equivalent("runs/tp1", "runs/tp2")    # AssertionError with the summary

Both run `equiv compare REF TEST --out DIR` and read DIR/report.json (reports/report.schema.json in
equiv's tree); a multi-step run's report (harness/SCHEMA.md, "Runs of many steps") also has one
report per captured step under DIR/step_NNNNNN/. The binary: the `equiv=` argument, else the
EQUIV environment variable, else `equiv` on PATH; none of them: EquivNotFound, saying so.
Exit status 2 (runs that cannot be read or assembled) raises EquivError with equiv's error line.
"""

import glob
import json
import os
import shutil
import subprocess
import tempfile

ENV_VAR = "EQUIV"


class EquivNotFound(FileNotFoundError):
    """No equiv binary: not given, not in $EQUIV, not on PATH."""


class EquivError(RuntimeError):
    """equiv could not compare the runs (exit status 2): the message is its error line."""


def find_equiv(equiv=None):
    """The equiv binary to run: `equiv` if given, else $EQUIV, else `equiv` on PATH."""
    for source, candidate in (("equiv=", equiv), (f"${ENV_VAR}", os.environ.get(ENV_VAR))):
        if candidate:
            path = shutil.which(candidate) or (candidate if os.path.isfile(candidate) else None)
            if path is None or not os.access(path, os.X_OK):
                raise EquivNotFound(f"equiv_capture: {source} names {candidate!r}, which is not an executable file")
            return path
    path = shutil.which("equiv")
    if path is None:
        raise EquivNotFound(f"equiv_capture: no equiv binary: put equiv on PATH, set {ENV_VAR}=/path/to/equiv, "
                            "or pass equiv='/path/to/equiv' (build it: meson setup build && meson compile -C build)")
    return path


class CompareResult:
    """What `equiv compare` said about two runs.

    passed: every tensor, finding and training curve as expected (exit status 0); verdict: "pass"/"fail".
    unexpected: the results not as expected, each a dict of the JSON report (path, role, observed,
        diagnosis, fitted_factor, factor_name, ...), in the report's order, every captured step's.
    where: the first of them (its "path"), where the difference starts; None when none.
    factor: that result's factor as a number (fitted_factor) where its diagnosis is a uniform scale.
    findings: the assembly findings (a replicated tensor that differs between ranks).
    curve: a multi-step run's training curve (the JSON report's "steps": class, why, drift, points).
    summary: equiv's summary line; report_dir and report_paths ({"md", "json", "html"}: the
        top report's files; step_reports: each captured step's report.json).
    """

    def __init__(self, status, report_dir, reports, stdout):
        self.exit_status = status
        self.passed = status == 0
        self.verdict = "pass" if self.passed else "fail"
        self.report_dir = report_dir
        self.report_paths = {ext: os.path.join(report_dir, f"report.{ext}") for ext in ("md", "json", "html")}
        self.step_reports = sorted(glob.glob(os.path.join(report_dir, "step_*", "report.json")))
        self.report_json = reports[0]
        self.stdout = stdout
        self.summary = " / ".join(r["summary"]["line"] for r in reports)
        self.unexpected, self.findings, self.curve = [], [], None
        for report in reports:
            for c in report["comparisons"]:
                self.unexpected += [r for r in c["results"] if not r["as_expected"]]
                self.findings += c.get("findings", [])
                if self.curve is None and "steps" in c:
                    self.curve = c["steps"]
        first = self.unexpected[0] if self.unexpected else None
        self.where = first["path"] if first else None
        self.diagnosis = first["diagnosis"] if first else None
        uniform = first is not None and "uniform scale" in first["diagnosis"]
        self.factor = first["fitted_factor"] if uniform and isinstance(first["fitted_factor"], float) else None

    def __bool__(self):
        return self.passed

    def message(self):
        """The report's summary: the summary line, where it starts, the curve, the findings."""
        lines = [self.summary]
        if self.where:
            lines.append(f"where it starts: {self.where}: {self.diagnosis}")
        if self.curve is not None:
            lines.append(f"training curve: {self.curve['class']} (expected {' or '.join(self.curve['expected'])}): "
                         f"{self.curve['why']}")
        lines += [f"finding: {f}" for f in self.findings[:3]]
        lines.append(f"report: {self.report_paths['md']}")
        return "\n".join(lines)

    def __repr__(self):
        return f"CompareResult(verdict={self.verdict!r}, where={self.where!r}, unexpected={len(self.unexpected)})"


def compare(ref, test, *, out=None, equiv=None, truth=None, tolerance=None, atol=None, rtol=None, args=()):
    """`equiv compare ref test`: a CompareResult. out: where the reports go (default: a new temporary
    directory, kept, named by result.report_dir); truth, tolerance, atol/rtol: equiv's options of
    those names; args: more of its command-line arguments."""
    binary = find_equiv(equiv)
    out = os.fspath(out) if out is not None else tempfile.mkdtemp(prefix="equiv-report-")
    command = [binary, "compare", os.fspath(ref), os.fspath(test), "--out", out]
    if truth is not None:
        command += ["--truth", os.fspath(truth)]
    if tolerance is not None:
        command += ["--tolerance", tolerance]
    if atol is not None or rtol is not None:
        command += ["--atol", repr(float(atol or 0.0)), "--rtol", repr(float(rtol or 0.0))]
    command += [str(a) for a in args]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode not in (0, 1):
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        error = next((line for line in lines if line.startswith("equiv: error:")), lines[-1] if lines else "")
        raise EquivError(f"equiv compare {ref} {test}: exit {done.returncode}: {error}")
    with open(os.path.join(out, "report.json")) as f:
        reports = [json.load(f)]
    for path in sorted(glob.glob(os.path.join(out, "step_*", "report.json"))):
        with open(path) as f:
            reports.append(json.load(f))
    return CompareResult(done.returncode, out, reports, done.stdout)


def assert_equivalent(ref, test, **kwargs):
    """compare(ref, test, **kwargs), raising AssertionError with the report's summary where the runs
    are not equivalent (as torch.testing.assert_close does for two tensors); the result otherwise."""
    result = compare(ref, test, **kwargs)
    if not result.passed:
        raise AssertionError(f"equiv: {os.fspath(test)} is not equivalent to {os.fspath(ref)}\n{result.message()}")
    return result
