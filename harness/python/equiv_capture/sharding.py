"""How a rank holds a tensor: the `shard` attribute of the schema.

A shard is "replicated" or a comma list of GROUP:DIM, GROUP dp or tp: "tp:0" (split along dim 0
over the tensor-parallel group), "dp:0,tp:2" (batch over dp, hidden over tp). equiv concatenates the
shards in group-rank order along DIM and checks that a tensor replicated over a group is equal on
every rank of it.

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


def module_tp_rule(module, kind):
    """The tensor-parallel part ("tp:D" or None for replicated) of a module's tensor of this kind."""
    cls = type(module).__name__
    param = kind[:-5] if kind.endswith("_grad") and kind != "out_grad" else kind
    if cls in COLUMN_PARALLEL:
        if param in ("out", "out_grad"):
            return None if getattr(module, "gather_output", False) else "tp:-1"
        if param == "in":
            return None
        return "tp:0"  # weight [out/tp, in], bias [out/tp]
    if cls in ROW_PARALLEL:
        if param == "weight":
            return "tp:1"  # [out, in/tp]
        if param == "in":
            return "tp:-1" if getattr(module, "input_is_parallel", True) else None
        return None  # the output is all-reduced; the bias is added after it
    if cls in VOCAB_PARALLEL:
        return "tp:0" if param == "weight" else None
    return None


def param_tp_rule(param):
    """Megatron marks its sharded parameters: tensor_model_parallel and partition_dim."""
    if getattr(param, "tensor_model_parallel", False) and hasattr(param, "partition_dim"):
        return f"tp:{int(param.partition_dim)}"
    return None


def dtensor_rule(tensor):
    """A DTensor's placements as a shard, or None for a plain tensor."""
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
        group = names[i] if i < len(names) else ("dp" if len(placements) > 1 and i == 0 else "tp")
        if group not in ("dp", "tp"):
            raise ValueError(f"DTensor mesh dim '{group}': name the mesh dims 'dp' and 'tp' for equiv")
        parts.append(f"{group}:{dim}")
    return ",".join(parts) if parts else "replicated"


def normalise(shard, ndim):
    """'dp:0,tp:-1' with negative dims counted from the end, as 'dp:0,tp:2'; checks the grammar."""
    if shard == "replicated":
        return shard
    out = []
    for part in shard.split(","):
        group, _, dim = part.partition(":")
        if group not in ("dp", "tp") or not dim.lstrip("-").isdigit():
            raise ValueError(f"shard '{shard}': want 'replicated' or parts like 'dp:0', 'tp:-1'")
        d = int(dim)
        d = d + ndim if d < 0 else d
        if not 0 <= d < max(ndim, 1):
            raise ValueError(f"shard '{shard}' splits dim {dim} of a {ndim}-d tensor")
        out.append(f"{group}:{d}")
    return ",".join(out)


def combine(dp_part, tp_part):
    parts = [p for p in (dp_part, tp_part) if p]
    return ",".join(parts) if parts else "replicated"


def shard_for(path, kind, ndim, *, module=None, param=None, tensor=None, rules=None, batch_dim=0,
              dp_size=1, inherited_tp=None):
    """The shard attribute of one dataset.

    path: the dataset path ("blocks.0.mlp.fc1.out"); kind: "out", "out_grad", "in", or a
    parameter's leaf name or its "_grad". inherited_tp: the tp part an elementwise module takes from
    its input (GELU after a column-parallel layer), used where no rule or placement says more. Activations (out, out_grad, in) are split over dp along
    batch_dim; parameters and their gradients are replicated over dp (DDP) unless a rule or a
    DTensor placement says otherwise.
    """
    activation = kind in ("out", "out_grad", "in")
    dp_part = f"dp:{batch_dim}" if activation and dp_size > 1 else None
    for pattern, rule in (rules or {}).items():
        if fnmatch.fnmatchcase(path, pattern):
            if rule != "replicated" and "dp:" in rule:
                return normalise(rule, ndim)
            tp_part = None if rule == "replicated" else rule
            return normalise(combine(dp_part, tp_part), ndim)
    if tensor is not None:
        placed = dtensor_rule(tensor)
        if placed is not None:
            return normalise(placed if placed == "replicated" or "dp:" in placed or not dp_part
                             else combine(dp_part, placed), ndim)
    tp_part = param_tp_rule(param) if param is not None else None
    if tp_part is None and inherited_tp is not None:
        tp_part = inherited_tp
    if tp_part is None and module is not None:
        tp_part = module_tp_rule(module, kind)
    return normalise(combine(dp_part, tp_part), ndim)
