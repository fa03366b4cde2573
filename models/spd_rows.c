#include "models/spd_rows.h"

#include <string.h>


/* Multiply-adds a range of the work should hold at least, so that a thread's start is paid for. */
#define SPD_ROWS_GRAIN_MACS 65536

/* An AVX2 copy of the loops beside the baseline x86-64 one, picked when the process starts:
 * four lanes of the same independent per-element operations instead of two. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define SPD_ROWS_WIDE __attribute__((target_clones("avx2", "default")))
#else
#define SPD_ROWS_WIDE
#endif

/* Four doubles (GCC and clang vector extension): the operations act lane by lane, each an IEEE
 * fp64 operation on that lane. */
typedef double v4d __attribute__((vector_size(4 * sizeof(double))));

/* acc[j] += a * b[j] for j < n: one rounded product, one rounded sum per element, four lanes at
 * a time (memcpy: unaligned loads and stores). */
static inline void row_axpy(int64_t n, double *restrict acc, double a, const double *restrict b)
{
    const v4d av = {a, a, a, a};
    int64_t j = 0;
    for (; j + 4 <= n; j += 4) {
        v4d sum, bj;
        memcpy(&sum, acc + j, sizeof sum);
        memcpy(&bj, b + j, sizeof bj);
        sum += av * bj;
        memcpy(acc + j, &sum, sizeof sum);
    }
    for (; j < n; j++) acc[j] += a * b[j];
}

/* Four steps of row_axpy at once, in order: acc[j] = (((acc[j] + a[0] b0[j]) + a[1] b1[j]) +
 * a[2] b2[j]) + a[3] b3[j], each product and sum rounded, acc read and written once. */
static inline void row_axpy4(int64_t n, double *restrict acc, const double *a, const double *restrict b0,
                             const double *restrict b1, const double *restrict b2, const double *restrict b3)
{
    const v4d a0 = {a[0], a[0], a[0], a[0]}, a1 = {a[1], a[1], a[1], a[1]};
    const v4d a2 = {a[2], a[2], a[2], a[2]}, a3 = {a[3], a[3], a[3], a[3]};
    int64_t j = 0;
    for (; j + 4 <= n; j += 4) {
        v4d sum, v0, v1, v2, v3;
        memcpy(&sum, acc + j, sizeof sum);
        memcpy(&v0, b0 + j, sizeof v0), memcpy(&v1, b1 + j, sizeof v1);
        memcpy(&v2, b2 + j, sizeof v2), memcpy(&v3, b3 + j, sizeof v3);
        sum += a0 * v0;
        sum += a1 * v1;
        sum += a2 * v2;
        sum += a3 * v3;
        memcpy(acc + j, &sum, sizeof sum);
    }
    for (; j < n; j++) acc[j] = (((acc[j] + a[0] * b0[j]) + a[1] * b1[j]) + a[2] * b2[j]) + a[3] * b3[j];
}

/* row_axpy4 on two rows of sums at once (acc0 with a, acc1 with a1), sharing the loads of b. */
static inline void row_axpy4x2(int64_t n, double *restrict acc0, double *restrict acc1, const double *a,
                               const double *a1, const double *restrict b0, const double *restrict b1,
                               const double *restrict b2, const double *restrict b3)
{
    const v4d p0 = {a[0], a[0], a[0], a[0]}, p1 = {a[1], a[1], a[1], a[1]};
    const v4d p2 = {a[2], a[2], a[2], a[2]}, p3 = {a[3], a[3], a[3], a[3]};
    const v4d q0 = {a1[0], a1[0], a1[0], a1[0]}, q1 = {a1[1], a1[1], a1[1], a1[1]};
    const v4d q2 = {a1[2], a1[2], a1[2], a1[2]}, q3 = {a1[3], a1[3], a1[3], a1[3]};
    int64_t j = 0;
    for (; j + 4 <= n; j += 4) {
        v4d s0, s1, v0, v1, v2, v3;
        memcpy(&s0, acc0 + j, sizeof s0), memcpy(&s1, acc1 + j, sizeof s1);
        memcpy(&v0, b0 + j, sizeof v0), memcpy(&v1, b1 + j, sizeof v1);
        memcpy(&v2, b2 + j, sizeof v2), memcpy(&v3, b3 + j, sizeof v3);
        s0 += p0 * v0;
        s1 += q0 * v0;
        s0 += p1 * v1;
        s1 += q1 * v1;
        s0 += p2 * v2;
        s1 += q2 * v2;
        s0 += p3 * v3;
        s1 += q3 * v3;
        memcpy(acc0 + j, &s0, sizeof s0), memcpy(acc1 + j, &s1, sizeof s1);
    }
    for (; j < n; j++) {
        acc0[j] = (((acc0[j] + a[0] * b0[j]) + a[1] * b1[j]) + a[2] * b2[j]) + a[3] * b3[j];
        acc1[j] = (((acc1[j] + a1[0] * b0[j]) + a1[1] * b1[j]) + a1[2] * b2[j]) + a1[3] * b3[j];
    }
}

