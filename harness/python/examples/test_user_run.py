"""A user's test suite judging its tensor-parallel step with equiv, as pytest tests.

    EQUIV=/path/to/equiv python3 -m pytest harness/python/examples/test_user_run.py   (from the repo root)

Each test trains one step of harness/python/examples/scratch_tp.py (the "user's model": CPU, gloo,
one process per rank) at tp 1 and tp 2 with TRAIN's commands, the same ones the GitHub Actions
workflow next to this file (equiv-workflow.yml) runs, and judges tp 2 against tp 1 with
equiv_capture.assert_equivalent: a pass, or an AssertionError whose message is equiv's summary
(where it starts, the factor, the report's path), as torch.testing.assert_close fails for two
tensors. equiv_capture.compare gives the result object instead (verdict, the tensors not as
expected, where it starts, the factor, the report paths).
"""
import os
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "harness", "python"))
import equiv_capture  # noqa: E402

# The training commands, from the repository root; {runs}: the runs' folder (the workflow's: runs).
TRAIN = [
    "python3 harness/python/examples/scratch_tp.py --out {runs}/tp1",
    "python3 harness/python/examples/scratch_tp.py --out {runs}/tp2 --tp 2",
]
BUG = "python3 harness/python/examples/scratch_tp.py --out {runs}/tp2-bug --tp 2 --bug partial_scale --strength 0.1"


def train(command, runs):
    argv = command.format(runs=runs).split()
    subprocess.run([sys.executable] + argv[1:], cwd=ROOT, check=True)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    runs = tmp_path_factory.mktemp("runs")
    for command in TRAIN:
        train(command, runs)
    return runs


def test_tp2_computes_the_step_of_tp1(runs):
    result = equiv_capture.assert_equivalent(runs / "tp1", runs / "tp2", out=runs / "report")
    assert result.passed and result.where is None
    assert os.path.isfile(result.report_paths["md"])


def test_a_planted_bug_fails_with_where_it_starts(runs):
    train(BUG, runs)
    with pytest.raises(AssertionError, match=r"where it starts: blocks\.0\.fc2\.out"):
        equiv_capture.assert_equivalent(runs / "tp1", runs / "tp2-bug")
    result = equiv_capture.compare(runs / "tp1", runs / "tp2-bug")
    assert result.verdict == "fail" and result.where == "blocks.0.fc2.out"
