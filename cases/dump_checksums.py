"""Same answers: the dumps of a fixed set of runs, held to recorded checksums.

Runs every case at its ci size (each dtype it has, a dp and a tp > 1 layout, and one planted bug
per case), and two cases at a size whose GEMMs split over threads, under the default and the
ordered GEMM kernel and EQUIV_THREADS 1 and 3 (thread_counts() says which run gets which), hashes
every dataset's raw bytes (in the file's own type: bf16 stays 16 bits) in path order, and compares
each dump with cases/dump_checksums.txt. Root attributes (command, created time, git revision) are
not hashed. Thread counts share one recorded line: a value may not depend on them.

    dump_checksums.py EQUIV [--record] [--keep DIR]

--record rewrites cases/dump_checksums.txt (only on purpose: see its header). Every check run
also flips the last bit of one value in a copy of one dump and requires the comparison to catch
it, so that the test can fail.
"""
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

try:
    import h5py
    import numpy as np
except ImportError as e:
    print(f"skip: {e}")
    sys.exit(77)

RECORD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "dump_checksums.txt")

# label -> equiv arguments; every dtype the case lists unless --dtype is given.
RUNS = {
    "row_parallel.dp2-tp2": ["--case", "row_parallel", "--dp", "2", "--tp", "2"],
    "row_parallel.dp1-tp4.skip_allreduce": ["--case", "row_parallel", "--tp", "4", "--inject", "skip_allreduce"],
    "column_parallel.dp2-tp2": ["--case", "column_parallel", "--dp", "2", "--tp", "2"],
    "column_parallel.dp1-tp4.shard_offset": ["--case", "column_parallel", "--tp", "4", "--inject", "shard_offset"],
    "mlp_stack.dp2-tp2": ["--case", "mlp_stack", "--dp", "2", "--tp", "2"],
    "mlp_stack.dp1-tp4.skip_allreduce": ["--case", "mlp_stack", "--tp", "4", "--inject", "skip_allreduce"],
    "gpt.dp2-tp2": ["--case", "gpt", "--dp", "2", "--tp", "2"],
    "gpt.dp2-tp1.grad_avg_twice.bf16": ["--case", "gpt", "--dp", "2", "--tp", "1", "--dtype", "bf16",
                                        "--inject", "grad_avg_twice"],
    "spd.dp2-tp2.sum": ["--case", "spd", "--dp", "2", "--tp", "2", "--grads", "sum"],
    "spd.dp2-tp2.sum.faith_every_rank": ["--case", "spd", "--dp", "2", "--tp", "2", "--grads", "sum",
                                         "--inject", "faith_every_rank"],
    "probe.dp2": ["--case", "probe", "--dp", "2"],
    "probe.dp2.local_count.bf16": ["--case", "probe", "--dp", "2", "--dtype", "bf16", "--inject", "local_count"],
    # Enough rows (M >= 3 x 128) that equiv's threads split the GEMMs at EQUIV_THREADS=3 (at the
    # ci sizes most GEMMs are below models/backend_cpu.c's MIN_ROWS_PER_THREAD).
    "row_parallel.threads.dp1-tp4": ["--case", "row_parallel", "--size", "threads", "--tp", "4"],
    "gpt.threads.dp1-tp2.bf16": ["--case", "gpt", "--size", "threads", "--tp", "2", "--dtype", "bf16"],
}
# The size "threads", appended to a copy of the case's own file (so it follows the case's edits).
THREADS_SIZES = {
    "row_parallel": {"seq": 256, "batch": 2, "in_features": 512, "out_features": 256},
    "gpt": {"seq": 32, "batch": 16, "hidden": 64, "heads": 4, "ffn": 256, "layers": 1},
}
# kernel -> EQUIV_CPU_GEMM (None: the backend's own choice on this CPU)
KERNELS = {"default": None, "ordered": "ordered"}


def thread_counts(kernel, label):
    """EQUIV_THREADS for each run: 1 and 3 under the default kernel, 3 under the ordered one; the
    probe the other way round (its tiny GEMMs cost the default kernel 20x the ordered one's time).
    A run with a planted bug (its own code path, not another thread split) at one count per kernel:
    3 under the default, 1 under the ordered."""
    if "--inject" in RUNS[label]:
        return ("3",) if kernel == "default" else ("1",)
    if label.startswith("probe"):
        return ("3",) if kernel == "default" else ("1", "3")
    return ("1", "3") if kernel == "default" else ("3",)


def dataset_names(f):
    names = []
    f.visititems(lambda name, obj: names.append(name) if isinstance(obj, h5py.Dataset) else None)
    return sorted(names)


def raw_bytes(ds):
    """The dataset's bytes as stored (no conversion: bf16 read as 16-bit words)."""
    ftype = ds.id.get_type()
    buf = np.empty(ds.shape, dtype=np.dtype(f"<u{ftype.get_size()}"))
    if buf.size:
        ds.id.read(h5py.h5s.ALL, h5py.h5s.ALL, buf, mtype=ftype)
    return buf.tobytes()


