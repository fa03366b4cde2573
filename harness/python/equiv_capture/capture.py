"""Capture: hooks on a model's modules, the gradients after the reduction, one file per rank."""

import fnmatch
import os
import platform
import socket
import subprocess
import sys
import warnings
import weakref

import numpy as np
import torch
import torch.distributed as dist

from . import SCHEMA_VERSION, __version__
from .sharding import COLUMN_PARALLEL, ROW_PARALLEL, shard_for
from .writer import RankFile

_LINEAR_LIKE = {"Linear"} | COLUMN_PARALLEL | ROW_PARALLEL
_ENV_PREFIXES = ("NCCL_", "TORCH_NCCL_", "CUDA_DEVICE_MAX_CONNECTIONS", "CUBLAS_WORKSPACE_CONFIG",
                 "NVIDIA_TF32_OVERRIDE")
BUFFER_BYTES = 256 << 20  # the default of Capture(buffer_bytes=): captured tensors held before they are written


def _unwrap(model):
    """DDP, FSDP and similar wrappers keep the model as .module: the names must not depend on it."""
    while hasattr(model, "module") and isinstance(getattr(model, "module"), torch.nn.Module) \
            and type(model).__name__ in ("DistributedDataParallel", "DataParallel",
                                         "FullyShardedDataParallel", "DDP", "Float16Module"):
        model = model.module
    return model


def _first_tensor(value):
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, (tuple, list)) and value and isinstance(value[0], torch.Tensor):
        return value[0]  # Megatron's parallel linears return (output, bias)
    return None


def _local(t):
    """A DTensor's local shard, or the tensor itself."""
    to_local = getattr(t, "to_local", None)
    return to_local() if callable(to_local) and hasattr(t, "placements") else t


def _array(t):
    """A tensor as what the file stores: numpy data, ("bf16", raw bits), plus extra attributes."""
    t = _local(t).detach()
    if t.dtype == torch.bfloat16:
        return ("bf16", t.contiguous().cpu().view(torch.int16).numpy().view(np.uint16)), {}
    if t.dtype == torch.float16:
        return t.float().cpu().numpy(), {"stored_from": "fp16"}
    return t.cpu().numpy(), {}


def _fsdp_params(model):
    """ids of the parameters FSDP2's fully_shard placed: those of a module whose class derives from
    FSDPModule (its DTensors' unnamed one-dimensional mesh is dp)."""
    placed = set()
    for module in model.modules():
        if any(c.__name__ == "FSDPModule" for c in type(module).__mro__):
            placed.update(id(p) for p in module.parameters())
    return placed


def _nbytes(t):
    t = _local(t)
    return t.nelement() * t.element_size()


def _group_ranks(group):
    """The global ranks of a process group's members."""
    ranks = getattr(dist, "get_process_group_ranks", None)
    if ranks is not None:
        return list(ranks(group))
    return [dist.get_global_rank(group, r) for r in range(dist.get_world_size(group))]


def _git_revision():
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
        return out.stdout.strip() if out.returncode == 0 else ""
    except (OSError, subprocess.SubprocessError):
        return ""


def _environment(backend):
    env = {"torch_version": torch.__version__, "dist_backend": backend or "none",
           "command": " ".join(sys.argv)[:240], "host": socket.gethostname(), "python": platform.python_version(),
           "equiv_capture_version": __version__}
    if torch.cuda.is_available():
        env["device"] = torch.cuda.get_device_name()
        env["cuda_version"] = torch.version.cuda or ""
        try:
            env["nccl_version"] = ".".join(str(v) for v in torch.cuda.nccl.version())
        except (AttributeError, RuntimeError, TypeError):
            pass
        env["allow_tf32"] = int(torch.backends.cuda.matmul.allow_tf32)
        env["allow_bf16_reduced_precision_reduction"] = int(
            getattr(torch.backends.cuda.matmul, "allow_bf16_reduced_precision_reduction", True))
    else:
        env["device"] = f"cpu {platform.machine()}"
    for key, value in os.environ.items():
        if key.startswith(_ENV_PREFIXES):
            env[key] = value[:240]
    revision = _git_revision()
    if revision:
        env["git_revision"] = revision
    return env


