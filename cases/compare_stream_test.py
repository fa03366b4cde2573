"""equiv compare streams (issue 29): a run of many tensors is compared a batch at a time, so its
peak memory does not grow with the number of tensors, and every tensor's result lands in its own
place, whatever batch it was read in.

    compare_stream_test.py EQUIV

Two captures of 8 MiB fp32 tensors (a reference file against 4 dp rank files, peers/capture_synth.py):
24 tensors (192 MiB a run: three batches of 64 MiB, so two in memory at once, as at any size) and
48 (384 MiB a run). Checked:
  - the peak memory of equiv's process grows by less than 32 MiB from 24 to 48 tensors (a compare
    that holds both runs whole grows by 2 x 192 MiB);
  - 48 tensors, one of them (blocks.40.out, several batches in) scaled by 1.01 on one rank: exit 1,
    the report names it where it starts and it alone is not as expected; every tensor's max |d| and
    count outside the tolerance in the JSON report equal numpy's, computed here from the files.
"""
import json
import re
import os
import resource
import subprocess
import sys
import tempfile

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SYNTH = os.path.join(HERE, "..", "peers", "capture_synth.py")
ATOL = 1e-3

failures = []


def check(ok, what):
    print(("ok: " if ok else "FAIL: ") + what)
    if not ok:
        failures.append(what)


def capture(out, gb):
    subprocess.run([sys.executable, SYNTH, out, "--gb", str(gb), "--tensor-mb", "8", "--layout", "dp4"], check=True,
                   stdout=subprocess.DEVNULL)


def peak_mib(cmd):
    """(exit status, peak RSS of the command's process in MiB), measured in a process of its own."""
    probe = ("import resource, subprocess, sys\n"
             "p = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL)\n"
             "print(p.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n")
    got = subprocess.run([sys.executable, "-c", probe] + cmd, capture_output=True, text=True, check=True).stdout.split()
    return int(got[0]), int(got[1]) / 1024


def assembled(run_dir, name):
    files = sorted(os.listdir(run_dir))
    parts = []
    for f in files:
        with h5py.File(os.path.join(run_dir, f), "r") as h:
            parts.append((int(h.attrs["dp_rank"]), h[name][()]))
    return np.concatenate([p for _, p in sorted(parts, key=lambda x: x[0])], axis=0)


def main():
    equiv = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        small, big = os.path.join(tmp, "small"), os.path.join(tmp, "big")
        capture(small, 0.2)
        capture(big, 0.4)
        with h5py.File(os.path.join(big, "ref.h5"), "r") as f:
            names = list(f.keys())
        check(len(names) == 48, f"the large capture holds 48 tensors ({len(names)})")
        cmd = lambda cap, out: [equiv, "compare", os.path.join(cap, "ref.h5"), os.path.join(cap, "run"), "--atol",
                                str(ATOL), "--rtol", "0", "--out", out]
        st_small, rss_small = peak_mib(cmd(small, os.path.join(tmp, "o-small")))
        st_big, rss_big = peak_mib(cmd(big, os.path.join(tmp, "o-big")))
        check(st_small == 0 and st_big == 0, f"honest runs within (exit {st_small}, {st_big})")
        check(rss_big - rss_small < 32, f"peak memory {rss_small:.0f} MiB at 24 tensors, {rss_big:.0f} MiB at 48: "
              f"grows by {rss_big - rss_small:.0f} MiB (< 32; whole runs: 384)")

        # one tensor several batches in, scaled on one rank
        with h5py.File(os.path.join(big, "run", "rank2.h5"), "r+") as f:
            f["blocks.40.out"][...] = f["blocks.40.out"][()] * np.float32(1.01)
        out = os.path.join(tmp, "o-bug")
        p = subprocess.run(cmd(big, out), capture_output=True, text=True)
        check(p.returncode == 1, f"a tensor scaled on one rank: exit {p.returncode} (want 1)")
        with open(os.path.join(out, "report.json")) as f:
            report = json.load(f)
        results = report["comparisons"][0]["results"]
        bad = [r["path"] for r in results if not r["as_expected"]]
        check(bad == ["blocks.40.out"], f"not as expected: {bad} (want blocks.40.out alone)")
        check("blocks.40.out" in p.stdout.splitlines()[-1], "the summary line names blocks.40.out first")
        check([r["path"] for r in results] == [f"blocks.{i}.out" for i in range(48)],
              "results in the reference's order (as written)")
        wrong = []
        with h5py.File(os.path.join(big, "ref.h5"), "r") as f:
            for r in results:
                ref = f[r["path"]][()].astype(np.float64)
                d = np.abs(assembled(os.path.join(big, "run"), r["path"]).astype(np.float64) - ref)
                if r["metrics"]["max_abs"] != d.max() or r["metrics"]["n_outside"] != int((d > ATOL).sum()):
                    wrong.append((r["path"], r["metrics"]["max_abs"], d.max()))
        check(not wrong, f"every tensor's max |d| and count outside equal numpy's ({wrong[:3]})")

        # progress (-v): lines of tensors done of all, the rate and the time left; a line a second
        # at most, so a compare that ends sooner may show only its first
        env = dict(os.environ, EQUIV_PROGRESS_AFTER_S="0")
        p = subprocess.run(cmd(big, os.path.join(tmp, "o-v")) + ["-v"], capture_output=True, text=True, env=env)
        lines = [x for x in p.stderr.splitlines() if x.startswith("equiv progress: compare")]
        form = re.compile(r"^equiv progress: compare(: (open the runs|at [0-9.e+-]+ GB/s, tensor [0-9]+/48))?, "
                          r"[0-9]+ s(, about [0-9]+ s left)?$")
        check(lines and all(form.match(x) for x in lines), f"progress lines of the form: {lines[:4]}")
        took = float(re.search(r"([0-9]+) s", lines[-1]).group(1)) if lines else 0
        if took >= 2:
            check(any("tensor" in x and "left" in x for x in lines), "a compare of 2 s or more shows tensors done "
                  "and the time left")
    if failures:
        sys.exit(f"{len(failures)} check(s) failed")


if __name__ == "__main__":
    main()
