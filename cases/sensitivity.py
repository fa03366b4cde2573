#!/usr/bin/env python3
"""How small a bug in a user's own run equiv catches, and that it names where the bug enters;
and that honest layouts of the same run are never flagged.

    sensitivity.py WORK EQUIV [--quick] [--truth] [--jobs N] [--reuse-runs]
                   [--expect-caught S:DTYPE[,S:DTYPE...]] [--expect-caught-truth S:DTYPE[,...]]
                   [--expect-located] [--expect-no-false-alarms]

WORK: a directory for the runs, the reports and the results (WORK/sensitivity.md, .json);
EQUIV: the equiv binary. The model is harness/python/examples/scratch_tp.py (its parse_args and
launch); every run is forked from this one process, which imported torch once.

1. References (seed 0..4, dp1 tp1, bf16 and fp32) and truth runs (dp1 tp1 in a wider dtype:
   fp32 for bf16, fp64 for fp32).
2. Sensitivity: for every bug kind of scratch_tp.py, bf16 at strengths 0.1, 0.03, 0.01, 0.003 and
   fp32 also at 0.001, 0.0003, 0.0001 (seed 0; tp 4, dp 4 for dp_grad_scale): the bug run, then
   `EQUIV compare REF TEST` (and with --truth `... --truth TRUTH`). Caught: exit status 1. Named:
   the tensor equiv names first, the report's "where it starts" (the first result not as expected,
   in capture order; a replicated tensor the ranks disagree on is one, through its assembly
   finding); located: it is where the bug enters (scratch_tp.entry_tensor(kind);
   for dp_grad_scale, which enters every parameter's gradient at once, any of them).
   --quick with --expect-caught: only the strengths the expectations name.
3. False alarms: honest runs at dp 2/4/8, tp 2/4/8, dp2 x tp2, dp2 x tp4 (--quick: dp 2, tp 4,
   dp2 x tp2, seed 0 only), bf16 and fp32, seeds 0..4, each compared against its seed's
   reference: each must exit 0. How near each came to being flagged: the report's largest
   max_tol_ratio (|d| over the tolerance; 1 is the edge), structure margin (1 is flagged; where
   equiv tests structure) and, with --truth, test_rel / ref_rel against the truth.

--reuse-runs keeps the runs an earlier invocation wrote (WORK/runs/NAME: the name says all that
the run computed) and only compares them, e.g. with another equiv.

Prints a Markdown table (and writes it to WORK/sensitivity.md; every run's row to
WORK/sensitivity.json) and the time taken.

Exit status: 0 it ran and every expectation given held; 1 a run or comparison failed (a
comparison's exit status 2, e.g. --truth where equiv lacks it) or an expectation did not hold
(each named); 2 usage; 77 (skipped) where this python lacks torch with gloo, h5py or numpy.
  --expect-caught 0.01:bf16,0.0001:fp32   every kind caught at that strength for that dtype
                                          (the strength is added to the sweep if missing)
  --expect-caught-truth ...               the same for the comparisons with --truth
  --expect-located                        every caught run names its entry tensor first
  --expect-no-false-alarms                every honest comparison exits 0
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time

from torch_example import load_example

scratch_tp = load_example("scratch_tp")

DTYPES = ("bf16", "fp32")
TRUTH_DTYPE = {"bf16": "fp32", "fp32": "fp64"}
UNIT_ROUNDOFF = {"bf16": 2.0 ** -8, "fp32": 2.0 ** -24, "fp64": 2.0 ** -53}
TRUTH_RATIO, TRUTH_FLOOR_U = 3.0, 1.0  # harness/truth.h's EQ_TRUTH_RATIO, EQ_TRUTH_FLOOR_U
EVIDENCE = (("bits", "ranks disagree"), ("table", "tolerance table"), ("bound", "rounding bound"),
            ("structure", "structure"), ("truth", "truth"))
STRENGTHS = {"bf16": (0.1, 0.03, 0.01, 0.003), "fp32": (0.1, 0.03, 0.01, 0.003, 0.001, 0.0003, 0.0001)}
HONEST_LAYOUTS = ((2, 1), (4, 1), (8, 1), (1, 2), (1, 4), (1, 8), (2, 2), (2, 4))  # (dp, tp)
QUICK_LAYOUTS = ((2, 1), (1, 4), (2, 2))
SEEDS, QUICK_SEEDS = (0, 1, 2, 3, 4), (0,)
SWEEP_SEED = 0


def fmt(x):
    return f"{x:g}"


class Runs:
    """Training runs, each once: a run is named by what it computes."""

    def __init__(self, work):
        self.dir = os.path.join(work, "runs")
        self.jobs = {}  # name -> argv

    def add(self, dtype, seed, dp=1, tp=1, bug="none", strength=None, opts=()):
        name = f"{dtype}-s{seed}-dp{dp}tp{tp}"
        for i in range(0, len(opts), 2):
            value = opts[i + 1]
            name += f"-{opts[i].lstrip('-')}{value if value in DTYPES + ('fp64',) else fmt(float(value))}"
        argv = ["--dtype", dtype, "--seed", str(seed), "--dp", str(dp), "--tp", str(tp), *opts]
        if bug != "none":
            name += f"-{bug}{fmt(strength)}"
            argv += ["--bug", bug, "--strength", repr(strength)]
        self.jobs.setdefault(name, argv)
        return os.path.join(self.dir, name)


def train(path, argv):
    """Runs in a forked child: one training run, its output in PATH.log; the exit status says."""
    log = os.open(path + ".log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    try:
        scratch_tp.launch(scratch_tp.parse_args(["--out", path] + argv))
        code = 0
    except SystemExit as e:  # bad arguments: argparse said why
        code = e.code if isinstance(e.code, int) and e.code else 1
    except BaseException:
        import traceback
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def written(path, argv):
    """Whether an earlier invocation wrote this run: every rank's file."""
    world = int(argv[argv.index("--dp") + 1]) * int(argv[argv.index("--tp") + 1])
    return all(os.path.exists(os.path.join(path, f"rank{r:05d}.h5")) for r in range(world))


