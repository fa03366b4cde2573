"""What a user would write instead of `equiv --case row_parallel --size docs --tp 4 --dtype bf16`:
one row-parallel linear in bf16 on the CPU, against the single-process GEMM (no rounding bound).

    row_parallel_torch.py [SEQ BATCH IN OUT TP]     (default: seed 002's 4096 2 4096 1024 4)

PEER_THREADS sets torch's threads (default: torch's own choice).
"""
import os
import sys
import time

import torch

THRESHOLDS = (1e-4, 1e-3, 5e-3, 1e-2)


def ring_all_reduce(parts, start=1):
    """NCCL's ring SUM of tp partials [tp, count] in their dtype: chunk c of tp near-equal chunks
    folds from rank c + start round to rank c + start - 1, one rounding per add."""
    tp, count = parts.shape
    bounds = [c * (count // tp) + min(c, count % tp) for c in range(tp + 1)]
    out = torch.empty(count, dtype=parts.dtype)
    for c in range(tp):
        lo, hi = bounds[c], bounds[c + 1]
        acc = parts[(c + start) % tp, lo:hi].clone()
        for step in range(1, tp):
            acc += parts[(c + start + step) % tp, lo:hi]  # bf16 + bf16, rounded to bf16
        out[lo:hi] = acc
    return out


def statistics(test, ref):
    d = (test.double() - ref.double()).abs().flatten()
    n = d.numel()  # median: the mean of the two middle values when n is even, as equiv and numpy
    median = (d.kthvalue((n + 1) // 2).values + d.kthvalue(n // 2 + 1).values).item() / 2
    return {"max": d.max().item(), "mean": d.mean().item(), "median": median,
            "above": [(d > t).double().mean().item() for t in THRESHOLDS]}


def main(seq=4096, batch=2, k=4096, n=1024, tp=4):
    if "PEER_THREADS" in os.environ:
        torch.set_num_threads(int(os.environ["PEER_THREADS"]))
    t0 = time.perf_counter()
    gen = torch.Generator().manual_seed(1234)
    x = torch.randn(seq * batch, k, generator=gen).to(torch.bfloat16)             # [S*B, K]
    w = (torch.randn(n, k, generator=gen) / k ** 0.5).to(torch.bfloat16)         # [N, K]
    ref = x @ w.T                                                                 # [S*B, N]
    shard = k // tp
    parts = torch.stack([(x[:, r * shard:(r + 1) * shard] @ w[:, r * shard:(r + 1) * shard].T).flatten()
                         for r in range(tp)])                                     # [tp, S*B*N]
    out = ring_all_reduce(parts).view(seq * batch, n)
    stats = statistics(out, ref)
    print(f"torch peer: {stats} in {time.perf_counter() - t0:.3f} s on {torch.get_num_threads()} threads")


if __name__ == "__main__":
    main(*[int(a) for a in sys.argv[1:]])
