#!/usr/bin/env python3
"""FSDP2 (torch >= 2.4: fully_shard over a one-dimensional device mesh, parameters and gradients
DTensors Shard(0) over data parallel) against the same step on one process, captured with
equiv_capture:

    fsdp2.py --out runs/f1                            # one process: the reference
    fsdp2.py --out runs/f2 --dp 2                     # fully_shard over a mesh of 2 (gloo, CPU)
    fsdp2.py --out runs/f2-bug --dp 2 --bug loss_div_twice
    equiv compare runs/f1 runs/f2

The model: two blocks  x + fc2(gelu(fc1(ln(x))))  drawn from seed 0 in every run, the global batch
[B, S, H] and its target drawn once, split by batch over dp, the loss the mean squared error of each
rank's part (FSDP2 averages the gradients over the mesh, as DDP does). The capture is given no
group: the mesh's one unnamed dim is data parallel, which equiv_capture reads from fully_shard
(harness/python/equiv_capture/sharding.py). Bug loss_div_twice: each rank's loss divided by dp
before backward, so every gradient is 1/dp of the reference's.
Exits 77 where torch has no fully_shard (Debian's 1.13).
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

B, S, H, FFN = 8, 4, 16, 32


def fully_shard_fn():
    """FSDP2's fully_shard (torch >= 2.6 exports it from fsdp; 2.4 and 2.5 from _composable), or None
    (Debian's torch 1.13 under Python 3.11 even fails to import fsdp, with a ValueError)."""
    try:
        from torch.distributed.fsdp import fully_shard
        return fully_shard
    except Exception:  # noqa: BLE001
        pass
    try:
        from torch.distributed._composable.fsdp import fully_shard
        return fully_shard
    except Exception:  # noqa: BLE001
        return None


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm(H)
        self.fc1 = nn.Linear(H, FFN)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(FFN, H)

    def forward(self, x):
        return x + self.fc2(self.act(self.fc1(self.ln(x))))


def worker(rank, world, args, init):
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    torch.manual_seed(0)
    model = nn.Sequential(Block(), Block())  # the same weights in every run
    g = torch.Generator().manual_seed(1)
    x_all, target_all = torch.randn(B, S, H, generator=g), torch.randn(B, S, H, generator=g)
    x, target = x_all.chunk(world)[rank], target_all.chunk(world)[rank]
    if world > 1:
        from torch.distributed.device_mesh import init_device_mesh
        mesh = init_device_mesh("cpu", (world,))  # one unnamed dim: data parallel
        shard = fully_shard_fn()
        for block in model:
            shard(block, mesh=mesh)
        shard(model, mesh=mesh)
    cap = equiv_capture.Capture(model, args.out)
    loss = F.mse_loss(model(x), target)
    if args.bug == "loss_div_twice":
        loss = loss / world
    cap.loss(loss)
    loss.backward()
    cap.grads()
    cap.write()
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--dp", type=int, default=1)
    p.add_argument("--bug", choices=("loss_div_twice",))
    args = p.parse_args()
    if fully_shard_fn() is None:
        print(f"skip: torch {torch.__version__} has no fully_shard (FSDP2 needs torch >= 2.4)")
        sys.exit(77)
    with tempfile.TemporaryDirectory() as tmp:
        init = f"file://{tmp}/rendezvous"
        if args.dp == 1:
            worker(0, 1, args, init)
        else:
            torch.multiprocessing.spawn(worker, args=(args.dp, args, init), nprocs=args.dp, join=True)


if __name__ == "__main__":
    main()
