#!/usr/bin/env python3
"""Rebuilds the single-process step of an spd dump in numpy (fp64) from the file alone, and checks
it against the dumped reference. It reads the parameters, the frozen target weights, the residual
stream entering the target, the mask noise, the subset routing and the PGD sources' initial values
from /layers, the sizes and every constant (eps, coefficients, p, Adam's) from /config, and the
axis order from each dataset's `dims`; nothing of equiv's code and no size is built in.

Rebuilt and checked: the target forward (each site's input and the target output), the CI
functions (ci_lower, ci_upper), the stochastic masks, the PGD warm-up (the Adam ascent from the
initial sources, through the hand-written backward of the masked model: the sources after it and
the PGD loss's gradient with respect to them), the four losses and their total, the eval
metrics, and every parameter's gradient (V, U and the CI functions'), per loss term and in total.

    rebuild_spd.py DUMP.h5 [--plant NAME=VALUE ...]

--plant overrides a /config value before the rebuild (the check must then fail). Exit 0: every
tensor within the bound of rebuild_lib.py; 1: some outside; 2: usage or a file it cannot rebuild
from; 3: the rebuild itself failed (an exception).
"""

import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rebuild_lib as rb  # noqa: E402

ERF = np.frompyfunc(math.erf, 1, 1)


def tokens(t, name):
    """layers/<name>, a per-token tensor, as [tokens, width] (tokens in batch-major order)."""
    x, dims, _ = t[name]
    names = dims.split(",")
    x = rb.canonical(x, dims, ["batch", "seq"] + names[2:])
    return x.reshape(x.shape[0] * x.shape[1], -1)


def gelu_tanh(x):
    c = math.sqrt(2.0 / math.pi)
    inner = c * (x + 0.044715 * x ** 3)
    th = np.tanh(inner)
    return 0.5 * x * (1.0 + th), (x, th, c)


def gelu_tanh_backward(dy, cache):
    x, th, c = cache
    return dy * (0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * c * (1.0 + 3 * 0.044715 * x * x))


def rmsnorm(h, eps):
    rstd = 1.0 / np.sqrt((h * h).mean(-1, keepdims=True) + eps)
    return h * rstd, rstd


def rmsnorm_backward(dout, out, rstd):
    return rstd * (dout - out * (dout * out).mean(-1, keepdims=True))


class Site:
    def __init__(self, t, s):
        g = lambda n: t[f"{s:02d}/{n}"][0]  # noqa: E731
        self.V, self.U, self.W = g("V"), g("U"), g("target_W")
        self.w1, self.b1, self.w2, self.b2 = g("ci_w1"), g("ci_b1"), g("ci_w2"), g("ci_b2")
        self.C = self.V.shape[1]
        self.E = self.W.T - self.V @ self.U  # Delta^T [D, O]