def dump_digest(path):
    """(number of datasets, sha256 over each dataset's name, type size, shape and raw bytes)."""
    h = hashlib.sha256()
    with h5py.File(path, "r") as f:
        names = dataset_names(f)
        for name in names:
            ds = f[name]
            h.update(f"{name}\0{ds.id.get_type().get_size()}\0{ds.shape}\0".encode())
            h.update(raw_bytes(ds))
    return len(names), h.hexdigest()


def dump_kernel(path):
    """The GEMM kernels the run chose and the CPU, without the thread count."""
    with h5py.File(path, "r") as f:
        kernel = str(f.attrs["gemm_kernel"]).split("; rows over")[0]
        return f"{kernel}; cpu {f.attrs['cpu']}"


def write_cases(cases_dir, work):
    """Every case file, the ones in THREADS_SIZES with the size "threads" appended."""
    folder = os.path.join(work, "cases")
    os.makedirs(folder)
    for name in os.listdir(cases_dir):
        if name.endswith(".ini"):
            with open(os.path.join(cases_dir, name)) as f:
                text = f.read()
            size = THREADS_SIZES.get(name[:-4])
            if size:
                text += "\n[size.threads]\n" + "".join(f"{k} = {v}\n" for k, v in size.items())
            with open(os.path.join(folder, name), "w") as f:
                f.write(text)
    return folder


def machine(provenance):
    """The OpenBLAS core and the CPU of a provenance line (not the kernels chosen on them)."""
    return [part for part in provenance.split("; ") if part.startswith(("OpenBLAS core", "cpu "))]


def run_equiv(equiv, args, out, env_extra):
    env = {k: v for k, v in os.environ.items() if k not in ("EQUIV_CPU_GEMM", "EQUIV_THREADS")}
    env.update({k: v for k, v in env_extra.items() if k != "cases"})
    os.makedirs(os.path.dirname(out), exist_ok=True)
    proc = subprocess.run([equiv] + args + ["--out", out, "--cases-dir", env_extra["cases"]], env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)
    want = 1 if "--inject" in args else 0
    if proc.returncode != want:
        raise RuntimeError(f"{' '.join(args)} ({env_extra}): exit {proc.returncode}, want {want}: {proc.stderr}")


def run_all(equiv, work):
    """Every run under every config; returns {(kernel, threads, label): folder}."""
    cases = write_cases(os.path.dirname(RECORD), work)
    jobs = {}
    for kernel, forced in KERNELS.items():
        for label, args in RUNS.items():
            for threads in thread_counts(kernel, label):
                env = {"EQUIV_THREADS": threads, "cases": cases}
                if forced:
                    env["EQUIV_CPU_GEMM"] = forced
                out = os.path.join(work, f"{kernel}-t{threads}", label)
                jobs[(kernel, threads, label)] = (out, args, env)
    with ThreadPoolExecutor(max_workers=2) as pool:
        slowest_first = sorted(jobs, key=lambda key: not key[2].startswith(("probe", "gpt")))
        futures = [pool.submit(run_equiv, equiv, jobs[key][1], jobs[key][0], jobs[key][2]) for key in slowest_first]
        for fut in futures:
            fut.result()
    return {key: out for key, (out, _, _) in jobs.items()}


def digests(folders):
    """{(kernel, label, file): {threads: (n, sha)}} and {kernel: provenance}."""
    table, provenance = {}, {}
    for (kernel, threads, label), out in sorted(folders.items()):
        for name in sorted(os.listdir(out)):
            if not name.endswith(".h5"):
                continue
            path = os.path.join(out, name)
            # the record names a dump by its layout alone, as names were before a run's other
            # settings (--grads sum, --inject) followed it ("spd-fp32-dp2-tp2-grads_sum.h5")
            recorded_name = re.sub(r"(-dp[0-9]+-tp[0-9]+)-.*[.]h5$", r"\1.h5", name)
            table.setdefault((kernel, label, recorded_name), {})[threads] = dump_digest(path)
            provenance.setdefault(kernel, dump_kernel(path))
    return table, provenance


def read_record():
    recorded, provenance = {}, {}
    with open(RECORD) as f:
        for line in f:
            if line.startswith("# kernel "):
                _, _, kernel, desc = line.rstrip("\n").split(" ", 3)
                provenance[kernel] = desc
            if line.startswith("#") or not line.strip():
                continue
            kernel, label, name, n, sha = line.split()
            recorded[(kernel, label, name)] = (int(n), sha)
    return recorded, provenance


