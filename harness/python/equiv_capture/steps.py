"""StepRecorder: many optimizer steps of a run, one light record per step, per rank.

    rec = equiv_capture.StepRecorder(model, "runs/tp2", optimizer=opt, tp_group=tp_group,
                                     params_every=1, full_steps=(1, 10))
    for step in range(1, 21):
        cap = rec.begin_step()          # a Capture at the steps in full_steps, else one that does nothing
        loss = compute_loss(model(x), y); cap.loss(loss); loss.backward()
        ...all-reduce, clip...;         cap.grads(); cap.write()
        opt.step(); rec.end_step(loss); opt.zero_grad()
    rec.close()

What each rank writes under the run directory (harness/SCHEMA.md, "Runs of many steps"):
  steps/rankNNNNN.json   the light record: per step the rank's loss (divided by loss_scale: the
                         global loss is the sum over the dp group), the learning rate, and per
                         parameter the sum of squares of this rank's piece of its value (after the
                         update) and of its gradient (as the optimizer used it: after the
                         all-reduce and any clipping). No communication: equiv adds the pieces.
  params_NNNNNN/         every params_every steps (and step 0, before training) the parameters,
                         an ordinary run directory of role "param" datasets (opt-in: 0 = never)
  step_NNNNNN/           the full capture of step NNNNNN, for each step in full_steps: an ordinary
                         run directory `equiv compare` reads as is (step 1 with the parameters
                         and the rounding bounds' operands; later steps without: the layouts'
                         parameters are then rounding apart, not bit-identical)
"""

import json
import math
import os

import torch

from .capture import Capture, _array, _environment, _local, _unwrap
from .sharding import shard_for
from .writer import write_rank_file

FORMAT = 1


class _NoCapture:
    """What begin_step gives at a step with no full capture: Capture's step methods, doing nothing."""

    def loss(self, loss):
        return loss

    def grads(self):
        pass

    def write(self):
        pass


def _optimizer_info(optimizer):
    if optimizer is None:
        return None
    group = optimizer.param_groups[0]
    info = {"name": type(optimizer).__name__.lower(), "lr": float(group.get("lr", 0.0))}
    if "betas" in group:
        info["betas"] = [float(b) for b in group["betas"]]
    if "eps" in group:
        info["eps"] = float(group["eps"])
    if group.get("weight_decay"):
        info["weight_decay"] = float(group["weight_decay"])
    return info


def _sum_squares(t):
    return _number(float(_local(t).detach().double().pow(2).sum()))


def _number(x):
    """A float as the light record holds it: a JSON number, or "NaN"/"Infinity"/"-Infinity"."""
    if math.isfinite(x):
        return x
    return "NaN" if math.isnan(x) else ("Infinity" if x > 0 else "-Infinity")


