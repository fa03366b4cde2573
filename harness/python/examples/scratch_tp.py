#!/usr/bin/env python3
"""A small tensor- and data-parallel model written from scratch, one training step captured with
equiv_capture, with bugs to plant at a chosen strength: what cases/sensitivity.py sweeps.

    scratch_tp.py --out runs/tp4 --tp 4                   # 4 processes (forked here, gloo)
    scratch_tp.py --out runs/tp4-bug --tp 4 --bug partial_scale --strength 0.01
    torchrun --nproc_per_node 4 scratch_tp.py --out runs/dp4 --dp 4
    equiv compare runs/tp1 runs/tp4-bug

The model (BLOCKS blocks, each):  x = x + drop(fc2(gelu(fc1(ln(x)))))
  token embedding (replicated) -> LayerNorm (replicated region) -> fc1, split by output features
  over tp (GELU on the split) -> fc2 with bias, split by input features over tp: each rank's partial
  product all-reduced by a hand-written autograd function, the bias added once after it -> dropout
  (replicated region) -> residual; then a replicated head (plain Linear) and cross-entropy against
  random next tokens. Before fc1 an identity whose backward all-reduces the input gradient over tp.

Every layout computes the same step: the weights are full master tensors drawn from the seed and
sliced, the global batch is fixed by the seed and split over dp in rank order, and the dropout mask
is drawn for the global batch from a generator seeded by (seed, step, block) and sliced to the
rank's rows. Data parallel: each rank's loss is the mean over its own tokens; after backward every
gradient is all-reduced over dp and divided by dp by hand. gloo has no bf16 all-reduce: bf16 is
gathered and added in rank order, rounding to bf16 after every add, as a bf16 wire does.

The splits are declared to equiv_capture with rules= (RULES), since these classes are not
Megatron's: fc1's weight and output over tp along their out-feature dims, fc2's weight along dim 1;
the rest replicated over tp.

Planted bugs (--bug KIND --strength EPS; the reference run has none):
  partial_scale     the last tp rank's partial of fc2 times (1+EPS) before the all-reduce
  bias_per_rank     fc2's bias added on every tp rank before the all-reduce (counted tp times)
  stale_weight      the last tp rank computes fc1 with a stale copy of its weight shard:
                    shard + EPS rms(W) d, d a fixed random direction of rms 1 (the parameter
                    itself, and its gradient, are the honest ones)
  ln_eps            the LayerNorm eps on the last tp rank made larger, so that its output is
                    about EPS (relative) smaller
  dropout_unsynced  on tp ranks other than 0 the dropout mask is drawn from seed + tp_rank
  dp_grad_scale     the last dp rank's gradients times (1+EPS) before the dp average
Every block has the bug; entry_tensor(KIND) names where it enters first (block 0), is_entry(KIND,
NAME) whether a tensor a report names first is where it enters.

Two kinds change the model the reference must share: bias_per_rank's effect is (tp-1) x the bias,
dropout_unsynced's is set by the dropout probability. shared_options(KIND, EPS, tp) gives the
options both runs take (--fc2-bias R: fc2's bias rms as a fraction of the rms of fc2's bias-free
output, R = EPS/(tp-1); --dropout P: P = EPS), so that the bug changes fc2's output by about EPS
(relative) and one dropout mask in about 1/EPS elements.
"""

import argparse
import math
import os
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import equiv_capture  # noqa: E402

VOCAB, HIDDEN, FFN, BLOCKS, SEQ, BATCH = 96, 64, 128, 2, 16, 8
DROPOUT = 0.1        # the honest runs' dropout probability (--dropout)
FC2_BIAS = 0.1       # fc2's bias rms relative to FC2_OUT_RMS (--fc2-bias)
# rms of fc2's bias-free output at init: fc1's output is about N(0, 1) (LayerNorm, weights of
# variance 1/in), gelu of it has E[gelu(z)^2] = 0.4252 and fc2's weights variance 1/FFN, so
# rms = sqrt(0.4252) (0.65 measured at seed 0 in fp64, both blocks).
FC2_OUT_RMS = math.sqrt(0.4252)

KINDS = ("partial_scale", "bias_per_rank", "stale_weight", "ln_eps", "dropout_unsynced", "dp_grad_scale")
DP_KINDS = ("dp_grad_scale",)

