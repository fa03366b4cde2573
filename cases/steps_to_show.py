"""How many steps a bug takes to show: `equiv compare REF TEST` on the first n steps of two runs of
many steps (harness/SCHEMA.md, "Runs of many steps"), n = 2, 3, ..., until it exits 1.

    steps_to_show.py EQUIV REF TEST     prints one line:
        "shows at step N: curve CLASS, FINDINGS findings (first: ...)"  or  "not shown in N steps"
    exit 0 when it showed, 1 when not, 2 on a usage or input error

The first n steps of a run are a copy of it whose light records (steps/rank*.json) hold steps 1..n
and whose other folders (params_*, step_*) are links to the run's: what the run would have recorded
had it stopped after step n. Each n is judged with step 1's full capture only (the later ones are
not yet taken after n steps).
"""
import json
import os
import subprocess
import sys
import tempfile


def truncate(run, n, dest):
    os.makedirs(os.path.join(dest, "steps"))
    for entry in os.listdir(run):
        if entry != "steps" and (not entry.startswith("step_") or entry == "step_000001"):
            os.symlink(os.path.abspath(os.path.join(run, entry)), os.path.join(dest, entry))
    for name in os.listdir(os.path.join(run, "steps")):
        with open(os.path.join(run, "steps", name)) as f:
            doc = json.load(f)
        doc["steps"] = doc["steps"][:n]
        doc["full_steps"] = [s for s in doc["full_steps"] if s == 1]
        with open(os.path.join(dest, "steps", name), "w") as f:
            json.dump(doc, f)


def judge(equiv, ref, test, n, work):
    """equiv compare's exit status on the first n steps, the curve's class and the findings."""
    pair = []
    for side, run in (("ref", ref), ("test", test)):
        dest = os.path.join(work, f"{side}-{n}")
        truncate(run, n, dest)
        pair.append(dest)
    out = os.path.join(work, f"report-{n}")
    done = subprocess.run([equiv, "compare", *pair, "--out", out], capture_output=True, text=True)
    if done.returncode not in (0, 1):
        sys.exit(f"steps_to_show: {n} steps: exit {done.returncode}: {done.stderr.strip()}")
    with open(os.path.join(out, "report.json")) as f:
        c = json.load(f)["comparisons"][0]
    return done.returncode, c["steps"]["class"], c.get("findings", [])


def main():
    if len(sys.argv) != 4:
        print(__doc__)
        return 2
    equiv, ref, test = sys.argv[1:]
    with open(os.path.join(ref, "steps", "rank00000.json")) as f:
        total = len(json.load(f)["steps"])
    with tempfile.TemporaryDirectory() as work:
        for n in range(2, total + 1):
            status, cls, findings = judge(equiv, ref, test, n, work)
            if status == 1:
                first = f" (first: {findings[0]})" if findings else ""
                print(f"shows at step {n}: curve {cls}, {len(findings)} findings{first}")
                return 0
    print(f"not shown in {total} steps")
    return 1


if __name__ == "__main__":
    sys.exit(main())
