/* The element-wise reduction every simulated collective is built on: n members' buffers folded in
 * the exact order and rounding of one algorithm (reductions/collectives.h: eq_algo).
 *
 * Ring chunks. [0, count) is split into n contiguous chunks of near-equal length: the first
 * count % n chunks hold count / n + 1 elements, the rest count / n (chunks past `count` are empty
 * when count < n). With count = n * k every chunk is exactly k elements, so chunk i is what member
 * i receives from a reduce_scatter. Only ring reads the chunk of an element; the other algorithms
 * fold every element the same way. eq_fold's ring does not use this split: it follows NCCL's
 * channels, loops and aligned chunks (reductions/nccl_layout.h).
 *
 * The rules of each algorithm are in fold.c, fold_block(). */
#ifndef EQUIV_REDUCTIONS_FOLD_H
#define EQUIV_REDUCTIONS_FOLD_H

#include <stddef.h>

#include "harness/base/status.h"
#include "harness/base/tensor.h"
#include "reductions/collectives.h"
#include "reductions/nccl_layout.h"

/* Chunk `chunk` (0 <= chunk < n) of the split above: its first element and its length. This is the
 * split of a reduce_scatter (member i's block) and of the MPI transport's ring; eq_fold's ring
 * places elements as NCCL's all-reduce does (reductions/nccl_layout.h), which is the same split
 * only when count < one loop and count divides by n * (16 / element size), at 1 channel. */
void eq_fold_chunk_bounds(size_t count, int n, int chunk, size_t *begin, size_t *len);

/* out[i] = the reduction over members k = 0..n-1 of in[k][i], for i in [0, count), as `algo`
 * orders and rounds it in wire dtype `dt`; op AVG pre-multiplies every input by dt(1/n). Ring folds
 * each element in the chunk NCCL's all-reduce puts it in with `nccl`'s channels and protocol
 * (reductions/nccl_layout.h); eq_fold is eq_fold_nccl with EQ_NCCL_CONFIG_DEFAULT.
 * `out` may be one of in[] itself (element i is read from all members before out[i] is written),
 * but may not overlap an input any other way. EQ_ERR_INTERNAL if n < 1 or algo, dt or op is out of
 * range; EQ_ERR_NOMEM if the scratch cannot be allocated. */
eq_status eq_fold(eq_algo algo, eq_dtype dt, eq_redop op, int n, const void *const in[], void *out,
                  size_t count);
eq_status eq_fold_nccl(eq_nccl_config nccl, eq_algo algo, eq_dtype dt, eq_redop op, int n, const void *const in[],
                       void *out, size_t count);

/* The same, for the elements of one ring chunk only: out (the chunk's length, see
 * eq_fold_chunk_bounds) gets elements [begin, begin + len) of the fold of in[] (each holding
 * `count` elements). This is how member `chunk` of a reduce_scatter gets its part without folding
 * the rest. `out` may be the chunk's own place in one of in[] (in[k] + begin elements: an in-place
 * reduce_scatter), but may not overlap an input any other way. EQ_ERR_INTERNAL also if chunk is not
 * in [0, n). */
eq_status eq_fold_one_chunk(eq_algo algo, eq_dtype dt, eq_redop op, int n, const void *const in[],
                            void *out, size_t count, int chunk);

/* The two element-wise steps every fold is made of, for transports that move the partial sums
 * between processes themselves (reductions/mpi_transport.c), so they round exactly as eq_fold:
 * acc[i] = dt(acc[i] + x[i]) for i in [0, count), one rounding per add in dtype `dt`; and
 * buf[i] = dt(buf[i] * dt(1/n)), AVG's pre-multiply of one member's input in a group of n. */
void eq_fold_add(eq_dtype dt, void *acc, const void *x, size_t count);
void eq_fold_premultiply(eq_dtype dt, int n, void *buf, size_t count);

#endif