# How equiv assembles the shards: fnmatch patterns over dataset paths.
RULES = {
    "*.fc1.weight*": "tp:0",   # [FFN/tp, HIDDEN]: this rank's output features
    "*.fc1.out*": "tp:-1",     # its output (and the output's gradient): split along features
    "*.fc1.in": "replicated",  # its input is the whole LayerNorm output on every rank
    "*.fc2.weight*": "tp:1",   # [HIDDEN, FFN/tp]: this rank's input features
    "*.fc2.in": "tp:-1",
}


def entry_tensor(kind):
    """The dataset the bug KIND enters at first (equiv_capture's names)."""
    return {"partial_scale": "blocks.0.fc2.out", "bias_per_rank": "blocks.0.fc2.out",
            "stale_weight": "blocks.0.fc1.out", "ln_eps": "blocks.0.ln.out",
            "dropout_unsynced": "blocks.0.drop.out", "dp_grad_scale": "embed.weight.grad"}[kind]


def is_entry(kind, name):
    """Whether a report that names NAME first has found where the bug KIND enters. dp_grad_scale
    enters every parameter's gradient at once (in the dp average, after the backward): the first
    in capture order (entry_tensor) is no more its entry than the others, so any parameter's
    gradient is (an activation's gradient, NAME.out_grad, is not: the bug comes after them)."""
    if kind == "dp_grad_scale":
        return name is not None and name.endswith(".grad") and not name.endswith(".out_grad")
    return name == entry_tensor(kind)


def replicated_entry(kind):
    """True where the entry tensor is replicated over tp and the bug makes the tp ranks disagree
    on it: equiv reports it under the assembly findings."""
    return kind in ("ln_eps", "dropout_unsynced")


def shared_options(kind, eps, tp):
    """The model options the bug run with --bug KIND --strength EPS at this tp shares with its
    reference (and truth) runs."""
    if kind == "bias_per_rank":
        return ["--fc2-bias", repr(eps / max(tp - 1, 1))]
    if kind == "dropout_unsynced":
        return ["--dropout", repr(eps)]
    return []


class World:
    """This rank's place: the groups, the layout and the planted bug, shared by the layers."""
    tp_group = dp_group = None
    dp = tp = 1
    dp_rank = tp_rank = 0
    seed = step = 0
    bug, strength = "none", 0.0


def sum_over(t, group):
    """SUM over the group; bf16 gathered and added in rank order, rounding after every add."""
    if group is None or dist.get_world_size(group) == 1:
        return t
    if t.dtype != torch.bfloat16:
        t = t.clone()
        dist.all_reduce(t, group=group)
        return t
    parts = [torch.empty_like(t, dtype=torch.float32) for _ in range(dist.get_world_size(group))]
    dist.all_gather(parts, t.float().contiguous(), group=group)
    acc = parts[0].to(torch.bfloat16)
    for p in parts[1:]:
        acc = acc + p.to(torch.bfloat16)
    return acc


class EnterTP(torch.autograd.Function):
    """Into the split region: identity forward; each rank's input gradient covers only its own
    features of fc1, so the backward sums them over tp."""

    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, g):
        return sum_over(g, World.tp_group)


class LeaveTP(torch.autograd.Function):
    """Out of the split region: the partial products summed over tp; the gradient of the sum is
    the same for every partial."""

    @staticmethod
    def forward(ctx, x):
        return sum_over(x, World.tp_group)

    @staticmethod
    def backward(ctx, g):
        return g


class StaleCopy(torch.autograd.Function):
    """stale_weight: the forward uses a stored copy in place of the weight; the gradient goes to
    the weight as if it had been used."""

    @staticmethod
    def forward(ctx, weight, copy):
        return copy.clone()

    @staticmethod
    def backward(ctx, g):
        return g, None


def gen(*key):
    """A generator seeded by a tuple of small ints (the same on every rank and layout)."""
    s = 0
    for k in key:
        s = (s * 1000003 + int(k)) % (2 ** 62)
    return torch.Generator().manual_seed(s)


def master(shape, *key, scale=1.0):
    """The full master tensor (fp64) for this key, the same at every layout."""
    return torch.randn(*shape, generator=gen(World.seed, *key), dtype=torch.float64) * scale


def slice_rows(t, parts, index, dim):
    n = t.shape[dim] // parts
    return t.narrow(dim, index * n, n).clone()


