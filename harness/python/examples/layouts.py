#!/usr/bin/env python3
"""Small hand-written models of the layouts a Megatron or TorchTitan run uses past dp x tp, one
training step each captured with equiv_capture, with each layout's classic bug to plant:

    layouts.py --out runs/sp2 --layout sp --tp 2          # sequence parallel with tp
    layouts.py --out runs/pp2 --layout pp --pp 2 --dp 2   # 4 blocks over 2 stages, 2 micro-batches
    layouts.py --out runs/cp2 --layout cp --cp 2          # causal attention, the sequence split
    layouts.py --out runs/ep2 --layout ep --dp 4 --ep 2   # 4 experts over ep 2 (carved from dp 4)
    equiv compare runs/sp1 runs/sp2

Every layout computes the same step of the same model at every size (the reference: all sizes 1):
weights are drawn from the seed by global name and sliced, the global batch [B, S, H] and its
target are drawn once and split (batch over dp in rank order, sequence over tp (sp) or cp), the
loss is the mean squared error against the target. Each rank's loss is its part of its dp
replica's mean, so its gradients are dp x the global loss's (loss_scale dp); gradients are
reduced by hand (gloo has no reduce-scatter; it is an all-reduce and a slice).

  sp  blocks of  x + fc2(gelu(fc1(ln(x))))  with fc1 a ColumnParallelLinear and fc2 a
      RowParallelLinear (Megatron's contract, so equiv_capture knows them by class name), the
      LayerNorm region split along the sequence over tp (its weights marked sequence_parallel, as
      Megatron-Core marks them): all-gathered before fc1, reduce-scattered after fc2. After the
      step the LayerNorm gradients, each tp rank's over its part of the sequence, are summed over
      tp (Megatron's finalize_model_grads).  Bug ln_grad_unreduced: that sum left out.
  pp  BLOCKS of the same (plain Linears) split over pp stages; --microbatches micro-batches, all
      forwards then all backwards in micro-batch order (GPipe), activations and their gradients
      sent between stages (send/recv); each micro-batch's loss divided by their count.
      Bugs: loss_div_twice (divided by the count twice: x 1/M); wrong_microbatch (stage 0 sends
      micro-batch m+1's activation as m's: wrong from the first layer of stage 1).
  cp  a causal single-head attention block  x + proj(attn(q, k, v))  on the sequence split over
      cp: keys and values all-gathered over cp, the causal mask at global positions.
      Bug local_mask: the mask compares global key positions with local query positions.
  ep  x + gate * expert(ln(x)): a router (top-1 of E experts) and E experts (fc1, gelu, fc2)
      split over ep, each rank holding E/ep of them by their global number; tokens dispatched by
      all-gather over the ep group (gloo has no all_to_all), the experts' outputs summed back.
      Expert gradients summed over the expert's dp replicas (ranks of the same ep rank) / dp.
      Bugs: expert_grad_unreduced (that sum left out); route_next (tokens routed to the expert of
      the next rank: (e + E/ep) mod E).
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

B, S, H, FFN, BLOCKS, EXPERTS = 8, 8, 16, 32, 4, 4
BUGS = {"sp": ("ln_grad_unreduced",), "pp": ("loss_div_twice", "wrong_microbatch"), "cp": ("local_mask",),
        "ep": ("expert_grad_unreduced", "route_next")}


def drawn(name, shape, scale=1.0):
    """The master tensor NAME: the same in every layout (a generator seeded by the name)."""
    g = torch.Generator().manual_seed(sum(ord(c) * 131 ** i for i, c in enumerate(name)) % (2 ** 31))
    return torch.randn(shape, generator=g) * scale


class W:
    """This rank's place and groups (W.members[g]: the global ranks of its group g, in group order)."""
    args = None
    groups = {}
    members = {}

    @staticmethod
    def size(g):
        return dist.get_world_size(W.groups[g])

    @staticmethod
    def rank(g):
        return dist.get_rank(W.groups[g])


