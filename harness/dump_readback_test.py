#!/usr/bin/env python3
"""Reads dumps of the column_parallel and row_parallel cases the way a user would, with h5py, and
checks what such a user relies on: the root attributes and their types, that bf16 data reads as
floating point and holds only bf16 values, the role attributes, and that out = input @ weight^T
holds to within the rounding the run is allowed, recomputed independently in float64.

    dump_readback_test.py DUMP.h5 [DUMP2.h5 ...]

Prints one line per file; exits 1 if any check failed, 0 if all passed, 2 on a usage error.
"""

import sys

import h5py
import numpy as np

STRING_ATTRS = ("case", "model", "size", "dtype", "transport", "algorithm", "backend", "version", "grads",
                "injected")
CASES = ("column_parallel", "row_parallel")
ROLES = {"input": "input", "weight": "param", "out": "activation"}

U_FP32 = 2.0 ** -24  # unit roundoff of fp32 (24 significand bits): the GEMM accumulates in fp32
U_BF16 = 2.0 ** -8   # unit roundoff of bf16 (8 significand bits)
# Absolute terms for results in the subnormal range, where rounding errors are not relative: half
# the spacing of fp32 subnormals per accumulation step, half that of bf16 subnormals per rounding.
FP32_SUBNORMAL_HALF_SPACING = 2.0 ** -150
BF16_SUBNORMAL_HALF_SPACING = 2.0 ** -134


class CheckFailed(Exception):
    pass


def require(condition, message):
    if not condition:
        raise CheckFailed(message)


def is_int(value):
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def check_attrs(f):
    for name in STRING_ATTRS:
        require(name in f.attrs, f"root attribute '{name}' is missing")
        require(isinstance(f.attrs[name], str),
                f"root attribute '{name}' reads as {type(f.attrs[name]).__name__}, not str")
    for name in ("dp", "tp", "seed"):
        require(name in f.attrs, f"root attribute '{name}' is missing")
        require(is_int(f.attrs[name]),
                f"root attribute '{name}' reads as {type(f.attrs[name]).__name__}, not an integer")
    dtype, case = f.attrs["dtype"], f.attrs["case"]
    dp, tp = int(f.attrs["dp"]), int(f.attrs["tp"])
    require(dtype in ("bf16", "fp32"), f"dtype is '{dtype}', want bf16 or fp32")
    require(case in CASES, f"case is '{case}', this script checks {', '.join(CASES)}")
    require(dp >= 1 and tp >= 1, f"dp={dp}, tp={tp}: want >= 1")
    return case, dtype, dp, tp


def read_dataset(f, name, dtype):
    """The dataset layers/00/<name> as float64, after the type and value checks for the run's dtype."""
    path = f"layers/00/{name}"
    require(isinstance(f.get(path), h5py.Dataset), f"{path} is missing or not a dataset")
    dset = f[path]
    role = dset.attrs.get("role")
    require(isinstance(role, str) and role == ROLES[name], f"{path} has role {role!r}, want '{ROLES[name]}'")
    values = dset[()]
    if dtype == "bf16":
        # h5py picks float32 for the 2-byte /bfloat16 type (HDF5 widens it exactly).
        stored = dset.id.get_type()
        require(dset.dtype.kind == "f", f"{path} reads as {dset.dtype}, not floating point")
        require(stored.get_size() == 2 and stored.committed(),
                f"{path} is stored as a {stored.get_size()}-byte type, not the named type /bfloat16")
        # Non-finite values first: HDF5's widening turns a bf16 NaN into 0x7fffffff.
        require(np.all(np.isfinite(values)), f"{path} holds non-finite values")
        as_f32 = values.astype(np.float32)
        require(np.array_equal(as_f32.astype(np.float64), values.astype(np.float64)),
                f"{path} holds values that are not even fp32")
        # A bf16 value is a float32 whose low 16 bits are zero.
        low_bits = as_f32.view(np.uint32) & np.uint32(0xFFFF)
        bad = np.flatnonzero(low_bits)
        if bad.size:
            raise CheckFailed(f"{path}: {bad.size} values are not bf16 values, first "
                              f"{as_f32.ravel()[bad[0]]!r} at flat index {bad[0]}")
    else:
        require(dset.dtype == np.float32, f"{path} reads as {dset.dtype}, not float32")
        require(np.all(np.isfinite(values)), f"{path} holds non-finite values")
    return path, values.astype(np.float64)