class SplitOutLinear(nn.Module):
    """y[..., my features] = x W[my rows]^T (no bias): the out features split over tp."""

    def __init__(self, in_f, out_f, key):
        super().__init__()
        w = master((out_f, in_f), *key, scale=in_f ** -0.5)
        self.weight = nn.Parameter(slice_rows(w, World.tp, World.tp_rank, 0))
        self.stale = None
        if World.bug == "stale_weight" and World.tp_rank == World.tp - 1:
            direction = master((out_f, in_f), 77, *key)
            stale = w + World.strength * w.pow(2).mean().sqrt() * direction / direction.pow(2).mean().sqrt()
            self.stale = slice_rows(stale, World.tp, World.tp_rank, 0)

    def forward(self, x):
        w = self.weight
        if self.stale is not None:  # the rank's cached copy of its shard, not the current weight
            w = StaleCopy.apply(w, self.stale.to(w.dtype))
        return F.linear(EnterTP.apply(x), w)


class SplitInLinear(nn.Module):
    """y = sum over tp of x[..., my features] W[:, my columns]^T, then + b (once)."""

    def __init__(self, in_f, out_f, key, bias_rms):
        super().__init__()
        w = master((out_f, in_f), *key, scale=in_f ** -0.5)
        self.weight = nn.Parameter(slice_rows(w, World.tp, World.tp_rank, 1))
        self.bias = nn.Parameter(master((out_f,), *key, 1, scale=bias_rms))

    def forward(self, x):
        partial = F.linear(x, self.weight)
        if World.bug == "partial_scale" and World.tp_rank == World.tp - 1:
            partial = partial * (1 + World.strength)
        if World.bug == "bias_per_rank":
            return LeaveTP.apply(partial + self.bias)
        return LeaveTP.apply(partial) + self.bias


class GlobalDropout(nn.Module):
    """Dropout whose mask is drawn for the whole global batch and sliced to this rank's rows."""

    def __init__(self, p, block):
        super().__init__()
        self.p, self.block = p, block

    def forward(self, x):
        if self.p == 0:
            return x.clone()
        seed = World.seed
        if World.bug == "dropout_unsynced" and World.tp_rank != 0:
            seed = seed + World.tp_rank  # a rank seeding its own generator
        keep = torch.rand(BATCH, *x.shape[1:], generator=gen(seed, 5, World.step, self.block)) >= self.p
        keep = slice_rows(keep, World.dp, World.dp_rank, 0)
        return torch.where(keep, x / (1 - self.p), torch.zeros((), dtype=x.dtype))


def mislaid_eps(module, inputs):
    """ln_eps: the last tp rank's eps, chosen from the input's variance so that the output is
    about EPS (relative) smaller: (var + eps1) = (var + eps0) / (1 - EPS)^2."""
    var = inputs[0].double().var(dim=-1, unbiased=False).mean().item()
    module.eps = module.honest_eps + (var + module.honest_eps) * ((1 - World.strength) ** -2 - 1)


class Block(nn.Module):
    def __init__(self, i, dropout, fc2_bias):
        super().__init__()
        self.ln = nn.LayerNorm(HIDDEN)
        with torch.no_grad():
            self.ln.weight.copy_(1 + master((HIDDEN,), i, 1, scale=0.1))
            self.ln.bias.copy_(master((HIDDEN,), i, 2, scale=0.1))
        self.ln.honest_eps = self.ln.eps
        if World.bug == "ln_eps" and World.tp_rank == World.tp - 1:
            self.ln.register_forward_pre_hook(mislaid_eps)
        self.fc1 = SplitOutLinear(HIDDEN, FFN, (i, 3))
        self.act = nn.GELU()
        self.fc2 = SplitInLinear(FFN, HIDDEN, (i, 4), fc2_bias * FC2_OUT_RMS)
        self.drop = GlobalDropout(dropout, i)

    def forward(self, x):
        return x + self.drop(self.fc2(self.act(self.fc1(self.ln(x)))))


class ScratchModel(nn.Module):
    def __init__(self, dropout, fc2_bias):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, HIDDEN)
        self.blocks = nn.ModuleList(Block(i, dropout, fc2_bias) for i in range(BLOCKS))
        self.head = nn.Linear(HIDDEN, VOCAB, bias=False)
        with torch.no_grad():
            self.embed.weight.copy_(master((VOCAB, HIDDEN), 90))
            self.head.weight.copy_(master((VOCAB, HIDDEN), 91, scale=HIDDEN ** -0.5))

    def forward(self, tokens):
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def global_batch():
    """Token ids and next-token targets of the whole batch, from the seed."""
    g = gen(World.seed, 6)
    tokens = torch.randint(VOCAB, (BATCH, SEQ + 1), generator=g)
    return tokens[:, :-1], tokens[:, 1:]


DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32, "fp64": torch.float64}


