"""How a rank holds a tensor: the `shard` attribute of the schema.

A shard is "replicated" or a comma list of GROUP:DIM, GROUP dp, tp, cp or ep: "tp:0" (split along
dim 0 over the tensor-parallel group), "dp:0,tp:2" (batch over dp, hidden over tp), "dp:1,cp:0" (a
[s, b, h] activation: batch over dp, sequence over context parallel), "ep:0" (a stack of experts
over expert parallel). equiv concatenates the shards in group-rank order along DIM and checks that
a tensor replicated over a group is equal on every rank of it. Pipeline stages hold a tensor whole
or not at all: a stage's file holds its own layers.

Sequence parallelism (Megatron's sequence_parallel with tp) splits the LayerNorm and dropout
regions along the sequence over tp: "tp:S", S the sequence dim. It is read from Megatron-Core's
`sequence_parallel` attribute on a module's parameters (its LayerNorms) or on a parallel linear
(a row-parallel output is reduce-scattered along the sequence; a column-parallel input is the
sequence shard before its all-gather); elementwise modules after them inherit it; a rule says it
for the rest ({"*.ln1.out*": "tp:0"}).

FSDP: a DTensor's mesh dims named dp, dp_shard or fsdp are dp ("dp_replicate" too, where it
replicates); an unnamed one-dimensional mesh is dp where FSDP2's fully_shard placed the parameter,
tp where its size is tp's and not dp's. FSDP1's flat parameters are not assembled: capture inside
FSDP.summon_full_params(model, with_grads=True), where every rank holds them whole.

Where the tensor-parallel split comes from, first match wins:
  1. the user's rules: {fnmatch pattern over the dataset path: shard}, e.g.
     {"*.qkv.out*": "tp:-1", "*.fc2.weight*": "tp:1"}; a rule that names no dp part keeps the
     automatic one (activations split over dp along the batch dim, parameters replicated);
  2. a DTensor's placements (mesh dims named "dp"/"tp");
  3. Megatron's parameter attributes (tensor_model_parallel, partition_dim);
  4. for a module with no parameters whose output has its input's shape (GELU, dropout): the split
     of the captured tensor it was applied to;
  5. the module's class: Megatron-Core's (and Transformer Engine's) ColumnParallelLinear,
     RowParallelLinear, VocabParallelEmbedding, matched by name, so a hand-written module of the
     same name and contract is treated the same;
  6. anything else (nn.Linear, LayerNorm, ...) is replicated over tp.
"""

import fnmatch

# kind: "out", "out_grad", "in", or a parameter's leaf name ("weight", "bias", ...) and its "_grad"
COLUMN_PARALLEL = {"ColumnParallelLinear", "TEColumnParallelLinear", "TELayerNormColumnParallelLinear"}
ROW_PARALLEL = {"RowParallelLinear", "TERowParallelLinear"}
VOCAB_PARALLEL = {"VocabParallelEmbedding"}


def _sequence_parallel(module):
    """Megatron-Core marks a sequence-parallel region's parameters (its LayerNorms') and its parallel
    linears with sequence_parallel = True."""
    if getattr(module, "sequence_parallel", False) is True:
        return True
    return any(getattr(p, "sequence_parallel", False) is True for p in module.parameters(recurse=False))


def module_tp_rule(module, kind, seq_dim=0):
    """The tensor-parallel part ("tp:D" or None for replicated) of a module's tensor of this kind.
    seq_dim: the sequence dim of activations, where sequence parallelism splits them."""
    cls = type(module).__name__
    param = kind[:-5] if kind.endswith("_grad") and kind != "out_grad" else kind
    sp = _sequence_parallel(module)
    if cls in COLUMN_PARALLEL:
        if param in ("out", "out_grad"):
            return None if getattr(module, "gather_output", False) else "tp:-1"
        if param == "in":
            return f"tp:{seq_dim}" if sp else None  # the sequence shard, before the all-gather
        return "tp:0"  # weight [out/tp, in], bias [out/tp]
    if cls in ROW_PARALLEL:
        if param == "weight":
            return "tp:1"  # [out, in/tp]
        if param == "in":
            return "tp:-1" if getattr(module, "input_is_parallel", True) else None
        if param in ("out", "out_grad") and sp:
            return f"tp:{seq_dim}"  # reduce-scattered along the sequence
        return None  # the output is all-reduced; the bias is added after it
    if cls in VOCAB_PARALLEL:
        return "tp:0" if param == "weight" else None
    if sp and param in ("out", "out_grad", "in"):
        return f"tp:{seq_dim}"  # a LayerNorm of the sequence-parallel region: its parameters whole
    return None


def param_tp_rule(param):
    """Megatron marks its sharded parameters: tensor_model_parallel and partition_dim."""
    if getattr(param, "tensor_model_parallel", False) and hasattr(param, "partition_dim"):
        return f"tp:{int(param.partition_dim)}"
    return None


# DTensor mesh dim names (TorchTitan's, Megatron's, equiv's) and the group each is
MESH_GROUPS = {"dp": "dp", "dp_shard": "dp", "fsdp": "dp", "dp_replicate": "dp", "ddp": "dp", "data_parallel": "dp",
               "tp": "tp", "tensor_parallel": "tp", "cp": "cp", "context_parallel": "cp", "ep": "ep",
               "expert_parallel": "ep"}


