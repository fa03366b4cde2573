/* The CPU backend: GEMMs under the contract of models/backend.h, shape-invariant.
 *
 * Kernels, per precision (fp32 for fp32 and bf16, fp64), chosen once at first use:
 *   blas    OpenBLAS (models/gemm_blas.c), where its shape-invariance probe passes (SKYLAKEX);
 *   ordered a plain C GEMM with a fixed order (models/gemm_ordered.c), where it fails (Haswell).
 * Under blas, GEMMs too small for OpenBLAS's blocked kernels go to models/gemm_small.c where its
 * probe shows it gives the same bits (else they are padded: models/gemm_blas.c).
 * EQUIV_CPU_GEMM=blas or =ordered forces one (to compare them, or to test the ordered one);
 * =padded forces blas with every small GEMM padded (to compare with the small kernel). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "equiv_config.h"
#include "harness/base/bf16.h"
#include "harness/base/env.h"
#include "harness/base/openblas.h"
#include "harness/base/parallel.h"
#include "harness/base/phase_time.h"
#include "models/backend.h"
#include "models/gemm_blas.h"
#include "models/gemm_ordered.h"
#include "models/ops.h"

typedef enum { KERNEL_UNCHOSEN = 0, KERNEL_BLAS, KERNEL_ORDERED } gemm_kernel;
static gemm_kernel kernel_for[2]; /* [0] fp32 (and bf16), [1] fp64; set before any thread starts */

/* Chooses the kernel for dt (kernel_for) at the first call, OpenBLAS opened first (the probes run
 * on it): a failure to open it is returned. */
static eq_status choose_kernel(eq_dtype dt)
{
    gemm_kernel *k = &kernel_for[dt == EQ_FP64];
    if (*k == KERNEL_UNCHOSEN) {
        const eq_status opened = eq_openblas_open();
        if (opened != EQ_OK) return opened;
        const char *forced = eq_env_word(EQ_ENV_CPU_GEMM); /* ordered, blas, padded or NULL */
        eq_openblas.set_num_threads(1); /* see threaded_gemm() */
        if (forced != NULL && strcmp(forced, "ordered") == 0) *k = KERNEL_ORDERED;
        else if (forced != NULL && (strcmp(forced, "blas") == 0 || strcmp(forced, "padded") == 0)) *k = KERNEL_BLAS;
        else *k = eq_gemm_blas_shape_invariant(dt) ? KERNEL_BLAS : KERNEL_ORDERED;
        const int padded = forced != NULL && strcmp(forced, "padded") == 0;
        if (*k == KERNEL_BLAS && !padded) eq_gemm_blas_enable_small(dt, eq_gemm_small);
    }
    return EQ_OK;
}

eq_status eq_backend_cpu_open(void)
{
    return eq_openblas_open();
}

/* One block of rows on the calling thread, with the chosen kernel. */
static eq_status serial_gemm(eq_dtype dt, int64_t M, int64_t N, int64_t K, const void *A, int64_t lda,
                             const void *B, int64_t ldb, void *C, int64_t ldc)
{
    if (kernel_for[dt == EQ_FP64] == KERNEL_BLAS) return eq_gemm_blas(dt, M, N, K, A, lda, B, ldb, C, ldc);
    if (dt == EQ_FP64) return eq_gemm_ordered_f64(M, N, K, A, lda, B, ldb, C, ldc);
    return eq_gemm_ordered_f32(M, N, K, A, lda, B, ldb, C, ldc);
}

/* OpenBLAS's own threading is not shape-invariant: with 2 threads, a GEMM over a quarter of the
 * columns rounded differently from the full one (models/backend_test.c caught it). So OpenBLAS
 * runs single-threaded and equiv splits the rows of C over its own threads (harness/base/parallel.h):
 * rows never interact, and each block is a serial GEMM. */
#define MIN_ROWS_PER_THREAD 128

/* The first failure among a parallel-for's workers, its message copied from the worker's thread
 * (the error state is per thread) for the caller to report. */