def train_all(runs, jobs, reuse=False):
    """Every run (with reuse, those an earlier invocation has not written), JOBS at a time, each a
    child forked from this process, which forks its ranks. Returns the names that failed."""
    os.makedirs(runs.dir, exist_ok=True)
    pending = [(n, a) for n, a in runs.jobs.items() if not (reuse and written(os.path.join(runs.dir, n), a))]
    running, failed = {}, []
    while pending or running:
        while pending and len(running) < jobs:
            name, argv = pending.pop(0)
            sys.stdout.flush()
            pid = os.fork()
            if pid == 0:
                train(os.path.join(runs.dir, name), argv)
            running[pid] = name
        pid, status = os.wait()
        name = running.pop(pid)
        if status != 0:
            failed.append(name)
    return failed


def compare_all(equiv, work, comparisons, jobs):
    """comparisons: {name: [REF, TEST, extra args...]}; runs `EQUIV compare ... --out WORK/cmp/NAME`,
    JOBS at a time. Returns {name: (exit status, report or None, stderr)}."""
    out, pending, running = {}, list(comparisons.items()), {}
    while pending or running:
        while pending and len(running) < jobs:
            name, args = pending.pop(0)
            d = os.path.join(work, "cmp", name)
            os.makedirs(d, exist_ok=True)
            for f in ("report.json", "report.md", "report.html"):
                if os.path.exists(os.path.join(d, f)):
                    os.unlink(os.path.join(d, f))
            p = subprocess.Popen([equiv, "compare", *args, "--out", d], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE, text=True)
            running[p] = (name, d)
        p = next(iter(running))
        _, err = p.communicate()
        name, d = running.pop(p)
        report = None
        if os.path.exists(os.path.join(d, "report.json")):
            with open(os.path.join(d, "report.json")) as f:
                report = json.load(f)
        out[name] = (p.returncode, report, err.strip())
    return out


FINDING = re.compile(r"^(?:test run|reference|test|ref)\w*: (\S+) \(")


MARGINS = (("tol", "max_tol_ratio", "largest metrics.max_tol_ratio: 1 is the tolerance"),
           ("structure", "structure margin", "largest structure.margin: 1 is flagged"),
           ("truth", "truth ratio", "largest truth.test_rel / truth.ref_rel: --truth flags beyond x3"))


