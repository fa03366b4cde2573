/* Where NCCL's ring all-reduce puts each element: its channel, the chunk it travels in, and so the
 * rank whose chunk it is (the rank that adds last; the fold starts one rank after it). Derived from
 * NCCL's source (cited in nccl_layout.c), not measured on several GPUs.
 *
 * A buffer of `count` elements is cut into contiguous channel parts (host side,
 * scheduleCollTasksToPlan); each channel walks its part in loops of nranks * chunkCount elements,
 * and a loop that is not full shrinks its chunks to alignUp(divUp(rem, nranks), 16 / elemSize)
 * (device side, runRing). Within a loop, chunk k is elements [k * chunkCount, (k + 1) * chunkCount)
 * of the loop, and it is folded from ring index k + 1 round to k. */
#ifndef EQUIV_REDUCTIONS_NCCL_LAYOUT_H
#define EQUIV_REDUCTIONS_NCCL_LAYOUT_H

#include <stddef.h>

#include "harness/base/status.h"

typedef enum { EQ_NCCL_SIMPLE = 0, EQ_NCCL_LL = 1, EQ_NCCL_LL128 = 2 } eq_nccl_proto;
#define EQ_NCCL_PROTO_COUNT 3
const char *eq_nccl_proto_name(eq_nccl_proto p);        /* "simple", "ll", "ll128" */
eq_status eq_nccl_proto_parse(const char *name, eq_nccl_proto *out); /* EQ_ERR_USAGE if unknown */

/* What NCCL chose for one all-reduce: the channels it runs on (task->nMaxChannels after the tuner)
 * and the protocol. The default is 1 channel, Simple: see README ("NCCL's fold order"). */
typedef struct {
    int channels; /* 1..EQ_NCCL_MAX_CHANNELS; 0: the default, 1 */
    eq_nccl_proto proto;
} eq_nccl_config;
#define EQ_NCCL_MAX_CHANNELS 64 /* MAXCHANNELS in NCCL's src/include/device.h */
#define EQ_NCCL_CONFIG_DEFAULT ((eq_nccl_config){0, EQ_NCCL_SIMPLE}) /* all zero: a zeroed struct is it */

/* A run of consecutive elements that share a channel, a loop and a chunk. */
typedef struct {
    size_t begin, len; /* elements [begin, begin + len) of the buffer */
    int channel;       /* 0-based, in the order of the parts */
    size_t loop;       /* loop of runRing within the channel */
    int chunk;         /* chunk within the loop, 0..n-1: ring index k adds last, k + 1 starts */
} eq_nccl_piece;

/* One loop of runRing on one channel: elements [begin, begin + len), cut into n chunks of
 * chunk_count (the last ones shorter or empty). */
typedef struct {
    size_t begin, len, chunk_count;
    int channel;
    size_t loop;
} eq_nccl_loop;

/* The loop holding element `at` (< count); walking at = 0, loop.begin + loop.len, ... covers the
 * buffer once, in order. */
void eq_nccl_ring_loop(eq_nccl_config cfg, size_t elem_size, int n, size_t count, size_t at, eq_nccl_loop *loop);

/* The piece holding element `at` (< count) of a ring all-reduce of `count` elements of
 * `elem_size` bytes over n ranks. Walking at = 0, piece.begin + piece.len, ... covers the buffer
 * once, in order. */
void eq_nccl_ring_piece(eq_nccl_config cfg, size_t elem_size, int n, size_t count, size_t at,
                        eq_nccl_piece *piece);

/* The ring index whose fold of a chunk comes first (runRing step 0 on ring index k + 1 sends it). */
static inline int eq_nccl_first_rank(int chunk, int n) { return (chunk + 1) % n; }

#endif
