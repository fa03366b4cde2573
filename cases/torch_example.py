"""The example model a torch test trains, imported with what its runs need, or exit 77 (skipped).

    from torch_example import load_example
    tiny_megatron = load_example("tiny_megatron")   # harness/python/examples/tiny_megatron.py

Checked once, in the process that forks every run: a check of its own would import torch once
more (about a CPU second).
"""
import importlib
import os
import sys

EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "harness", "python", "examples")


def load_example(name):
    """harness/python/examples/NAME.py as a module; exit 77 where this python lacks torch with gloo,
    h5py or numpy."""
    sys.path.insert(0, EXAMPLES)
    try:
        import h5py  # noqa: F401
        import numpy  # noqa: F401
        import torch.distributed
        module = importlib.import_module(name)
        if not torch.distributed.is_gloo_available():
            raise ImportError("torch.distributed without gloo")
    except ImportError as e:
        print(f"skip: {sys.executable} lacks torch (with gloo), h5py or numpy ({e}): "
              "apt-get install python3-torch python3-h5py")
        sys.exit(77)
    return module