class Capture:
    """Captures one training step of this rank.

    model: the module (DDP/FSDP wrappers are looked through, so names are the same at every dp).
    out_dir: the run directory; this rank writes out_dir/rankNNNNN.h5.
    pp_group, cp_group, ep_group: the pipeline stage group (this rank's stage is its rank in it),
        context parallel (the sequence split over it: every activation "cp:S"), expert parallel
        (carved from dp: ep divides dp; give each expert's tensors one global name, held by the ranks
        of its ep rank). With pp or cp, give dp_group and tp_group where their size is above 1.
    microbatches: the forwards (and backwards) of one step: each activation's record of every
        micro-batch, in order, is concatenated along batch_dim, the losses given to loss() summed.
    seq_dim: the sequence dim of activations (default: 0 where batch_dim is 1, Megatron's [s, b, h],
        else 1), along which cp and sequence parallelism split them.
    dp_group, tp_group: the process groups. Both None: tp of 1, dp over the whole world (with
        Megatron's parallel_state initialised, its groups). One of them None: its size is the world's
        over the other's (tp_group alone at tp = world: dp 1), and this rank's place in it follows from
        its global rank and the given group's ranks, in Megatron's order (a replica's tp ranks are
        neighbours: rank = dp_rank * tp + tp_rank) or the transposed one; any other grouping: pass both.
    include, exclude: fnmatch patterns over module names; what: "activations", "gradients" or "both".
    rules: {pattern over dataset paths: shard}, for modules whose split equiv cannot tell by type.
    loss_scale: what each rank's backward differentiates, relative to the global loss: dp for DDP's
        convention (each rank's mean over its own batch; the AVG all-reduce makes the parameter
        gradients those of the global mean), 1 where the loss is already divided by the global
        count. Activation gradients are stored with grad_scale = loss_scale, the recorded loss is
        sum over dp of each rank's loss / loss_scale. Default: dp.
    batch_dim: the batch dimension of activations (Megatron's [s, b, h]: 1).
    params: also store every parameter (checked equal across replicas and against the reference).
    bounds: for bias-free linear layers, store the input and the weight with the output, so equiv can
        compute the rounding-error bound of the GEMM.
    buffer_bytes: the captured tensors are copied as the step makes them and written to the rank's
        (temporary) file whenever the copies held pass this many bytes, so the capture holds at most
        this plus the largest single tensor, whatever the model's size (0: each written at once).
        The copies sit where the tensors were (a GPU's, in its memory); each is moved to the host
        only while it is written. write() writes the rest and gives the file its name.
    """

    def __init__(self, model, out_dir, *, dp_group=None, tp_group=None, step=0, name=None, include=("*",),
                 exclude=(), what="both", rules=None, loss_scale=None, batch_dim=0, params=False, bounds=True,
                 pp_group=None, cp_group=None, ep_group=None, microbatches=1, seq_dim=None,
                 buffer_bytes=BUFFER_BYTES):
        if what not in ("activations", "gradients", "both"):
            raise ValueError(f"what='{what}': want 'activations', 'gradients' or 'both'")
        self.model = _unwrap(model)
        self.out_dir = os.fspath(out_dir)
        self.step = int(step)
        self.name = name
        self.rules = dict(rules or {})
        self.batch_dim = batch_dim
        self.seq_dim = (0 if batch_dim == 1 else 1) if seq_dim is None else seq_dim
        self.microbatches = int(microbatches)
        self.want_acts = what in ("activations", "both")
        self.want_grads = what in ("gradients", "both")
        self.params = params
        self.bounds = bounds
        self.include, self.exclude = tuple(include), tuple(exclude)
        self._init_world(dp_group, tp_group, pp_group, cp_group, ep_group)
        self._fsdp = _fsdp_params(self.model)
        self.loss_scale = float(self.dp if loss_scale is None else loss_scale)
        self._init_store(buffer_bytes)
        self._produced = {}  # id(output tensor) -> (a weak reference, its shard): what elementwise modules inherit
        self._loss = None
        self._hooks = []
        for mod_name, module in self.model.named_modules():
            if not self._selected(mod_name, module):
                continue
            self._hooks.append(module.register_forward_hook(self._forward_hook(mod_name or "model", module)))

    # the world ---------------------------------------------------------------------------------
    def _init_world(self, dp_group, tp_group, pp_group=None, cp_group=None, ep_group=None):
        self.initialised = dist.is_available() and dist.is_initialized()
        if self.initialised and dp_group is None and tp_group is None:
            try:  # Megatron-Core, when it has set up its groups
                from megatron.core import parallel_state as ps
                if ps.model_parallel_is_initialized():
                    dp_group, tp_group = ps.get_data_parallel_group(), ps.get_tensor_model_parallel_group()
                    pp_group = ps.get_pipeline_model_parallel_group()
                    cp_group = getattr(ps, "get_context_parallel_group", lambda: None)()
                    ep_group = getattr(ps, "get_expert_model_parallel_group", lambda: None)()
            except ImportError:
                pass
        self.dp_group, self.tp_group = dp_group, tp_group
        self.pp_group, self.cp_group, self.ep_group = pp_group, cp_group, ep_group
        self.world = dist.get_world_size() if self.initialised else 1
        self.rank = dist.get_rank() if self.initialised else 0
        self._dp_ranks = None  # the global ranks of this rank's dp group, in dp order, where it was not given

        def size_rank(group):
            return (dist.get_world_size(group), dist.get_rank(group)) if self.initialised and group else (1, 0)
        (self.pp, self.pp_rank), (self.cp, self.cp_rank), (self.ep, self.ep_rank) = \
            size_rank(pp_group), size_rank(cp_group), size_rank(ep_group)
        others = self.pp * self.cp
        if others > 1:  # the dp x tp complement rules hold for dp x tp worlds only
            if (dp_group is None and tp_group is None) or (dp_group is None) != (tp_group is None):
                dp_size, tp_size = size_rank(dp_group)[0], size_rank(tp_group)[0]
                if self.world != dp_size * tp_size * others:
                    raise ValueError(f"equiv_capture: world {self.world} with pp {self.pp} x cp {self.cp}: pass "
                                     "dp_group and tp_group (a group of one rank may be left out)")
        if not self.initialised:
            self.dp, self.dp_rank, self.tp, self.tp_rank = 1, 0, 1, 0
        elif dp_group is None and tp_group is None:
            self.dp, self.dp_rank = (self.world, self.rank) if others == 1 else (1, 0)
            self.tp, self.tp_rank = 1, 0
        elif dp_group is None and others > 1:  # of size 1 (checked above)
            self.tp, self.tp_rank = dist.get_world_size(tp_group), dist.get_rank(tp_group)
            self.dp, self.dp_rank = 1, 0
        elif tp_group is None and others > 1:
            self.dp, self.dp_rank = dist.get_world_size(dp_group), dist.get_rank(dp_group)
            self.tp, self.tp_rank = 1, 0
        elif dp_group is None:
            self.tp, self.tp_rank = dist.get_world_size(tp_group), dist.get_rank(tp_group)
            self.dp, self.dp_rank, self._dp_ranks = self._complement(tp_group, "tp", "dp")
        elif tp_group is None:
            self.dp, self.dp_rank = dist.get_world_size(dp_group), dist.get_rank(dp_group)
            self.tp, self.tp_rank, _ = self._complement(dp_group, "dp", "tp")
        else:
            self.dp, self.dp_rank = dist.get_world_size(dp_group), dist.get_rank(dp_group)
            self.tp, self.tp_rank = dist.get_world_size(tp_group), dist.get_rank(tp_group)
        if self.dp * self.tp * others != self.world:
            raise ValueError(f"equiv_capture: world {self.world} is not dp {self.dp} x tp {self.tp} x pp {self.pp} "
                             f"x cp {self.cp} (pass every group)")
        if self.dp % self.ep:
            raise ValueError(f"equiv_capture: ep {self.ep} does not divide dp {self.dp} (ep is carved from dp)")
        self.backend = dist.get_backend() if self.initialised else None

    def _complement(self, group, given, missing):
        """The group not given: its size (world / the given group's), this rank's place in it, and its
        members' global ranks in order. The given group's members are a block of neighbours (Megatron's
        tp groups; the missing group's rank is then the block's index) or every size-th rank (its
        dp groups; the missing rank is then the first member)."""
        ranks = sorted(_group_ranks(group))
        n = len(ranks)
        if self.world % n:
            raise ValueError(f"equiv_capture: {given}_group of {n} ranks in a world of {self.world}: "
                             f"pass {missing}_group too")
        size, first = self.world // n, ranks[0]
        place = ranks.index(self.rank)
        if size == 1:
            return 1, 0, [self.rank]
        if ranks == list(range(first, first + n)) and first % n == 0:  # blocks: the missing group strides
            return size, first // n, list(range(place, self.world, n))
        if ranks == list(range(first, self.world, size)) and first < size:  # strided: the missing group is a block
            return size, first, list(range(place * size, (place + 1) * size))
        raise ValueError(f"equiv_capture: cannot tell rank {self.rank}'s {missing} rank from its {given}_group, "
                         f"ranks {ranks} (neither neighbours nor every {size}th rank): pass {missing}_group too")

    # what is captured --------------------------------------------------------------------------
    def _named(self, name):
        """A module name the include/exclude patterns let through ("" is the model itself)."""
        full = name or "model"
        return not any(fnmatch.fnmatchcase(full, p) for p in self.exclude) and \
            any(fnmatch.fnmatchcase(full, p) for p in self.include)

    def _selected(self, name, module):
        # leaves, and the parallel linears (which may hold children of their own)
        return self._named(name) and (not any(True for _ in module.children())
                                      or type(module).__name__ in _LINEAR_LIKE)

    # the storage: captured tensors written in bounded batches --------------------------------------
    def _init_store(self, buffer_bytes):
        if buffer_bytes < 0:
            raise ValueError(f"buffer_bytes={buffer_bytes}: want 0 or more")
        self.buffer_bytes = int(buffer_bytes)
        self._records = {}   # dataset path -> (tensor, or None once written; kind, module, param, attrs)
        self._order = []     # dataset paths in capture order
        self._pending = {}   # paths recorded and not yet written, in capture order (an ordered set)
        self._pending_bytes = 0
        self._pieces = {}    # dataset path -> micro-batches joined so far (with microbatches > 1)
        self._file = None    # the RankFile, made at the first write
        self._failed = None  # why a write during the step failed: write() reports it, no file is made
        self._first_dtype = None  # the first activation's dtype: the root's `dtype`

    def _record(self, path, tensor, kind, module=None, param=None, attrs=None):
        if self._failed is not None:
            return
        if path not in self._records:
            self._order.append(path)
        if path in self._records and self.microbatches > 1 and kind in ("in", "out", "out_grad"):
            # the next micro-batch's: joined to the ones before, held until all have come
            tensor = torch.cat([self._records[path][0], tensor], dim=self.batch_dim)
            attrs = {**(attrs or {}), "microbatches": self.microbatches}
            self._pieces[path] = self._pieces.get(path, 1) + 1
        held = self._records[path][0] if path in self._pending else None
        if held is not None:  # recorded again before it was written: the last one is kept
            self._pending_bytes -= _nbytes(held)
        self._records[path] = (tensor, kind, module, param, dict(attrs or {}))
        self._pending[path] = None
        self._pending_bytes += _nbytes(tensor)
        if self._pending_bytes > self.buffer_bytes:
            self._flush()

    def _waiting(self, path):
        """A tensor that later micro-batches still join (held until they have come)."""
        kind = self._records[path][1]
        return (self.microbatches > 1 and kind in ("in", "out", "out_grad")
                and self._pieces.get(path, 1) < self.microbatches)

    def _flush(self, final=False):
        """Writes every tensor held (but those later micro-batches join, until final), in capture order,
        and lets go of each as it is written. A failure
        (a full disk) removes the temporary file and is kept for write() to raise: raised here, in the
        middle of one rank's forward or backward, it would leave the other ranks waiting in a collective."""
        if self._failed is not None:
            return
        path, kept = None, {}
        try:
            if self._file is None:
                self._file = RankFile(os.path.join(self.out_dir, f"rank{self.rank:05d}.h5"))
            for path in self._pending:
                if not final and self._waiting(path):
                    kept[path] = None
                    continue
                tensor, kind, module, param, attrs = self._records[path]
                self._file.add(path, *self._dataset(path, tensor, kind, module, param, attrs))
                self._records[path] = (None, kind, module, param, attrs)
        except Exception as e:  # noqa: BLE001 (any failure: write() reports it)
            self._failed = f"{path or 'the file'}: {type(e).__name__}: {e}"
            warnings.warn(f"equiv_capture: rank {self.rank}: writing {self._failed}; nothing more is captured "
                          "this step and write() will raise")
            if self._file is not None:
                self._file.abort()
            kept = {}
        finally:
            self._pending = kept if self._failed is None else {}
            self._pending_bytes = sum(_nbytes(self._records[p][0]) for p in self._pending)

    def _dataset(self, path, tensor, kind, module, param, attrs):
        """A captured tensor as the file stores it: (numpy data or ("bf16", raw bits), attributes)."""
        if kind == "loss":  # this rank's value for now (its place in the order): write() stores the global one
            data, extra = _array((tensor.double().reshape(1) / self.loss_scale).to(tensor.dtype))
            return data, {"role": "loss", "shard": "replicated", **extra}
        role = ("activation" if kind in ("in", "out") else
                "grad" if kind.endswith("_grad") else "param")
        attrs = dict(attrs)
        inherited = attrs.pop("shard_tp", None)
        shard = shard_for(path, kind, max(_local(tensor).dim(), 1), module=module, param=param, tensor=tensor,
                          rules=self.rules, batch_dim=self.batch_dim, dp_size=self.dp, inherited_tp=inherited,
                          seq_dim=self.seq_dim, cp_size=self.cp, tp_size=self.tp,
                          fsdp=param is not None and id(param) in self._fsdp)
        data, extra = _array(tensor)
        if self._first_dtype is None and role == "activation":
            self._first_dtype = tensor.dtype
        return data, {"role": role, "shard": shard, **attrs, **extra}

    def _bound_operands(self, module):
        """A linear layer y = x W^T with no bias: its GEMM's operands can be recorded."""
        return (self.bounds and type(module).__name__ in _LINEAR_LIKE and getattr(module, "bias", None) is None
                and isinstance(getattr(module, "weight", None), torch.Tensor) and module.weight.dim() == 2)

    def _forward_hook(self, name, module):
        def hook(mod, inputs, output):
            out = _first_tensor(output)
            if out is None or not out.is_floating_point():
                return
            if self.want_acts:
                attrs = {}
                if self._bound_operands(mod):
                    x = _first_tensor(inputs)
                    if x is not None and x.is_floating_point():
                        self._record(f"{name}.in", x.detach().clone(), "in", module)
                        attrs = {"gemm_a": f"{name}.in", "gemm_b": f"{name}.weight",
                                 "gemm_k_split": "tp" if type(mod).__name__ in ROW_PARALLEL else "none",
                                 "gemm_accumulate": self._accumulation(out)}
                inherited = self._inherited_shard(mod, inputs, out)
                if inherited is not None:
                    attrs["shard_tp"] = inherited
                self._record(f"{name}.out", out.detach().clone(), "out", module, attrs=attrs)
                self._produced[id(out)] = (weakref.ref(out), self._tp_part(f"{name}.out", "out", out, mod, attrs))
            if self.want_grads and out.requires_grad:
                out.register_hook(self._grad_hook(name, module))
        return hook

    def _tp_part(self, path, kind, tensor, module, attrs):
        if "shard_tp" in attrs:
            return attrs["shard_tp"]
        shard = shard_for(path, kind, tensor.dim(), module=module, rules=self.rules, dp_size=1, seq_dim=self.seq_dim)
        return None if shard == "replicated" else shard

    def _inherited_shard(self, mod, inputs, out):
        """A module with no parameters whose output has its input's shape (GELU, dropout, a scale)
        holds its output as its input is held: after a column-parallel layer, split over tp."""
        if any(True for _ in mod.parameters(recurse=False)) or type(mod).__name__ in _LINEAR_LIKE:
            return None
        x = _first_tensor(inputs)
        if x is None or x.shape != out.shape or id(x) not in self._produced:
            return None
        tensor, tp_part = self._produced[id(x)]
        return tp_part if tensor() is x else None

    def _grad_hook(self, name, module):
        def hook(grad):
            attrs = {"grad_scale": self.loss_scale} if self.loss_scale != 1.0 else {}
            out_attrs = self._records.get(f"{name}.out", (None,) * 4 + ({},))[4]
            if "shard_tp" in out_attrs:  # the gradient is held as its activation is
                attrs["shard_tp"] = out_attrs["shard_tp"]
            self._record(f"{name}.out_grad", grad.detach().clone(), "out_grad", module, attrs=attrs)
        return hook

    @staticmethod
    def _accumulation(out):
        """What the GEMM accumulates in: fp32, except where cuBLAS may round split-K partials to bf16."""
        if out.is_cuda and out.dtype == torch.bfloat16 and \
                getattr(torch.backends.cuda.matmul, "allow_bf16_reduced_precision_reduction", True):
            return "bf16"
        return "fp64" if out.dtype == torch.float64 else "fp32"

    # the step ----------------------------------------------------------------------------------
    def loss(self, loss):
        """The loss this rank computed (before backward); written reduced over dp."""
        if self._loss is not None and self.microbatches > 1:  # the micro-batches' losses, summed
            self._loss = self._loss + loss.detach()
        else:
            self._loss = loss.detach().clone()
        self._record("loss", self._loss, "loss")  # in capture order: after the forward, before the backward
        return loss

    def grads(self):
        """Every parameter's .grad: call it after the gradient reduction (DDP: after backward)."""
        modules = dict(self.model.named_modules())
        for pname, p in self.model.named_parameters():
            mod_name, _, leaf = pname.rpartition(".")
            module = modules.get(mod_name)
            if not self._named(mod_name):
                continue
            path = pname  # the parameter's own name: "blocks.0.fc1.weight"
            needed_for_bound = self.want_acts and module is not None and self._bound_operands(module) \
                and leaf == "weight"
            if self.params or needed_for_bound:
                self._record(path, p.detach().clone(), leaf, module, p)
            if self.want_grads and p.grad is not None:
                self._record(f"{path}.grad", p.grad.detach().clone(), f"{leaf}_grad", module, p)

    def _global_loss(self):
        """sum over the dp group of each rank's loss / loss_scale, in fp64, stored in the loss's dtype."""
        value = self._loss.double().reshape(1)
        if self.initialised and self.cp > 1:  # each cp rank's loss covers its part of the sequence
            value = value.clone()
            dist.all_reduce(value, op=dist.ReduceOp.SUM, group=self.cp_group)
        if self.initialised and self.dp > 1 and self._dp_ranks is None:
            value = value.clone()
            dist.all_reduce(value, op=dist.ReduceOp.SUM, group=self.dp_group)
        elif self.initialised and self.dp > 1:  # no dp group given: every rank's, summed over this one's dp group
            every = [torch.empty_like(value) for _ in range(self.world)]
            dist.all_gather(every, value)
            value = torch.stack([every[r] for r in self._dp_ranks]).sum(0)
        return (value / self.loss_scale).to(self._loss.dtype)

    def write(self):
        """Writes what is still held, the global loss and the root attributes, and gives this rank's
        file its name (every rank must call it: the loss is reduced over dp); removes the hooks."""
        for h in self._hooks:
            h.remove()
        self._hooks = []
        try:
            # the collective first, on every rank given a loss, whether or not its own writes failed
            loss = self._global_loss() if self._loss is not None else None
            self._flush(final=True)
            if self._failed is not None:
                raise RuntimeError(f"equiv_capture: rank {self.rank}'s file was not written: writing "
                                   f"{self._failed}")
            if loss is not None and "loss" in self._records:  # over this rank's own value, in its place
                data, extra = _array(loss)
                self._file.add("loss", data, {"role": "loss", "shard": "replicated", **extra})
            dtype_names = {torch.bfloat16: "bf16", torch.float32: "fp32", torch.float64: "fp64", torch.float16: "fp32"}
            root = {"schema": SCHEMA_VERSION, "source": "torch", "case": self.name or os.path.basename(
                        os.path.normpath(self.out_dir)),
                    "dp": self.dp, "tp": self.tp, "world_size": self.world, "rank": self.rank, "dp_rank": self.dp_rank,
                    "tp_rank": self.tp_rank, "step": self.step, "version": f"equiv_capture {__version__}"}
            for group in ("pp", "cp", "ep"):  # the other groups, where they have more than one rank
                if getattr(self, group) > 1:
                    root[group], root[f"{group}_rank"] = getattr(self, group), getattr(self, f"{group}_rank")
            if self._first_dtype in dtype_names:
                root["dtype"] = dtype_names[self._first_dtype]
            root.update(_environment(self.backend))
            self._file.close(root)
        except BaseException:
            if self._file is not None:
                self._file.abort()
            raise
        finally:
            self._init_store(self.buffer_bytes)
            self._produced = {}
