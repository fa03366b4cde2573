"""Training runs of harness/python/examples/tiny_megatron.py, several in one process.

    torch_train.py WORK [EXAMPLE] < JOBS   (JOBS: one run a line, "NAME ARGS...": the example's arguments;
                                            EXAMPLE: tiny_megatron (default) or scratch_train)
    exit status 77 (skipped) where this python lacks torch with gloo, h5py or numpy

Each run is what `tiny_megatron.py --out WORK/NAME ARGS...` does (the same parse_args and launch,
one process per rank forked from the launching process, gloo), but all runs are launched from this
one process, which imported torch once (about a CPU second an import). The command line itself is
run by README.md's commands (cases/readme_test.sh). A run's output goes to WORK/NAME.log; a run that
fails is named with the end of its log, and the others still run. Exit status 1 if any failed.
"""
import os
import sys
import traceback

from torch_example import load_example

def train(example, work, name, argv):
    """One run, its output (this process's and its ranks') in WORK/NAME.log; True if it succeeded."""
    log = os.open(os.path.join(work, name + ".log"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    saved = os.dup(1), os.dup(2)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(log, 1)
    os.dup2(log, 2)
    try:
        example.launch(example.parse_args(["--out", os.path.join(work, name)] + argv))
        return True
    except SystemExit:  # bad arguments: argparse said why
        return False
    except Exception:  # a rank's exception (its traceback in the message) or the launch's
        traceback.print_exc()
        return False
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in saved + (log,):
            os.close(fd)


def main():
    if len(sys.argv) not in (2, 3) or sys.argv[2:] not in ([], ["tiny_megatron"], ["scratch_train"]):
        print(__doc__)
        return 2
    work = sys.argv[1]
    example = load_example(sys.argv[2] if len(sys.argv) == 3 else "tiny_megatron")
    failed = 0
    for line in sys.stdin:
        if not line.strip():
            continue
        name, *argv = line.split()
        if train(example, work, name, argv):
            print(f"ok: training run {name} ({' '.join(argv)})", flush=True)
            continue
        failed += 1
        with open(os.path.join(work, name + ".log")) as f:
            tail = f.read().splitlines()[-5:]
        print(f"FAIL: training run {name} ({' '.join(argv)}) failed:", *tail, sep="\n", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