def unnamed_mesh_group(mesh_size, *, fsdp=False, dp=1, tp=1):
    """The group of a one-dimensional mesh with no dim names: dp where FSDP2's fully_shard placed the
    tensor (or where only dp has its size), tp where tp has its size and dp has not."""
    if fsdp:
        return "dp"
    if tp > 1 and mesh_size == tp and mesh_size != dp:
        return "tp"
    if dp > 1 and mesh_size == dp:
        return "dp"
    return "tp"


def dtensor_rule(tensor, *, fsdp=False, dp=1, tp=1):
    """A DTensor's placements as a shard, or None for a plain tensor. fsdp: FSDP2 placed it (an
    unnamed one-dimensional mesh is then dp); dp, tp: the run's sizes, for an unnamed mesh."""
    placements = getattr(tensor, "placements", None)
    mesh = getattr(tensor, "device_mesh", None)
    if placements is None or mesh is None:
        return None
    names = getattr(mesh, "mesh_dim_names", None) or ()
    parts = []
    for i, placement in enumerate(placements):
        dim = getattr(placement, "dim", None)
        if dim is None:  # Replicate (or Partial, which equiv does not assemble)
            if type(placement).__name__ not in ("Replicate",):
                raise ValueError(f"a DTensor placement {placement!r}: equiv assembles Shard and Replicate only")
            continue
        if i < len(names):
            group = MESH_GROUPS.get(names[i], names[i])
        elif len(placements) == 1:
            size = mesh.size() if callable(getattr(mesh, "size", None)) else 0
            group = unnamed_mesh_group(size, fsdp=fsdp, dp=dp, tp=tp)
        else:
            group = "dp" if i == 0 else "tp"
        if group not in ("dp", "tp", "cp", "ep"):
            raise ValueError(f"DTensor mesh dim '{group}': name the mesh dims dp, tp, cp or ep for equiv")
        parts.append(f"{group}:{dim}")
    return ",".join(parts) if parts else "replicated"


def normalise(shard, ndim):
    """'dp:0,tp:-1' with negative dims counted from the end, as 'dp:0,tp:2'; checks the grammar."""
    if shard == "replicated":
        return shard
    out = []
    for part in shard.split(","):
        group, _, dim = part.partition(":")
        if group not in ("dp", "tp", "cp", "ep") or not dim.lstrip("-").isdigit():
            raise ValueError(f"shard '{shard}': want 'replicated' or parts like 'dp:0', 'tp:-1', 'cp:1', 'ep:0'")
        d = int(dim)
        d = d + ndim if d < 0 else d
        if not 0 <= d < max(ndim, 1):
            raise ValueError(f"shard '{shard}' splits dim {dim} of a {ndim}-d tensor")
        out.append(f"{group}:{d}")
    return ",".join(out)


def combine(*parts):
    parts = [p for part in parts if part for p in part.split(",")]
    return ",".join(parts) if parts else "replicated"


def _automatic(rule, dp_part, cp_part):
    """A rule's or a placement's parts, with the automatic dp and cp parts of an activation for the
    groups it does not name."""
    named = () if rule == "replicated" else rule.split(",")
    dp = None if any(p.startswith(("dp:", "ep:")) for p in named) else dp_part
    cp = None if any(p.startswith("cp:") for p in named) else cp_part
    return combine(dp, cp, *(p for p in named))


def shard_for(path, kind, ndim, *, module=None, param=None, tensor=None, rules=None, batch_dim=0,
              dp_size=1, inherited_tp=None, seq_dim=None, cp_size=1, fsdp=False, tp_size=1):
    """The shard attribute of one dataset.

    path: the dataset path ("blocks.0.mlp.fc1.out"); kind: "out", "out_grad", "in", or a
    parameter's leaf name or its "_grad". inherited_tp: the tp part an elementwise module takes from
    its input (GELU after a column-parallel layer), used where no rule or placement says more. Activations (out, out_grad, in) are split over dp along
    batch_dim; parameters and their gradients are replicated over dp (DDP) unless a rule or a
    DTensor placement says otherwise.
    """
    activation = kind in ("out", "out_grad", "in")
    seq_dim = (0 if batch_dim == 1 else 1) if seq_dim is None else seq_dim
    dp_part = f"dp:{batch_dim}" if activation and dp_size > 1 else None
    cp_part = f"cp:{seq_dim}" if activation and cp_size > 1 else None  # every token-wise activation
    for pattern, rule in (rules or {}).items():
        if fnmatch.fnmatchcase(path, pattern):
            return normalise(_automatic(rule, dp_part, cp_part), ndim)
    if tensor is not None:
        placed = dtensor_rule(tensor, fsdp=fsdp, dp=dp_size, tp=tp_size)
        if placed is not None:
            return normalise(_automatic(placed, dp_part, cp_part), ndim)
    tp_part = param_tp_rule(param) if param is not None else None
    if tp_part is None and inherited_tp is not None:
        tp_part = inherited_tp
    if tp_part is None and module is not None:
        tp_part = module_tp_rule(module, kind, seq_dim)
    return normalise(combine(dp_part, cp_part, tp_part), ndim)
