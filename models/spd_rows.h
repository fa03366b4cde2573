/* The sums of the spd ops (models/spd_ops.h) in loops whose inner loop is unit-stride.
 *
 * Every output element is one fp64 sum over its index k in ascending order, started at 0 and
 * not rounded: out = ((0 + p_0) + p_1) + ..., each product p_k one multiplication, as the
 * scalar dot-product loop `acc += a[k] * b[k]` makes it. The loops hold a row of such sums and add
 * one product to every element of the row per step (acc[j] += a_k b[k, j]): the lanes are
 * independent, so the vector instructions that run them reassociate nothing, and the build's
 * -ffp-contract=off keeps multiply and add two roundings. Rows (or blocks of output rows) are
 * split over threads (harness/base/parallel.h); a value depends on its own data alone, never on the
 * thread count. */
#ifndef EQUIV_MODELS_SPD_ROWS_H
#define EQUIV_MODELS_SPD_ROWS_H

#include <stdint.h>

#include "harness/base/parallel.h"

/* eq_parallel_for, except in a thread marked by spd_rows_serial(1): there the whole range runs
 * on the caller. models/spd.c marks the threads that already each run a share of the dp
 * replicas, so that the ops inside do not split again. The flag is the calling thread's own. */
void spd_parallel_for(int64_t n, int64_t grain, eq_range_fn fn, void *ctx);
void spd_rows_serial(int on);

/* out[t, j] = sum_k a[t, k] B[k, j] (k < K ascending), for t < T, j < N; a's rows lda apart,
 * B's ldb apart; out [T, N] dense. keep (may be NULL): rows t with keep[t] != want are set to 0
 * and not computed. */
void spd_rows_mm(int64_t T, int64_t K, int64_t N, const double *a, int64_t lda, const double *B, int64_t ldb,
                 const unsigned char *keep, int want, double *out);

/* out[i, j] = sum_t (x[t, i] s[t]) dy[t, j] (t < T ascending), for i < I, j < N: a sum over
 * tokens of outer products. s may be NULL (the product x[t, i] dy[t, j] alone); keep (may be
 * NULL): tokens with keep[t] == 0 are left out of the sum. x's rows ldx apart, dy's ldy apart;
 * out [I, N] dense. */
void spd_rows_outer(int64_t T, int64_t I, int64_t N, const double *x, int64_t ldx, const double *s,
                    const unsigned char *keep, const double *dy, int64_t ldy, double *out);

#endif
