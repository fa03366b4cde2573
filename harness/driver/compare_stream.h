/* `equiv compare` on runs of any size: tensor by tensor, never the whole run in memory.
 *
 * The reference's tensors are taken in capture order, in batches of at most EQ_STREAM_BATCH_BYTES
 * (a larger tensor alone, at most EQ_STREAM_BATCH_TENSORS); each batch is read from both runs (and
 * the truth), with the GEMM operands its outputs need for their rounding bounds, assembled
 * (harness/run_stream.h), compared by the evidence path every run takes (eq_compare_evidence) and
 * let go before the next. So the memory is a batch's: its tensors once in each reader's shared
 * buffer and once more assembled, whatever the number of tensors; the two runs' readers read in
 * parallel while this process waits. The verdict is given once, over every result, as for a run
 * held whole; the results are the same. */
#ifndef EQUIV_HARNESS_DRIVER_COMPARE_STREAM_H
#define EQUIV_HARNESS_DRIVER_COMPARE_STREAM_H

#include "harness/case_file.h"
#include "harness/compare.h"
#include "harness/progress.h"
#include "harness/run_stream.h"

#define EQ_STREAM_BATCH_BYTES ((double)(64 << 20))
#define EQ_STREAM_BATCH_TENSORS 512

typedef struct {
    eq_run_stream *ref, *test, *truth; /* truth NULL: none */
    const char *ref_path, *test_path, *truth_path;
    eq_run_meta ref_meta, test_meta;   /* as the report names them */
    int check_dtype;                   /* hold each run's declared dtype to its data (harness/run_load.h) */
    eq_progress *progress;             /* NULL: none */
} eq_stream_compare;

/* Compares c->test against c->ref into out (evidence, the case's lines where kase is not NULL, the
 * verdict): eq_compare_runs' result for the runs held whole. */
eq_status eq_compare_streams(const eq_stream_compare *c, const eq_tolerance *tol, const eq_tolerance *grad_tol,
                             eq_expect expect, const eq_case *kase, eq_comparison *out);

/* The same under `--comm mpi` (harness/driver/commands.c), the batches spread over `size`
 * processes. Every process opens the runs (c: as above) and forms the batches as
 * eq_compare_streams does; process `rank` compares batch b where b % size == rank, and hands its
 * batches' evidence (results, findings, dtype checks) over as *part_bytes bytes at *part
 * (malloc'd), for rank 0. */
eq_status eq_compare_streams_part(const eq_stream_compare *c, const eq_tolerance *tol, const eq_tolerance *grad_tol,
                                  eq_expect expect, int rank, int size, void **part, size_t *part_bytes);
/* Rank 0: every process's part (parts[r], sizes[r] bytes, for r < size) merged in batch order into
 * out, then the dtype checks' outcome, the case's lines and the verdict: eq_compare_streams' result
 * bit for bit. EQ_ERR_INTERNAL where a batch is missing, out of place or left over. */
eq_status eq_compare_streams_merge(const eq_stream_compare *c, const eq_tolerance *tol, const eq_tolerance *grad_tol,
                                   eq_expect expect, const eq_case *kase, void *const *parts, const size_t *sizes,
                                   int size, eq_comparison *out);

#endif