def gemm_bound(case, dtype, tp, x, w, ref):
    """Elementwise bound on |out - ref| for out = x @ w^T computed as the run computes it.

    Base (the brief's): 8 u |x| @ |w|^T + (bf16 only) 2^-8 |ref|, u = 2^-24.
      - Each product of bf16 values widened to fp32 is exact (8 + 8 significand bits fit in 24), so
        the fp32 error comes from accumulation alone; for fp32 inputs a product rounds once more.
        A worst-case bound for a K-term fp32 sum is about K u sum|x||w|; what a real accumulation
        makes is far smaller, because the per-step roundings fall either way (growth like
        sqrt(K) u times partial sums of size sqrt(K), against sum|x||w| of size K for zero-mean
        data). 8 u sum|x||w| is a practical bound for the cases' zero-mean random data, not a
        worst case: a plain sequential fp32 loop reaches about half of it at K = 4096, blocked
        FMA kernels less. An operand mix-up (wrong operand, transposed weight, a lost shard)
        produces errors of the size of |ref| itself, orders of magnitude above the bound.
      - bf16 output: one rounding to nearest, |error| <= 2^-8 |value|.
    Row-parallel with tp > 1 adds the reduction: rank r computes the partial sum p_r over its
    contiguous slice of in_features (Megatron's RowParallelLinear split) and rounds it to the dtype
    (bf16: <= 2^-8 |p_r|, together <= u_d sum_r |p_r|; fp32: already fp32). The all-reduce then
    adds tp values with tp - 1 roundings in the dtype: the last is the output rounding above (for
    fp32 inside 8 u sum|x||w|), the tp - 2 before it are each <= u_d |running sum| <= u_d sum_r |p_r|
    whatever order the algorithm (ring, tree) adds in. Hence (tp - 1) u_d sum_r |p_r| for both
    dtypes, times (1 + u_d)^tp for the growth of the rounded values over their exact ones. These
    errors scale with sum_r |p_r|, not |ref|: partials that cancel leave a small ref with a
    bf16-sized error, which the base bound alone would wrongly reject.
    Plus absolute terms for results in the subnormal range.
    """
    k = x.shape[1]
    bound = 8.0 * U_FP32 * (np.abs(x) @ np.abs(w).T) + k * FP32_SUBNORMAL_HALF_SPACING
    if dtype == "bf16":
        bound += U_BF16 * np.abs(ref) + BF16_SUBNORMAL_HALF_SPACING
    if case == "row_parallel" and tp > 1:
        require(k % tp == 0, f"in_features {k} is not divisible by tp={tp}")
        shard = k // tp
        partial_abs = sum(np.abs(x[:, r * shard:(r + 1) * shard] @ w[:, r * shard:(r + 1) * shard].T)
                          for r in range(tp))
        u_d = U_BF16 if dtype == "bf16" else U_FP32
        half_spacing = BF16_SUBNORMAL_HALF_SPACING if dtype == "bf16" else FP32_SUBNORMAL_HALF_SPACING
        bound += (tp - 1) * u_d * (1.0 + u_d) ** tp * partial_abs + tp * half_spacing
    return bound


def check_file(path):
    with h5py.File(path, "r") as f:
        case, dtype, dp, tp = check_attrs(f)
        if dtype == "bf16":
            require(isinstance(f.get("bfloat16"), h5py.Datatype), "named datatype /bfloat16 is missing")
        x_path, x = read_dataset(f, "input", dtype)
        w_path, w = read_dataset(f, "weight", dtype)
        o_path, out = read_dataset(f, "out", dtype)
    require(x.ndim == 3, f"{x_path} has shape {x.shape}, want [seq, batch, in_features]")
    require(w.ndim == 2, f"{w_path} has shape {w.shape}, want [out_features, in_features]")
    require(w.shape[1] == x.shape[2],
            f"{w_path} has shape {w.shape}, want [out_features, {x.shape[2]}] for input {x.shape}")
    want_out = (x.shape[0], x.shape[1], w.shape[0])
    require(out.shape == want_out, f"{o_path} has shape {out.shape}, want {want_out}")

    # float64 reference; its own rounding (about K 2^-53 sum|x||w|) is far below the bound.
    x2 = x.reshape(-1, x.shape[2])
    ref = x2 @ w.T
    got = out.reshape(ref.shape)
    bound = gemm_bound(case, dtype, tp, x2, w, ref)
    err = np.abs(got - ref)
    outside = np.flatnonzero(~(err <= bound))
    if outside.size:
        i = outside[np.argmax((err / bound).ravel()[outside])]
        raise CheckFailed(f"{o_path}: {outside.size} of {err.size} elements differ from input @ weight^T by "
                          f"more than the bound; worst at flat index {i}: out {got.ravel()[i]!r}, "
                          f"ref {ref.ravel()[i]!r}, |diff| {err.ravel()[i]:.3e} > bound {bound.ravel()[i]:.3e}")
    ratio = float(np.max(err / bound)) if err.size else 0.0
    return (f"{case} {dtype} dp={dp} tp={tp}, out {list(out.shape)} within bound "
            f"(max |diff|/bound {ratio:.3f})")


def main(argv):
    if len(argv) < 2:
        print(f"usage: {argv[0]} DUMP.h5 [DUMP2.h5 ...]", file=sys.stderr)
        return 2
    failed = 0
    for path in argv[1:]:
        try:
            print(f"PASS {path}: {check_file(path)}")
        except CheckFailed as e:
            failed += 1
            print(f"FAIL {path}: {e}")
        except (OSError, KeyError, ValueError, TypeError) as e:
            failed += 1
            print(f"FAIL {path}: cannot read as an HDF5 dump: {e}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
