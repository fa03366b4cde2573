/* The CPU backend: OpenBLAS SGEMM/DGEMM under the GEMM contract of models/backend.h. */
#include <cblas.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "harness/bf16.h"
#include "models/backend.h"

/* Shape invariance. A layout changes the M (data parallel) or N (column parallel) of a GEMM,
 * never the K of an output element, so the harness needs each element's reduction order to
 * depend on K alone. OpenBLAS's blocked SKYLAKEX kernels give that; its small-matrix kernels,
 * taken when M*N*K <= 100^3 (kernel/x86_64/sgemm_small_kernel_permit_skylakex.c and its dgemm twin), sum in another
 * order. So a small GEMM gets zero rows appended to A until it is past that threshold: the extra
 * rows of C are dropped, the real rows are computed by the blocked kernels. */
#define SMALL_PATH_MNK 1000000.0

static int64_t padded_rows(int64_t M, int64_t N, int64_t K)
{
    double per_row = (double)N * (double)K;
    if ((double)M * per_row > SMALL_PATH_MNK) return M;
    return (int64_t)(SMALL_PATH_MNK / per_row) + 1;
}

/* C[M,N] = A[M,K] B[N,K]^T in fp32 or fp64, on this thread, through the blocked kernels. */
static eq_status serial_gemm_nt(eq_dtype dt, int64_t M, int64_t N, int64_t K, const void *A, int64_t lda,
                              const void *B, int64_t ldb, void *C, int64_t ldc)
{
    const int64_t rows = padded_rows(M, N, K);
    const size_t elem = eq_dtype_size(dt);
    const void *a = A;
    void *c = C;
    char *a_pad = NULL, *c_pad = NULL;
    if (rows > M) {
        a_pad = calloc((size_t)(rows * K), elem);
        c_pad = malloc((size_t)(rows * N) * elem);
        if (a_pad == NULL || c_pad == NULL) {
            free(a_pad);
            free(c_pad);
            return EQ_FAIL(EQ_ERR_NOMEM, "GEMM: no memory to pad %lld rows", (long long)rows);
        }
        for (int64_t r = 0; r < M; r++)
            memcpy(a_pad + (size_t)(r * K) * elem, (const char *)A + (size_t)(r * lda) * elem, (size_t)K * elem);
        a = a_pad, lda = K, c = c_pad;
    }
    const int64_t c_ld = rows > M ? N : ldc;
    if (dt == EQ_FP64)
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)rows, (blasint)N, (blasint)K, 1.0, a,
                    (blasint)lda, B, (blasint)ldb, 0.0, c, (blasint)c_ld);
    else
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)rows, (blasint)N, (blasint)K, 1.0f, a,
                    (blasint)lda, B, (blasint)ldb, 0.0f, c, (blasint)c_ld);
    if (rows > M)
        for (int64_t r = 0; r < M; r++)
            memcpy((char *)C + (size_t)(r * ldc) * elem, c_pad + (size_t)(r * N) * elem, (size_t)N * elem);
    free(a_pad);
    free(c_pad);
    return EQ_OK;
}


/* OpenBLAS's own threading is not shape-invariant either: with 2 threads, a GEMM over a quarter of
 * the columns rounded differently from the full one (models/backend_test.c caught it). So OpenBLAS
 * runs single-threaded and equiv splits the rows of C over its own threads: rows never interact,
 * and each block is a serial GEMM, which is invariant. */
#define MIN_ROWS_PER_THREAD 128
#define MAX_THREADS 16

typedef struct {
    eq_dtype dt;
    int64_t M, N, K, lda, ldb, ldc;
    const void *A, *B;
    void *C;
    eq_status st;
} gemm_block;

static void *run_gemm_block(void *arg)
{
    gemm_block *g = arg;
    g->st = serial_gemm_nt(g->dt, g->M, g->N, g->K, g->A, g->lda, g->B, g->ldb, g->C, g->ldc);
    return NULL;
}

static int worker_count(int64_t M)
{
    static int cores = 0;
    if (cores == 0) {
        long online = sysconf(_SC_NPROCESSORS_ONLN);
        cores = online < 1 ? 1 : online > MAX_THREADS ? MAX_THREADS : (int)online;
        openblas_set_num_threads(1);
    }
    int64_t by_rows = M / MIN_ROWS_PER_THREAD;
    return by_rows < 1 ? 1 : by_rows < cores ? (int)by_rows : cores;
}

