"""A synthetic capture of the size of a real run's, for the compare benchmark (issue 29): a
reference file of full tensors and a run directory of per-rank files holding the same tensors
sharded as equiv_capture writes them, with a small difference so that no tensor is bit-exact.

    capture_synth.py OUT_DIR --gb G --dtype fp32|bf16 --layout dp4|tp4 [--tensor-mb M]

Writes OUT_DIR/ref.h5 (one file, dp 1 tp 1) and OUT_DIR/run/rank{r}.h5 (dp 4 shards along dim 0,
or tp 4 shards along dim 1), G GB per run in tensors of M MiB (default 64), named
"blocks.{i}.out" with role activation, source "torch" (a user's run). Values: ref ~ N(0, 1) (one draw,
rolled and scaled per tensor), test = ref + N(0, 1e-4), rounded to the dtype.
"""
import argparse
import os
import sys

import numpy as np

# equiv_capture's writer alone, so that the files are written as a capture writes them (its
# package imports torch, which this script does not need)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "harness", "python",
                                "equiv_capture"))
from writer import RankFile  # noqa: E402

H = 4096  # columns of every tensor: [rows, H]


def to_bf16_bits(x):
    """Round-to-nearest-even fp32 -> bf16 raw bits (uint16)."""
    u = x.astype(np.float32).view(np.uint32)
    u = u + 0x7FFF + ((u >> 16) & 1)
    return (u >> 16).astype(np.uint16)


def put(f, name, data, dtype, attrs):
    f.add(name, ("bf16", to_bf16_bits(data)) if dtype == "bf16" else data.astype(np.float32), attrs)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--gb", type=float, required=True)
    p.add_argument("--dtype", choices=("fp32", "bf16"), default="fp32")
    p.add_argument("--layout", choices=("dp4", "tp4"), default="dp4")
    p.add_argument("--tensor-mb", type=float, default=64.0)
    a = p.parse_args()
    size = 2 if a.dtype == "bf16" else 4
    rows = max(4, int(a.tensor_mb * 2**20 / (H * size)) // 4 * 4)
    count = max(1, int(round(a.gb * 1e9 / (rows * H * size))))
    os.makedirs(os.path.join(a.out, "run"), exist_ok=True)
    world = 4
    ref = RankFile(os.path.join(a.out, "ref.h5"))
    ranks = [RankFile(os.path.join(a.out, "run", f"rank{r}.h5")) for r in range(world)]
    root = {"dp": 1, "tp": 1, "source": "torch", "dtype": a.dtype}
    rank_roots = [dict(root, dp=4 if a.layout == "dp4" else 1, tp=1 if a.layout == "dp4" else 4, world_size=world,
                       rank=r, dp_rank=r if a.layout == "dp4" else 0, tp_rank=0 if a.layout == "dp4" else r)
                  for r in range(world)]
    # two tensors drawn once, rolled and scaled per tensor: the time goes to writing, as a capture's
    rng = np.random.default_rng(0)
    base = rng.standard_normal((rows, H), dtype=np.float32)
    noise = rng.standard_normal((rows, H), dtype=np.float32) * np.float32(1e-4)
    shard = "dp:0" if a.layout == "dp4" else "tp:1"
    for i in range(count):
        x = np.roll(base, i, axis=1) * np.float32(1.0 + 0.01 * i)
        put(ref, f"blocks.{i}.out", x, a.dtype, {"role": "activation"})
        x += np.roll(noise, 3 * i, axis=0)
        for r, g in enumerate(ranks):
            part = x[r * rows // 4:(r + 1) * rows // 4] if a.layout == "dp4" else x[:, r * H // 4:(r + 1) * H // 4]
            put(g, f"blocks.{i}.out", np.ascontiguousarray(part), a.dtype, {"role": "activation", "shard": shard})
    ref.close(root)
    for g, attrs in zip(ranks, rank_roots):
        g.close(attrs)
    print(f"{a.out}: {count} tensors of [{rows}, {H}] {a.dtype}, {count * rows * H * size / 1e9:.2f} GB per run, "
          f"{a.layout}")


if __name__ == "__main__":
    main()