# group -> what its members share: the coordinates that do not vary in it (ep and edp within dp)
SHARED = {"tp": lambda c: (c["cp"], c["dp"], c["pp"]), "cp": lambda c: (c["tp"], c["dp"], c["pp"]),
          "dp": lambda c: (c["tp"], c["cp"], c["pp"]), "pp": lambda c: (c["tp"], c["cp"], c["dp"]),
          "ep": lambda c: (c["tp"], c["cp"], c["pp"], c["edp"]), "edp": lambda c: (c["tp"], c["cp"], c["pp"], c["ep"])}


def make_groups(world, coords):
    """Every group of every kind (all ranks create all, in one order); W.groups[g] is this rank's."""
    for g, shared in SHARED.items():
        parts = {}
        for r in range(world):
            parts.setdefault(shared(coords(r)), []).append(r)
        for key in sorted(parts):
            group = dist.new_group(parts[key])
            if dist.get_rank() in parts[key]:
                W.groups[g], W.members[g] = group, parts[key]


# collectives with their backward --------------------------------------------------------------
def _gather(x, dim, group):
    parts = [torch.empty_like(x) for _ in range(dist.get_world_size(group))]
    dist.all_gather(parts, x.contiguous(), group=group)
    return torch.cat(parts, dim)


def _reduce_scatter(x, dim, group):
    x = x.clone()
    dist.all_reduce(x, group=group)
    return x.chunk(dist.get_world_size(group), dim)[dist.get_rank(group)].contiguous()


class Gather(torch.autograd.Function):
    """All-gather along dim over group; backward: reduce-scatter."""

    @staticmethod
    def forward(ctx, x, dim, group):
        ctx.dim, ctx.group = dim, group
        return _gather(x, dim, group) if dist.get_world_size(group) > 1 else x

    @staticmethod
    def backward(ctx, g):
        return (_reduce_scatter(g, ctx.dim, ctx.group) if dist.get_world_size(ctx.group) > 1 else g), None, None


class ReduceScatter(torch.autograd.Function):
    """Sum over group, keep this rank's part along dim; backward: all-gather."""

    @staticmethod
    def forward(ctx, x, dim, group):
        ctx.dim, ctx.group = dim, group
        return _reduce_scatter(x, dim, group) if dist.get_world_size(group) > 1 else x

    @staticmethod
    def backward(ctx, g):
        return (_gather(g, ctx.dim, ctx.group) if dist.get_world_size(ctx.group) > 1 else g), None, None


def sum_grads(params, group, divide):
    for p in params:
        if p.grad is not None:
            if dist.get_world_size(group) > 1:
                dist.all_reduce(p.grad, group=group)
            p.grad /= divide


# the models -----------------------------------------------------------------------------------
class ColumnParallelLinear(nn.Module):
    """Megatron's contract: weight [FFN/tp, H], output split along its features; with
    sequence_parallel its input is the sequence shard, all-gathered here."""

    def __init__(self, name, n_in, n_out):
        super().__init__()
        tp, t = W.size("tp"), W.rank("tp")
        self.weight = nn.Parameter(drawn(name + ".weight", (n_out, n_in), n_in ** -0.5).chunk(tp, 0)[t].clone())
        self.bias = nn.Parameter(drawn(name + ".bias", (n_out,), 0.1).chunk(tp, 0)[t].clone())
        self.sequence_parallel, self.gather_output = tp > 1, False

    def forward(self, x):  # x [b, s/tp, h] -> [b, s, ffn/tp]
        return F.linear(Gather.apply(x, 1, W.groups["tp"]), self.weight, self.bias)


