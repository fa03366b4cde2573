/* One parallel-for for the CPU: the rows of a GEMM, the elements of a generator, the rows of a
 * softmax. Work is split into contiguous ranges over short-lived threads.
 *
 * Contract that keeps results independent of the thread count: `fn` writes only what its range
 * owns, and every element's value depends on its own coordinates, not on which range or worker
 * computed it. A reduction over ranges must use fixed blocks (say 4096 elements, independent of
 * the worker count), each summed in order, then combined in block order by the caller.
 *
 *     static void scale(void *ctx, int64_t begin, int64_t end) { ... x[i] for i in [begin, end) }
 *     eq_parallel_for(n, 4096, scale, &ctx);
 */
#ifndef EQUIV_HARNESS_BASE_PARALLEL_H
#define EQUIV_HARNESS_BASE_PARALLEL_H

#include <stdint.h>

typedef void (*eq_range_fn)(void *ctx, int64_t begin, int64_t end);
/* The same, told which worker runs the range: `slot` in [0, eq_parallel_workers()), one range per
 * slot per call, so a caller can hand each worker its own scratch. */
typedef void (*eq_slot_range_fn)(void *ctx, int slot, int64_t begin, int64_t end);

/* Workers equiv uses at most: the online cores, or EQUIV_THREADS when set (1..1024; harness/base/env.h),
 * capped at 16. */
int eq_parallel_workers(void);

/* Runs fn over [0, n) in at most eq_parallel_workers() contiguous ranges of at least `grain`
 * items each (one range, on the caller, when n < 2 * grain). Ranges that a thread could not be
 * started for run on the caller: the call never fails, only slows. Returns when all are done. */
void eq_parallel_for(int64_t n, int64_t grain, eq_range_fn fn, void *ctx);
void eq_parallel_for_slots(int64_t n, int64_t grain, eq_slot_range_fn fn, void *ctx);

#endif
