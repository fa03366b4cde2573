"""Shared by the rebuild scripts (rebuild_gpt.py, rebuild_spd.py): read a dump with nothing but
h5py and what the file says (the /config group, each dataset's `dims`), and judge a rebuilt
tensor against the dumped one.

The bound. The dump's reference ran in fp32, each op's result rounded once to fp32 (unit
roundoff u = 2^-24), its sums accumulated in fp32 or fp64; the rebuild runs the same maths in
fp64 and rounds nothing. Their difference is the reference's own rounding, carried through the
layers above it. Each rounding is at most u relative to the value it rounds; a sum of K terms
adds at most K u (worst case, Higham's gamma_K) of the sum of magnitudes, and about sqrt(K) u in
practice; a layer passes what it receives on, amplified by its condition. So the difference,
measured against the tensor's RMS (an element near zero has no relative error to speak of), is a
modest multiple of u: TOLERANCE_ULPS units of u times the RMS. 2^9 u = 3.1e-5 leaves room for
sums of up to a few hundred terms (sqrt(K) u each) through a handful of layers and their
backward at the ci sizes: measured, the worst gpt tensor sits at 84 u x rms (a qkv weight
gradient), the worst spd one at 167 u x rms (PGD sources, where Adam's step m / sqrt(v) divides
two rounded moments), the worst mlp_stack one at 172 (16 layers of GEMMs without a norm). A wrong hyperparameter moves the result by far more (a head count: 1e8 u;
a LayerNorm eps of 1e-6 for 1e-5: 2e3 u), which the planted-error runs of rebuild_test.sh show.
"""

import sys

import numpy as np

U_FP32 = 2.0 ** -24
TOLERANCE_ULPS = 2.0 ** 9


def load(path):
    """(root, config, tensors): the root's and /config's attributes as dicts, and every dataset
    under /layers as (float64 array, dims, role), keyed by its path without 'layers/'."""
    import h5py

    tensors = {}
    with h5py.File(path, "r") as f:
        if "config" not in f or "layers" not in f:
            print(f"{path}: no /config or /layers group (a dump written before dumps recorded their "
                  f"hyperparameters, or not an equiv dump): cannot rebuild", file=sys.stderr)
            sys.exit(2)
        config = {k: (v.item() if hasattr(v, "item") else v) for k, v in f["config"].attrs.items()}
        root = dict(f.attrs)
        if root.get("dtype") not in ("fp32", "fp64"):
            print(f"{path}: a {root.get('dtype')} dump; the bound here is fp32's rounding (rebuild an fp32 or "
                  f"fp64 run)", file=sys.stderr)
            sys.exit(2)

        def visit(name, obj):
            if isinstance(obj, h5py.Dataset):
                tensors[name] = (np.asarray(obj[()], dtype=np.float64), obj.attrs.get("dims", ""),
                                 obj.attrs.get("role", ""))

        f["layers"].visititems(visit)
    return root, config, tensors


def plant(config, overrides):
    """Applies NAME=VALUE overrides (a planted wrong hyperparameter) to config."""
    for item in overrides:
        name, value = item.split("=", 1)
        if name not in config:
            sys.exit(f"--plant {item}: the dump's /config has no '{name}'")
        config[name] = type(config[name])(float(value)) if not isinstance(config[name], str) else value
        print(f"planted: {name} = {config[name]}")


class Judge:
    """Compares rebuilt tensors with dumped ones; counts failures."""

    def __init__(self):
        self.failed = 0
        self.checked = 0
        self.worst = 0.0
        self.names = set()

    def check(self, name, rebuilt, dumped):
        self.names.add(name)
        rebuilt = np.asarray(rebuilt, dtype=np.float64)
        if rebuilt.shape != dumped.shape:
            print(f"FAIL {name}: rebuilt shape {rebuilt.shape}, dumped {dumped.shape}")
            self.failed += 1
            return
        rms = float(np.sqrt(np.mean(dumped * dumped))) if dumped.size else 0.0
        err = float(np.max(np.abs(rebuilt - dumped))) if dumped.size else 0.0
        scale = rms if rms > 0 else 1.0
        ulps = err / (U_FP32 * scale)
        self.checked += 1
        self.worst = max(self.worst, ulps)
        ok = ulps <= TOLERANCE_ULPS
        if not ok:
            self.failed += 1
        print(f"{'ok  ' if ok else 'FAIL'} {name}: max |rebuilt - dumped| = {err:.3g} = {ulps:.3g} u x rms "
              f"(rms {rms:.3g}; bound {TOLERANCE_ULPS:.0f})")

    def finish(self, what, tensors):
        """The verdict; every activation, gradient and loss of the dump must have been rebuilt (a
        rebuild that stops early, or a dump holding what the rebuild does not know, fails)."""
        for name, (_, _, role) in sorted(tensors.items()):
            if role in ("activation", "grad", "loss") and f"layers/{name}" not in self.names:
                print(f"FAIL layers/{name}: in the dump, not rebuilt")
                self.failed += 1
        print(f"{what}: {self.checked} tensors rebuilt in fp64 from the dump alone, {self.failed} outside "
              f"{TOLERANCE_ULPS:.0f} u x rms (worst {self.worst:.3g} u x rms)")
        return 1 if self.failed or not self.checked else 0


def run(main):
    """main(argv)'s exit status; an exception is 3, never 1, so that a rebuild which crashes is
    not taken for one that found a mismatch."""
    try:
        return main(sys.argv[1:])
    except Exception:  # noqa: BLE001 - any failure of the rebuild itself
        import traceback

        traceback.print_exc()
        return 3


def canonical(tensor, dims, want):
    """The array with its axes reordered from `dims` (the dump's names) to `want`."""
    have = dims.split(",")
    if sorted(have) != sorted(want):
        sys.exit(f"dims '{dims}' do not name the axes {want}")
    return np.transpose(tensor, [have.index(d) for d in want])


def start(argv, doc):
    """The scripts' common start: DUMP [--plant KEY=VALUE...] -> (config, tensors) with the plants
    applied, or None after printing the usage (exit 2)."""
    if len(argv) < 1 or (len(argv) > 1 and argv[1] != "--plant"):
        print(doc, file=sys.stderr)
        return None
    _, config, tensors = load(argv[0])
    plant(config, argv[2:])
    return config, tensors
