#!/usr/bin/env python3
"""Rebuilds the single-process step of a gpt dump in numpy (fp64) from the file alone, and checks
it against the dumped reference: every block activation, the final LayerNorm, the loss, and the
whole backward (every block output's gradient and every parameter's gradient). It reads the
input, target and parameters from /layers, the sizes and the maths' constants (heads, LayerNorm
eps, attention scale) from /config, and the axis order from each dataset's `dims`; nothing of
equiv's code and no size is built in.

    rebuild_gpt.py DUMP.h5 [--plant NAME=VALUE ...]

--plant overrides a /config value before the rebuild (a planted wrong hyperparameter: the check
must then fail). Exit 0: every tensor within the bound of rebuild_lib.py; 1: some outside; 2: usage
or a file it cannot rebuild from; 3: the rebuild itself failed (an exception).
"""

import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rebuild_lib as rb  # noqa: E402

ERF = np.frompyfunc(math.erf, 1, 1)


def get(tensors, name, last=None):
    """layers/<name> as [seq, batch, last] (activations) or as stored (parameters, loss)."""
    t, dims, _ = tensors[name]
    if last is None:
        return t
    return rb.canonical(t, dims, ["seq", "batch", last])


def ln_forward(x, g, b, eps):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    rstd = 1.0 / np.sqrt(var + eps)
    xhat = (x - mu) * rstd
    return xhat * g + b, (xhat, rstd)


def ln_backward(dy, g, cache):
    xhat, rstd = cache
    dxhat = dy * g
    dg = (dy * xhat).sum(axis=(0, 1))
    db = dy.sum(axis=(0, 1))
    dx = rstd * (dxhat - dxhat.mean(-1, keepdims=True) - xhat * (dxhat * xhat).mean(-1, keepdims=True))
    return dx, dg, db


def gelu(x):
    phi = 0.5 * (1.0 + ERF(x / math.sqrt(2.0)).astype(np.float64))
    return x * phi, phi


def gelu_backward(dy, x, phi):
    return dy * (phi + x * np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi))


def attention(qkv, heads, scale):
    """qkv [S, B, heads*3*D] (per head [q|k|v]) -> ctx [S, B, heads*D], and what the backward needs."""
    S, B, W = qkv.shape
    D = W // (3 * heads)
    x = qkv.reshape(S, B, heads, 3, D)
    q, k, v = x[:, :, :, 0], x[:, :, :, 1], x[:, :, :, 2]                  # [S, B, NH, D]
    scores = np.einsum("ibhd,jbhd->bhij", q, k) * scale
    scores = np.where(np.tril(np.ones((S, S), dtype=bool)), scores, -np.inf)
    p = np.exp(scores - scores.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)                                           # [B, NH, S, S]
    ctx = np.einsum("bhij,jbhd->ibhd", p, v)
    return ctx.reshape(S, B, heads * D), (q, k, v, p)


def attention_backward(dctx, cache, scale):
    q, k, v, p = cache
    S, B, NH, D = q.shape
    dctx = dctx.reshape(S, B, NH, D)
    dv = np.einsum("bhij,ibhd->jbhd", p, dctx)
    dp = np.einsum("ibhd,jbhd->bhij", dctx, v)
    ds = p * (dp - (p * dp).sum(-1, keepdims=True)) * scale
    dq = np.einsum("bhij,jbhd->ibhd", ds, k)
    dk = np.einsum("bhij,ibhd->jbhd", ds, q)
    return np.stack([dq, dk, dv], axis=3).reshape(S, B, NH * 3 * D)


def linear(x, w):
    return x @ w.T


def linear_backward(dy, x, w):
    return dy @ w, np.einsum("sbo,sbi->oi", dy, x)


