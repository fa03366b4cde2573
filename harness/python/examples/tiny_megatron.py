#!/usr/bin/env python3
"""A small transformer with Megatron-style tensor parallelism, trained one step, captured with
equiv_capture: the kind of script `equiv compare` is for, and the one its tests run.

    tiny_megatron.py --out runs/tp4 --tp 4              # 4 processes (started here, gloo)
    torchrun --nproc_per_node 4 tiny_megatron.py --out runs/dp4 --dp 4
    equiv compare runs/tp1 runs/tp4

The model: L pre-LN blocks (LayerNorm; q, k, v column-parallel over heads; causal attention; the
output projection row-parallel; LayerNorm; fc1 column-parallel, GELU, fc2 row-parallel), a final
LayerNorm and a replicated head, MSE loss against a target. Column-parallel layers copy their input
to the tp ranks (all-reduce of its gradient in the backward), row-parallel layers all-reduce their
output (Megatron's copy_to / reduce_from_tensor_model_parallel_region). Weights are the full master
tensor from a seed, then sliced, so every layout starts from the same weights; the global batch is
fixed and split over dp in rank order.

--convention avg: DDP (each rank's loss is its local mean; DDP averages the gradients).
--convention sum: the loss divided by the global count, gradients SUM-all-reduced by hand.
--bug plants what real code gets wrong: no_row_allreduce (a row-parallel output left as each rank's
partial), grad_div_world (gradients divided by the world size once more after DDP), local_count
(sum convention, but the loss divided by the local count), desync_param (dp rank 1 starts from a
perturbed weight).
--groups tp (or dp): Capture is given that group alone, and works out the other (dp = world / tp).
"""

import argparse
import os
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import equiv_capture  # noqa: E402

HIDDEN, HEADS, FFN, LAYERS, SEQ, BATCH = 64, 4, 128, 2, 8, 8


class Ctx:
    """The process groups and the planted bug, shared by the layers."""
    tp_group = None
    tp = 1
    tp_rank = 0
    bug = "none"


def all_reduce_sum(t, group):
    """SUM over the group. gloo has no bf16 all-reduce: bf16 is gathered (widened exactly) and
    added in rank order, rounding to bf16 after every add, as a bf16 wire would."""
    if dist.get_world_size(group) == 1:
        return t
    if t.dtype != torch.bfloat16:
        t = t.clone()
        dist.all_reduce(t, group=group)
        return t
    parts = [torch.empty_like(t, dtype=torch.float32) for _ in range(dist.get_world_size(group))]
    dist.all_gather(parts, t.float(), group=group)
    acc = parts[0].to(torch.bfloat16)
    for p in parts[1:]:
        acc = acc + p.to(torch.bfloat16)
    return acc


class CopyToTP(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, g):
        return all_reduce_sum(g, Ctx.tp_group)