typedef struct {
    pthread_mutex_t lock;
    eq_status st;
    char message[256];
} worker_failure;
#define WORKER_FAILURE_INIT {PTHREAD_MUTEX_INITIALIZER, EQ_OK, ""}

static void worker_failed(worker_failure *f, eq_status st)
{
    pthread_mutex_lock(&f->lock);
    if (f->st == EQ_OK) {
        f->st = st;
        snprintf(f->message, sizeof f->message, "%s (%s)", eq_error_message(), eq_error_where());
    }
    pthread_mutex_unlock(&f->lock);
    eq_error_clear();
}

typedef struct {
    eq_dtype dt;
    int64_t N, K, lda, ldb, ldc;
    const char *A, *B;
    char *C;
    worker_failure failure;
} gemm_rows;

static void run_gemm_rows(void *ctx, int64_t r0, int64_t r1)
{
    gemm_rows *g = ctx;
    const size_t elem = eq_dtype_size(g->dt);
    eq_status st = serial_gemm(g->dt, r1 - r0, g->N, g->K, g->A + (size_t)(r0 * g->lda) * elem, g->lda, g->B,
                               g->ldb, g->C + (size_t)(r0 * g->ldc) * elem, g->ldc);
    if (st != EQ_OK) worker_failed(&g->failure, st);
}

static eq_status threaded_gemm(eq_dtype dt, int64_t M, int64_t N, int64_t K, const void *A, int64_t lda,
                              const void *B, int64_t ldb, void *C, int64_t ldc)
{
    eq_status st = choose_kernel(dt);
    if (st != EQ_OK) return st;
    gemm_rows g = {.dt = dt, .N = N, .K = K, .lda = lda, .ldb = ldb, .ldc = ldc, .A = A, .B = B, .C = C,
                   .failure = WORKER_FAILURE_INIT};
    eq_parallel_for(M, MIN_ROWS_PER_THREAD, run_gemm_rows, &g);
    pthread_mutex_destroy(&g.failure.lock);
    if (g.failure.st != EQ_OK) st = EQ_FAIL(g.failure.st, "GEMM block: %s", g.failure.message);
    return st;
}

/* bf16: the operands are widened exactly to fp32 and the fp32 GEMM runs on the copies. B is
 * widened once per call (over the workers' rows of it); each worker then takes its rows of A in
 * chunks of BF16_CHUNK_ROWS: widens them, runs the serial GEMM, rounds that block of C to bf16.
 * Rows of C never interact, so the chunking changes no bit (the shape invariance above). The
 * copies live in scratch kept across calls (grown, never shrunk; cpu_release frees it), so a GEMM
 * costs no allocation and no page faults once the largest shape has been seen; the lock makes
 * concurrent callers take turns on it. */
#define BF16_CHUNK_ROWS 256
#define MAX_SLOTS 16 /* harness/base/parallel.c's MAX_WORKERS */

typedef struct {
    float *buf;
    size_t cap; /* floats */
} scratch;

static pthread_mutex_t bf16_lock = PTHREAD_MUTEX_INITIALIZER;
static scratch bf16_b;                 /* [N, K] widened B */
static scratch bf16_slot[MAX_SLOTS]; /* per worker: [BF16_CHUNK_ROWS, K] of A, then [BF16_CHUNK_ROWS, N] of C */

static int scratch_reserve(scratch *s, size_t floats)
{
    if (s->cap >= floats) return 1;
    free(s->buf);
    s->buf = malloc(floats * sizeof *s->buf);
    s->cap = s->buf != NULL ? floats : 0;
    return s->buf != NULL;
}

static void scratch_free(scratch *s)
{
    free(s->buf);
    s->buf = NULL, s->cap = 0;
}

/* Copies rows [r0, r1) of a strided bf16 matrix (row stride ld, `cols` wide) into packed fp32
 * rows starting at dst's row 0: exact. */
static void widen_bf16_rows(const uint16_t *src, int64_t r0, int64_t r1, int64_t cols, int64_t ld, float *dst)
{
    for (int64_t r = r0; r < r1; r++) {
        const uint16_t *in = src + r * ld;
        float *out = dst + (r - r0) * cols;
        for (int64_t c = 0; c < cols; c++) out[c] = eq_bf16_to_f32(in[c]);
    }
}

