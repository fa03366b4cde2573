#!/usr/bin/env python3
"""A user's run of many small tensors, for `equiv compare --comm mpi` (cases/compare_mpi_test.sh):
more tensors than one batch holds (harness/driver/compare_stream.h: 512), so that the batches are
spread over the processes.

    compare_mpi_fixture.py DIR [--tensors N]

Writes DIR/ref (the reference: 2 files, tp 2, activations split along dim 1 over tp, a parameter
and its gradient replicated) and DIR/test (4 files, dp 2 x tp 2, activations split over dp along
dim 0 and over tp along dim 1) of the same tensors, the test's off by rounding (1e-6 relative);
then DIR/scaled, the test run with one activation near the end scaled by 1.001 (a planted bug),
DIR/replica, the test run whose dp rank 1 holds another copy of a parameter (a finding), and
DIR/damaged, the test run with one activation of rank 1's file stored with a checksum that its
data no longer matches (its batch's process fails to read it).
Every tensor [8, 16] fp32, role activation ("blocks.{i}.out"), plus "blocks.{i}.weight" and its
gradient every 100 tensors, source "torch" (a user's run).
"""
import argparse
import os

import h5py
import numpy as np

R, C = 8, 16


def write_run(path, tensors, dp, tp, change=None, checksum=None):
    """tensors: [(name, full array, role, split)] with split True: activation split dp:0,tp:1;
    checksum: a name stored with a Fletcher-32 checksum (chunked)."""
    os.makedirs(path, exist_ok=True)
    for rank in range(dp * tp):
        d, t = rank // tp, rank % tp
        with h5py.File(os.path.join(path, f"rank{rank:05d}.h5"), "w", track_order=True) as f:
            f.attrs.update(dict(dp=dp, tp=tp, world_size=dp * tp, rank=rank, dp_rank=d, tp_rank=t,
                                source="torch", dtype="fp32"))
            for name, x, role, split in tensors:
                if change is not None:
                    x = change(name, d, x)
                if split:
                    part = x[d * R // dp:(d + 1) * R // dp, t * C // tp:(t + 1) * C // tp]
                    shard = ",".join(s for s, n in (("dp:0", dp), ("tp:1", tp)) if n > 1) or "replicated"
                else:
                    part, shard = x, "replicated"
                part = np.ascontiguousarray(part, dtype=np.float32)
                if name == checksum:
                    f.create_dataset(name, data=part, chunks=part.shape, fletcher32=True)
                else:
                    f[name] = part
                f[name].attrs.update(role=role, shard=shard)


def damage(path, name):
    """One byte of the data of dataset `name` in file `path` flipped: its checksum fails on read."""
    with h5py.File(path, "r") as f:
        at = f[name].id.get_chunk_info(0).byte_offset
    with open(path, "r+b") as f:
        f.seek(at + 5)
        b = f.read(1)
        f.seek(at + 5)
        f.write(bytes([b[0] ^ 0xFF]))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--tensors", type=int, default=2100)
    a = p.parse_args()
    rng = np.random.default_rng(7)
    ref, test = [], []
    for i in range(a.tensors):
        x = rng.standard_normal((R, C)).astype(np.float32)
        e = rng.standard_normal((R, C)).astype(np.float32) * np.float32(1e-6)
        ref.append((f"blocks.{i}.out", x, "activation", True))
        test.append((f"blocks.{i}.out", (x + x * e).astype(np.float32), "activation", True))
        if i % 100 == 0:
            for name, role in ((f"blocks.{i}.weight", "param"), (f"blocks.{i}.weight.grad", "grad")):
                w = rng.standard_normal((R, C)).astype(np.float32)
                ref.append((name, w, role, False))
                test.append((name, w, role, False))
    write_run(os.path.join(a.out, "ref"), ref, 1, 2)
    write_run(os.path.join(a.out, "test"), test, 2, 2)
    planted = f"blocks.{a.tensors * 3 // 7}.out"
    write_run(os.path.join(a.out, "scaled"), test, 2, 2,
              lambda name, d, x: x * np.float32(1.001) if name == planted else x)
    replica = f"blocks.{(a.tensors * 4 // 5) // 100 * 100}.weight"
    write_run(os.path.join(a.out, "replica"), test, 2, 2,
              lambda name, d, x: np.nextafter(x, np.float32(np.inf)) if name == replica and d == 1 else x)
    damaged = f"blocks.{a.tensors * 4 // 7}.out"
    write_run(os.path.join(a.out, "damaged"), test, 2, 2, checksum=damaged)
    damage(os.path.join(a.out, "damaged", "rank00001.h5"), damaged)


if __name__ == "__main__":
    main()
