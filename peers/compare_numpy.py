"""The script a user would write instead of `equiv compare REF RUN_DIR --atol 1e-4 --rtol 0`:
assemble each tensor of a run directory from its rank files (h5py), compare it with the
reference's and print max, mean and median |d| and the shares above 1e-4, 1e-3 and 1e-2, one
tensor at a time (so it compares any size).

    compare_numpy.py REF.h5 RUN_DIR
"""
import glob
import sys

import h5py
import numpy as np


def read(d):
    """A dataset as fp32 (bf16 stored as the named 16-bit type: its raw bits shifted up, which is 100
    times faster than h5py's own conversion of the type, d[()])."""
    if d.id.get_type().get_size() == 2:
        raw = np.empty(d.shape, np.uint16)
        d.id.read(h5py.h5s.ALL, h5py.h5s.ALL, raw, mtype=d.id.get_type())
        return (raw.astype(np.uint32) << 16).view(np.float32)
    return d[()]


def assemble(ranks, name):
    spec = ranks[0][name].attrs.get("shard", "replicated")
    if spec == "replicated":
        return read(ranks[0][name])
    group, dim = spec.split(":")
    order = sorted(ranks, key=lambda f: int(f.attrs[group + "_rank"]))
    return np.concatenate([read(f[name]) for f in order], axis=int(dim))


def main():
    ref = h5py.File(sys.argv[1], "r")
    ranks = [h5py.File(p, "r") for p in sorted(glob.glob(sys.argv[2] + "/*.h5"))]
    names = []
    ref.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
    for name in names:
        d = np.abs(assemble(ranks, name).astype(np.float64) - read(ref[name]))
        print(f"{name}: max {d.max():.3e} mean {d.mean():.3e} median {np.median(d):.3e} "
              + " ".join(f">{t:g} {np.mean(d > t):.4f}" for t in (1e-4, 1e-3, 1e-2)))


if __name__ == "__main__":
    main()