static eq_status blas_gemm_nt(eq_dtype dt, int64_t M, int64_t N, int64_t K, const void *A, int64_t lda,
                              const void *B, int64_t ldb, void *C, int64_t ldc)
{
    const int workers = worker_count(M);
    if (workers == 1) return serial_gemm_nt(dt, M, N, K, A, lda, B, ldb, C, ldc);
    const size_t elem = eq_dtype_size(dt);
    gemm_block blocks[MAX_THREADS];
    pthread_t threads[MAX_THREADS];
    int started = 0;
    eq_status st = EQ_OK;
    for (int w = 0; w < workers; w++) {
        int64_t r0 = M * w / workers, r1 = M * (w + 1) / workers;
        blocks[w] = (gemm_block){dt, r1 - r0, N, K, lda, ldb, ldc, (const char *)A + (size_t)(r0 * lda) * elem, B,
                                 (char *)C + (size_t)(r0 * ldc) * elem, EQ_OK};
    }
    for (; started < workers - 1; started++)
        if (pthread_create(&threads[started], NULL, run_gemm_block, &blocks[started + 1]) != 0) break;
    run_gemm_block(&blocks[0]);
    for (int w = started + 1; w < workers; w++) run_gemm_block(&blocks[w]); /* threads that did not start */
    for (int t = 0; t < started; t++) pthread_join(threads[t], NULL);
    for (int w = 0; w < workers; w++)
        if (blocks[w].st != EQ_OK && st == EQ_OK) st = blocks[w].st;
    return st;
}

/* Copies a strided bf16 matrix [rows, cols] (row stride ld) into a packed fp32 one: exact. */
static void widen_bf16(const uint16_t *src, int64_t rows, int64_t cols, int64_t ld, float *dst)
{
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) dst[r * cols + c] = eq_bf16_to_f32(src[r * ld + c]);
}

static eq_status gemm_bf16(int64_t M, int64_t N, int64_t K, const uint16_t *A, int64_t lda, const uint16_t *B,
                           int64_t ldb, uint16_t *C, int64_t ldc)
{
    eq_status st = EQ_OK;
    float *a32 = malloc((size_t)(M * K) * sizeof *a32);
    float *b32 = malloc((size_t)(N * K) * sizeof *b32);
    float *c32 = malloc((size_t)(M * N) * sizeof *c32);
    if (a32 == NULL || b32 == NULL || c32 == NULL) {
        st = EQ_FAIL(EQ_ERR_NOMEM, "bf16 GEMM [%lld x %lld x %lld]: no memory for fp32 copies", (long long)M,
                     (long long)N, (long long)K);
        goto cleanup;
    }
    widen_bf16(A, M, K, lda, a32);
    widen_bf16(B, N, K, ldb, b32);
    EQ_TRY(blas_gemm_nt(EQ_FP32, M, N, K, a32, K, b32, K, c32, N));
    for (int64_t r = 0; r < M; r++)
        for (int64_t c = 0; c < N; c++) C[r * ldc + c] = eq_f32_to_bf16(c32[r * N + c]);
cleanup:
    free(a32);
    free(b32);
    free(c32);
    return st;
}

static eq_status cpu_gemm_nt(eq_dtype dt, int64_t M, int64_t N, int64_t K, const void *A, int64_t lda,
                             const void *B, int64_t ldb, void *C, int64_t ldc)
{
    if (M < 1 || N < 1 || K < 1 || lda < K || ldb < K || ldc < N || M > INT32_MAX || N > INT32_MAX ||
        K > INT32_MAX)
        return EQ_FAIL(EQ_ERR_INTERNAL, "GEMM with bad sizes M=%lld N=%lld K=%lld", (long long)M, (long long)N,
                       (long long)K);
    if (dt == EQ_BF16) return gemm_bf16(M, N, K, A, lda, B, ldb, C, ldc);
    return blas_gemm_nt(dt, M, N, K, A, lda, B, ldb, C, ldc);
}

static const char *cpu_describe(char *buf, size_t len)
{
    const char *core = openblas_get_corename();
    snprintf(buf, len, "OpenBLAS %s, single-threaded per block, rows over up to %d threads", core ? core : "?",
             worker_count(INT32_MAX));
    return buf;
}

const eq_backend eq_backend_cpu = {
    .name = "cpu",
    .gemm_nt = cpu_gemm_nt,
    .describe = cpu_describe,
};

eq_status eq_backend_find(const char *name, const eq_backend **out)
{
    if (strcmp(name, "cpu") == 0) {
        *out = &eq_backend_cpu;
        return EQ_OK;
    }
    return EQ_FAIL(EQ_ERR_USAGE, "unknown backend '%s' (built: cpu)", name);
}

void eq_cpu_prefer_avx512_openblas(char **argv)
{
    const char *want = getenv("EQUIV_OPENBLAS_CORETYPE"); /* an explicit choice for equiv wins */
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    if (want == NULL && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
        want = "SKYLAKEX";
#endif
    const char *have = getenv("OPENBLAS_CORETYPE");
    if (want == NULL || want[0] == '\0' || (have != NULL && strcasecmp(have, want) == 0)) return;
    if (setenv("OPENBLAS_CORETYPE", want, 1) != 0) return;
    execv("/proc/self/exe", argv);
    /* exec failed (no /proc): carry on with the kernels OpenBLAS chose. */
}
