#!/usr/bin/env python3
"""Rebuilds the single-process step of an mlp_stack dump in numpy (fp64) from the file alone
(every layer's fc1_out and out from the input and the weights; the layer count from /config, the
axis order from `dims`) and checks it against the dumped reference.

    rebuild_mlp_stack.py DUMP.h5 [--plant NAME=VALUE ...]

Exit 0: every tensor within the bound of rebuild_lib.py, and every activation of the dump
rebuilt; 1: not; 2: usage or a file it cannot rebuild from; 3: the rebuild itself failed.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rebuild_lib as rb  # noqa: E402


def main(argv):
    started = rb.start(argv, __doc__)
    if started is None:
        return 2
    cfg, t = started
    judge = rb.Judge()

    def act(name, last):
        x, dims, _ = t[name]
        return rb.canonical(x, dims, ["seq", "batch", last])

    x = act("00/input", "hidden")
    for l in range(int(cfg["layers"])):
        fc1 = x @ t[f"{l:02d}/fc1_weight"][0].T
        x = fc1 @ t[f"{l:02d}/fc2_weight"][0].T
        judge.check(f"layers/{l:02d}/fc1_out", fc1, act(f"{l:02d}/fc1_out", "ffn"))
        judge.check(f"layers/{l:02d}/out", x, act(f"{l:02d}/out", "hidden"))
    return judge.finish("mlp_stack", t)


if __name__ == "__main__":
    sys.exit(rb.run(main))