class RowParallelLinear(nn.Module):
    """weight [H, FFN/tp]; the partial products reduce-scattered along the sequence, then the bias."""

    def __init__(self, name, n_in, n_out):
        super().__init__()
        tp, t = W.size("tp"), W.rank("tp")
        self.weight = nn.Parameter(drawn(name + ".weight", (n_out, n_in), n_in ** -0.5).chunk(tp, 1)[t].clone())
        self.bias = nn.Parameter(drawn(name + ".bias", (n_out,), 0.1))  # added to the sequence shard:
        self.bias.sequence_parallel = tp > 1                              # its gradient is too (Megatron)
        self.sequence_parallel, self.input_is_parallel = tp > 1, True

    def forward(self, x):  # x [b, s, ffn/tp] -> [b, s/tp, h]
        return ReduceScatter.apply(F.linear(x, self.weight), 1, W.groups["tp"]) + self.bias


def layer_norm(name):
    ln = nn.LayerNorm(H)
    with torch.no_grad():
        ln.weight.copy_(1 + drawn(name + ".weight", (H,), 0.1))
        ln.bias.copy_(drawn(name + ".bias", (H,), 0.1))
    return ln


def linear(name, n_in, n_out, bias=True):
    lin = nn.Linear(n_in, n_out, bias=bias)
    with torch.no_grad():
        lin.weight.copy_(drawn(name + ".weight", (n_out, n_in), n_in ** -0.5))
        if bias:
            lin.bias.copy_(drawn(name + ".bias", (n_out,), 0.1))
    return lin


class MLPBlock(nn.Module):
    """x + fc2(gelu(fc1(ln(x)))); tensor parallel with sequence parallelism where tp > 1 (sp)."""

    def __init__(self, name, parallel):
        super().__init__()
        self.ln = layer_norm(name + ".ln")
        for p in self.ln.parameters():
            p.sequence_parallel = parallel and W.size("tp") > 1  # as Megatron-Core marks them
        make_in, make_out = (ColumnParallelLinear, RowParallelLinear) if parallel else (linear, linear)
        self.fc1, self.act, self.fc2 = make_in(name + ".fc1", H, FFN), nn.GELU(), make_out(name + ".fc2", FFN, H)

    def forward(self, x):
        return x + self.fc2(self.act(self.fc1(self.ln(x))))


class AttnBlock(nn.Module):
    """x + proj(softmax(q k^T / sqrt(H) + causal) v), the sequence split over cp."""

    def __init__(self, name):
        super().__init__()
        self.ln, self.attn = layer_norm(name + ".ln"), nn.Identity()
        # k without a bias: softmax over keys ignores it, its gradient is zero (rounding noise only)
        self.q, self.k, self.v, self.proj = (linear(f"{name}.{n}", H, H, n != "k") for n in ("q", "k", "v", "proj"))

    def forward(self, x):  # x [b, s/cp, h]
        h = self.ln(x)
        cp_group, s_local = W.groups["cp"], x.shape[1]
        q, k, v = self.q(h), Gather.apply(self.k(h), 1, cp_group), Gather.apply(self.v(h), 1, cp_group)
        first = W.rank("cp") * s_local  # this rank's first global position
        rows = torch.arange(s_local) + (0 if W.args.bug == "local_mask" else first)
        mask = torch.arange(k.shape[1])[None, :] > rows[:, None]  # [s/cp, s]: a key after the query
        scores = (q @ k.transpose(1, 2)) / math.sqrt(H)
        return x + self.proj(self.attn(torch.softmax(scores.masked_fill(mask, float("-inf")), -1) @ v))


class Expert(nn.Module):
    """fc2(gelu(fc1(x))), called as a function: its tokens are the ep group's, so no activation of
    it is captured (only its parameters and their gradients)."""

    def __init__(self, name):
        super().__init__()
        self.w1 = nn.Parameter(drawn(name + ".w1", (FFN, H), H ** -0.5))
        self.w2 = nn.Parameter(drawn(name + ".w2", (H, FFN), FFN ** -0.5))

    def run(self, x):
        return F.linear(F.gelu(F.linear(x, self.w1)), self.w2)


