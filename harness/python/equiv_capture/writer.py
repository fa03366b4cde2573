"""One rank's file in equiv's HDF5 schema (harness/SCHEMA.md), written atomically.

Datasets sit at the root under their tensor names ("blocks.0.fc1.out", "blocks.0.fc1.weight.grad",
"loss"), in capture order (the root tracks creation order): forward activations as the forward ran,
the loss, then gradients as the backward produced them.

bf16 is stored as it is: raw 16-bit values under the named type /bfloat16 (a 16-bit IEEE float with
sign bit 15, 8 exponent bits at 7 with bias 127, 7 mantissa bits), which h5py, h5dump and equiv
read as floats. fp16 is widened to fp32 (exactly) and says so in `stored_from`.
"""

import os

import h5py
import numpy as np


def _bf16_type():
    t = h5py.h5t.IEEE_F32LE.copy()
    # move the fields while the type is 32 bits wide, then cut precision and size to 16
    t.set_fields(15, 7, 8, 0, 7)
    t.set_offset(0)
    t.set_precision(16)
    t.set_size(2)
    t.set_ebias(127)
    return t


def _plain(value):
    """str, int or float as HDF5 wants them (torch.__version__ is a str subclass h5py cannot store)."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    raise TypeError(f"attribute value {value!r}: want str, int or float")


def _group(f, path):
    """The group holding dataset `path`, created with tracked order (equiv reads in capture order)."""
    parent = f
    for part in path.split("/")[:-1]:
        parent = parent[part] if part in parent else parent.create_group(part, track_order=True)
    return parent


def write_rank_file(path, root_attrs, datasets):
    """datasets: list of (dataset path, numpy array or ("bf16", uint16 array), {attribute: value})."""
    tmp = f"{os.path.dirname(path) or '.'}/.{os.path.basename(path)}.tmp.{os.getpid()}"
    try:
        with h5py.File(tmp, "w", track_order=True) as f:
            for key, value in root_attrs.items():
                f.attrs[key] = _plain(value)
            bf16 = None
            for name, data, attrs in datasets:
                parent = _group(f, name)
                leaf = name.split("/")[-1]
                if isinstance(data, tuple):  # ("bf16", raw uint16 values)
                    raw = np.ascontiguousarray(data[1], dtype=np.uint16)
                    if bf16 is None:
                        bf16 = _bf16_type()
                        bf16.commit(f.id, b"bfloat16")
                    space = h5py.h5s.create_simple(raw.shape) if raw.ndim else h5py.h5s.create(h5py.h5s.SCALAR)
                    dset_id = h5py.h5d.create(parent.id, leaf.encode(), bf16, space)
                    dset_id.write(h5py.h5s.ALL, h5py.h5s.ALL, raw, mtype=bf16)
                    dset = h5py.Dataset(dset_id)
                else:
                    dset = parent.create_dataset(leaf, data=np.ascontiguousarray(data))
                for key, value in attrs.items():
                    dset.attrs[key] = _plain(value)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
