"""One rank's file in equiv's HDF5 schema (harness/SCHEMA.md), written as the tensors come and
made visible atomically.

Datasets sit at the root under their tensor names ("blocks.0.fc1.out", "blocks.0.fc1.weight.grad",
"loss"), in capture order (the root tracks creation order): forward activations as the forward ran,
the loss, then gradients as the backward produced them.

RankFile writes them into a hidden temporary file beside the final one (".rank00003.h5.tmp.PID");
close() sets the root attributes and renames it to rank00003.h5. Until then no file of the run has
the final name, so a step that dies half-way leaves only the temporary file, which equiv's reader
skips (it lists a directory's `*.h5` and skips hidden names); abort(), or the end of the process
that made it, removes it.

bf16 is stored as it is: raw 16-bit values under the named type /bfloat16 (a 16-bit IEEE float with
sign bit 15, 8 exponent bits at 7 with bias 127, 7 mantissa bits), which h5py, h5dump and equiv
read as floats. fp16 is widened to fp32 (exactly) and says so in `stored_from`.
"""

import os
import weakref

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


def _remove(path, owner):
    """Removes a temporary file that was never renamed, in the process that made it only (a fork of
    that process inherits its finaliser and must not take the file from under it)."""
    if os.getpid() == owner and os.path.exists(path):
        os.unlink(path)


class RankFile:
    """One rank's file, written a dataset at a time in the order add() is called.

    add() writes a dataset at once (nothing is held here after it returns); set_attrs() changes a
    written dataset's attributes; close(root_attrs) sets the root's and gives the file its name.
    A dataset added again under the same name is overwritten in place where its shape and type are
    the same (its place in the order kept), else replaced at the end of the order."""

    def __init__(self, path):
        self.path = os.fspath(path)
        self.tmp = f"{os.path.dirname(self.path) or '.'}/.{os.path.basename(self.path)}.tmp.{os.getpid()}"
        self._f = None  # opened at the first add(): a capture that writes nothing makes no file before close()
        self._bf16 = None
        self._cleanup = None

    def _file(self):
        if self._f is None:
            os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
            self._cleanup = weakref.finalize(self, _remove, self.tmp, os.getpid())
            self._f = h5py.File(self.tmp, "w", track_order=True)
        return self._f

    def add(self, name, data, attrs):
        """data: a numpy array or ("bf16", uint16 array); attrs: {attribute: str, int or float}."""
        f = self._file()
        parent = _group(f, name)
        leaf = name.split("/")[-1]
        bf16 = isinstance(data, tuple)  # ("bf16", raw uint16 values)
        raw = np.ascontiguousarray(data[1], dtype=np.uint16) if bf16 else np.ascontiguousarray(data)
        if leaf in parent:
            old = parent[leaf]
            same = old.shape == raw.shape and (old.id.get_type().committed() if bf16 else old.dtype == raw.dtype)
            if same:
                if bf16:
                    old.id.write(h5py.h5s.ALL, h5py.h5s.ALL, raw, mtype=old.id.get_type())
                else:
                    old[()] = raw
                for key in list(old.attrs):
                    del old.attrs[key]
                self.set_attrs(name, attrs)
                return
            del parent[leaf]
        if bf16:
            if self._bf16 is None:
                self._bf16 = _bf16_type()
                self._bf16.commit(f.id, b"bfloat16")
            space = h5py.h5s.create_simple(raw.shape) if raw.ndim else h5py.h5s.create(h5py.h5s.SCALAR)
            dset_id = h5py.h5d.create(parent.id, leaf.encode(), self._bf16, space)
            dset_id.write(h5py.h5s.ALL, h5py.h5s.ALL, raw, mtype=self._bf16)
        else:
            parent.create_dataset(leaf, data=raw)
        self.set_attrs(name, attrs)

    def set_attrs(self, name, attrs):
        dset = self._file()[name]
        for key, value in attrs.items():
            dset.attrs[key] = _plain(value)

    def close(self, root_attrs):
        """Sets the root attributes, closes the file and renames it to its final name."""
        try:
            f = self._file()
            for key, value in root_attrs.items():
                f.attrs[key] = _plain(value)
            f.close()
            self._f = None
            os.replace(self.tmp, self.path)
            self._cleanup.detach()
        except BaseException:
            self.abort()
            raise

    def abort(self):
        """Closes and removes the temporary file; the final name is never made."""
        if self._f is not None:
            try:
                self._f.close()
            finally:
                self._f = None
        if self._cleanup is not None:
            self._cleanup()


def write_rank_file(path, root_attrs, datasets):
    """datasets: list of (dataset path, numpy array or ("bf16", uint16 array), {attribute: value})."""
    out = RankFile(path)
    try:
        for name, data, attrs in datasets:
            out.add(name, data, attrs)
    except BaseException:
        out.abort()
        raise
    out.close(root_attrs)
