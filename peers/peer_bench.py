"""equiv against the script a user would write instead: `equiv --case row_parallel --size docs
--tp 4 --dtype bf16` (full report, rounding bound included) and the torch and numpy peers
(row_parallel_torch.py, row_parallel_numpy.py: the same GEMMs, ring sum and statistics, no bound),
run in alternation, each as a fresh process, as a user runs them.

    peer_bench.py EQUIV

PEER_BENCH_PAIRS: rounds (default 5); each round runs equiv, the torch peer and the numpy peer
once (equiv first in even rounds, last in odd ones, so that a drift in load hits both sides), and
gives one pair per peer. PEER_THREADS: the peers' threads (default: as many as equiv uses, the
online cores up to 16 or EQUIV_THREADS), so that both sides have the same cores.

Prints each pair's wall and CPU seconds, then per peer the medians and the ratio equiv / peer
(the median of the pairs' ratios). Timings, not a test: it fails only if a program does.
"""
import os
import resource
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PEERS = {"torch": os.path.join(HERE, "row_parallel_torch.py"), "numpy": os.path.join(HERE, "row_parallel_numpy.py")}


def timed(cmd, env):
    """(wall seconds, CPU seconds of the child) of one run; exits on a failure."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        sys.exit(f"peer_bench: {' '.join(cmd)} exited {proc.returncode}:\n{proc.stdout[-2000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    equiv = sys.argv[1]
    rounds = int(os.environ.get("PEER_BENCH_PAIRS", "5"))
    threads = os.environ.get("PEER_THREADS") or os.environ.get("EQUIV_THREADS") or str(min(os.cpu_count() or 1, 16))
    peer_env = dict(os.environ, PEER_THREADS=threads, OPENBLAS_NUM_THREADS=threads)
    runs = {"equiv": [equiv, "--case", "row_parallel", "--size", "docs", "--tp", "4", "--dtype", "bf16"]}
    runs.update({name: [sys.executable, path] for name, path in PEERS.items()})
    print(f"row_parallel docs tp4 bf16: equiv vs the torch and numpy peers, {rounds} rounds, "
          f"peers on {threads} threads; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    times = {name: [] for name in runs}
    for r in range(rounds):
        order = ["equiv", "torch", "numpy"] if r % 2 == 0 else ["torch", "numpy", "equiv"]
        for name in order:
            times[name].append(timed(runs[name], os.environ if name == "equiv" else peer_env))
        print(f"round {r + 1}: " + "  ".join(f"{n} {times[n][r][0]:.2f} s wall {times[n][r][1]:.2f} s CPU"
                                             for n in runs), flush=True)
    for peer in PEERS:
        for i, kind in enumerate(("wall", "CPU")):
            eq = [t[i] for t in times["equiv"]]
            pe = [t[i] for t in times[peer]]
            ratio = statistics.median(e / p for e, p in zip(eq, pe))
            print(f"{peer:5s} {kind:4s}: equiv median {statistics.median(eq):.2f} s, peer median "
                  f"{statistics.median(pe):.2f} s, equiv/peer {ratio:.2f}x (median of {rounds} pairs)")
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
