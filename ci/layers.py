#!/usr/bin/env python3
"""The layers of equiv's sources, and the check that no file includes a header of a layer above
its own (README.md, "What is where").

    ci/layers.py SOURCE_ROOT     check the tree: exit 0, or 1 with one line per fault
    ci/layers.py --self-test     the check itself, on small planted trees (it must catch each)

Layers, bottom to top; a file may include headers of its own layer and the layers below it:

    base        harness/base/    status, tensor, bf16, rng, threads, timing, signals, atomic files
    reductions  reductions/      collectives, the folds, the transports, the rank world (world.h)
                                 and the CUDA device handle (cuda_device.h)
    harness     harness/         the evidence and its formats: capture, case files, tolerances,
                                 comparison, rounding bounds, truth runs, dumps and their reading
    models      models/          backends, the tensor-parallel ops, the model table
    reports     reports/         Markdown, JSON, HTML writers
    driver      harness/driver/  main, the CLI, the commands, the run and matrix drivers, golden
    fuzz        fuzz/            the fuzz harnesses (programs over everything)

A file's layer is the one of the longest folder of FOLDERS holding it, unless PROGRAMS names it.
Every C, CUDA and header file of the tree must be in a folder of the table, and every folder of
the table must exist, so that a new folder or a moved one is placed on purpose. Needs only the
Python standard library.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

LAYERS = ['base', 'reductions', 'harness', 'models', 'reports', 'driver', 'fuzz']

FOLDERS = {
    'harness/base': 'base',
    'reductions': 'reductions',
    'harness': 'harness',
    'models': 'models',
    'reports': 'reports',
    'harness/driver': 'driver',
    'fuzz': 'fuzz',
}

# Test programs that sit beside the code they test but also call a layer above it, so that they
# are of that layer. Only programs (*_test.c, *_bench.c) may be listed here: nothing includes them.
PROGRAMS = {
    'harness/case_file_test.c': 'driver',      # the shipped cases through the runner's checks
    'harness/rounding_bound_test.c': 'models',  # the bound on real row-parallel runs
}

# Headers the build writes (meson.build's configure_file, harness/meson.build's vcs_tag).
GENERATED = {
    'equiv_config.h': 'base',
    'harness/equiv_revision.h': 'harness',
}

SOURCE_SUFFIXES = ('.c', '.h', '.cu', '.cc', '.cpp', '.cuh')
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')


def source_files(root):
    """The tree's C, CUDA and header files, relative to root: git's tracked and untracked-not-
    ignored files in a checkout, else every file outside build folders."""
    try:
        out = subprocess.run(['git', '-C', root, 'ls-files', '-z', '--cached', '--others', '--exclude-standard'],
                             check=True, capture_output=True).stdout.decode()
        names = [n for n in out.split('\0') if n and os.path.isfile(os.path.join(root, n))]
    except (OSError, subprocess.CalledProcessError):
        names = []
        for folder, dirs, files in os.walk(root):
            dirs[:] = [d for d in dirs if not d.startswith('.')
                       and not os.path.exists(os.path.join(folder, d, 'meson-private'))]
            names += [os.path.relpath(os.path.join(folder, f), root) for f in files]
    return sorted(n.replace(os.sep, '/') for n in names if n.endswith(SOURCE_SUFFIXES))


def layer_of(path):
    """The layer of a file, or None when no folder of the table holds it."""
    if path in PROGRAMS:
        return PROGRAMS[path]
    if path in GENERATED:
        return GENERATED[path]
    best = None
    for folder in FOLDERS:
        if path.startswith(folder + '/') and (best is None or len(folder) > len(best)):
            best = folder
    return FOLDERS[best] if best else None


def check(root):
    """Every fault of the tree at root, one line each (empty: none)."""
    faults = []
    for folder in sorted(FOLDERS):
        if not os.path.isdir(os.path.join(root, folder)):
            faults.append(f'{folder}/: a folder of the layer table ({FOLDERS[folder]}) that the tree does not have')
    for path, layer in sorted(PROGRAMS.items()):
        if not re.search(r'_(test|bench)\.c$', path):
            faults.append(f'{path}: PROGRAMS may name only test and benchmark programs')
        if layer not in LAYERS:
            faults.append(f'{path}: unknown layer {layer}')
    files = source_files(root)
    known = set(files)
    for path in files:
        mine = layer_of(path)
        if mine is None:
            faults.append(f'{path}: in no folder of the layer table (ci/layers.py)')
            continue
        with open(os.path.join(root, path), encoding='utf-8', errors='replace') as f:
            lines = f.read().splitlines()
        for number, line in enumerate(lines, 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            target = m.group(1)
            if target not in known and target not in GENERATED:
                beside = os.path.normpath(os.path.join(os.path.dirname(path), target)).replace(os.sep, '/')
                if beside in known:
                    target = beside
                else:
                    faults.append(f'{path}:{number}: includes "{m.group(1)}", no file of the tree')
                    continue
            if target in PROGRAMS:
                faults.append(f'{path}:{number}: includes the program {target}')
                continue
            theirs = layer_of(target)
            if theirs is None:
                continue  # reported as the file's own fault
            if LAYERS.index(theirs) > LAYERS.index(mine):
                faults.append(f'{path}:{number}: ({mine}) includes {target} ({theirs}), a layer above its own')
    return faults


def self_test():
    """The check on planted trees: a clean one passes, and each planted fault is caught."""
    roots = []

    def tree(files):
        root = tempfile.mkdtemp(prefix='layers_selftest.')
        roots.append(root)
        for folder in FOLDERS:
            os.makedirs(os.path.join(root, folder), exist_ok=True)
        for path, text in files.items():
            os.makedirs(os.path.join(root, os.path.dirname(path)), exist_ok=True)
            with open(os.path.join(root, path), 'w') as f:
                f.write(text)
        return root

    clean = {
        'harness/base/status.h': '#include <stdio.h>\n',
        'reductions/collectives.h': '#include "harness/base/status.h"\n#include "equiv_config.h"\n',
        'harness/compare.h': '#include "reductions/collectives.h"\n',
        'models/model.h': '#include "harness/compare.h"\n#include "model_local.h"\n',
        'models/model_local.h': '\n',
        'reports/report.h': '#include "harness/compare.h"\n',
        'harness/driver/main.c': '#include "models/model.h"\n#include "reports/report.h"\n',
        'harness/case_file_test.c': '#include "harness/driver/runner.h"\n',
        'harness/driver/runner.h': '#include "models/model.h"\n',
    }
    planted = [
        ('an upward include', {'harness/base/status.h': '#include "models/model.h"\n'}, 'a layer above its own'),
        ('an upward include two layers up', {'reductions/world.h': '#include "harness/compare.h"\n'},
         'a layer above its own'),
        ('the evidence including the driver', {'harness/compare.c': '  #  include "harness/driver/runner.h"\n'},
         'a layer above its own'),
        ('a file in no folder of the table', {'extras/x.c': '\n'}, 'in no folder of the layer table'),
        ('an include of no file', {'models/x.c': '#include "harness/gone.h"\n'}, 'no file of the tree'),
        ('an include of a program', {'models/x.c': '#include "harness/case_file_test.c"\n'}, 'includes the program'),
    ]
    failures = 0
    faults = check(tree(clean))
    if faults:
        print('self-test: the clean tree has faults:\n  ' + '\n  '.join(faults))
        failures += 1
    for what, change, expect in planted:
        faults = check(tree({**clean, **change}))
        if not any(expect in f for f in faults):
            print(f'self-test: {what} not caught (faults: {faults})')
            failures += 1
    root = tree(clean)
    os.rmdir(os.path.join(root, 'fuzz'))
    if not any('that the tree does not have' in f for f in check(root)):
        print('self-test: a missing folder of the table not caught')
        failures += 1
    for root in roots:
        shutil.rmtree(root)
    print('self-test: ' + ('FAIL' if failures else f'{len(planted) + 2} trees, each as it should be'))
    return 1 if failures else 0


def main(argv):
    if len(argv) == 2 and argv[1] == '--self-test':
        return self_test()
    if len(argv) != 2:
        print(__doc__.split('\n\n')[1], file=sys.stderr)
        return 2
    faults = check(argv[1])
    for f in faults:
        print(f)
    if faults:
        print(f'ci/layers.py: {len(faults)} fault(s); the layers are in ci/layers.py and README.md "What is where"')
        return 1
    print(f'ci/layers.py: {len(source_files(argv[1]))} files, no include of a higher layer')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
