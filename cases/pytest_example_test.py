"""The pytest example and the GitHub Actions workflow for a user's repository
(harness/python/examples/test_user_run.py, equiv-workflow.yml).

    pytest_example_test.py workflow          the workflow parses as YAML, and the commands it trains
                                             with are the pytest example's (TRAIN), its pytest step
                                             runs that example, its report is the one it posts
    pytest_example_test.py pytest EQUIV      runs the example with pytest (EQUIV set): its two tests pass
    exit 0 passed, 1 failed, 77 skipped (no python3-yaml / python3-pytest: ci/install-deps lists them)
"""
import ast
import os
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
EXAMPLES = os.path.join(ROOT, "harness", "python", "examples")
EXAMPLE = "harness/python/examples/test_user_run.py"


def constant(path, name):
    """The value of the module-level constant `name` in the Python file at path (not imported: it
    imports pytest)."""
    with open(path) as f:
        tree = ast.parse(f.read())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name for t in node.targets):
            return ast.literal_eval(node.value)
    raise KeyError(f"{path} has no {name}")


def check_workflow():
    try:
        import yaml
    except ImportError:
        print("skip: no python3-yaml (ci/install-deps lists it)")
        return 77
    with open(os.path.join(EXAMPLES, "equiv-workflow.yml")) as f:
        flow = yaml.safe_load(f)
    failures = []
    steps = [s for job in flow["jobs"].values() for s in job["steps"]]
    lines = [line.strip() for s in steps for line in s.get("run", "").splitlines() if line.strip()]
    trains = [line for line in lines if "scratch_tp.py" in line]
    want = [c.format(runs="runs") for c in constant(os.path.join(EXAMPLES, "test_user_run.py"), "TRAIN")]
    if trains != want:
        failures.append(f"the workflow trains with {trains}, the pytest example with {want}")
    if f"python3 -m pytest {EXAMPLE}" not in lines:
        failures.append(f"no step runs `python3 -m pytest {EXAMPLE}`")
    if '"$EQUIV" compare runs/tp1 runs/tp2 --out equiv-report' not in lines:
        failures.append("no step writes the report of runs/tp1 against runs/tp2 to equiv-report")
    if not any("gh pr comment" in line and "--body-file equiv-report/report.md" in line for line in lines):
        failures.append("no step posts equiv-report/report.md")
    on = flow.get("on", flow.get(True))  # YAML 1.1 reads the key `on` as true
    if "pull_request" not in on:
        failures.append("not run on pull requests")
    for f in failures:
        print(f"FAIL: workflow: {f}")
    if not failures:
        print(f"ok: the workflow parses; it trains with the pytest example's commands ({len(want)}), runs it, posts the report")
    return 1 if failures else 0


def run_pytest(equiv):
    try:
        import pytest  # noqa: F401
    except ImportError:
        print("skip: no python3-pytest (ci/install-deps lists it)")
        return 77
    env = dict(os.environ, EQUIV=os.path.abspath(equiv))
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", EXAMPLE], cwd=ROOT, env=env)
    print(f"{'ok' if done.returncode == 0 else 'FAIL'}: pytest {EXAMPLE}: exit {done.returncode}")
    return 0 if done.returncode == 0 else 1


if __name__ == "__main__":
    if sys.argv[1:2] == ["workflow"] and len(sys.argv) == 2:
        sys.exit(check_workflow())
    if sys.argv[1:2] == ["pytest"] and len(sys.argv) == 3:
        sys.exit(run_pytest(sys.argv[2]))
    print(__doc__)
    sys.exit(2)
