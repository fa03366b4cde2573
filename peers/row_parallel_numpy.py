"""The numpy twin of row_parallel_torch.py: the same row-parallel check in bf16, numpy having no
bf16 type: bf16 values held in fp32, rounded to bf16 (nearest, ties to even) after every
GEMM and every add.

    row_parallel_numpy.py [SEQ BATCH IN OUT TP]     (default: seed 002's 4096 2 4096 1024 4)

Threads: numpy's BLAS decides (OPENBLAS_NUM_THREADS).
"""
import sys
import time

import numpy as np

THRESHOLDS = (1e-4, 1e-3, 5e-3, 1e-2)


def to_bf16(a):
    """fp32 -> the nearest bf16 value (ties to even), kept in fp32 (finite values only)."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    u = (u + np.uint32(0x7FFF) + ((u >> 16) & np.uint32(1))) & np.uint32(0xFFFF0000)
    return u.view(np.float32)


def ring_all_reduce(parts, start=1):
    """NCCL's ring SUM of tp partials [tp, count] (bf16 values): chunk c of tp near-equal chunks
    folds from rank c + start round to rank c + start - 1, one bf16 rounding per add."""
    tp, count = parts.shape
    bounds = [c * (count // tp) + min(c, count % tp) for c in range(tp + 1)]
    out = np.empty(count, dtype=np.float32)
    for c in range(tp):
        lo, hi = bounds[c], bounds[c + 1]
        acc = parts[(c + start) % tp, lo:hi]
        for step in range(1, tp):
            acc = to_bf16(acc + parts[(c + start + step) % tp, lo:hi])
        out[lo:hi] = acc
    return out


def statistics(test, ref):
    d = np.abs(test.astype(np.float64) - ref.astype(np.float64)).ravel()
    return {"max": d.max(), "mean": d.mean(), "median": np.median(d), "above": [(d > t).mean() for t in THRESHOLDS]}


def main(seq=4096, batch=2, k=4096, n=1024, tp=4):
    t0 = time.perf_counter()
    rng = np.random.default_rng(1234)
    x = to_bf16(rng.standard_normal((seq * batch, k), dtype=np.float32))                 # [S*B, K]
    w = to_bf16(rng.standard_normal((n, k), dtype=np.float32) / np.float32(k ** 0.5))   # [N, K]
    ref = to_bf16(x @ w.T)                                                              # [S*B, N]
    shard = k // tp
    parts = np.stack([to_bf16(x[:, r * shard:(r + 1) * shard] @ w[:, r * shard:(r + 1) * shard].T).ravel()
                      for r in range(tp)])                                              # [tp, S*B*N]
    out = ring_all_reduce(parts).reshape(seq * batch, n)
    stats = statistics(out, ref)
    print(f"numpy peer: {stats} in {time.perf_counter() - t0:.3f} s")


if __name__ == "__main__":
    main(*[int(a) for a in sys.argv[1:]])
