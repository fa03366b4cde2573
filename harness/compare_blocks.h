/* What the blocked comparison statistics (harness/compare_stats.c, compare_pairs.c) and the median
 * of |d| (harness/compare_median.c, compare_median_guess.c) share: blocks of EQ_STATS_BLOCK
 * elements (read into fp64 lanes by eq_load_widened4, harness/base/widen_lanes.h, or widened by
 * eq_tensor_widen, harness/base/tensor.h), the scan of a block's stored bits, and lanes of fp64
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
_Static_assert(LANES == 4, "the loops read storage 4 elements at a time (eq_load_widened4)");
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

/* What the stored bits of a block say before any value is widened: how many elements differ
 * (+0 and -0 do; NaN payloads do), how many of those are +0 against -0 (equal values: |d| = 0),
 * the largest magnitude's bits on either side (sign cleared: for finite values, those of the
 * largest |v|), and whether either side holds a NaN or Inf (its exponent field all ones). */
typedef struct {
    int64_t differ, signed_zeros;
    uint64_t top;
    int nonfinite;
} bits_scan;

/* The scan for one width of storage: counts in the element's own width (a block's 4096 fit in
 * 16 bits), so that the loop runs as wide as the elements. */
#define SCAN_BITS(type, sign, exponent)                                                                         \
    do {                                                                                                        \
        const type *x = (const type *)a->data + begin, *y = (const type *)b->data + begin;                    \
        type differ = 0, zeros = 0, top = 0;                                                                    \
        for (int64_t i = 0; i < n; i++) {                                                                       \
            const type u = x[i], v = y[i], mu = u & (type)~(sign), mv = v & (type)~(sign);                      \
            differ += u != v;                                                                                   \
            zeros += (u != v) & ((mu | mv) == 0);                                                               \
            top = mu > top ? mu : top;                                                                          \
            top = mv > top ? mv : top;                                                                          \
        }                                                                                                       \
        return (bits_scan){(int64_t)differ, (int64_t)zeros, top, top >= (type)(exponent)};                      \
    } while (0)

static inline __attribute__((always_inline)) bits_scan scan_bits(const eq_tensor *a, const eq_tensor *b, int64_t begin,
                                                                  int64_t n)
{
    switch (a->dtype) {
    case EQ_BF16: SCAN_BITS(uint16_t, 0x8000u, 0x7f80u);
    case EQ_FP32: SCAN_BITS(uint32_t, 0x80000000u, 0x7f800000u);
    case EQ_FP64: break;
    }
    SCAN_BITS(uint64_t, 0x8000000000000000u, FP64_INF_BITS);
}
#undef SCAN_BITS

static inline lanes_d lanes_abs(lanes_d x) { return (lanes_d)((lanes_i)x & INT64_MAX); }

/* The lanes summed in one fixed order. */
static inline double lanes_total(lanes_d lane)
{
    return (lane[0] + lane[1]) + (lane[2] + lane[3]);
}

/* The squared deviations about `mean` of a finite block (begin, len) of storage `data` (dtype dt),
 * in lanes, its tail lane by lane: pass 2 sums the same in its loop over the block's pairs
 * (pair_step), and this is that sum where pass 2 does not read the block in lanes. */
static inline __attribute__((always_inline)) double block_m2(const void *data, eq_dtype dt, int64_t begin, int64_t len,
                                                             double mean)
{
    const lanes_d m = (lanes_d){0} + mean;
    lanes_d m2 = {0};
    int64_t i = 0;
    for (; i + LANES <= len; i += LANES) {
        const lanes_d dev = eq_load_widened4(data, dt, begin + i) - m;
        m2 += dev * dev;
    }
    for (int k = 0; i < len; i++, k++) {
        const double dev = eq_buffer_get(dt, data, begin + i) - mean;
        m2[k] += dev * dev;
    }
    return lanes_total(m2);
}

/* block_m2 of tensor t, compiled for each dtype. */
static inline __attribute__((always_inline)) double block_m2_of(const eq_tensor *t, int64_t begin, int64_t len,
                                                                double mean)
{
    switch (t->dtype) {
    case EQ_BF16: return block_m2(t->data, EQ_BF16, begin, len, mean);
    case EQ_FP32: return block_m2(t->data, EQ_FP32, begin, len, mean);
    case EQ_FP64: break;
    }
    return block_m2(t->data, EQ_FP64, begin, len, mean);
}


/* Lane by lane: yes where mask is -1, no where it is 0. */
static inline lanes_d lanes_select(lanes_i mask, lanes_d yes, lanes_d no)
{
    return (lanes_d)(((lanes_i)yes & mask) | ((lanes_i)no & ~mask));
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
