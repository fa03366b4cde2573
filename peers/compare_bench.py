"""equiv compare against the script a user would write instead (compare_numpy.py: h5py and numpy,
one tensor at a time), on synthetic captures of a real run's size (capture_synth.py): a reference
file against a run directory of 4 rank files, fp32 and bf16, dp 4 (shards along dim 0) and tp 4
(along dim 1), at 1.6 GB and 16 GB per run.

    compare_bench.py EQUIV [--sizes 1.6,16] [--dtypes fp32,bf16] [--layouts dp4,tp4] [--pairs 4]
                           [--dir DIR] [--huge GB]

Each configuration: the capture is written under DIR (default: a temporary folder), then PAIRS
rounds run, each from a cold page cache where this user may drop it (/proc/sys/vm/drop_caches),
else as it lies, in orders that balance which runs after which (ORDERS: use a multiple of 4
rounds): equiv, the peer, and the files read once two ways, `cat > /dev/null` and the HDF5 read alone (read_h5.py: every dataset into one reused
buffer); then the capture is deleted. Printed per configuration: medians of wall time and of peak
memory (equiv's own process, which maps the readers' shared buffer), and the medians of the rounds'
ratios equiv / peer (issue 29: at most 0.7), equiv / cat and equiv / HDF5 read (at most 1.3): a
ratio within one round, where the box's state (a virtual disk's speed, other jobs) is the same.

COMPARE_BENCH_ARGS: more options, for `meson test --benchmark` (which passes EQUIV alone).
--huge GB: one more configuration of GB in all (two runs of GB / 2, fp32 dp4), compared by equiv
alone, to show that memory stays bounded whatever the size: written only where the disk has room
(else said and skipped), deleted after. Timings, not a test: it fails only if a program does.
"""
import argparse
import os
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PY = sys.executable


def drop_caches():
    """1 if the page cache was dropped (the next read is cold), else 0."""
    try:
        subprocess.run(["sync"], check=True)
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return 1
    except OSError:
        return 0


