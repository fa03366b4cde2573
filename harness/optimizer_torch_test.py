#!/usr/bin/python3
"""harness/optimizer.h against torch.optim, bit for bit: 5 steps of SGD and Adam on random fp32 and
fp64 parameters and gradients, run by the optimizer_steps program (argv[1]) and by torch on CPU.

Adam's first moment comes in two forms (torch 2's lerp_, torch 1's mul_ then add_): the installed
torch.optim.Adam checks its own form, and a transcription of torch's _single_tensor_adam with the
same tensor ops checks both (the transcription itself checked against torch.optim.Adam first).

Skips (77) without torch or numpy, and where torch's CPU kernels were not built for AVX2 or
AVX512 (ATEN_CPU_CAPABILITY=default rounds add_(x, alpha) twice where the SIMD kernels fuse it:
an ulp or two apart now and then, not a bug here)."""
import math
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import torch
except ImportError as e:
    print(f"skip: {e}")
    sys.exit(77)

STEPS, N = 5, 1003  # N: whole SIMD vectors of 8 and 4 lanes and a tail


def cpu_capability():
    for line in torch.__config__.show().splitlines():
        if "CPU capability usage:" in line:
            return line.split(":", 1)[1].strip()
    return "unknown"


def data(dtype, seed):
    """params [N] and grads [STEPS, N]: normal values, some steps scaled down to where eps and
    the bias corrections matter, a few exact zeros and signed values of mixed magnitudes."""
    g = torch.Generator().manual_seed(seed)
    params = torch.randn(N, generator=g, dtype=dtype)
    grads = torch.randn(STEPS, N, generator=g, dtype=dtype)
    grads *= torch.tensor([1.0, 1e-3, 10.0, 1e-7, 0.5], dtype=dtype)[:, None]
    grads[:, ::97] = 0.0
    grads[2, 1::5] *= 1e4
    return params, grads


def torch_optim(kind, hp, params, grads):
    p = torch.nn.Parameter(params.clone())
    if kind == "sgd":
        opt = torch.optim.SGD([p], lr=hp["lr"], foreach=False)
    else:
        opt = torch.optim.Adam([p], lr=hp["lr"], betas=(hp["beta1"], hp["beta2"]), eps=hp["eps"], foreach=False)
    out = []
    for t in range(STEPS):
        p.grad = grads[t].clone()
        opt.step()
        out.append(p.detach().clone())
    return torch.stack(out)


def transcribed_adam(form, hp, params, grads):
    """torch/optim/adam.py _single_tensor_adam (no amsgrad, weight decay, maximize, capturable)."""
    beta1, beta2, lr, eps = hp["beta1"], hp["beta2"], hp["lr"], hp["eps"]
    param = params.clone()
    exp_avg, exp_avg_sq = torch.zeros_like(param), torch.zeros_like(param)
    step_t = torch.tensor(0.0)
    out = []
    for t in range(STEPS):
        grad = grads[t]
        step_t += 1
        if form == "lerp":
            exp_avg.lerp_(grad, 1 - beta1)
        else:
            exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
        exp_avg_sq.mul_(beta2).addcmul_(grad, grad.conj(), value=1 - beta2)
        step = step_t.item()
        bias_correction1 = 1 - beta1**step
        bias_correction2 = 1 - beta2**step
        step_size = lr / bias_correction1
        bias_correction2_sqrt = math.sqrt(bias_correction2)
        denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)
        param.addcdiv_(exp_avg, denom, value=-step_size)
        out.append(param.clone())
    return torch.stack(out)


def equiv(exe, kind, form, dtype, hp, params, grads, tmp):
    name = {torch.float32: "fp32", torch.float64: "fp64"}[dtype]
    paths = [os.path.join(tmp, f) for f in ("params.bin", "grads.bin", "out.bin")]
    params.numpy().tofile(paths[0])
    grads.numpy().tofile(paths[1])
    args = [exe, kind, form, name, str(N), str(STEPS)] + [repr(float(hp.get(k, 0.0))) for k in ("lr", "beta1", "beta2", "eps")]
    subprocess.run(args + paths, check=True)
    return torch.from_numpy(np.fromfile(paths[2], dtype=params.numpy().dtype).reshape(STEPS, N))


def differences(label, got, want):
    """0 if the bits agree; else prints the first differing step and element, with ulps."""
    int_type = {torch.float32: np.int32, torch.float64: np.int64}[want.dtype]
    a, b = got.numpy().view(int_type), want.numpy().view(int_type)
    bad = np.argwhere(a != b)
    if len(bad) == 0:
        return 0
    t, i = bad[0]
    print(f"FAIL {label}: {len(bad)} of {a.size} elements differ; first at step {t + 1} element {i}: "
          f"{got[t, i].item()!r} vs torch {want[t, i].item()!r} ({abs(int(a[t, i]) - int(b[t, i]))} ulp)")
    return 1


def main():
    if len(sys.argv) != 2:
        print("usage: optimizer_torch_test.py OPTIMIZER_STEPS", file=sys.stderr)
        return 2
    exe = sys.argv[1]
    capability = cpu_capability()
    if not capability.startswith("AVX"):
        print(f"skip: torch's CPU kernels are '{capability}', not AVX2/AVX512 (see the docstring)")
        return 77
    installed_form = "lerp" if int(torch.__version__.split(".")[0]) >= 2 else "mul_add"
    print(f"torch {torch.__version__}, CPU capability {capability}, torch.optim.Adam's first moment: {installed_form}")
    configs = [
        ("sgd", {"lr": 0.01}),
        ("sgd", {"lr": 0.3}),
        ("adam", {"lr": 1e-3, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8}),  # torch's defaults
        ("adam", {"lr": 0.05, "beta1": 0.7, "beta2": 0.95, "eps": 1e-6}),   # lerp weight 0.3: the small branch
        ("adam", {"lr": 0.02, "beta1": 0.3, "beta2": 0.9, "eps": 1e-4}),    # lerp weight 0.7: the large branch
    ]
    failures = checks = 0
    with tempfile.TemporaryDirectory() as tmp:
        for dtype in (torch.float32, torch.float64):
            for seed, (kind, hp) in enumerate(configs):
                params, grads = data(dtype, seed)
                label = f"{kind} {hp} {dtype}"
                if kind == "sgd":
                    want = torch_optim(kind, hp, params, grads)
                    failures += differences(label, equiv(exe, kind, "lerp", dtype, hp, params, grads, tmp), want)
                    checks += 1
                    continue
                # the transcription is torch.optim.Adam where the installed torch uses its form
                failures += differences(f"transcription {label}", transcribed_adam(installed_form, hp, params, grads),
                                        torch_optim(kind, hp, params, grads))
                checks += 1
                for form in ("lerp", "mul_add"):
                    want = transcribed_adam(form, hp, params, grads)
                    failures += differences(f"{form} {label}", equiv(exe, kind, form, dtype, hp, params, grads, tmp), want)
                    checks += 1
                # the forms do differ here (else the checks above could not tell them apart)
                if dtype == torch.float32:
                    checks += 1
                    if torch.equal(transcribed_adam("lerp", hp, params, grads), transcribed_adam("mul_add", hp, params, grads)):
                        print(f"FAIL {label}: lerp and mul_add agree on this data: it cannot tell them apart")
                        failures += 1
    print(f"optimizer_torch_test: {checks} checks, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
