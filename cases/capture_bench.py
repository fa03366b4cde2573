#!/usr/bin/env python3
"""equiv_capture's cost on a CPU training step of a 100M-parameter model: time and peak memory of the
step without capture, with full capture, and with the selections (include, exclude, what=) and
buffer sizes a user may choose.

    capture_bench.py [--tokens N] [--reps R] [--dir DIR] [--package DIR] [--before DIR] [--configs I,...]

The model is a GPT-like MLP stack in fp32: 12 residual blocks of LayerNorm, Linear(1024, 4096), GELU,
Linear(4096, 1024) (100.7M parameters); the step is a forward over N tokens (512: about 2 s on one
core), a squared-error loss and the backward, with every parameter's gradient. One process,
the model built once; the configurations alternate step by step, R rounds, and each number is the
median over the rounds, as a ratio to the step without capture in the same rounds.

Time: the whole step, the Capture's construction and write() included (the file's removal not), as
wall-clock time and as this process's CPU time (less moved by other work on a shared machine).
Memory: the step's peak RSS over the RSS at its start (Linux's VmHWM, reset through
/proc/self/clear_refs before each step); glibc's mmap threshold is fixed at 128 KiB (the script
re-executes itself with MALLOC_MMAP_THRESHOLD_ set) so a freed tensor goes back to the system and
each step's peak is its own, not the allocator's leftovers of the one before.

--package DIR imports equiv_capture from DIR (default: this tree's harness/python); --before DIR
also imports the one in DIR (another tree's harness/python, say main's before a change) and runs
its configurations too, alternated with the others in the same rounds, as "before: ..." rows. A
configuration that names buffer_bytes is skipped for a package that lacks it.
Exit 0; 77 without torch, h5py or Linux's /proc.
"""

import argparse
import inspect
import os
import shutil
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MIB = 1 << 20

# name, Capture's keyword arguments (None: no capture)
CONFIGS = [
    ("none", None),
    ("full", {}),
    ("full, buffer_bytes=0", {"buffer_bytes": 0}),
    ("full, buffer_bytes=32 MiB", {"buffer_bytes": 32 * MIB}),
    ('include=("blocks.0.*",)', {"include": ("blocks.0.*",)}),
    ('exclude=("*.ln", "*.act")', {"exclude": ("*.ln", "*.act")}),
    ('what="activations"', {"what": "activations"}),
    ('what="gradients"', {"what": "gradients"}),
]


def parse():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tokens", type=int, default=512, help="tokens in the step's batch (default 512)")
    p.add_argument("--reps", type=int, default=5, help="rounds over the configurations (default 5)")
    p.add_argument("--dir", default=None, help="where the files are written (default: a temporary folder)")
    p.add_argument("--package", default=os.path.join(ROOT, "harness", "python"),
                   help="the folder equiv_capture is imported from")
    p.add_argument("--before", default=None, help="another folder holding an equiv_capture to run alongside")
    p.add_argument("--configs", default=None, help="comma-separated indices into the table (default all)")
    return p.parse_args()


