"""The peers (row_parallel_torch.py, row_parallel_numpy.py) do the work they claim: their ring sum
equals sums worked out by hand, a planted wrong order is caught, their bf16 rounding and
statistics match hand values, and the two peers' ring sums agree bit for bit.

Exit 0 all hold, 1 one does not, 77 torch is missing (after the numpy peer's checks pass).
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import row_parallel_numpy as peer_np  # noqa: E402

failures = []


def expect(what, got, want):
    got, want = [float(v) for v in got], [float(v) for v in want]
    if got != want:
        failures.append(f"{what}: got {got}, want {want}")
    return got == want


# bf16 has 8 significant bits: 256 + 1 = 257 lies halfway between 256 and 258 and rounds to the
# even 256, while 1 + 1 = 2 is exact; so 256 + 1 + 1 is 258 or 256 by the order of the adds.
# Ranks hold [256, 1, 1] at every element. Ring, tp 3: chunk c folds from rank c+1 round to c:
#   chunk 0: (r1 + r2) + r0 = (1 + 1) + 256 = 258
#   chunk 1: (r2 + r0) + r1 = (1 + 256) + 1 = 256
#   chunk 2: (r0 + r1) + r2 = (256 + 1) + 1 = 256
# With 7 elements the chunks are 3, 2, 2 long (the first count % tp chunks one longer).
RANKS = [256.0, 1.0, 1.0]
WANT_3 = [258, 256, 256]
WANT_7 = [258, 258, 258, 256, 256, 256, 256]


def ring_cases(ring, make):
    """Problems of one ring implementation on the hand cases (make: list of rows -> its array)."""
    before = len(failures)
    for count, want in ((3, WANT_3), (7, WANT_7)):
        got = ring(make([[r] * count for r in RANKS]))
        expect(f"ring sum, tp 3, {count} elements", got, want)
    return len(failures) == before


def selfcheck(name, ring, make):
    ring_cases(ring, make)
    # A planted wrong order: each chunk folded from its own rank (start 0) must be caught.
    saved = list(failures)
    if ring_cases(lambda parts: ring(parts, start=0), make):
        saved.append(f"{name}: a ring sum starting at the wrong rank passed the hand check")
    failures[:] = saved


# numpy peer
selfcheck("numpy", peer_np.ring_all_reduce, lambda rows: np.array(rows, dtype=np.float32))
expect("numpy bf16 rounding", peer_np.to_bf16(np.array([257, 259, -257, 1 + 2**-8, 1 + 3 * 2**-8], np.float32)),
       [256, 260, -256, 1, 1 + 2**-6])
D = [0, 2e-4, 2e-3, 6e-3, 2e-2]  # |d| of five elements: median 2e-3, above 1e-4/1e-3/5e-3/1e-2: 4/3/2/1 of 5
WANT_STATS = [2e-2, sum(D) / 5, 2e-3, 0.8, 0.6, 0.4, 0.2]


def stats_list(s):
    return [s["max"], s["mean"], s["median"]] + list(s["above"])


def close(got, want):
    return all(abs(g - w) <= 1e-9 * max(abs(w), 1e-30) for g, w in zip(got, want))


got = stats_list(peer_np.statistics(np.array(D, np.float64), np.zeros(5)))
if not close(got, WANT_STATS):
    failures.append(f"numpy statistics: got {got}, want {WANT_STATS}")
got = peer_np.statistics(np.array(D[:4], np.float64), np.zeros(4))["median"]
if not close([got], [1.1e-3]):
    failures.append(f"numpy median of 4: got {got}, want the mean of the middle two 1.1e-3")

try:
    import torch
except ImportError:
    torch = None
if torch is not None:
    import row_parallel_torch as peer_torch

    selfcheck("torch", peer_torch.ring_all_reduce, lambda rows: torch.tensor(rows, dtype=torch.bfloat16))
    got = stats_list(peer_torch.statistics(torch.tensor(D, dtype=torch.float64), torch.zeros(5)))
    if not close(got, WANT_STATS):
        failures.append(f"torch statistics: got {got}, want {WANT_STATS}")
    got = peer_torch.statistics(torch.tensor(D[:4], dtype=torch.float64), torch.zeros(4))["median"]
    if not close([got], [1.1e-3]):
        failures.append(f"torch median of 4: got {got}, want the mean of the middle two 1.1e-3")
    # The two peers fold random bf16 partials (tp 4, uneven chunks) to the same bits.
    parts = torch.randn(4, 1003, generator=torch.Generator().manual_seed(7)).to(torch.bfloat16)
    a = peer_torch.ring_all_reduce(parts).float().numpy()
    b = peer_np.ring_all_reduce(parts.float().numpy())
    if not np.array_equal(a, b):
        failures.append(f"torch and numpy ring sums differ at {np.flatnonzero(a != b)[:5]}")

for f in failures:
    print("FAIL:", f)
if failures:
    sys.exit(1)
if torch is None:
    print("skip: numpy peer checked; torch missing")
    sys.exit(77)
print("ok: both peers: ring sums by hand, a wrong ring order caught, bf16 rounding, statistics, torch = numpy")