def main(argv):
    started = rb.start(argv, __doc__)
    if started is None:
        return 2
    config, t = started
    L, heads, eps = int(config["layers"]), int(config["heads"]), float(config["layernorm_eps"])
    scale = float(config["attention_scale"])
    judge = rb.Judge()
    x = get(t, "00/input", "hidden")
    caches = []
    for l in range(L):
        P = {n: get(t, f"{l:02d}/{n}") for n in ("ln1_gamma", "ln1_beta", "qkv_weight", "proj_weight", "ln2_gamma",
                                                 "ln2_beta", "fc1_weight", "fc2_weight")}
        a = {}
        a["ln1_out"], ln1 = ln_forward(x, P["ln1_gamma"], P["ln1_beta"], eps)
        a["qkv"] = linear(a["ln1_out"], P["qkv_weight"])
        a["attn_ctx"], att = attention(a["qkv"], heads, scale)
        a["attn_out"] = linear(a["attn_ctx"], P["proj_weight"])
        a["resid"] = x + a["attn_out"]
        a["ln2_out"], ln2 = ln_forward(a["resid"], P["ln2_gamma"], P["ln2_beta"], eps)
        a["fc1_out"] = linear(a["ln2_out"], P["fc1_weight"])
        a["gelu_out"], phi = gelu(a["fc1_out"])
        a["mlp_out"] = linear(a["gelu_out"], P["fc2_weight"])
        a["out"] = a["resid"] + a["mlp_out"]
        for name, value in a.items():
            if f"{l:02d}/{name}" in t:  # a lean capture holds the block output only
                judge.check(f"layers/{l:02d}/{name}", value, get(t, f"{l:02d}/{name}", tensors_last(t, l, name)))
        caches.append((x, P, a, ln1, att, ln2, phi))
        x = a["out"]
    top = f"{L:02d}"
    g, b = get(t, f"{top}/lnf_gamma"), get(t, f"{top}/lnf_beta")
    y, lnf = ln_forward(x, g, b, eps)
    target = get(t, f"{top}/target", "hidden")
    judge.check(f"layers/{top}/lnf_out", y, get(t, f"{top}/lnf_out", "hidden"))
    loss = np.mean((y - target) ** 2)
    judge.check(f"layers/{top}/loss", np.array([loss]), get(t, f"{top}/loss").reshape(1))
    if f"{top}/lnf_gamma_grad" not in t:
        return judge.finish("gpt (forward only)", t)

    dy = 2.0 * (y - target) / y.size
    dh, dg, db = ln_backward(dy, g, lnf)
    judge.check(f"layers/{top}/lnf_gamma_grad", dg, get(t, f"{top}/lnf_gamma_grad"))
    judge.check(f"layers/{top}/lnf_beta_grad", db, get(t, f"{top}/lnf_beta_grad"))
    for l in reversed(range(L)):
        xin, P, a, ln1, att, ln2, phi = caches[l]
        judge.check(f"layers/{l:02d}/out_grad", dh, get(t, f"{l:02d}/out_grad", "hidden"))
        G = {}
        d_gelu, G["fc2_weight"] = linear_backward(dh, a["gelu_out"], P["fc2_weight"])
        d_fc1 = gelu_backward(d_gelu, a["fc1_out"], phi)
        d_ln2, G["fc1_weight"] = linear_backward(d_fc1, a["ln2_out"], P["fc1_weight"])
        d_res, G["ln2_gamma"], G["ln2_beta"] = ln_backward(d_ln2, P["ln2_gamma"], ln2)
        d_res = d_res + dh
        d_ctx, G["proj_weight"] = linear_backward(d_res, a["attn_ctx"], P["proj_weight"])
        d_qkv = attention_backward(d_ctx, att, scale)
        d_ln1, G["qkv_weight"] = linear_backward(d_qkv, a["ln1_out"], P["qkv_weight"])
        d_x, G["ln1_gamma"], G["ln1_beta"] = ln_backward(d_ln1, P["ln1_gamma"], ln1)
        for name, value in G.items():
            judge.check(f"layers/{l:02d}/{name}_grad", value, get(t, f"{l:02d}/{name}_grad"))
        dh = d_x + d_res
    return judge.finish("gpt", t)


def tensors_last(t, l, name):
    """The last axis's name of layers/<l>/<name> (hidden, ffn or qkv), from its dims."""
    return t[f"{l:02d}/{name}"][1].split(",")[-1]


if __name__ == "__main__":
    sys.exit(rb.run(main))