def reading(rc, report):
    """What one comparison said: caught, the tensor it names first, where it starts, and how near
    an honest run came to being flagged (each margin with its tensor)."""
    r = {"rc": rc, "caught": rc == 1, "named": None, "starts": None, "finding": None, "unexpected": None,
         "by": set()}
    for key, _, _ in MARGINS:
        r[key], r[key + "_tensor"] = None, None

    def worst(key, value, path):
        if isinstance(value, (int, float)) and (r[key] is None or value > r[key]):
            r[key], r[key + "_tensor"] = value, path

    if report is None:
        return r
    for c in report.get("comparisons", []):
        if c.get("findings"):
            r["by"].add("bits")
        u = UNIT_ROUNDOFF.get((c.get("reference") or {}).get("dtype"), 0.0)
        for f in c.get("findings") or []:
            m = FINDING.match(f)
            if m and r["finding"] is None:
                r["finding"] = m.group(1)
        for res in c.get("results") or []:
            path = res.get("path")
            if not res.get("as_expected", True) and r["starts"] is None:
                r["starts"] = path
            worst("tol", (res.get("metrics") or {}).get("max_tol_ratio"), path)
            worst("structure", (res.get("structure") or {}).get("margin"), path)
            t = res.get("truth") or {}
            elements = 1
            for extent in res.get("shape") or []:
                elements *= extent
            if (t.get("judged") and isinstance(t.get("ref_rel"), (int, float)) and t["ref_rel"] > 0
                    and elements >= 64):  # equiv's EQ_TRUTH_MIN_ELEMENTS: a loss's ratio says nothing
                worst("truth", t["test_rel"] / t["ref_rel"], path)
            # which evidence flagged it (harness/verdict.h's order): the table, the bound, structure, truth
            m = res.get("metrics") or {}
            if res.get("observed") == "NON-FINITE" or as_float(m.get("max_tol_ratio")) > 1:
                r["by"].add("table")
            if as_float((res.get("theory") or {}).get("det_ratio")) > 1:
                r["by"].add("bound")
            if (res.get("structure") or {}).get("flagged"):
                r["by"].add("structure")
            if (t.get("judged") and elements >= 64 and as_float(t.get("test_rel")) > TRUTH_FLOOR_U * u
                    and as_float(t.get("test_rel")) > TRUTH_RATIO * as_float(t.get("ref_rel"))):
                r["by"].add("truth")
        r["unexpected"] = (r["unexpected"] or 0) + (c.get("unexpected") or 0)  # findings included
    r["named"] = r["starts"]  # a tensor the ranks disagree on is itself not as expected, in capture order
    r["by"] = sorted(r["by"])
    return r


def as_float(v):
    """A JSON report's real ("Infinity" and "NaN" are strings there); 0 when absent."""
    try:
        return float(v) if v is not None else 0.0
    except (TypeError, ValueError):
        return 0.0


def parse_expect(text, parser, flag):
    out = []
    for part in filter(None, (text or "").split(",")):
        s, _, dtype = part.partition(":")
        try:
            out.append((float(s), dtype))
        except ValueError:
            parser.error(f"{flag} {part}: want STRENGTH:DTYPE, e.g. 0.01:bf16")
        if dtype not in DTYPES:
            parser.error(f"{flag} {part}: the dtype is one of {', '.join(DTYPES)}")
    return out


def smallest_caught(rows):
    """The smallest strength from which every stronger one is caught ('-' if the strongest is
    missed), and '*' where a weaker one is caught below a miss; 'error' where a comparison failed."""
    if any(r["rc"] not in (0, 1) for r in rows):
        return "error"
    rows = sorted(rows, key=lambda r: -r["strength"])
    best = "-"
    for i, r in enumerate(rows):
        if not r["caught"]:
            if any(x["caught"] for x in rows[i:]):
                best += "*"
            break
        best = fmt(r["strength"])
    return best