class MoEBlock(nn.Module):
    """x + gate * expert(ln(x)), top-1 routing; experts split over ep by global number."""

    def __init__(self, name):
        super().__init__()
        ep, e = W.size("ep"), W.rank("ep")
        self.local = EXPERTS // ep
        self.ln, self.router, self.moe = layer_norm(name + ".ln"), nn.Linear(H, EXPERTS, bias=False), nn.Identity()
        with torch.no_grad():
            self.router.weight.copy_(drawn(name + ".router.weight", (EXPERTS, H), 1.0))
        self.experts = nn.ModuleDict({str(i): Expert(f"{name}.experts.{i}")
                                      for i in range(e * self.local, (e + 1) * self.local)})

    def forward(self, x):  # x [b, s, h]
        h = self.ln(x)
        probs = torch.softmax(self.router(h), -1)
        gate, idx = probs.max(-1)
        if W.args.bug == "route_next":
            idx = (idx + self.local) % EXPERTS
        group = W.groups["ep"]
        tokens = Gather.apply(h.reshape(-1, H), 0, group)  # [ep x b s, h]: the group's tokens
        where = _gather(idx.reshape(-1), 0, group) if W.size("ep") > 1 else idx.reshape(-1)
        partial = torch.zeros_like(tokens)
        for name, expert in self.experts.items():
            chosen = where == int(name)
            partial = partial.index_put((chosen.nonzero()[:, 0],), expert.run(tokens[chosen]))
        out = ReduceScatter.apply(partial, 0, group).reshape(x.shape)  # this rank's tokens back
        return x + self.moe(gate[..., None] * out)


class Stack(nn.Module):
    def __init__(self, make, held):
        super().__init__()
        self.blocks = nn.ModuleDict({str(i): make(f"blocks.{i}") for i in held})

    def forward(self, x):
        for block in self.blocks.values():
            x = block(x)
        return x


# one step -----------------------------------------------------------------------------------
def data(rows, seq):
    """This rank's rows and sequence positions of the global input and target."""
    x, y = drawn("input", (B, S, H)), drawn("target", (B, S, H))
    return x[rows][:, seq].contiguous(), y[rows][:, seq].contiguous()