typedef struct {
    int64_t K, N, lda, ldb;
    const double *a, *B;
    const unsigned char *keep;
    int want;
    double *out;
} mm_job;

SPD_ROWS_WIDE static void mm_range(void *arg, int64_t t0, int64_t t1)
{
    const mm_job *j = arg;
    const double *B = j->B;
    const int64_t ldb = j->ldb, N = j->N;
    int64_t t = t0;
    for (;;) {
        int64_t ts[2]; /* the next (up to) two rows computed, sharing B's loads */
        int m = 0;
        for (; t < t1 && m < 2; t++) {
            memset(j->out + t * N, 0, (size_t)N * sizeof *j->out);
            if (j->keep == NULL || (j->keep[t] != 0) == (j->want != 0)) ts[m++] = t;
        }
        if (m == 0) break;
        double *acc0 = j->out + ts[0] * N, *acc1 = j->out + ts[m - 1] * N;
        const double *a0 = j->a + ts[0] * j->lda, *a1 = j->a + ts[m - 1] * j->lda;
        int64_t k = 0;
        for (; k + 4 <= j->K; k += 4) {
            const double *b0 = B + k * ldb, *b1 = b0 + ldb, *b2 = b1 + ldb, *b3 = b2 + ldb;
            if (m == 2) row_axpy4x2(N, acc0, acc1, a0 + k, a1 + k, b0, b1, b2, b3);
            else row_axpy4(N, acc0, a0 + k, b0, b1, b2, b3);
        }
        for (; k < j->K; k++) {
            row_axpy(N, acc0, a0[k], B + k * ldb);
            if (m == 2) row_axpy(N, acc1, a1[k], B + k * ldb);
        }
    }
}

static _Thread_local int serial_here;

void spd_rows_serial(int on) { serial_here = on; }

void spd_parallel_for(int64_t n, int64_t grain, eq_range_fn fn, void *ctx)
{
    if (serial_here) {
        if (n > 0) fn(ctx, 0, n);
        return;
    }
    eq_parallel_for(n, grain, fn, ctx);
}

static int64_t grain_for(int64_t macs_per_item)
{
    return macs_per_item >= SPD_ROWS_GRAIN_MACS ? 1 : SPD_ROWS_GRAIN_MACS / (macs_per_item > 0 ? macs_per_item : 1);
}

void spd_rows_mm(int64_t T, int64_t K, int64_t N, const double *a, int64_t lda, const double *B, int64_t ldb,
                 const unsigned char *keep, int want, double *out)
{
    mm_job job = {K, N, lda, ldb, a, B, keep, want, out};
    spd_parallel_for(T, grain_for(K * N), mm_range, &job);
}

typedef struct {
    int64_t T, N, ldx, ldy;
    const double *x, *s, *dy;
    const unsigned char *keep;
    double *out;
} outer_job;

/* Output rows [i0, i1): tokens outer, four at a time, so dy's rows are read once per four tokens
 * and the block of sums stays in cache. */
SPD_ROWS_WIDE static void outer_range(void *arg, int64_t i0, int64_t i1)
{
    const outer_job *j = arg;
    memset(j->out + i0 * j->N, 0, (size_t)((i1 - i0) * j->N) * sizeof *j->out);
    int64_t t = 0;
    for (;;) {
        int64_t ts[4]; /* the next (up to) four tokens in the sum, in order */
        int m = 0;
        for (; t < j->T && m < 4; t++)
            if (j->keep == NULL || j->keep[t]) ts[m++] = t;
        if (m == 0) break;
        for (int64_t i = i0; i < i1; i++) {
            double a[4];
            for (int q = 0; q < m; q++) a[q] = j->s != NULL ? j->x[ts[q] * j->ldx + i] * j->s[ts[q]] : j->x[ts[q] * j->ldx + i];
            double *acc = j->out + i * j->N;
            if (m == 4)
                row_axpy4(j->N, acc, a, j->dy + ts[0] * j->ldy, j->dy + ts[1] * j->ldy, j->dy + ts[2] * j->ldy,
                          j->dy + ts[3] * j->ldy);
            else
                for (int q = 0; q < m; q++) row_axpy(j->N, acc, a[q], j->dy + ts[q] * j->ldy);
        }
    }
}

void spd_rows_outer(int64_t T, int64_t I, int64_t N, const double *x, int64_t ldx, const double *s,
                    const unsigned char *keep, const double *dy, int64_t ldy, double *out)
{
    outer_job job = {T, N, ldx, ldy, x, s, dy, keep, out};
    spd_parallel_for(I, grain_for(T * N), outer_range, &job);
}