def table(sweep, alarms, truth, elapsed):
    lines = ["| kind | dtype | layout | entry tensor | smallest caught | named the entry (caught runs) |"
             + (" smallest caught, --truth | named the entry, --truth |" if truth else ""),
             "|---|---|---|---|---|---|" + ("---|---|" if truth else "")]
    for kind in scratch_tp.KINDS:
        for dtype in DTYPES:
            rows = [r for r in sweep if r["kind"] == kind and r["dtype"] == dtype]
            if not rows:
                continue
            entry = f"`{scratch_tp.entry_tensor(kind)}`" + (" (any parameter's)" if kind in scratch_tp.DP_KINDS else "")
            cells = [kind, dtype, rows[0]["layout"], entry]
            for mode in ("plain",) + (("truth",) if truth else ()):
                got = [dict(r[mode], strength=r["strength"]) for r in rows]
                caught = [g for g in got if g["caught"]]
                cells.append(smallest_caught(got))
                cells.append(f"{sum(g['located'] for g in caught)}/{len(caught)}")
            lines.append("| " + " | ".join(cells) + " |")
    mode = "truth" if truth else "plain"
    lines += ["", "The smallest strength each piece of evidence flags on its own (in the comparisons"
              + (" with --truth" if truth else "") + "; '-': none of the strengths):", "",
              "| kind | dtype | " + " | ".join(title for _, title in EVIDENCE) + " |",
              "|---|---|" + "---|" * len(EVIDENCE)]
    for kind in scratch_tp.KINDS:
        for dtype in DTYPES:
            rows = [r for r in sweep if r["kind"] == kind and r["dtype"] == dtype]
            if rows:
                cells = [kind, dtype] + [smallest_caught([dict(r[mode], strength=r["strength"], caught=key in r[mode]["by"])
                                                          for r in rows]) for key, _ in EVIDENCE]
                lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "Every run:", "",
              "| kind | dtype | strength | caught | named first | where it starts |"
              + (" caught, --truth | named first, --truth |" if truth else ""),
              "|---|---|---:|---|---|---|" + ("---|---|" if truth else "")]
    for r in sweep:
        p = r["plain"]
        cells = [r["kind"], r["dtype"], fmt(r["strength"]), caught_cell(p),
                 f"`{p['named']}`" if p["named"] else "-", f"`{p['starts']}`" if p["starts"] else "-"]
        if truth:
            t = r["truth"]
            cells += [caught_cell(t), f"`{t['named']}`" if t["named"] else "-"]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "False alarms (honest layouts against their seed's dp1 tp1 reference):", ""]
    for mode in ("plain",) + (("truth",) if truth else ()):
        bad = [a for a in alarms if a[mode]["rc"] != 0]
        lines.append(f"- {'with --truth' if mode == 'truth' else 'plain'}: {len(bad)} of {len(alarms)} "
                     f"comparisons not exit 0")
        for a in bad:
            lines.append(f"  - {a['name']}: exit {a[mode]['rc']}, named `{a[mode]['named']}`")
    lines += ["", "How near the honest runs came (the worst comparison, and its tensor; the median of the "
              "comparisons' worst):", "", "| dtype | " + " | ".join(title for _, title, _ in MARGINS) + " |",
              "|---|" + "---|" * len(MARGINS)]
    for dtype in DTYPES:
        cells = [dtype]
        for key, _, _ in MARGINS:
            mode = "truth" if key == "truth" else "plain"
            got = [a for a in alarms if a["dtype"] == dtype and mode in a and a[mode][key] is not None]
            if not got:
                cells.append("-")
                continue
            w = max(got, key=lambda a: a[mode][key])
            med = sorted(a[mode][key] for a in got)[len(got) // 2]
            cells.append(f"{w[mode][key]:.3g} ({w['name']}, `{w[mode][key + '_tensor']}`); median {med:.3g}")
        lines.append("| " + " | ".join(cells) + " |")
    lines += [""] + [f"- {title}: {what}" for _, title, what in MARGINS]
    lines += ["", f"Time: {elapsed:.1f} s."]
    return "\n".join(lines) + "\n"


def caught_cell(r):
    return {0: "no", 1: "yes"}.get(r["rc"], f"error (exit {r['rc']})")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], usage=__doc__.split("\n\n")[1])
    parser.add_argument("work")
    parser.add_argument("equiv")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--truth", action="store_true", help="also compare with --truth (the wider run)")
    parser.add_argument("--jobs", type=int, default=2, help="runs and comparisons at a time (default 2)")
    parser.add_argument("--reuse-runs", action="store_true",
                        help="keep the runs an earlier invocation wrote in WORK/runs (compare them again)")
    parser.add_argument("--expect-caught", default="")
    parser.add_argument("--expect-caught-truth", default="")
    parser.add_argument("--expect-located", action="store_true")
    parser.add_argument("--expect-no-false-alarms", action="store_true")
    args = parser.parse_args()
    expect = parse_expect(args.expect_caught, parser, "--expect-caught")
    expect_truth = parse_expect(args.expect_caught_truth, parser, "--expect-caught-truth")
    if expect_truth and not args.truth:
        parser.error("--expect-caught-truth needs --truth")
    start = time.time()
    work = os.path.abspath(args.work)
    os.makedirs(work, exist_ok=True)
    runs = Runs(work)
    # --quick with expectations: only the strengths they name (the test); else the whole sweep
    wanted = {d: {s for s, dd in expect + expect_truth if dd == d} for d in DTYPES}
    strengths = {d: sorted(wanted[d] if args.quick and wanted[d] else set(STRENGTHS[d]) | wanted[d], reverse=True)
                 for d in DTYPES}

    # the sweep: a bug run, its reference and truth (sharing the model options the kind needs)
    sweep, comparisons = [], {}
    for kind in scratch_tp.KINDS:
        dp, tp = (4, 1) if kind in scratch_tp.DP_KINDS else (1, 4)
        for dtype in DTYPES:
            for s in strengths[dtype]:
                opts = tuple(scratch_tp.shared_options(kind, s, tp))
                ref = runs.add(dtype, SWEEP_SEED, opts=opts)
                test = runs.add(dtype, SWEEP_SEED, dp, tp, kind, s, opts)
                name = os.path.basename(test)
                row = {"kind": kind, "dtype": dtype, "strength": s, "layout": f"dp{dp} tp{tp}", "name": name}
                comparisons[name] = [ref, test]
                if args.truth:
                    truth = runs.add(TRUTH_DTYPE[dtype], SWEEP_SEED, opts=opts + ("--truth-of", dtype))
                    comparisons[name + "-truth"] = [ref, test, "--truth", truth]
                sweep.append(row)
    # the false alarms
    alarms = []
    for dtype in DTYPES:
        for seed in QUICK_SEEDS if args.quick else SEEDS:
            ref = runs.add(dtype, seed)
            truth = runs.add(TRUTH_DTYPE[dtype], seed, opts=("--truth-of", dtype)) if args.truth else None
            for dp, tp in QUICK_LAYOUTS if args.quick else HONEST_LAYOUTS:
                test = runs.add(dtype, seed, dp, tp)
                name = os.path.basename(test)
                alarms.append({"name": name, "dtype": dtype, "seed": seed, "layout": f"dp{dp} tp{tp}"})
                comparisons[name] = [ref, test]
                if args.truth:
                    comparisons[name + "-truth"] = [ref, test, "--truth", truth]

    t0 = time.time()
    failed = train_all(runs, max(args.jobs, 1), args.reuse_runs)
    t_train = time.time() - t0
    for name in failed:
        with open(os.path.join(runs.dir, name + ".log")) as f:
            tail = f.read().splitlines()[-5:]
        print(f"FAIL: training run {name} ({' '.join(runs.jobs[name])}) failed:", *tail, sep="\n")
    t0 = time.time()
    results = compare_all(args.equiv, work, comparisons, max(args.jobs, 1))
    t_cmp = time.time() - t0

    errors = [f"training run {n} failed" for n in failed]
    for name, (rc, _, err) in results.items():
        if rc not in (0, 1):
            errors.append(f"equiv compare {' '.join(comparisons[name])}: exit {rc}: {err.splitlines()[-1] if err else ''}")
    for rows, key in ((sweep, "name"), (alarms, "name")):
        for row in rows:
            for mode, suffix in (("plain", ""), ("truth", "-truth")):
                if row[key] + suffix in results:
                    rc, report, _ = results[row[key] + suffix]
                    row[mode] = reading(rc, report)
    for row in sweep:
        for mode in ("plain", "truth"):
            if mode in row:
                row[mode]["located"] = scratch_tp.is_entry(row["kind"], row[mode]["named"])

    elapsed = time.time() - start
    md = table(sweep, alarms, args.truth, elapsed)
    md += (f"Training: {len(runs.jobs)} runs, {t_train:.1f} s; comparisons: {len(comparisons)}, {t_cmp:.1f} s "
           f"({args.jobs} at a time).\n")
    with open(os.path.join(work, "sensitivity.md"), "w") as f:
        f.write(md)
    with open(os.path.join(work, "sensitivity.json"), "w") as f:
        json.dump({"sweep": sweep, "false_alarms": alarms, "seconds": elapsed}, f, indent=1)
    print(md, end="")

    failures = list(errors)
    for mode, wanted in (("plain", expect), ("truth", expect_truth)):
        for s, dtype in wanted:
            for kind in scratch_tp.KINDS:
                row = next((r for r in sweep if r["kind"] == kind and r["dtype"] == dtype and r["strength"] == s), None)
                if row is None or not row[mode]["caught"]:
                    failures.append(f"{kind} {dtype} at strength {fmt(s)} not caught"
                                    + (" with --truth" if mode == "truth" else ""))
    if args.expect_located:
        for row in sweep:
            for mode in ("plain", "truth"):
                r = row.get(mode)
                if r and r["caught"] and not r["located"]:
                    failures.append(f"{row['name']}{' with --truth' if mode == 'truth' else ''}: caught, but "
                                    f"named `{r['named']}` first, not `{scratch_tp.entry_tensor(row['kind'])}`")
    if args.expect_no_false_alarms:
        for a in alarms:
            for mode in ("plain", "truth"):
                if mode in a and a[mode]["rc"] != 0:
                    failures.append(f"false alarm: {a['name']}{' with --truth' if mode == 'truth' else ''} "
                                    f"exit {a[mode]['rc']} (named `{a[mode]['named']}`)")
    for f in failures:
        print(f"FAIL: {f}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