class StepRecorder:
    """Records every optimizer step of this rank (see the module's text). model, dp_group, tp_group,
    rules, loss_scale, batch_dim: as Capture's. optimizer: for the learning rate each step (and the
    report's heading). params_every: store the parameters every that many steps (0: never; then the
    curve is judged on the losses and gradient norms, without the drift). full_steps: the steps
    (1-based) to capture in full. masters: for mixed precision, the fp32 master copies the optimizer
    updates, one per parameter in named_parameters() order: their values and gradients are recorded
    (the model's own are the bf16 copies). capture_options: more keyword arguments for those Captures."""

    def __init__(self, model, out_dir, *, optimizer=None, dp_group=None, tp_group=None, rules=None,
                 loss_scale=None, batch_dim=0, params_every=0, full_steps=(1,), name=None, masters=None,
                 **capture_options):
        self.model = _unwrap(model)
        self.out_dir = os.fspath(out_dir)
        self.optimizer = optimizer
        self.groups = {"dp_group": dp_group, "tp_group": tp_group}
        self.rules = dict(rules or {})
        self.batch_dim = batch_dim
        self.params_every = int(params_every)
        self.full_steps = sorted({int(s) for s in full_steps})
        if self.params_every < 0 or any(s < 1 for s in self.full_steps):
            raise ValueError("StepRecorder: params_every >= 0 and full steps >= 1 (step 1 is the first)")
        self.name = name or os.path.basename(os.path.normpath(self.out_dir))
        self.capture_options = dict(capture_options, rules=self.rules, batch_dim=batch_dim, loss_scale=loss_scale)
        # the world as Capture sees it (a Capture that selects no module installs no hook)
        self.world = Capture(self.model, self.out_dir, include=(), loss_scale=loss_scale, **self.groups)
        self.loss_scale = self.world.loss_scale
        self.names = [n for n, _ in self.model.named_parameters()]
        self.masters = list(masters) if masters is not None else None
        if self.masters is not None and len(self.masters) != len(self.names):
            raise ValueError(f"StepRecorder: {len(self.masters)} masters for {len(self.names)} parameters")
        self.dtype = None
        for _, p in self.model.named_parameters():
            self.dtype = {torch.bfloat16: "bf16", torch.float64: "fp64"}.get(p.dtype, "fp32")
            break
        self.shards = [self._shard(n, p) for n, p in self.model.named_parameters()]
        self.records = []
        self.step = 0
        if self.params_every:
            self._write_params(0)

    def _shard(self, pname, p):
        mod_name, _, leaf = pname.rpartition(".")
        module = dict(self.model.named_modules()).get(mod_name)
        return shard_for(pname, leaf, max(_local(p).dim(), 1), module=module, param=p, tensor=p,
                         rules=self.rules, batch_dim=self.batch_dim, dp_size=self.world.dp)

    def _root(self, step):
        w = self.world
        root = {"schema": 1, "source": "torch", "case": self.name, "dp": w.dp, "tp": w.tp, "world_size": w.world,
                "rank": w.rank, "dp_rank": w.dp_rank, "tp_rank": w.tp_rank, "step": step}
        root.update(_environment(w.backend))
        return root

    def _path(self, folder):
        return os.path.join(self.out_dir, folder, f"rank{self.world.rank:05d}")

    def _trained(self):
        """(name, the tensor the optimizer updates) per parameter: the master where there are masters."""
        params = [p for _, p in self.model.named_parameters()]
        return zip(self.names, self.masters if self.masters is not None else params)

    def _write_params(self, step):
        """The parameters after step `step`'s update: an ordinary run directory params_NNNNNN."""
        datasets = []
        for (pname, p), shard in zip(self._trained(), self.shards):
            data, extra = _array(p)
            datasets.append((pname, data, {"role": "param", "shard": shard, **extra}))
        path = self._path(f"params_{step:06d}") + ".h5"
        os.makedirs(os.path.dirname(path), exist_ok=True)
        write_rank_file(path, self._root(step), datasets)

    def begin_step(self):
        """Call before the step's forward: a Capture of the step (into step_NNNNNN) where it is one of
        full_steps, else a stand-in whose loss/grads/write do nothing."""
        step = self.step + 1
        if step not in self.full_steps:
            return _NoCapture()
        # After step 1 the layouts' parameters are rounding apart, no longer bit-identical: they are
        # stored (params_NNNNNN), not captured (a captured parameter must be bit-identical), and so
        # are the weights a rounding bound would need.
        first = step == 1
        options = dict(dict(params=first, bounds=first), **self.capture_options)
        return Capture(self.model, os.path.join(self.out_dir, f"step_{step:06d}"), step=step, name=self.name,
                       **self.groups, **options)

    def end_step(self, loss):
        """Call after optimizer.step() and before zero_grad(): records the step's light record (the
        gradients as the optimizer used them, the parameters after its update)."""
        self.step += 1
        grad_sq, param_sq = [], []
        for _, p in self._trained():
            param_sq.append(_sum_squares(p))
            grad_sq.append(_sum_squares(p.grad) if p.grad is not None else None)
        value = float(loss.detach().double()) / self.loss_scale  # this rank's share of the global loss
        info = _optimizer_info(self.optimizer)
        self.records.append({"step": self.step, "loss": _number(value),
                             "lr": info["lr"] if info else None, "grad_sq": grad_sq, "param_sq": param_sq})
        if self.params_every and self.step % self.params_every == 0:
            self._write_params(self.step)

    def close(self):
        """Writes this rank's light record, steps/rankNNNNN.json (atomically)."""
        w = self.world
        doc = {"equiv_steps": FORMAT, "source": "torch", "case": self.name, "dp": w.dp, "tp": w.tp,
               "world_size": w.world, "rank": w.rank, "dp_rank": w.dp_rank, "tp_rank": w.tp_rank,
               "dtype": self.dtype or "fp32", "optimizer": _optimizer_info(self.optimizer),
               "params_every": self.params_every, "full_steps": self.full_steps,
               "params": [{"name": n, "shard": s} for n, s in zip(self.names, self.shards)],
               "steps": self.records}
        path = self._path("steps") + ".json"
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.tmp.{os.getpid()}"
        with open(tmp, "w") as f:
            json.dump(doc, f, allow_nan=False)
        os.replace(tmp, path)

    def __enter__(self):
        return self

    def __exit__(self, kind, value, traceback):
        if kind is None:
            self.close()
