#!/usr/bin/python3
"""How far rounding alone moves two trainings apart: the measurement behind harness/step_curve.c's
thresholds. A 2-layer tanh MLP (batch 256, 64 -> 32 -> 1, squared error) trained for STEPS steps
(argv[1], default 200) with torch.optim SGD (lr 0.05) and Adam (lr 1e-3), its forward and backward
in fp32 or bf16; the reference sums the batch's gradient in one piece, the "layout" in 4 chunks (a
data-parallel all-reduce's order). With factor 0.5 the layout's gradients are halved (a bug).
Prints, per run, the drift (param_dist / trained_dist) by step, the fitted growth exponent and the
gradient-norm ratios, as step_curve.h defines them."""
import math
import sys

import numpy as np
import torch

STEPS = int(sys.argv[1]) if len(sys.argv) > 1 else 200
B, D, H = 256, 64, 32
torch.manual_seed(0)
X, Y = torch.randn(B, D), torch.randn(B, 1)


def train(chunks, kind, dtype, factor=1.0):
    g = torch.Generator().manual_seed(1)
    w1, w2 = torch.randn(D, H, generator=g) / 8, torch.randn(H, 1, generator=g) / 6
    params = [torch.nn.Parameter(w1.clone()), torch.nn.Parameter(w2.clone())]
    opt = torch.optim.SGD(params, lr=0.05) if kind == "sgd" else torch.optim.Adam(params, lr=1e-3)
    steps = []
    for _ in range(STEPS):
        grads, loss_sum = [torch.zeros_like(p) for p in params], 0.0
        for rows in torch.chunk(torch.arange(B), chunks):
            a, b = (p.detach().to(dtype).requires_grad_() for p in params)
            loss = ((torch.tanh(X[rows].to(dtype) @ a) @ b).float() - Y[rows]).pow(2).sum() / B
            loss.backward()
            loss_sum += loss.item()
            grads[0] += a.grad.float()
            grads[1] += b.grad.float()
        for p, gr in zip(params, grads):
            p.grad = gr * factor
        grad_norm = math.sqrt(sum(float(p.grad.double().pow(2).sum()) for p in params))
        opt.step()
        steps.append((loss_sum, grad_norm, [p.detach().double().clone() for p in params]))
    return steps, [w1.double(), w2.double()]


def dist(a, b):
    return math.sqrt(sum(float((x - y).pow(2).sum()) for x, y in zip(a, b)))


for dtype, u in ((torch.float32, 2.0**-24), (torch.bfloat16, 2.0**-8)):
    for kind in ("sgd", "adam"):
        for factor in (1.0, 0.5):
            (ref, p0), (test, _) = train(1, kind, dtype), train(4, kind, dtype, factor)
            drift = [dist(t[2], r[2]) / dist(r[2], p0) for r, t in zip(ref, test)]
            ratio = [t[1] / r[1] for r, t in zip(ref, test)]
            logs = [(math.log(s + 1), math.log(d * dist(r[2], p0))) for s, (d, r) in enumerate(zip(drift, ref)) if d > 0]
            b = np.polyfit(*zip(*logs), 1)[0] if len(logs) >= 2 else 0.0
            print(f"{str(dtype)[6:]:8s} {kind:4s} gradient x{factor}: drift {' '.join(f'{d:.2g}' for d in drift[::max(1, STEPS // 10)])}"
                  f"; exponent {b:.2f}; gradient ratio at step 1 {ratio[0]:.4f}, furthest {max(ratio, key=lambda r: abs(math.log(r))):.4f}"
                  f"; 8u {8 * u:.2g}, sqrt(u) {math.sqrt(u):.2g}")