def compare(table, recorded, skip_kernels):
    """Problems found: a dump whose digest differs from the record, between thread counts, or
    that appears or is missing."""
    problems = []
    for key in sorted(set(table) | set(recorded)):
        if key[0] in skip_kernels:
            continue
        where = " ".join(key)
        if key not in table:
            problems.append(f"{where}: recorded, not written any more")
            continue
        if key not in recorded:
            problems.append(f"{where}: written, not recorded")
            continue
        for threads, got in sorted(table[key].items()):
            if got != recorded[key]:
                problems.append(f"{where} (EQUIV_THREADS={threads}): {got[0]} datasets sha256 {got[1][:16]}, "
                                f"recorded {recorded[key][0]} {recorded[key][1][:16]}")
    return problems


def first_differing_dataset(a, b):
    with h5py.File(a, "r") as fa, h5py.File(b, "r") as fb:
        for name in dataset_names(fa):
            if name not in fb or raw_bytes(fa[name]) != raw_bytes(fb[name]):
                return name
    return None


def flip_last_bit(path, name):
    """One ulp, in place: the lowest bit of the last nonzero value of the dataset."""
    with h5py.File(path, "r+") as f:
        ds = f[name]
        ftype = ds.id.get_type()
        buf = np.empty(ds.shape, dtype=np.dtype(f"<u{ftype.get_size()}"))
        ds.id.read(h5py.h5s.ALL, h5py.h5s.ALL, buf, mtype=ftype)
        flat = buf.reshape(-1)
        flat[np.flatnonzero(flat)[-1]] ^= 1
        ds.id.write(h5py.h5s.ALL, h5py.h5s.ALL, buf, mtype=ftype)


def self_check(folders, table, work):
    """A one-ulp change in one dataset of one dump must be caught: compared with the digest of the
    dump it was copied from, as a run's dump is with its recorded line."""
    kernel, threads, label = key = ("default", "1", "row_parallel.dp2-tp2")
    name, dataset = "row_parallel-bf16-dp2-tp2.h5", "layers/00/out"
    planted = os.path.join(work, "planted.h5")
    shutil.copyfile(os.path.join(folders[key], name), planted)
    flip_last_bit(planted, dataset)
    unplanted = {(kernel, label, name): table[(kernel, label, name)][threads]}
    if not compare({(kernel, label, name): {threads: dump_digest(planted)}}, unplanted, set()):
        print(f"FAIL: self-check: one ulp planted in {dataset} of {name} was not caught")
        return False
    print(f"ok: self-check: one ulp planted in {name}:{dataset} is caught")
    return True


def main():
    args = sys.argv[1:]
    if not args:
        print(__doc__)
        return 2
    equiv, record, keep = args[0], "--record" in args, None
    if "--keep" in args:
        keep = args[args.index("--keep") + 1]
    work = keep or tempfile.mkdtemp(prefix="equiv-checksums.")
    try:
        folders = run_all(equiv, work)
        table, provenance = digests(folders)
        if record:
            return write_record(table, provenance)
        recorded, recorded_provenance = read_record()
        # The default kernel's fp32 bits are those of the OpenBLAS core and CPU the record was made
        # on; on another machine they are not checked (a new kernel choice on the same machine is:
        # that is a change of values). The ordered C GEMM is checked everywhere.
        skip = {k for k in provenance
                if k != "ordered" and machine(recorded_provenance.get(k, "")) != machine(provenance[k])}
        for k in skip:
            print(f"note: the {k} kernel here is '{provenance[k]}', recorded with "
                  f"'{recorded_provenance.get(k)}': another machine, its dumps are not checked")
        problems = compare(table, recorded, skip)
        # Thread counts must agree with each other on every machine, recorded or not.
        for key, per_threads in sorted(table.items()):
            if len(set(per_threads.values())) > 1:
                out = {t: os.path.join(folders[(key[0], t, key[1])], key[2]) for t in per_threads}
                t1, t3 = sorted(out)[:2]
                problems.append(f"{' '.join(key)}: EQUIV_THREADS={t1} and ={t3} differ first at "
                                f"{first_differing_dataset(out[t1], out[t3])}")
        for p in problems:
            print("FAIL:", p)
        checked = sum(len(v) for k, v in table.items() if k[0] not in skip)
        ok = self_check(folders, table, work) and not problems
        print(f"{'ok' if ok else 'FAIL'}: {checked} dumps of {len(folders)} runs against {os.path.basename(RECORD)}")
        return 0 if ok else 1
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)


def write_record(table, provenance):
    for key, per_threads in table.items():
        if len(set(per_threads.values())) > 1:
            print(f"refusing to record: {' '.join(key)} differs between thread counts")
            return 1
    with open(RECORD) as f:
        header = [line for line in f if line.startswith("#") and not line.startswith("# kernel ")]
    with open(RECORD, "w") as f:
        f.writelines(header)
        for kernel in sorted(provenance):
            f.write(f"# kernel {kernel} {provenance[kernel]}\n")
        for key, per_threads in sorted(table.items()):
            n, sha = next(iter(per_threads.values()))
            f.write(f"{' '.join(key)} {n} {sha}\n")
    print(f"recorded {len(table)} dumps in {RECORD}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
