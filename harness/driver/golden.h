/* Golden envelopes (golden/envelopes/<case>.json): for one case at one size, seed and algorithm,
 * the recorded statistics of every activation, gradient and loss of every (dtype, layout) against
 * the dp1-tp1 reference: max |d|, mean |d| and whether the tensor was bit-exact. A fresh matrix
 * is checked against them, so that a change which keeps every tensor inside its tolerance but
 * moves the numerics (a lost all-reduce on a small tensor, a factor 1/n, another reduction
 * order) still shows.
 *
 * A tensor leaves its envelope when
 *   - it was bit-exact and is not any more, or the reverse;
 *   - its max |d| or mean |d| moved outside [recorded / F, recorded * F], F = EQ_GOLDEN_FACTOR
 *     (values below EQ_GOLDEN_ZERO count as zero: then only being zero or not matters);
 *   - it appears (in the run, not in the file) or disappears (in the file, not in the run) for a
 *     dtype the run covers. Dtypes the matrix did not run (a --dtype filter) are not checked.
 *
 * File: one JSON object; the header (case, size, algorithm, seed, backend) on its own lines, then
 * one line per tensor in the matrix's order, numbers with %.9g, so that a diff of two versions
 * reads line by line:
 *   {"dtype": "fp32", "layout": "dp1-tp2", "path": "layers/00/out", "role": "activation",
 *    "bit_exact": false, "max_abs": 1.90734863e-06, "mean_abs": 2.1e-07} */
#ifndef EQUIV_HARNESS_DRIVER_GOLDEN_H
#define EQUIV_HARNESS_DRIVER_GOLDEN_H

#include <stdio.h>

#include "harness/driver/matrix.h"

/* Why 4: the CPU numerics are deterministic on one machine, but another OpenBLAS kernel or the
 * ordered GEMM fallback reorders fp32 sums, which moves rounding-level statistics by small
 * factors (measured: up to x3.4 for a scalar loss, x2.4 otherwise; golden/README.md). A real
 * regression (a missing all-reduce, a factor 1/n, a misplaced shard) moves them by orders of
 * magnitude or flips bit-exactness. */
#define EQ_GOLDEN_FACTOR 4.0
/* Below this a statistic counts as zero. fp32 and bf16 differences at the ci sizes are 1e-11 and
 * up; below 1e-12 sit only fp64 roundings (the gpt loss summed from dp partials differs by 1e-16
 * to 1e-14), whose size means nothing: only whether they differ at all. */
#define EQ_GOLDEN_ZERO 1e-12

/* Writes the envelope of case_name's rows of m to path (whole or not at all). EQ_ERR_USAGE when
 * m has no row of that case. */
eq_status eq_golden_write(const char *path, const eq_matrix *m, const char *case_name);

/* Checks case_name's rows of m against the envelope at path. Sets *n_outside to the number of
 * tensors outside it (appeared and disappeared ones included) and, when report is not NULL,
 * lists each with its recorded and current values, then a closing line. A missing or malformed
 * file is EQ_ERR_INPUT naming it; an envelope recorded at another size, seed or algorithm than m
 * ran is EQ_ERR_USAGE (it does not apply). */
eq_status eq_golden_check(const char *path, const eq_matrix *m, const char *case_name, FILE *report,
                          int *n_outside);

/* Rewrites dir/<case>.json for every case in m (creating dir, one level, if needed) and prints to
 * diff_out (when not NULL) per file either "<path>: unchanged" or a unified diff without context
 * (--- old, +++ new, @@ hunks of -old and +new lines). An unchanged file is not rewritten. */
eq_status eq_golden_update(const char *dir, const eq_matrix *m, FILE *diff_out);

#endif
