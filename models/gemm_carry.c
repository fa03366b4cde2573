#include "models/gemm_carry.h"

#include <pthread.h>
#include <stdlib.h>

#include "harness/base/bf16.h"
#include "harness/base/parallel.h"
#include "models/gemm_ordered.h"

size_t eq_gemm_carry_elem(eq_dtype dt) { return dt == EQ_FP64 ? sizeof(double) : sizeof(float); }

/* Element (i, j) of a matrix in dtype dt with row stride ld, or of its transpose. */
static double element(eq_dtype dt, const void *m, int64_t ld, int transposed, int64_t i, int64_t j)
{
    const int64_t at = transposed ? j * ld + i : i * ld + j;
    switch (dt) {
    case EQ_BF16: return eq_bf16_to_f32(((const uint16_t *)m)[at]);
    case EQ_FP32: return ((const float *)m)[at];
    case EQ_FP64: return ((const double *)m)[at];
    }
    return 0.0;
}

/* dst[rows, cols] (packed, the accumulator's type) = src (or its transpose), widened: exact. */
static void pack(eq_dtype dt, const void *src, int64_t ld, int transposed, int64_t rows, int64_t cols, void *dst)
{
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++) {
            const double v = element(dt, src, ld, transposed, i, j);
            if (dt == EQ_FP64) ((double *)dst)[i * cols + j] = v;
            else ((float *)dst)[i * cols + j] = (float)v;
        }
}

typedef struct {
    eq_dtype dt;
    int64_t N, K;
    const void *a, *bt; /* [M, K] and [N, K], packed */
    void *acc;          /* [M, N], packed */
    pthread_mutex_t lock;
    eq_status st; /* the ordered kernel fails only for want of a tile: the first failure */
} carry_rows;

static void run_carry_rows(void *ctx, int64_t r0, int64_t r1)
{
    carry_rows *c = ctx;
    eq_status st;
    if (c->dt == EQ_FP64)
        st = eq_gemm_ordered_acc_f64(r1 - r0, c->N, c->K, (const double *)c->a + r0 * c->K, c->K, c->bt, c->K,
                                     (double *)c->acc + r0 * c->N, c->N);
    else
        st = eq_gemm_ordered_acc_f32(r1 - r0, c->N, c->K, (const float *)c->a + r0 * c->K, c->K, c->bt, c->K,
                                     (float *)c->acc + r0 * c->N, c->N);
    if (st == EQ_OK) return;
    eq_error_clear(); /* the worker's message; the caller reports the failure as its own */
    pthread_mutex_lock(&c->lock);
    c->st = st;
    pthread_mutex_unlock(&c->lock);
}

eq_status eq_gemm_carry(eq_dtype dt, eq_gemm_form form, int64_t M, int64_t N, int64_t K, const void *A, int64_t lda,
                        const void *B, int64_t ldb, void *acc)
{
    const size_t elem = eq_gemm_carry_elem(dt);
    eq_status st = EQ_OK;
    void *a = malloc((size_t)(M * K) * elem + 1), *bt = malloc((size_t)(N * K) * elem + 1);
    if (a == NULL || bt == NULL) {
        st = EQ_FAIL(EQ_ERR_NOMEM, "carried GEMM [%lld x %lld x %lld]: no memory for the widened operands",
                     (long long)M, (long long)N, (long long)K);
        goto cleanup;
    }
    pack(dt, A, lda, form == EQ_GEMM_TN, M, K, a);  /* A [M, K], or A [K, M] transposed */
    pack(dt, B, ldb, form != EQ_GEMM_NT, N, K, bt); /* B [N, K], or B [K, N] transposed */
    carry_rows c = {dt, N, K, a, bt, acc, PTHREAD_MUTEX_INITIALIZER, EQ_OK};
    eq_parallel_for(M, 128, run_carry_rows, &c);
    pthread_mutex_destroy(&c.lock);
    if (c.st != EQ_OK) {
        st = EQ_FAIL(c.st, "carried GEMM [%lld x %lld x %lld]: no memory for a tile", (long long)M, (long long)N,
                     (long long)K);
    }
cleanup:
    free(a);
    free(bt);
    return st;
}

void eq_gemm_carry_round(eq_dtype dt, int64_t M, int64_t N, const void *acc, void *out, int64_t ldo)
{
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            const int64_t at = i * N + j, to = i * ldo + j;
            switch (dt) {
            case EQ_BF16: ((uint16_t *)out)[to] = eq_f32_to_bf16(((const float *)acc)[at]); break;
            case EQ_FP32: ((float *)out)[to] = ((const float *)acc)[at]; break;
            case EQ_FP64: ((double *)out)[to] = ((const double *)acc)[at]; break;
            }
        }
}
