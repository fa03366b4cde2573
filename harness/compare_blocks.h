/* What the blocked comparison statistics (harness/compare_stats.c, compare_pairs.c) and the median
 * of |d| (harness/compare_median.c, compare_median_guess.c) share: blocks of EQ_STATS_BLOCK
 * elements (widened to fp64 by eq_tensor_widen, harness/base/tensor.h), and lanes of fp64
 * operations. Internal to those files. */
#ifndef EQUIV_HARNESS_COMPARE_BLOCKS_H
#define EQUIV_HARNESS_COMPARE_BLOCKS_H

#include <float.h>
#include <stdint.h>
#include <string.h>

#include "harness/base/bf16.h"
#include "harness/base/widen_lanes.h"
#include "harness/compare_stats.h"

/* An x86-64-v4 (AVX-512) and an AVX2 copy of the block loops beside the baseline x86-64 one,
 * picked when the process starts (as models/spd_rows.c, harness/structure.c): the lanes below are
 * independent IEEE operations (and the build contracts none into FMAs: -ffp-contract=off), so
 * every copy gives the same bits. GCC names x86-64-v4 from 12 on. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12
#define STATS_WIDE __attribute__((target_clones("arch=x86-64-v4", "avx2", "default")))
#elif defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define STATS_WIDE __attribute__((target_clones("avx2", "default")))
#else
#define STATS_WIDE
#endif

#define BLOCK EQ_STATS_BLOCK
#define LANES 4
#define FP64_INF_BITS 0x7ff0000000000000u

static inline int64_t block_count(int64_t n) { return (n + BLOCK - 1) / BLOCK; }
static inline int64_t block_len(int64_t n, int64_t b) { return n - b * BLOCK < BLOCK ? n - b * BLOCK : BLOCK; }

static inline uint64_t double_bits(double x)
{
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

/* LANES doubles (GCC and clang vector extension): each operation acts lane by lane, one IEEE fp64
 * operation per lane, whatever vector width the compiler picks (memcpy: unaligned loads). Element
 * i of a block goes to lane i % LANES, the last block's tail included (lane by lane in scalar code). */
#ifdef __GNUC__ /* GCC and clang */
/* The lanes pass only between static functions of the files that include this one: no ABI to
 * keep (baseline x86-64 has no 32-byte registers; the AVX2 copy does). */
#pragma GCC diagnostic ignored "-Wpsabi"
#endif
typedef double lanes_d __attribute__((vector_size(LANES * sizeof(double))));
typedef int64_t lanes_i __attribute__((vector_size(LANES * sizeof(int64_t))));
typedef uint64_t lanes_u __attribute__((vector_size(LANES * sizeof(uint64_t))));

static inline lanes_d load_lanes(const double *p)
{
    lanes_d v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* LANES elements of storage of dtype dt from element i on, widened exactly to fp64. */
_Static_assert(LANES == 4, "load_widened reads 4 elements");
static inline __attribute__((always_inline)) lanes_d load_widened(const void *data, eq_dtype dt, int64_t i)
{
    return eq_load_widened4(data, dt, i);
}

static inline lanes_d lanes_abs(lanes_d x) { return (lanes_d)((lanes_i)x & INT64_MAX); }

/* Lane by lane: yes where mask is -1, no where it is 0. */
static inline lanes_d lanes_select(lanes_i mask, lanes_d yes, lanes_d no)
{
    return (lanes_d)(((lanes_i)yes & mask) | ((lanes_i)no & ~mask));
}

/* The lanes summed in one fixed order. */
static inline double lanes_total(lanes_d lane)
{
    return (lane[0] + lane[1]) + (lane[2] + lane[3]);
}

static inline double lanes_max(lanes_d lane)
{
    double m = 0.0;
    for (int j = 0; j < LANES; j++) m = lane[j] > m ? lane[j] : m;
    return m;
}

static inline int64_t lanes_count(lanes_i lane)
{
    int64_t c = 0;
    for (int j = 0; j < LANES; j++) c += lane[j];
    return c;
}

/* The median's histogram: each |d| by its top 16 bits (sign 0, 11 exponent, 4 significand bits),
 * so the bins are in |d| order, 16 to an octave; |d| = 0 falls in bin 0 with no branch and is
 * taken out after (counted apart). Each worker keeps HISTOGRAM_COPIES copies, element i counted
 * in copy i % 4, so that neighbours falling in one bin do not wait on each other's increment. */
#define BIN_SHIFT 48
#define N_BINS ((int64_t)1 << 15)
#define HISTOGRAM_COPIES 4
#define HISTOGRAM_SIZE (HISTOGRAM_COPIES * N_BINS)
#endif
