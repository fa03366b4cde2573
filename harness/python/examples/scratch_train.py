#!/usr/bin/env python3
"""Many training steps of scratch_tp.py's model (tp, dp or both, gloo), recorded with
equiv_capture.StepRecorder: what `equiv compare` judges as a training curve, and four bugs that
only show over steps.

    scratch_train.py --out runs/t-tp1 --steps 20                       # the reference
    scratch_train.py --out runs/t-tp2 --steps 20 --tp 2
    scratch_train.py --out runs/t-tp2-clip --steps 20 --tp 2 --bug clip_local
    equiv compare runs/t-tp1 runs/t-tp2-clip

The recipe (every layout): Adam (lr 1e-3, betas 0.9/0.999, eps 1e-8) on fp32 master weights (a
bf16 run's model holds them rounded to bf16), decoupled weight decay 0.1 (p -= lr wd p before the
update), gradients clipped to a global norm of CLIP, a learning-rate schedule (linear warm-up over
WARMUP steps, times DECAY per step), a fresh batch per step from the seed, dp averaging by hand (gloo has no bf16
all-reduce). The global gradient norm: the tp-split parameters' squares summed over tp, the
replicated ones' counted once.

Planted bugs (--bug; the reference has none):
  clip_local     each rank clips by its own norm (its shards and its replicated copies), not the
                 global one: every tp rank scales its gradients by another, larger, factor (tp)
  wd_every_rank  a replicated parameter's weight decay applied on every tp rank and summed over
                 tp (as when the decay is added to a gradient that is then all-reduced over tp):
                 the replicated parameters decay tp times too fast (tp)
  adam_reset     the last dp rank's Adam moments reset at step --bug-step (as after a restart that
                 did not load that rank's optimizer state): its replica goes its own way (dp)
  lr_twice       the learning-rate schedule stepped twice per step on the last rank (tp or dp)
"""

import argparse
import os
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import equiv_capture  # noqa: E402
import scratch_tp as S  # noqa: E402

LR, BETAS, EPS, WD, CLIP, WARMUP, DECAY = 1e-3, (0.9, 0.999), 1e-8, 0.1, 1.0, 5, 0.95
BUGS = {"clip_local": "tp", "wd_every_rank": "tp", "adam_reset": "dp", "lr_twice": "any"}


def batch(step):
    """This rank's tokens and targets of step `step`'s global batch."""
    tokens = torch.randint(S.VOCAB, (S.BATCH, S.SEQ + 1), generator=S.gen(S.World.seed, 6, step))
    return (S.slice_rows(t, S.World.dp, S.World.dp_rank, 0) for t in (tokens[:, :-1], tokens[:, 1:]))


def is_split(name):
    """Split over tp (fc1's and fc2's weights): their squares are summed over tp."""
    return name.endswith("fc1.weight") or name.endswith("fc2.weight")


def grad_norm(named, local):
    """The global gradient norm (fp32), or with local=True this rank's own (the clip_local bug)."""
    split = sum((g.float().pow(2).sum() for n, g in named if is_split(n)), torch.zeros(()))
    replicated = sum((g.float().pow(2).sum() for n, g in named if not is_split(n)), torch.zeros(()))
    if not local and S.World.tp > 1:
        dist.all_reduce(split, group=S.World.tp_group)
    return (split + replicated).sqrt()