def masked_forward(sites, h0, masks, deltas, routes, eps):
    """The model with every site decomposed; returns the output and what the backward needs."""
    h, tape = h0, []
    for l in range(len(sites) // 2):
        a, rstd = rmsnorm(h, eps)
        mid, c_fc = site_forward(sites[2 * l], a, masks[2 * l], deltas[2 * l], routes[2 * l])
        g, gcache = gelu_tanh(mid)
        out, c_dn = site_forward(sites[2 * l + 1], g, masks[2 * l + 1], deltas[2 * l + 1], routes[2 * l + 1])
        tape.append((a, rstd, c_fc, gcache, c_dn))
        h = h + out
    return h, tape


def site_forward(p, x, m, d, route):
    xv, xe = x @ p.V, x @ p.E
    routed = (xv * m) @ p.U + d[:, None] * xe
    out = np.where(route[:, None] > 0, routed, x @ p.W.T)
    return out, (x, xv, xe, m, d, route)


def site_backward(p, cache, dout):
    """dout -> dx, dm, dd, dV, dU (unrouted tokens send nothing to m, d, V and U)."""
    x, xv, xe, m, d, route = cache
    r = route[:, None] > 0
    dout_r = np.where(r, dout, 0.0)
    du = dout_r @ p.U.T
    dx = np.where(r, (du * m) @ p.V.T + d[:, None] * (dout @ p.E.T), dout @ p.W)
    dm = du * xv
    dd = (dout_r * xe).sum(-1)
    G = x.T @ (d[:, None] * dout_r)  # the gradient of E = W^T - V U
    dV = x.T @ (du * m) - G @ p.U.T
    dU = (xv * m).T @ dout_r - p.V.T @ G
    return dx, dm, dd, dV, dU


def masked_backward(sites, tape, dy):
    """dy -> per site (dm, dd, dV, dU)."""
    n = len(sites)
    dm, dd, dV, dU = [None] * n, [None] * n, [None] * n, [None] * n
    dh = dy
    for l in reversed(range(n // 2)):
        a, rstd, c_fc, gcache, c_dn = tape[l]
        fc, dn = 2 * l, 2 * l + 1
        dg, dm[dn], dd[dn], dV[dn], dU[dn] = site_backward(sites[dn], c_dn, dh)
        dmid = gelu_tanh_backward(dg, gcache)
        da, dm[fc], dd[fc], dV[fc], dU[fc] = site_backward(sites[fc], c_fc, dmid)
        dh = dh + rmsnorm_backward(da, a, rstd)
    return dm, dd, dV, dU


def ci_backward(q, x, dz):
    """dz [T, C] -> the CI function's gradients (ci_w1, ci_b1, ci_w2, ci_b2)."""
    hpre = x @ q.w1 + q.b1
    phi = 0.5 * (1.0 + ERF(hpre / math.sqrt(2.0)).astype(np.float64))
    hg = hpre * phi
    dhg = dz @ q.w2.T
    dhpre = dhg * (phi + hpre * np.exp(-0.5 * hpre * hpre) / math.sqrt(2.0 * math.pi))
    return {"ci_w1": x.T @ dhpre, "ci_b1": dhpre.sum(0), "ci_w2": hg.T @ dz, "ci_b2": dz.sum(0)}


def lower_backward(dci, z, alpha):
    """ci_lower's surrogate: dci on [0, 1], alpha dci below 0, 0 above 1."""
    return np.where(z < 0, alpha * dci, np.where(z <= 1.0, dci, 0.0))


def upper_backward(dci, z, alpha):
    """ci_upper's derivative: 0 below 0, 1 on [0, 1], alpha above 1."""
    return np.where(z < 0, 0.0, np.where(z <= 1.0, dci, alpha * dci))


def main(argv):
    started = rb.start(argv, __doc__)
    if started is None:
        return 2
    cfg, t = started
    judge = rb.Judge()
    n_sites = 2 * int(cfg["layers"])
    top = f"{n_sites:02d}"
    sites = [Site(t, s) for s in range(n_sites)]
    eps, alpha = float(cfg["rmsnorm_eps"]), float(cfg["leaky_alpha"])

    # The target: each site's input and the output every reconstruction is measured against.
    h = tokens(t, "00/residual_input")
    T, M = h.shape
    x = [None] * n_sites
    for l in range(n_sites // 2):
        x[2 * l], _ = rmsnorm(h, eps)
        x[2 * l + 1], _ = gelu_tanh(x[2 * l] @ sites[2 * l].W.T)
        h = h + x[2 * l + 1] @ sites[2 * l + 1].W.T
    y_target = tokens(t, f"{top}/target_output")
    judge.check(f"layers/{top}/target_output", h, y_target)

    # CI functions, masks, and the per-site losses that need no masked forward.
    p = cfg["p_start"] + (cfg["p_end"] - cfg["p_start"]) * min(1.0, cfg["step"] / cfg["steps"])
    judge.check("config p_norm", np.array([p]), np.array([cfg["p_norm"]]))
    faith_num = faith_den = imp = 0.0
    ci_lo, masks, deltas, routes, src0, zs = [], [], [], [], [], []
    grads = {k: [dict() for _ in sites] for k in ("faith", "stoch", "imp_min", "ppgd")}
    for s, q in enumerate(sites):
        judge.check(f"layers/{s:02d}/input", x[s], tokens(t, f"{s:02d}/input"))
        hid = x[s] @ q.w1 + q.b1
        z = (hid * 0.5 * (1.0 + ERF(hid / math.sqrt(2.0)).astype(np.float64))) @ q.w2 + q.b2
        lo = np.clip(z, 0.0, 1.0)
        up = np.where(z < 0, 0.0, np.where(z <= 1.0, z, 1.0 + alpha * (z - 1.0)))
        judge.check(f"layers/{s:02d}/ci_lower", lo, tokens(t, f"{s:02d}/ci_lower"))
        judge.check(f"layers/{s:02d}/ci_upper", up, tokens(t, f"{s:02d}/ci_upper"))
        u = tokens(t, f"{s:02d}/stoch_noise")
        mask = np.concatenate([lo + (1.0 - lo) * u[:, :q.C], u[:, q.C:]], axis=1)
        judge.check(f"layers/{s:02d}/stoch_mask", mask, tokens(t, f"{s:02d}/stoch_mask"))
        judge.check(f"layers/{s:02d}/eval_l0", np.array([np.count_nonzero(lo > 0) / T]), t[f"{s:02d}/eval_l0"][0])
        ci_lo.append(lo), masks.append(mask[:, :q.C]), deltas.append(mask[:, q.C])
        routes.append(tokens(t, f"{s:02d}/stoch_route")[:, 0]), src0.append(tokens(t, f"{s:02d}/ppgd_sources_init"))
        zs.append(z)
        faith_num += float((q.E ** 2).sum())
        faith_den += q.E.size
        S = ((up + cfg["imp_eps"]) ** p).sum(0)
        beta = cfg["imp_beta"]
        imp += float((S / T + beta * (S / T) * np.log2(1.0 + S)).sum())
        dS = 1.0 / T + beta / T * np.log2(1.0 + S) + beta * (S / T) / ((1.0 + S) * math.log(2.0))
        dci_up = cfg["coef_imp_min"] * dS * p * (up + cfg["imp_eps"]) ** (p - 1.0)
        grads["imp_min"][s] = ci_backward(q, x[s], upper_backward(dci_up, z, alpha))
    losses = {"faith": cfg["coef_faith"] * faith_num / faith_den, "imp_min": cfg["coef_imp_min"] * imp}
    for s, q in enumerate(sites):
        c = -2.0 * cfg["coef_faith"] / faith_den
        grads["faith"][s] = {"V": c * q.E @ q.U.T, "U": c * q.V.T @ q.E}

    # Stochastic reconstruction with the subset routing.
    y, tape = masked_forward(sites, tokens(t, "00/residual_input"), masks, deltas, routes, eps)
    losses["stoch"] = cfg["coef_stoch"] * float(((y - y_target) ** 2).sum()) / (T * M)
    dm, _, dV, dU = masked_backward(sites, tape, cfg["coef_stoch"] * 2.0 * (y - y_target) / (T * M))
    for s, q in enumerate(sites):
        noise = tokens(t, f"{s:02d}/stoch_noise")[:, :q.C]
        grads["stoch"][s] = {"V": dV[s], "U": dU[s],
                             **ci_backward(q, x[s], lower_backward(dm[s] * (1.0 - noise), zs[s], alpha))}

    # Persistent PGD: Adam ascent on the sources (every token routed), then the loss there.
    all_routed = [np.ones(T)] * n_sites
    src = [a.copy() for a in src0]
    mom = [np.zeros_like(a) for a in src]
    vel = [np.zeros_like(a) for a in src]
    b1, b2, lr, aeps = cfg["adam_beta1"], cfg["adam_beta2"], cfg["ppgd_lr"], cfg["adam_eps"]

    def ppgd(sources):
        """The PGD loss at the sources, its gradient with respect to them, and the parameters'."""
        m = [lo + (1.0 - lo) * sc[:, :-1] for lo, sc in zip(ci_lo, sources)]
        d = [sc[:, -1] for sc in sources]
        out, tape = masked_forward(sites, tokens(t, "00/residual_input"), m, d, all_routed, eps)
        loss = cfg["coef_ppgd"] * float(((out - y_target) ** 2).sum()) / (T * M)
        dm, dd, dV, dU = masked_backward(sites, tape, cfg["coef_ppgd"] * 2.0 * (out - y_target) / (T * M))
        g_src = [np.concatenate([dm[s] * (1.0 - ci_lo[s]), dd[s][:, None]], axis=1) for s in range(n_sites)]
        g_par = [{"V": dV[s], "U": dU[s],
                  **ci_backward(q, x[s], lower_backward(dm[s] * (1.0 - sources[s][:, :-1]), zs[s], alpha))}
                 for s, q in enumerate(sites)]
        return loss, g_src, g_par

    for k in range(1, int(cfg["ppgd_warmup"]) + 1):
        _, g_src, _ = ppgd(src)
        for s in range(n_sites):
            mom[s] = b1 * mom[s] + (1 - b1) * g_src[s]
            vel[s] = b2 * vel[s] + (1 - b2) * g_src[s] ** 2
            step = lr * (mom[s] / (1 - b1 ** k)) / (np.sqrt(vel[s] / (1 - b2 ** k)) + aeps)
            src[s] = np.clip(src[s] + step, 0.0, 1.0)
    losses["ppgd"], g_src, grads["ppgd"] = ppgd(src)
    for s in range(n_sites):
        judge.check(f"layers/{s:02d}/ppgd_sources", src[s], tokens(t, f"{s:02d}/ppgd_sources"))
        judge.check(f"layers/{s:02d}/ppgd_sources_grad", g_src[s], tokens(t, f"{s:02d}/ppgd_sources_grad"))

    # Every parameter's gradient, per loss term (the terms that reach it) and in total.
    for s in range(n_sites):
        for param in ("V", "U", "ci_w1", "ci_b1", "ci_w2", "ci_b2"):
            total = 0.0
            for term in ("faith", "stoch", "imp_min", "ppgd"):
                if param in grads[term][s]:
                    total = total + grads[term][s][param]
                    judge.check(f"layers/{s:02d}/{param}_grad.{term}", grads[term][s][param],
                                t[f"{s:02d}/{param}_grad.{term}"][0])
            judge.check(f"layers/{s:02d}/{param}_grad", total, t[f"{s:02d}/{param}_grad"][0])

    for name in ("faith", "stoch", "imp_min", "ppgd"):
        judge.check(f"layers/{top}/loss.{name}", np.array([losses[name]]), t[f"{top}/loss.{name}"][0])
    judge.check(f"layers/{top}/loss", np.array([sum(losses.values())]), t[f"{top}/loss"][0])

    # Eval: the unmasked reconstruction (every mask 1, no delta, every token routed).
    ones = [np.ones((T, q.C)) for q in sites]
    y1, _ = masked_forward(sites, tokens(t, "00/residual_input"), ones, [np.zeros(T)] * n_sites, all_routed, eps)
    judge.check(f"layers/{top}/eval_unmasked_recon", np.array([((y1 - y_target) ** 2).mean()]),
                t[f"{top}/eval_unmasked_recon"][0])
    return judge.finish("spd", t)


if __name__ == "__main__":
    sys.exit(rb.run(main))
