#!/usr/bin/env python3
"""equiv_capture's cost on a CPU training step of a 100M-parameter model: time and peak memory of the
step without capture, with full capture, and with the selections (include, exclude, what=) and
buffer sizes a user may choose.

    capture_bench.py [--tokens N] [--reps R] [--dir DIR] [--package DIR] [--configs NAME,...]

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

--package DIR imports equiv_capture from DIR (an older tree's harness/python, to compare); a
configuration that names buffer_bytes is skipped where that package lacks it.
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


def main():
    if os.environ.get("MALLOC_MMAP_THRESHOLD_") is None:
        os.execve(sys.executable, [sys.executable] + sys.argv, dict(os.environ, MALLOC_MMAP_THRESHOLD_="131072"))
    args = parse()
    try:
        import torch
        from torch import nn
        sys.path.insert(0, os.path.abspath(args.package))
        import equiv_capture
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
    takes_buffer = "buffer_bytes" in inspect.signature(equiv_capture.Capture).parameters
    configs = [c for i, c in enumerate(CONFIGS) if args.configs is None or str(i) in args.configs.split(",")]
    configs = [c for c in configs if c[1] is None or "buffer_bytes" not in c[1] or takes_buffer]
    work = args.dir or tempfile.mkdtemp(prefix="capture_bench.")
    os.makedirs(work, exist_ok=True)

    def step(kwargs):
        """One step; (seconds, peak RSS growth, process peak RSS, file bytes, CPU seconds)."""
        out = os.path.join(work, "run")
        model.zero_grad(set_to_none=True)
        reset_peak()
        start_rss = vm("VmRSS")
        t0, c0 = time.perf_counter(), time.process_time()
        cap = equiv_capture.Capture(model, out, **kwargs) if kwargs is not None else None
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
          f"{torch.get_num_threads()} threads, equiv_capture from {os.path.abspath(args.package)}, "
          f"{args.reps} rounds", flush=True)
    step(None)  # warm-up: the first step's allocations
    seen = {name: [] for name, _ in configs}
    for r in range(args.reps):
        for name, kwargs in configs:
            seen[name].append(step(kwargs))
        print(f"round {r + 1}: " + ", ".join(f"{name} {seen[name][-1][0]:.2f} s" for name, _ in configs), flush=True)
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
    for name, _ in configs:
        size = median(name, 3)
        print(f"| {name} | {median(name, 0):.2f} s | {ratio(name, 0)} | {median(name, 4):.2f} s | {ratio(name, 4)} | "
              f"{median(name, 1) / MIB:.0f} MiB | {ratio(name, 1)} | {median(name, 2) / MIB:.0f} MiB | "
              f"{f'{size / MIB:.0f} MiB' if size else '-'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