def layout_coords(args):
    """rank -> its coordinates, in Megatron's order (tp, cp innermost; pp outermost; ep inside dp)."""
    def coords(r):
        tp_rank, r = r % args.tp, r // args.tp
        cp_rank, r = r % args.cp, r // args.cp
        dp_rank, pp_rank = r % args.dp, r // args.dp
        return {"tp": tp_rank, "cp": cp_rank, "dp": dp_rank, "pp": pp_rank, "ep": dp_rank % args.ep,
                "edp": dp_rank // args.ep}
    return coords


def run(rank, world, args, init):
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    torch.manual_seed(0)
    W.args = args
    make_groups(world, layout_coords(args))
    dp, dp_rank = W.size("dp"), W.rank("dp")
    rows = slice(dp_rank * B // dp, (dp_rank + 1) * B // dp)
    split = W.size("tp") * W.size("cp")
    part = W.rank("tp") * W.size("cp") + W.rank("cp")
    seq = slice(part * S // split, (part + 1) * S // split)
    x, y = data(rows, seq)
    count = (B // dp) * S * H  # the elements of this rank's dp replica
    stage, stages = W.rank("pp"), W.size("pp")
    per = BLOCKS // stages if args.layout == "pp" else 1
    make = {"sp": lambda n: MLPBlock(n, True), "pp": lambda n: MLPBlock(n, False), "cp": AttnBlock,
            "ep": MoEBlock}[args.layout]
    model = Stack(make, range(stage * per, (stage + 1) * per) if args.layout == "pp" else range(2))
    cap = equiv_capture.Capture(model, args.out, dp_group=W.groups["dp"], tp_group=W.groups["tp"],
                                pp_group=W.groups["pp"], cp_group=W.groups["cp"], ep_group=W.groups["ep"],
                                microbatches=args.microbatches if args.layout == "pp" else 1, params=True)
    if args.layout == "pp":
        pipeline(model, cap, x, y, count, args)
    else:
        loss = ((model(x) - y) ** 2).sum() / count
        total = loss.detach().clone()
        if W.size("tp") > 1:  # the sequence's parts: the capture sums over dp and cp, not tp
            dist.all_reduce(total, group=W.groups["tp"])
        cap.loss(total)
        loss.backward()
    finalize(model, args)
    cap.grads()
    cap.write()
    dist.destroy_process_group()


def pipeline(model, cap, x, y, count, args):
    """GPipe: every micro-batch's forward, then every backward, in micro-batch order."""
    m_count, stage, stages = args.microbatches, W.rank("pp"), W.size("pp")
    ranks = W.members["pp"]
    prev = ranks[stage - 1] if stage > 0 else None
    nxt = ranks[stage + 1] if stage < stages - 1 else None
    xs, ys = x.chunk(m_count, 0), y.chunk(m_count, 0)
    inputs, outputs = [], []
    for m in range(m_count):
        if prev is None:
            inp = xs[m]
        else:
            inp = torch.empty_like(xs[m])
            dist.recv(inp, prev)
            inp.requires_grad_(True)
        inputs.append(inp)
        outputs.append(model(inp))
    if nxt is not None:
        for m in range(m_count):
            sent = m if args.bug != "wrong_microbatch" else (m + 1) % m_count
            dist.send(outputs[sent].detach().contiguous(), nxt)
    for m in range(m_count):
        if nxt is None:  # the last stage: each micro-batch's loss over the count of micro-batches
            loss = ((outputs[m] - ys[m]) ** 2).sum() / (count // m_count) / m_count
            if args.bug == "loss_div_twice":
                loss = loss / m_count
            cap.loss(loss)
            loss.backward()
        else:
            grad = torch.empty_like(outputs[m])
            dist.recv(grad, nxt)
            outputs[m].backward(grad)
        if prev is not None:
            dist.send(inputs[m].grad.contiguous(), prev)


def finalize(model, args):
    """The gradient reductions after the backward, by hand."""
    dense, experts, sp = [], [], []
    for name, p in model.named_parameters():
        (experts if ".experts." in name else sp if getattr(p, "sequence_parallel", False) else dense).append(p)
    if args.bug != "ln_grad_unreduced":
        sum_grads(sp, W.groups["tp"], 1)  # Megatron's finalize_model_grads: sequence-parallel weights over tp
    sum_grads(sp + dense, W.groups["cp"], 1)  # each cp rank's part of the sequence
    sum_grads(sp + dense, W.groups["dp"], W.size("dp"))
    if args.bug == "expert_grad_unreduced":  # each replica keeps the gradient of its own tokens
        for p in experts:
            p.grad /= W.size("dp")
        return
    sum_grads(experts, W.groups["edp"], W.size("dp"))


def make_parser():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--layout", choices=tuple(BUGS), required=True)
    for g in ("dp", "tp", "pp", "cp", "ep"):
        parser.add_argument(f"--{g}", type=int, default=1)
    parser.add_argument("--microbatches", type=int, default=2)
    parser.add_argument("--bug", default="none")
    return parser


def parse_args(argv=None):
    parser = make_parser()
    args = parser.parse_args(argv)
    if args.bug not in ("none",) + BUGS[args.layout]:
        parser.error(f"--bug {args.bug}: {args.layout}'s are {', '.join(BUGS[args.layout])}")
    if S % (args.tp * args.cp) or B % (args.dp * args.microbatches) or BLOCKS % args.pp or args.dp % args.ep \
            or EXPERTS % args.ep or FFN % args.tp:
        parser.error("the sizes do not divide the model's")
    return args


def launch(args, start_method="fork" if sys.platform == "linux" else "spawn"):
    world = args.dp * args.tp * args.pp * args.cp
    with tempfile.TemporaryDirectory() as tmp:
        torch.multiprocessing.start_processes(run, args=(world, args, f"file://{tmp}/rendezvous"), nprocs=world,
                                              start_method=start_method)


def main():
    args = parse_args()
    if "RANK" in os.environ:
        run(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), args, "env://")
        return
    launch(args)


if __name__ == "__main__":
    main()
