#!/usr/bin/env python3
"""equiv_capture's sharding rules for the layouts past dp x tp, without a process group: FSDP2's
DTensor Shard(0) over an unnamed one-dimensional mesh is dp (stub placements, so it runs on a torch
without DTensor), TorchTitan's mesh names, sequence parallelism from Megatron-Core's attribute,
context parallel's automatic sequence split. Each check would fail on the rule it guards: an
unnamed mesh taken as tp, a cp activation left whole, a sequence-parallel LayerNorm replicated."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from equiv_capture.sharding import dtensor_rule, module_tp_rule, shard_for  # noqa: E402

failed = 0


def expect(what, got, want):
    global failed
    ok = got == want
    failed += not ok
    print(f"{'ok' if ok else 'FAIL'}: {what}: {got!r}" + ("" if ok else f", want {want!r}"))


class Shard:  # torch.distributed.tensor.Shard's contract: .dim
    def __init__(self, dim):
        self.dim = dim


class Replicate:
    pass


class Mesh:
    def __init__(self, size, names=None):
        self._size, self.mesh_dim_names = size, names

    def size(self):
        return self._size


class FakeDTensor:
    def __init__(self, placements, mesh):
        self.placements, self.device_mesh = placements, mesh


class Param:
    def __init__(self, **attrs):
        self.__dict__.update(attrs)


class Module:
    def __init__(self, cls, params=(), **attrs):
        self.__class__ = type(cls, (Module,), {})
        self._params = list(params)
        self.__dict__.update(attrs)

    def parameters(self, recurse=False):
        return iter(self._params)


# FSDP2: fully_shard(model) on a 1-D mesh without names, a world of 4 in dp
flat = FakeDTensor([Shard(0)], Mesh(4))
expect("fully_shard's unnamed 1-D mesh is dp", dtensor_rule(flat, fsdp=True, dp=4, tp=1), "dp:0")
expect("an unnamed 1-D mesh of dp's size, tp 1, is dp", dtensor_rule(flat, dp=4, tp=1), "dp:0")
expect("an unnamed 1-D mesh of tp's size is tp", dtensor_rule(FakeDTensor([Shard(0)], Mesh(2)), dp=4, tp=2), "tp:0")
expect("a weight's shard file attribute", shard_for("w", "weight", 2, tensor=flat, fsdp=True, dp_size=4), "dp:0")
expect("its gradient", shard_for("w.grad", "weight_grad", 2, tensor=flat, fsdp=True, dp_size=4), "dp:0")
expect("TorchTitan's dp_shard x tp", dtensor_rule(FakeDTensor([Shard(0), Shard(1)], Mesh(4, ("dp_shard", "tp")))),
       "dp:0,tp:1")
expect("TorchTitan's cp mesh, replicated", dtensor_rule(FakeDTensor([Replicate()], Mesh(2, ("cp",)))), "replicated")

# sequence parallelism: Megatron-Core marks the LayerNorm's weights, its parallel linears say so
ln = Module("FusedLayerNorm", [Param(sequence_parallel=True)])
expect("a sequence-parallel LayerNorm's output ([s, b, h])", module_tp_rule(ln, "out", seq_dim=0), "tp:0")
expect("its weight", module_tp_rule(ln, "weight", seq_dim=0), None)
expect("a LayerNorm without the attribute", module_tp_rule(Module("LayerNorm", [Param()]), "out"), None)
row = Module("RowParallelLinear", sequence_parallel=True)
expect("a row-parallel output, reduce-scattered", module_tp_rule(row, "out", seq_dim=0), "tp:0")
col = Module("ColumnParallelLinear", sequence_parallel=True)
expect("a column-parallel input, before its all-gather", module_tp_rule(col, "in", seq_dim=0), "tp:0")
expect("a [s, b, h] activation at dp 2, cp 2",
       shard_for("x.out", "out", 3, batch_dim=1, dp_size=2, cp_size=2), "dp:1,cp:0")
expect("a rule naming its cp part keeps it", shard_for("x.out", "out", 3, rules={"x.*": "cp:2"}, cp_size=2), "cp:2")
expect("a parameter at cp 2 is replicated", shard_for("w", "weight", 2, cp_size=2), "replicated")
sys.exit(1 if failed else 0)