typedef struct {
    int64_t N, K, lda, ldb, ldc;
    int64_t chunk_rows; /* at most BF16_CHUNK_ROWS, and at most M */
    const uint16_t *A, *B;
    uint16_t *C;
    worker_failure failure;
} bf16_rows;

static void run_widen_b(void *ctx, int64_t r0, int64_t r1)
{
    const bf16_rows *g = ctx;
    widen_bf16_rows(g->B, r0, r1, g->K, g->ldb, bf16_b.buf + r0 * g->K);
}

static void run_bf16_rows(void *ctx, int slot, int64_t r0, int64_t r1)
{
    bf16_rows *g = ctx;
    float *a32 = bf16_slot[slot].buf, *c32 = a32 + (size_t)(g->chunk_rows * g->K);
    eq_status st = EQ_OK;
    for (int64_t c0 = r0; c0 < r1 && st == EQ_OK; c0 += g->chunk_rows) {
        const int64_t c1 = c0 + g->chunk_rows < r1 ? c0 + g->chunk_rows : r1;
        widen_bf16_rows(g->A, c0, c1, g->K, g->lda, a32);
        st = serial_gemm(EQ_FP32, c1 - c0, g->N, g->K, a32, g->K, bf16_b.buf, g->K, c32, g->N);
        for (int64_t r = c0; st == EQ_OK && r < c1; r++) {
            const float *in = c32 + (r - c0) * g->N;
            uint16_t *out = g->C + r * g->ldc;
            for (int64_t c = 0; c < g->N; c++) out[c] = eq_f32_to_bf16(in[c]);
        }
    }
    if (st != EQ_OK) worker_failed(&g->failure, st);
}

static eq_status gemm_bf16(int64_t M, int64_t N, int64_t K, const uint16_t *A, int64_t lda, const uint16_t *B,
                           int64_t ldb, uint16_t *C, int64_t ldc)
{
    eq_status st = choose_kernel(EQ_FP32);
    if (st != EQ_OK) return st;
    pthread_mutex_lock(&bf16_lock);
    const int64_t rows = M < BF16_CHUNK_ROWS ? M : BF16_CHUNK_ROWS; /* of a chunk */
    const int workers = eq_parallel_workers();
    int have = scratch_reserve(&bf16_b, (size_t)(N * K));
    for (int w = 0; w < workers && have; w++) have = scratch_reserve(&bf16_slot[w], (size_t)(rows * (K + N)));
    bf16_rows g = {.N = N, .K = K, .lda = lda, .ldb = ldb, .ldc = ldc, .chunk_rows = rows, .A = A, .B = B, .C = C,
                   .failure = WORKER_FAILURE_INIT};
    if (!have) {
        st = EQ_FAIL(EQ_ERR_NOMEM, "bf16 GEMM [%lld x %lld x %lld]: no memory for fp32 copies", (long long)M,
                     (long long)N, (long long)K);
        goto cleanup;
    }
    eq_parallel_for(N, MIN_ROWS_PER_THREAD, run_widen_b, &g);
    eq_parallel_for_slots(M, MIN_ROWS_PER_THREAD, run_bf16_rows, &g);
    if (g.failure.st != EQ_OK) st = EQ_FAIL(g.failure.st, "GEMM block: %s", g.failure.message);
cleanup:
    pthread_mutex_destroy(&g.failure.lock);
    pthread_mutex_unlock(&bf16_lock);
    return st;
}

/* The fp32 copies of the bf16 GEMM (the only thing the CPU backend holds). */
static void cpu_release(void)
{
    pthread_mutex_lock(&bf16_lock);
    scratch_free(&bf16_b);
    for (int w = 0; w < MAX_SLOTS; w++) scratch_free(&bf16_slot[w]);
    pthread_mutex_unlock(&bf16_lock);
}

