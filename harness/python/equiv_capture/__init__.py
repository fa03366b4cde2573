"""equiv_capture: what a PyTorch training step computed, per rank, in equiv's HDF5 schema.

Three lines in a training script (one process per rank, after torch.distributed is set up):

    cap = equiv_capture.Capture(model, "runs/dp4", dp_group=dp_group, tp_group=tp_group)
    loss = step(model, batch); cap.loss(loss); loss.backward()      # your step, as it is
    cap.grads(); cap.write()                                         # after the gradient all-reduce

Each rank writes runs/dp4/rank00003.h5; `equiv compare runs/dp1 runs/dp4` assembles the shards and
judges every layer against the reference run. The schema is harness/SCHEMA.md in equiv's tree.
"""

SCHEMA_VERSION = 1
__version__ = "0.1.0"

try:
    import h5py  # noqa: F401
    import numpy  # noqa: F401
except ImportError as e:  # a clear line instead of a traceback deep inside the package
    raise ImportError(
        f"equiv_capture needs numpy and h5py ({e.name} is missing): pip install numpy h5py, "
        "or apt-get install python3-numpy python3-h5py") from e
try:
    import torch  # noqa: F401
except ImportError as e:
    raise ImportError("equiv_capture captures PyTorch runs and needs torch: install PyTorch "
                      "(pip install torch, or apt-get install python3-torch)") from e

from .capture import Capture  # noqa: E402
from .compare import CompareResult, EquivError, EquivNotFound, assert_equivalent, compare  # noqa: E402
from .sharding import shard_for  # noqa: E402
from .steps import StepRecorder  # noqa: E402

__all__ = ["Capture", "StepRecorder", "shard_for", "compare", "assert_equivalent", "CompareResult", "EquivError",
           "EquivNotFound", "SCHEMA_VERSION"]