def run(rank, world, args, init_method):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=init_method, rank=rank, world_size=world)
    dp, tp = args.dp, args.tp
    tp_groups = [dist.new_group(list(range(r * tp, (r + 1) * tp))) for r in range(dp)]
    dp_groups = [dist.new_group(list(range(t, world, tp))) for t in range(tp)]
    W = S.World
    W.dp_rank, W.tp_rank = divmod(rank, tp)
    W.dp, W.tp = dp, tp
    W.tp_group, W.dp_group = tp_groups[W.dp_rank], dp_groups[W.tp_rank]
    W.seed, W.bug = args.seed, "none"
    last = rank == world - 1

    model = S.ScratchModel(S.DROPOUT, S.FC2_BIAS).to(S.DTYPES[args.dtype])
    named = list(model.named_parameters())
    masters = [p.detach().float().clone() for _, p in named]
    opt = torch.optim.Adam(masters, lr=LR, betas=BETAS, eps=EPS)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda t: min(1.0, (t + 1) / WARMUP) * DECAY ** t)
    rec = equiv_capture.StepRecorder(model, args.out, optimizer=opt, dp_group=W.dp_group, tp_group=W.tp_group,
                                     rules=S.RULES, params_every=args.params_every, full_steps=args.full_steps,
                                     masters=masters)
    for step in range(1, args.steps + 1):
        W.step = step
        cap = rec.begin_step()
        tokens, targets = batch(step)
        loss = F.cross_entropy(model(tokens).reshape(-1, S.VOCAB), targets.reshape(-1))  # this rank's mean
        cap.loss(loss)
        loss.backward()
        for p in model.parameters():  # the data-parallel average, by hand
            p.grad = S.sum_over(p.grad, W.dp_group) / dp if dp > 1 else p.grad
        cap.grads()
        cap.write()
        for m, (_, p) in zip(masters, named):
            m.grad = p.grad.float()
        norm = grad_norm([(n, m.grad) for m, (n, _) in zip(masters, named)], local=args.bug == "clip_local")
        scale = torch.clamp(CLIP / (norm + 1e-6), max=1.0)
        with torch.no_grad():
            for m, (n, _) in zip(masters, named):
                m.grad.mul_(scale)
                decay = LR * sched.get_last_lr()[0] / LR * WD
                if args.bug == "wd_every_rank" and not is_split(n):
                    decay *= tp  # each tp rank's decay of its copy, summed over tp
                m.mul_(1 - decay)
        if args.bug == "adam_reset" and W.dp_rank == dp - 1 and step == args.bug_step:
            opt.state.clear()  # this rank's moments (and step count) start again
        opt.step()
        sched.step()
        if args.bug == "lr_twice" and last:
            sched.step()
        with torch.no_grad():
            for m, (_, p) in zip(masters, named):
                p.copy_(m)
        rec.end_step(loss)
        opt.zero_grad(set_to_none=True)
        model.zero_grad(set_to_none=True)
    rec.close()
    dist.destroy_process_group()


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--dp", type=int, default=1)
    parser.add_argument("--tp", type=int, default=1)
    parser.add_argument("--dtype", choices=("bf16", "fp32"), default="fp32")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--params-every", type=int, default=1, help="store the parameters every K steps (0: never)")
    parser.add_argument("--full-steps", type=lambda s: [int(x) for x in s.split(",") if x], default=[1],
                        help="steps to capture in full, comma-separated (default 1)")
    parser.add_argument("--bug", choices=("none",) + tuple(BUGS), default="none")
    parser.add_argument("--bug-step", type=int, default=5, help="adam_reset: the step whose moments are reset")
    args = parser.parse_args(argv)
    if args.dp < 1 or args.tp < 1 or S.FFN % args.tp or S.BATCH % args.dp or args.steps < 1:
        parser.error(f"tp {args.tp} must divide {S.FFN}; dp {args.dp} must divide the batch {S.BATCH}; steps >= 1")
    need = BUGS.get(args.bug)
    if need == "tp" and args.tp < 2 or need == "dp" and args.dp < 2 or need == "any" and args.dp * args.tp < 2:
        parser.error(f"--bug {args.bug} needs {need if need != 'any' else 'dp or tp'} > 1")
    return args


def launch(args, start_method="fork" if sys.platform == "linux" else "spawn"):
    world = args.dp * args.tp
    with tempfile.TemporaryDirectory() as tmp:
        torch.multiprocessing.start_processes(run, args=(world, args, f"file://{tmp}/rendezvous"), nprocs=world,
                                              start_method=start_method)


def main():
    args = parse_args()
    if "RANK" in os.environ:  # torchrun
        run(int(os.environ["RANK"]), args.dp * args.tp, args, "env://")
        return
    launch(args)


if __name__ == "__main__":
    main()