static eq_status cpu_gemm_nt(eq_dtype dt, int64_t M, int64_t N, int64_t K, const void *A, int64_t lda,
                             const void *B, int64_t ldb, void *C, int64_t ldc)
{
    if (M < 1 || N < 1 || K < 1 || lda < K || ldb < K || ldc < N || M > INT32_MAX || N > INT32_MAX ||
        K > INT32_MAX)
        return EQ_FAIL(EQ_ERR_INTERNAL, "GEMM with bad sizes M=%lld N=%lld K=%lld", (long long)M, (long long)N,
                       (long long)K);
    const eq_phase_mark mark = eq_phase_enter(EQ_PHASE_GEMM);
    eq_phase_add_gemm_flops(M, N, K);
    eq_status st = dt == EQ_BF16 ? gemm_bf16(M, N, K, A, lda, B, ldb, C, ldc)
                                 : threaded_gemm(dt, M, N, K, A, lda, B, ldb, C, ldc);
    eq_phase_leave(EQ_PHASE_GEMM, mark);
    return st;
}

static const char *kernel_name(eq_dtype dt)
{
    /* describe() cannot fail: it says so, and the first GEMM returns the error */
    if (eq_openblas_try_open() != NULL) return "none (OpenBLAS not loaded)";
    (void)choose_kernel(dt); /* OpenBLAS is open: it cannot fail */
    if (kernel_for[dt == EQ_FP64] == KERNEL_BLAS)
        return eq_gemm_blas_small_in_use(dt) ? "OpenBLAS (small GEMMs: fma kernel, probed)"
                                             : "OpenBLAS (small GEMMs padded)";
    return eq_env_word(EQ_ENV_CPU_GEMM) ? "ordered C (EQUIV_CPU_GEMM)" : "ordered C (OpenBLAS failed the shape probe)";
}

static const char *cpu_describe(char *buf, size_t len)
{
    const char *core = eq_openblas_try_open() == NULL ? eq_openblas.get_corename() : NULL;
    snprintf(buf, len, "OpenBLAS core %s; fp32 GEMM: %s; fp64 GEMM: %s; rows over up to %d threads",
             core ? core : "?", kernel_name(EQ_FP32), kernel_name(EQ_FP64), eq_parallel_workers());
    return buf;
}

const char *eq_cpu_model(char *buf, size_t len)
{
    char line[512];
    snprintf(buf, len, "unknown");
    FILE *fp = fopen("/proc/cpuinfo", "r");
    if (fp == NULL) return buf;
    while (fgets(line, sizeof line, fp) != NULL) {
        if (strncmp(line, "model name", 10) != 0) continue;
        const char *colon = strchr(line, ':');
        if (colon == NULL) break;
        colon++;
        while (*colon == ' ' || *colon == '\t') colon++;
        snprintf(buf, len, "%.*s", (int)strcspn(colon, "\n"), colon);
        break;
    }
    fclose(fp);
    return buf;
}

#if !EQUIV_HAVE_CUDA
const char *eq_gpu_describe(char *buf, size_t len)
{
    if (len > 0) buf[0] = '\0';
    return buf;
}
#endif

static eq_status cpu_gelu_forward(eq_dtype dt, int64_t n, void *out, const void *in)
{
    eq_gelu_forward(dt, n, out, in);
    return EQ_OK;
}

static const eq_backend_ops cpu_ops = {
    .layernorm_forward = eq_layernorm_forward,
    .gelu_forward = cpu_gelu_forward,
    .causal_softmax = eq_causal_softmax,
};

const eq_backend eq_backend_cpu = {
    .name = "cpu",
    .gemm_nt = cpu_gemm_nt,
    .describe = cpu_describe,
    .release = cpu_release,
    .ops = &cpu_ops,
    .shape_invariant = 1,
};

const eq_backend eq_backend_cpu_tf32 = {
    .name = "cpu",
    .gemm_nt = eq_tf32_gemm_nt,
    .describe = eq_tf32_describe,
    .release = cpu_release,
    .ops = &cpu_ops,
    .shape_invariant = 1, /* rounding an input is per element: a slice rounds as the whole */
};
