#include "models/spd_rows.h"

#include <string.h>

#include "harness/parallel.h"

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
    for (int64_t t = t0; t < t1; t++) {
        double *restrict acc = j->out + t * j->N;
        memset(acc, 0, (size_t)j->N * sizeof *acc);
        if (j->keep != NULL && (j->keep[t] != 0) != (j->want != 0)) continue;
        const double *at = j->a + t * j->lda;
        for (int64_t k = 0; k < j->K; k++) row_axpy(j->N, acc, at[k], j->B + k * j->ldb);
    }
}

static int64_t grain_for(int64_t macs_per_item)
{
    return macs_per_item >= SPD_ROWS_GRAIN_MACS ? 1 : SPD_ROWS_GRAIN_MACS / (macs_per_item > 0 ? macs_per_item : 1);
}

void spd_rows_mm(int64_t T, int64_t K, int64_t N, const double *a, int64_t lda, const double *B, int64_t ldb,
                 const unsigned char *keep, int want, double *out)
{
    mm_job job = {K, N, lda, ldb, a, B, keep, want, out};
    eq_parallel_for(T, grain_for(K * N), mm_range, &job);
}

typedef struct {
    int64_t T, N, ldx, ldy;
    const double *x, *s, *dy;
    const unsigned char *keep;
    double *out;
} outer_job;

/* Output rows [i0, i1): tokens outer, so dy's row is read once per token and the block of sums
 * stays in cache. */
SPD_ROWS_WIDE static void outer_range(void *arg, int64_t i0, int64_t i1)
{
    const outer_job *j = arg;
    memset(j->out + i0 * j->N, 0, (size_t)((i1 - i0) * j->N) * sizeof *j->out);
    for (int64_t t = 0; t < j->T; t++) {
        if (j->keep != NULL && !j->keep[t]) continue;
        const double *xt = j->x + t * j->ldx, *dyt = j->dy + t * j->ldy;
        for (int64_t i = i0; i < i1; i++) {
            const double a = j->s != NULL ? xt[i] * j->s[t] : xt[i];
            row_axpy(j->N, j->out + i * j->N, a, dyt);
        }
    }
}

void spd_rows_outer(int64_t T, int64_t I, int64_t N, const double *x, int64_t ldx, const double *s,
                    const unsigned char *keep, const double *dy, int64_t ldy, double *out)
{
    outer_job job = {T, N, ldx, ldy, x, s, dy, keep, out};
    eq_parallel_for(I, grain_for(T * N), outer_range, &job);
}