def timed(cmd, ok=(0, 1)):
    """(wall s, peak RSS MiB of the command's process, of its largest descendant) of one run."""
    wrapped = ["/usr/bin/time", "-f", "%e %M"] + cmd
    t0 = time.perf_counter()
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    p = subprocess.run(wrapped, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - t0
    if p.returncode not in ok:
        sys.exit(f"compare_bench: {' '.join(cmd)} exited {p.returncode}: {p.stderr[-2000:]}")
    rss = int(p.stderr.strip().split()[-1]) / 1024
    return wall, rss, max(before, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) / 1024


def med(xs):
    return statistics.median(xs)


# The rounds' orders of the four programs (equiv, peer, cat, HDF5 read): a balanced Latin square, in
# which over four rounds each program runs once in each place and once after each other. What ran
# just before changes a cold run here: on this virtual machine the host takes back the pages a run
# frees a few seconds later, and the next run to touch them pays 2 to 3 times the kernel time (a
# cold compare of 1.6 GB: 1.5 s, or 3.1 s after a 5 s pause), so no program may always follow the same one.
ORDERS = ((0, 1, 3, 2), (1, 2, 0, 3), (2, 3, 1, 0), (3, 0, 2, 1))


def one(args, out, gb, dtype, layout):
    cap = os.path.join(out, f"cap-{gb}-{dtype}-{layout}")
    subprocess.run([PY, os.path.join(HERE, "capture_synth.py"), cap, "--gb", str(gb), "--dtype", dtype,
                    "--layout", layout], check=True, stdout=subprocess.DEVNULL)
    ref, run = os.path.join(cap, "ref.h5"), os.path.join(cap, "run")
    files = [ref] + sorted(os.path.join(run, f) for f in os.listdir(run))
    cmds = {"equiv": ([args.equiv, "compare", ref, run, "--atol", "1e-4", "--rtol", "0"], (0, 1)),
            "peer": ([PY, os.path.join(HERE, "compare_numpy.py"), ref, run], (0,)),
            "cat": (["sh", "-c", "cat " + " ".join(files) + " > /dev/null"], (0,)),
            "h5": ([PY, os.path.join(HERE, "read_h5.py"), ref, run], (0,))}
    names = list(cmds)
    times = {name: [] for name in names}
    cold = 0
    for r in range(args.pairs):  # each round every program once, cold, in the order of a balanced square
        for k in ORDERS[r % len(ORDERS)]:
            cold = drop_caches()
            times[names[k]].append(timed(cmds[names[k]][0], ok=cmds[names[k]][1]))
    shutil.rmtree(cap)

    def ratios(a, b):  # each round's ratio: that round's programs ran on the same box's state
        return [x[0] / y[0] for x, y in zip(times[a], times[b])]

    def ratio(a, b):  # their median
        return med(ratios(a, b))

    def spread(a, b):  # and the range of the rounds' ratios, which says how far the box's state moved them
        r = ratios(a, b)
        return f"{min(r):.2f} to {max(r):.2f}"

    wall = {name: med([t[0] for t in times[name]]) for name in names}
    peak = {name: med([t[1] for t in times[name]]) for name in ("equiv", "peer")}
    print(f"{gb:>5} GB {dtype} {layout} ({'cold' if cold else 'warm'} cache): equiv {wall['equiv']:.2f} s, "
          f"{peak['equiv']:.0f} MiB; numpy peer {wall['peer']:.2f} s, {peak['peer']:.0f} MiB; equiv / peer "
          f"{ratio('equiv', 'peer'):.2f}; reading the files once: cat {wall['cat']:.2f} s, HDF5 {wall['h5']:.2f} s; "
          f"equiv / cat {ratio('equiv', 'cat'):.2f} (rounds {spread('equiv', 'cat')}), equiv / HDF5 read "
          f"{ratio('equiv', 'h5'):.2f} (rounds {spread('equiv', 'h5')})", flush=True)


def huge(args, out, gb):
    free = shutil.disk_usage(out).free / 1e9
    if free < gb * 1.05:
        print(f"--huge {gb}: skipped, {free:.0f} GB free under {out} (a capture of {gb} GB needs {gb * 1.05:.0f})")
        return
    cap = os.path.join(out, f"cap-huge-{gb}")
    t0 = time.perf_counter()
    subprocess.run([PY, os.path.join(HERE, "capture_synth.py"), cap, "--gb", str(gb / 2), "--layout", "dp4"],
                   check=True, stdout=subprocess.DEVNULL)
    written = time.perf_counter() - t0
    drop_caches()
    wall, rss, _ = timed([args.equiv, "compare", os.path.join(cap, "ref.h5"), os.path.join(cap, "run"), "--atol",
                          "1e-4", "--rtol", "0"])
    shutil.rmtree(cap)
    print(f"{gb:>5} GB fp32 dp4 (equiv alone; written in {written:.0f} s): {wall:.1f} s, "
          f"{gb / wall:.2f} GB/s, peak {rss:.0f} MiB", flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("equiv")
    p.add_argument("--sizes", default="1.6,16")
    p.add_argument("--dtypes", default="fp32,bf16")
    p.add_argument("--layouts", default="dp4,tp4")
    p.add_argument("--pairs", type=int, default=4)
    p.add_argument("--dir")
    p.add_argument("--huge", type=float)
    # meson's benchmark passes EQUIV alone: COMPARE_BENCH_ARGS adds options ("--huge 100")
    args = p.parse_args(sys.argv[1:] + shlex.split(os.environ.get("COMPARE_BENCH_ARGS", "")))
    out = args.dir or tempfile.mkdtemp(prefix="equiv_compare_bench_")
    os.makedirs(out, exist_ok=True)
    print(f"equiv compare vs the numpy peer, {args.pairs} pairs each, {os.cpu_count()} cores, "
          f"load {os.getloadavg()[0]:.1f}", flush=True)
    try:
        for gb in [float(x) for x in args.sizes.split(",") if x]:
            for dtype in args.dtypes.split(","):
                for layout in args.layouts.split(","):
                    one(args, out, gb, dtype, layout)
        if args.huge:
            huge(args, out, args.huge)
    finally:
        if not args.dir:
            shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()