def vm(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def reset_peak():
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # VmHWM := VmRSS


def load_package(name, folder):
    """The equiv_capture package in folder, imported under another name (two can then run side by side)."""
    import importlib.util
    pkg = os.path.join(os.path.abspath(folder), "equiv_capture")
    spec = importlib.util.spec_from_file_location(name, os.path.join(pkg, "__init__.py"),
                                                  submodule_search_locations=[pkg])
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def main():
    if os.environ.get("MALLOC_MMAP_THRESHOLD_") is None:
        os.execve(sys.executable, [sys.executable] + sys.argv, dict(os.environ, MALLOC_MMAP_THRESHOLD_="131072"))
    args = parse()
    try:
        import torch
        from torch import nn
        packages = [("", load_package("equiv_capture", args.package))]
        if args.before:
            packages.append(("before: ", load_package("equiv_capture_before", args.before)))
        reset_peak()
        vm("VmHWM")
    except (ImportError, OSError, RuntimeError) as e:
        print(f"skip: {e}")
        return 77

    class Block(nn.Module):
        def __init__(self, hidden, ffn):
            super().__init__()
            self.ln, self.fc1, self.act, self.fc2 = nn.LayerNorm(hidden), nn.Linear(hidden, ffn), nn.GELU(), \
                nn.Linear(ffn, hidden)

        def forward(self, x):
            return x + self.fc2(self.act(self.fc1(self.ln(x))))

    class Net(nn.Module):
        def __init__(self, hidden=1024, ffn=4096, layers=12):
            super().__init__()
            self.blocks = nn.ModuleList(Block(hidden, ffn) for _ in range(layers))

        def forward(self, x):
            for block in self.blocks:
                x = block(x)
            return x

    torch.manual_seed(0)
    model = Net()
    n_params = sum(p.numel() for p in model.parameters())
    x = torch.randn(args.tokens // 32 or 1, min(32, args.tokens), 1024)
    target = torch.randn_like(x)
    configs = []  # (name, the package's Capture, its keyword arguments)
    for i, (name, kwargs) in enumerate(CONFIGS):
        if args.configs is not None and str(i) not in args.configs.split(","):
            continue
        if kwargs is None:
            configs.append((name, None, None))
            continue
        for label, package in packages:
            if "buffer_bytes" not in kwargs or \
                    "buffer_bytes" in inspect.signature(package.Capture).parameters:
                configs.append((label + name, package.Capture, kwargs))
    work = args.dir or tempfile.mkdtemp(prefix="capture_bench.")
    os.makedirs(work, exist_ok=True)

    def step(capture, kwargs):
        """One step; (seconds, peak RSS growth, process peak RSS, file bytes, CPU seconds)."""
        out = os.path.join(work, "run")
        model.zero_grad(set_to_none=True)
        reset_peak()
        start_rss = vm("VmRSS")
        t0, c0 = time.perf_counter(), time.process_time()
        cap = capture(model, out, **kwargs) if capture is not None else None
        loss = ((model(x) - target) ** 2).mean()
        if cap is not None:
            cap.loss(loss)
        loss.backward()
        if cap is not None:
            cap.grads()
            cap.write()
        seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
        peak = vm("VmHWM")
        size = os.path.getsize(os.path.join(out, "rank00000.h5")) if cap is not None else 0
        del cap, loss
        shutil.rmtree(out, ignore_errors=True)
        return seconds, peak - start_rss, peak, size, cpu

    print(f"capture_bench: {n_params / 1e6:.1f}M parameters, {x.shape[0] * x.shape[1]} tokens, "
          f"torch threads {torch.get_num_threads()}, equiv_capture from {os.path.abspath(args.package)}"
          f"{f' (before: {os.path.abspath(args.before)})' if args.before else ''}, {args.reps} rounds", flush=True)
    step(None, None)  # warm-up: the first step's allocations
    seen = {name: [] for name, _, _ in configs}
    for r in range(args.reps):
        for name, capture, kwargs in configs:
            seen[name].append(step(capture, kwargs))
        print(f"round {r + 1}: " + ", ".join(f"{name} {seen[name][-1][0]:.2f} s" for name, _, _ in configs),
              flush=True)
    if not args.dir:
        shutil.rmtree(work, ignore_errors=True)

    def median(name, k):
        return statistics.median(s[k] for s in seen[name])

    def ratio(name, k):
        return f"{median(name, k) / median('none', k):.2f}" if "none" in seen else "-"

    print()
    print("| capture | step time | vs none | CPU time | vs none | peak RSS growth in the step | vs none | "
          "process peak RSS | file |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, _, _ in configs:
        size = median(name, 3)
        print(f"| {name} | {median(name, 0):.2f} s | {ratio(name, 0)} | {median(name, 4):.2f} s | {ratio(name, 4)} | "
              f"{median(name, 1) / MIB:.0f} MiB | {ratio(name, 1)} | {median(name, 2) / MIB:.0f} MiB | "
              f"{f'{size / MIB:.0f} MiB' if size else '-'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
