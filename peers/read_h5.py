"""The HDF5 read alone: every dataset of the given files read once with h5py into one buffer that
is reused (so no time goes to fresh memory), the stored bytes as they lie (bf16 as its 16 raw
bits); what `equiv compare` cannot do without, for compare_bench.py's "equiv / HDF5 read".

    read_h5.py FILE_OR_DIR...     (a directory: its *.h5 files)

Prints the bytes read and the seconds taken.
"""
import glob
import os
import sys
import time

import h5py
import numpy as np


def files(paths):
    for p in paths:
        yield from sorted(glob.glob(os.path.join(p, "*.h5"))) if os.path.isdir(p) else [p]


def main():
    t0 = time.perf_counter()
    buf, total = np.empty(0, np.uint8), 0
    for path in files(sys.argv[1:]):
        with h5py.File(path, "r") as f:
            sets = []
            f.visititems(lambda n, o: sets.append(o) if isinstance(o, h5py.Dataset) else None)
            for d in sets:
                t = d.id.get_type()
                size = int(np.prod(d.shape, dtype=np.int64)) * t.get_size()
                if buf.size < size:
                    buf = np.empty(size, np.uint8)
                view = buf[:size].view(np.uint16 if t.get_size() == 2 else d.dtype).reshape(d.shape)
                d.id.read(h5py.h5s.ALL, h5py.h5s.ALL, view, mtype=t)
                total += size
    print(f"{total / 1e9:.2f} GB in {time.perf_counter() - t0:.2f} s")


if __name__ == "__main__":
    main()