class ReduceFromTP(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        if Ctx.bug == "no_row_allreduce":
            return x.clone()
        return all_reduce_sum(x, Ctx.tp_group)

    @staticmethod
    def backward(ctx, g):
        return g


def master_weight(out_features, in_features, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(out_features, in_features, generator=g, dtype=torch.float64) / in_features ** 0.5


class ColumnParallelLinear(nn.Module):
    """y[:, block] = x W[block]^T: this rank's rows of the weight; output split over tp."""

    def __init__(self, in_features, out_features, seed):
        super().__init__()
        rows = out_features // Ctx.tp
        w = master_weight(out_features, in_features, seed)[Ctx.tp_rank * rows:(Ctx.tp_rank + 1) * rows]
        self.weight = nn.Parameter(w.float())
        self.bias = None
        self.gather_output = False

    def forward(self, x):
        return F.linear(CopyToTP.apply(x), self.weight)


class RowParallelLinear(nn.Module):
    """y = sum over tp of x[:, block] W[:, block]^T: this rank's columns; input split over tp."""

    def __init__(self, in_features, out_features, seed):
        super().__init__()
        cols = in_features // Ctx.tp
        w = master_weight(out_features, in_features, seed)[:, Ctx.tp_rank * cols:(Ctx.tp_rank + 1) * cols]
        self.weight = nn.Parameter(w.float())
        self.bias = None
        self.input_is_parallel = True

    def forward(self, x):
        return ReduceFromTP.apply(F.linear(x, self.weight))


class Attention(nn.Module):
    def __init__(self, seed):
        super().__init__()
        self.q = ColumnParallelLinear(HIDDEN, HIDDEN, seed + 1)
        self.k = ColumnParallelLinear(HIDDEN, HIDDEN, seed + 2)
        self.v = ColumnParallelLinear(HIDDEN, HIDDEN, seed + 3)
        self.proj = RowParallelLinear(HIDDEN, HIDDEN, seed + 4)
        self.heads = HEADS // Ctx.tp

    def forward(self, x):
        b, s, _ = x.shape
        d = HIDDEN // HEADS
        q, k, v = (m(x).view(b, s, self.heads, d).transpose(1, 2) for m in (self.q, self.k, self.v))
        scores = q @ k.transpose(-1, -2) / d ** 0.5
        mask = torch.ones(s, s, dtype=torch.bool).triu(1)
        ctx = torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1) @ v
        return self.proj(ctx.transpose(1, 2).reshape(b, s, self.heads * d))


class Block(nn.Module):
    def __init__(self, seed):
        super().__init__()
        self.ln1 = nn.LayerNorm(HIDDEN)
        self.attn = Attention(seed)
        self.ln2 = nn.LayerNorm(HIDDEN)
        self.fc1 = ColumnParallelLinear(HIDDEN, FFN, seed + 5)
        self.act = nn.GELU()
        self.fc2 = RowParallelLinear(FFN, HIDDEN, seed + 6)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.fc2(self.act(self.fc1(self.ln2(x))))


class TinyGPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList(Block(100 * (i + 1)) for i in range(LAYERS))
        self.ln_f = nn.LayerNorm(HIDDEN)
        self.head = nn.Linear(HIDDEN, HIDDEN, bias=False)
        with torch.no_grad():
            self.head.weight.copy_(master_weight(HIDDEN, HIDDEN, 999).float())

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


def global_batch(dtype):
    g = torch.Generator().manual_seed(7)
    x = torch.randn(BATCH, SEQ, HIDDEN, generator=g).to(dtype)
    target = torch.randn(BATCH, SEQ, HIDDEN, generator=g).to(dtype)
    return x, target


def run(rank, world, args, init_method):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=init_method, rank=rank, world_size=world)
    dp, tp = args.dp, args.tp
    # Megatron's order: the tp ranks of a replica are neighbours (rank = dp_rank * tp + tp_rank)
    tp_groups = [dist.new_group(list(range(r * tp, (r + 1) * tp))) for r in range(dp)]
    dp_groups = [dist.new_group(list(range(t, world, tp))) for t in range(tp)]
    dp_rank, tp_rank = divmod(rank, tp)
    Ctx.tp_group, Ctx.tp, Ctx.tp_rank, Ctx.bug = tp_groups[dp_rank], tp, tp_rank, args.bug
    dp_group = dp_groups[tp_rank]
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float32

    model = TinyGPT().to(dtype)
    if args.convention == "avg" and dp > 1:
        model = nn.parallel.DistributedDataParallel(model, process_group=dp_group)
    if args.bug == "desync_param" and dp_rank == 1:  # after DDP's broadcast from rank 0, as a bad load would
        with torch.no_grad():
            next(p for n, p in model.named_parameters() if n.endswith("blocks.0.fc1.weight"))[0, 0] += 0.01

    x, target = global_batch(dtype)
    local = BATCH // dp
    x, target = (t[dp_rank * local:(dp_rank + 1) * local] for t in (x, target))

    # the three equiv_capture lines
    groups = {"dp_group": dp_group if args.groups in ("both", "dp") else None,
              "tp_group": Ctx.tp_group if args.groups in ("both", "tp") else None}
    cap = equiv_capture.Capture(model, args.out, **groups, loss_scale=1 if args.convention == "sum" else None,
                                params=args.params)
    y = model(x)
    if args.convention == "avg":
        loss = ((y - target) ** 2).mean()                                # local mean; DDP averages
    else:
        count = y.numel() if args.bug == "local_count" else y.numel() * dp  # the global count
        loss = ((y - target) ** 2).sum() / count
    cap.loss(loss)
    loss.backward()
    if args.convention == "sum":
        for p in model.parameters():
            p.grad = all_reduce_sum(p.grad, dp_group)
    if args.bug == "grad_div_world":
        for p in model.parameters():
            p.grad /= dp
    cap.grads()
    cap.write()
    dist.destroy_process_group()


def make_parser():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--dp", type=int, default=1)
    parser.add_argument("--tp", type=int, default=1)
    parser.add_argument("--dtype", choices=("fp32", "bf16"), default="fp32")
    parser.add_argument("--convention", choices=("avg", "sum"), default="avg")
    parser.add_argument("--bug", choices=("none", "no_row_allreduce", "grad_div_world", "local_count",
                                          "desync_param"), default="none")
    parser.add_argument("--params", action="store_true", help="capture the parameters too")
    parser.add_argument("--groups", choices=("both", "tp", "dp"), default="both",
                        help="the process groups given to Capture (the other one it works out)")
    return parser


def parse_args(argv=None):
    """The command line (argv: sys.argv[1:] when None), checked against the model's sizes."""
    parser = make_parser()
    args = parser.parse_args(argv)
    if HEADS % args.tp or FFN % args.tp or BATCH % args.dp:
        parser.error(f"tp {args.tp} must divide {HEADS} heads and {FFN}; dp {args.dp} must divide batch {BATCH}")
    return args


def launch(args, start_method="fork" if sys.platform == "linux" else "spawn"):
    """One process per rank, started here. On Linux by fork: each rank starts from this process's
    torch, imported once (nothing has run a torch op or started a thread yet), instead of importing
    it again (about 0.8 s of CPU a rank); elsewhere by spawn."""
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
