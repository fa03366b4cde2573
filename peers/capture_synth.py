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

import h5py
import numpy as np

H = 4096  # columns of every tensor: [rows, H]


def bf16_type():
    t = h5py.h5t.IEEE_F32LE.copy()
    t.set_fields(15, 7, 8, 0, 7)
    t.set_offset(0)
    t.set_precision(16)
    t.set_size(2)
    t.set_ebias(127)
    return t


def to_bf16_bits(x):
    """Round-to-nearest-even fp32 -> bf16 raw bits (uint16)."""
    u = x.astype(np.float32).view(np.uint32)
    u = u + 0x7FFF + ((u >> 16) & 1)
    return (u >> 16).astype(np.uint16)


def put(f, name, data, dtype, attrs):
    if dtype == "bf16":
        bits = to_bf16_bits(data)
        if "bfloat16" not in f:
            bf16_type().commit(f.id, b"bfloat16")
        t = h5py.h5t.open(f.id, b"bfloat16")
        sid = h5py.h5s.create_simple(bits.shape)
        did = h5py.h5d.create(f.id, name.encode(), t, sid)
        did.write(h5py.h5s.ALL, h5py.h5s.ALL, bits, mtype=t)
        d = h5py.Dataset(did)
    else:
        d = f.create_dataset(name, data=data.astype(np.float32))
    for k, v in attrs.items():
        d.attrs[k] = v


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
    ref = h5py.File(os.path.join(a.out, "ref.h5"), "w", track_order=True)
    ranks = [h5py.File(os.path.join(a.out, "run", f"rank{r}.h5"), "w", track_order=True) for r in range(world)]
    for f, r in [(ref, None)] + [(g, i) for i, g in enumerate(ranks)]:
        f.attrs["dp"], f.attrs["tp"] = (1, 1) if r is None else ((4, 1) if a.layout == "dp4" else (1, 4))
        f.attrs["source"], f.attrs["dtype"] = "torch", a.dtype
        if r is not None:
            f.attrs["world_size"], f.attrs["rank"] = world, r
            f.attrs["dp_rank"], f.attrs["tp_rank"] = (r, 0) if a.layout == "dp4" else (0, r)
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
    for f in [ref] + ranks:
        f.close()
    print(f"{a.out}: {count} tensors of [{rows}, {H}] {a.dtype}, {count * rows * H * size / 1e9:.2f} GB per run, "
          f"{a.layout}")


if __name__ == "__main__":
    main()