def run(rank, world, args, init_method):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=init_method, rank=rank, world_size=world)
    dp, tp = args.dp, args.tp
    # the tp ranks of a replica are neighbours: rank = dp_rank * tp + tp_rank
    tp_groups = [dist.new_group(list(range(r * tp, (r + 1) * tp))) for r in range(dp)]
    dp_groups = [dist.new_group(list(range(t, world, tp))) for t in range(tp)]
    World.dp_rank, World.tp_rank = divmod(rank, tp)
    World.dp, World.tp = dp, tp
    World.tp_group, World.dp_group = tp_groups[World.dp_rank], dp_groups[World.tp_rank]
    World.seed, World.step, World.bug, World.strength = args.seed, args.step, args.bug, args.strength

    model = ScratchModel(args.dropout, args.fc2_bias)
    if args.truth_of is not None:  # the truth of a run in that dtype: its very weights, computed wider
        model = model.to(DTYPES[args.truth_of])
    model = model.to(DTYPES[args.dtype])
    tokens, targets = (slice_rows(t, dp, World.dp_rank, 0) for t in global_batch())

    cap = equiv_capture.Capture(model, args.out, dp_group=World.dp_group, tp_group=World.tp_group,
                                rules=RULES, step=args.step, params=args.params)
    logits = model(tokens)
    loss = F.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1))  # this rank's mean
    cap.loss(loss)
    loss.backward()
    for p in model.parameters():  # the data-parallel average, by hand
        g = p.grad
        if World.bug == "dp_grad_scale" and World.dp_rank == dp - 1:
            g = g * (1 + args.strength)
        p.grad = sum_over(g, World.dp_group) / dp if dp > 1 else g
    cap.grads()
    cap.write()
    dist.destroy_process_group()


def make_parser():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--dp", type=int, default=1)
    parser.add_argument("--tp", type=int, default=1)
    parser.add_argument("--dtype", choices=tuple(DTYPES), default="fp32")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--step", type=int, default=0, help="the step (it seeds the dropout mask)")
    parser.add_argument("--bug", choices=("none",) + KINDS, default="none")
    parser.add_argument("--strength", type=float, default=0.01, help="the bug's relative size (default 0.01)")
    parser.add_argument("--dropout", type=float, default=DROPOUT, help=f"dropout probability (default {DROPOUT})")
    parser.add_argument("--fc2-bias", type=float, default=FC2_BIAS,
                        help=f"fc2's bias rms relative to its bias-free output's (default {FC2_BIAS})")
    parser.add_argument("--params", action="store_true", help="capture the parameters too")
    parser.add_argument("--truth-of", choices=("bf16", "fp32"), default=None,
                        help="the truth run of a run in this dtype: its weights rounded to it, then computed in "
                             "--dtype (fp32 for bf16, fp64 for fp32)")
    return parser


def parse_args(argv=None):
    """The command line (argv: sys.argv[1:] when None), checked against the model's sizes."""
    parser = make_parser()
    args = parser.parse_args(argv)
    if args.dp < 1 or args.tp < 1 or FFN % args.tp or BATCH % args.dp:
        parser.error(f"tp {args.tp} must divide {FFN}; dp {args.dp} must divide the batch {BATCH}")
    if not 0 <= args.dropout < 1:
        parser.error(f"--dropout {args.dropout}: want 0 <= p < 1")
    if args.bug in DP_KINDS and args.dp < 2 or args.bug not in DP_KINDS + ("none",) and args.tp < 2:
        parser.error(f"--bug {args.bug} needs {'dp' if args.bug in DP_KINDS else 'tp'} > 1")
    return args


def launch(args, start_method="fork" if sys.platform == "linux" else "spawn"):
    """One process per rank, started here (forked on Linux: each rank starts from this process's
    torch, imported once)."""
    world = args.dp * args.tp
    with tempfile.TemporaryDirectory() as tmp:
        torch.multiprocessing.start_processes(run, args=(world, args, f"file://{tmp}/rendezvous"), nprocs=world,
                                              start_method=start_method)


def main():
    args = parse_args()
    world = args.dp * args.tp
    if "RANK" in os.environ:  # launched by torchrun: one process per rank already
        if int(os.environ["WORLD_SIZE"]) != world:
            make_parser().error(f"WORLD_SIZE {os.environ['WORLD_SIZE']} is not dp x tp = {world}")
        run(int(os.environ["RANK"]), world, args, "env://")
        return
    launch(args)


if __name__ == "__main__":
    main()
