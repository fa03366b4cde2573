/* The CUDA backend: GEMMs on cuBLAS under the contract of models/backend.h (built with the cuda
 * feature only).
 *
 *   fp32  cublasGemmEx, CUDA_R_32F, CUBLAS_COMPUTE_32F_PEDANTIC under CUBLAS_PEDANTIC_MATH: fp32
 *         FMA accumulation, no TF32 and no reduced-precision reduction;
 *   bf16  cublasGemmEx, CUDA_R_16BF in and out, CUBLAS_COMPUTE_32F (fp32 accumulation, one
 *         rounding to bf16 at the end): the tensor-core path training runs on, with
 *         CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION so that split-K partial sums stay in
 *         fp32 (the default math lets cuBLAS round them to bf16; PyTorch allows that by default,
 *         allow_bf16_reduced_precision_reduction, but the contract and the rounding bound here
 *         are for one rounding);
 *   fp64  cublasDgemm under CUBLAS_PEDANTIC_MATH.
 * The accumulation order is cuBLAS's (blocked, FMAs, possibly split-K with a fixed reduction), not
 * the CPU's: the two backends agree within K * u of the sum of |products|, not bit for bit.
 *
 * Deterministic: cuBLAS "guarantees the same bit-wise results at every run" for one toolkit
 * version on GPUs of the same architecture and SM count, when one stream is active; with several
 * streams it may pick other internal workspaces unless each has its own (cuBLAS Library User
 * Guide, 2.1.4 "Results reproducibility"). Here: one handle, one stream, one workspace we own
 * (cublasSetWorkspace), atomics not allowed (cublasSetAtomicsMode, the default made explicit).
 * Not promised: the same bits for a GEMM of another shape. cuBLAS's heuristics pick a kernel per
 * shape, so a column slice of a GEMM may round differently from the full one; the column_parallel
 * case measures exactly this on a GPU.
 *
 * Buffers: the backend interface takes host pointers, so each GEMM copies A and B to device
 * buffers it owns (grown as needed), runs, and copies C back. All state is in `gemm`, freed in one
 * place (cuda_release, which also frees the sim-cuda transport's buffers and the stream). Calls are
 * serialised by a mutex; they all come from the thread that opened the device (reductions/cuda_device.h). */
#include <cublas_v2.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/base/rng.h"
#include "models/backend.h"
#include "reductions/cuda_device.h"
#include "models/ops_cuda.h"
#include "models/ops_cuda_kernel.h"
#include "reductions/fold_cuda.h"

#define EQ_CUBLAS_TRY(call)                                                                           \
    do {                                                                                              \
        cublasStatus_t eq_cublas_err_ = (call);                                                       \
        if (eq_cublas_err_ != CUBLAS_STATUS_SUCCESS) {                                                \
            st = EQ_FAIL(eq_cublas_err_ == CUBLAS_STATUS_ALLOC_FAILED ? EQ_ERR_NOMEM : EQ_ERR_BACKEND, \
                         "%s: %s", #call, cublas.cublasGetStatusString(eq_cublas_err_));                     \
            goto cleanup;                                                                             \
        }                                                                                             \
    } while (0)

/* cuBLAS is loaded when the backend opens, not when equiv starts: linking it costs every run of
 * equiv 0.2 s and 200 MiB (its initialisers), CPU runs included. These are the functions used. */
#define CUBLAS_FUNCTIONS(X)                                                                           \
    X(cublasCreate_v2) X(cublasDestroy_v2) X(cublasSetStream_v2) X(cublasSetWorkspace_v2)            \
    X(cublasSetAtomicsMode) X(cublasSetMathMode) X(cublasGemmEx) X(cublasDgemm_v2)                    \
    X(cublasGetStatusString) X(cublasGetVersion_v2)
static struct {
    void *lib;
#define CUBLAS_POINTER(name) __typeof__(&name) name;
    CUBLAS_FUNCTIONS(CUBLAS_POINTER)
#undef CUBLAS_POINTER
} cublas;

#define CUBLAS_SONAME_(major) "libcublas.so." #major
#define CUBLAS_SONAME(major) CUBLAS_SONAME_(major)

static eq_status load_cublas(void)
{
    if (cublas.lib != NULL) return EQ_OK;
    void *lib = dlopen(CUBLAS_SONAME(CUBLAS_VER_MAJOR), RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) return EQ_FAIL(EQ_ERR_BACKEND, "cannot load cuBLAS: %s", dlerror());
#define CUBLAS_RESOLVE(name)                                                                         \
    cublas.name = (__typeof__(cublas.name))dlsym(lib, #name);                                         \
    if (cublas.name == NULL) {                                                                        \
        dlclose(lib);                                                                                 \
        return EQ_FAIL(EQ_ERR_BACKEND, "cuBLAS %s lacks %s", CUBLAS_SONAME(CUBLAS_VER_MAJOR), #name);  \
    }
    CUBLAS_FUNCTIONS(CUBLAS_RESOLVE)
#undef CUBLAS_RESOLVE
    cublas.lib = lib; /* kept loaded until exit: its handles may outlive a release */
    return EQ_OK;
}

/* 32 MiB: the larger of the two deterministic settings the cuBLAS guide names for
 * CUBLAS_WORKSPACE_CONFIG (":4096:8"). */
#define GEMM_WORKSPACE_BYTES ((size_t)32 << 20)

static struct {
    int ready;
    cublasHandle_t blas;
    eq_cuda_buffer a, b, c;  /* packed copies of A [M,K], B [N,K], C [M,N] */
    eq_cuda_buffer p;        /* an attention head's probabilities [S,S] */
    eq_cuda_buffer workspace; /* cuBLAS's, fixed */
    char device_name[256];
    int sm_count, cc_major, cc_minor;
} gemm = {0};
static pthread_mutex_t gemm_lock = PTHREAD_MUTEX_INITIALIZER;

static void cuda_release(void)
{
    pthread_mutex_lock(&gemm_lock);
    if (gemm.ready) cublas.cublasDestroy_v2(gemm.blas);
    eq_cuda_buffer_free(&gemm.a);
    eq_cuda_buffer_free(&gemm.b);
    eq_cuda_buffer_free(&gemm.c);
    eq_cuda_buffer_free(&gemm.p);
    eq_cuda_buffer_free(&gemm.workspace);
    gemm.ready = 0;
    pthread_mutex_unlock(&gemm_lock);
    eq_ops_cuda_release();  /* the row ops' buffers */
    eq_fold_cuda_release(); /* the sim-cuda transport's buffers */
    eq_cuda_close();
}

/* Device, stream, handle and workspace, once. Called with gemm_lock held. */
static eq_status open_locked(void)
{
    eq_status st = EQ_OK;
    int created = 0;
    struct cudaDeviceProp prop;
    if (gemm.ready) return EQ_OK;
    EQ_TRY(eq_cuda_open(-1)); /* the launcher's local rank picks the GPU */
    EQ_TRY(load_cublas());
    EQ_CUDA_TRY(cudaGetDeviceProperties(&prop, eq_cuda_device()));
    snprintf(gemm.device_name, sizeof gemm.device_name, "%s", prop.name);
    gemm.sm_count = prop.multiProcessorCount;
    gemm.cc_major = prop.major;
    gemm.cc_minor = prop.minor;
    EQ_CUBLAS_TRY(cublas.cublasCreate_v2(&gemm.blas));
    created = 1;
    EQ_CUBLAS_TRY(cublas.cublasSetStream_v2(gemm.blas, eq_cuda_stream()));
    EQ_TRY(eq_cuda_buffer_reserve(&gemm.workspace, GEMM_WORKSPACE_BYTES, "the cuBLAS workspace"));
    EQ_CUBLAS_TRY(cublas.cublasSetWorkspace_v2(gemm.blas, gemm.workspace.ptr, gemm.workspace.bytes));
    EQ_CUBLAS_TRY(cublas.cublasSetAtomicsMode(gemm.blas, CUBLAS_ATOMICS_NOT_ALLOWED));
    int version = 0;
    EQ_CUBLAS_TRY(cublas.cublasGetVersion_v2(gemm.blas, &version));
    eq_cuda_note_cublas_version(version);
    gemm.ready = 1;
cleanup:
    if (st != EQ_OK && created) cublas.cublasDestroy_v2(gemm.blas);
    return st;
}

/* C[M,N] = A[M,K] B[N,K]^T on packed device buffers, queued on the stream (waited for when
 * EQUIV_CUDA_TIMES times it). Called with gemm_lock held, the device open. */
static eq_status gemm_device_locked(eq_dtype dt, int64_t M, int64_t N, int64_t K, const void *dA, const void *dB,
                                    void *dC)
{
    eq_status st = EQ_OK;
    const double t0 = eq_cuda_timing() ? eq_cuda_now() : 0;
    /* Row-major C[M,N] = A[M,K] B[N,K]^T is column-major C^T[N,M] = B^T[N,K]... as cuBLAS sees the
     * packed buffers: B is a column-major K x N matrix (so op T), A a column-major K x M one. */
    const int m = (int)N, n = (int)M, k = (int)K;
    if (dt == EQ_FP64) {
        const double one = 1.0, zero = 0.0;
        EQ_CUBLAS_TRY(cublas.cublasSetMathMode(gemm.blas, CUBLAS_PEDANTIC_MATH));
        EQ_CUBLAS_TRY(cublas.cublasDgemm_v2(gemm.blas, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &one, dB, k, dA, k, &zero, dC, m));
    } else {
        const float one = 1.0f, zero = 0.0f;
        const cudaDataType type = dt == EQ_BF16 ? CUDA_R_16BF : CUDA_R_32F;
        const cublasComputeType_t compute = dt == EQ_BF16 ? CUBLAS_COMPUTE_32F : CUBLAS_COMPUTE_32F_PEDANTIC;
        const cublasMath_t bf16_math =
            (cublasMath_t)(CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION);
        EQ_CUBLAS_TRY(cublas.cublasSetMathMode(gemm.blas, dt == EQ_BF16 ? bf16_math : CUBLAS_PEDANTIC_MATH));
        EQ_CUBLAS_TRY(cublas.cublasGemmEx(gemm.blas, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &one, dB, type, k, dA, type, k, &zero, dC,
                                          type, m, compute, CUBLAS_GEMM_DEFAULT));
    }
    if (eq_cuda_timing()) {
        EQ_CUDA_TRY(cudaStreamSynchronize(eq_cuda_stream()));
        eq_cuda_time_add(EQ_CUDA_T_GEMM, eq_cuda_now() - t0, (size_t)(2 * M * N * K)); /* FLOPs */
    }
cleanup:
    return st;
}

static eq_status gemm_locked(eq_dtype dt, int64_t M, int64_t N, int64_t K, const void *A, int64_t lda,
                             const void *B, int64_t ldb, void *C, int64_t ldc)
{
    eq_status st = EQ_OK;
    const size_t elem = eq_dtype_size(dt);
    EQ_TRY(open_locked());
    EQ_TRY(eq_cuda_buffer_reserve(&gemm.a, (size_t)(M * K) * elem, "GEMM input A"));
    EQ_TRY(eq_cuda_buffer_reserve(&gemm.b, (size_t)(N * K) * elem, "GEMM input B"));
    EQ_TRY(eq_cuda_buffer_reserve(&gemm.c, (size_t)(M * N) * elem, "GEMM output C"));
    EQ_TRY(eq_cuda_upload_rows(gemm.a.ptr, A, (size_t)K * elem, (size_t)M, (size_t)lda * elem));
    EQ_TRY(eq_cuda_upload_rows(gemm.b.ptr, B, (size_t)K * elem, (size_t)N, (size_t)ldb * elem));
    EQ_TRY(gemm_device_locked(dt, M, N, K, gemm.a.ptr, gemm.b.ptr, gemm.c.ptr));
    EQ_TRY(eq_cuda_download_rows(C, gemm.c.ptr, (size_t)N * elem, (size_t)M, (size_t)ldc * elem));
cleanup:
    return st;
}

/* One attention head on the device: scores[S,S] = Q K^T, P = the causal softmax of scores /
 * sqrt(D), ctx = P V, with V given transposed (VT [D,S], packed) as eq_gemm hands it to gemm_nt.
 * The same cuBLAS calls on the same packed shapes and the same softmax kernel as the three calls
 * it replaces (so the same bits), but the two [S,S] matrices stay on the device: at S = 4096 they
 * are 64x the bytes of Q, K, V and ctx together, and each crossed the bus twice. */
static eq_status attention_head_locked(eq_dtype dt, int64_t S, int64_t D, const void *Q, const void *K,
                                       int64_t qkv_ld, const void *VT, void *ctx, int64_t ctx_ld)
{
    eq_status st = EQ_OK;
    const size_t elem = eq_dtype_size(dt);
    EQ_TRY(open_locked());
    EQ_TRY(eq_cuda_buffer_reserve(&gemm.a, (size_t)(S * D) * elem, "attention Q, then ctx"));
    EQ_TRY(eq_cuda_buffer_reserve(&gemm.b, (size_t)(S * D) * elem, "attention K, then V^T"));
    EQ_TRY(eq_cuda_buffer_reserve(&gemm.c, (size_t)(S * S) * elem, "attention scores"));
    EQ_TRY(eq_cuda_buffer_reserve(&gemm.p, (size_t)(S * S) * elem, "attention probabilities"));
    EQ_TRY(eq_cuda_upload_rows(gemm.a.ptr, Q, (size_t)D * elem, (size_t)S, (size_t)qkv_ld * elem));
    EQ_TRY(eq_cuda_upload_rows(gemm.b.ptr, K, (size_t)D * elem, (size_t)S, (size_t)qkv_ld * elem));
    EQ_TRY(gemm_device_locked(dt, S, S, D, gemm.a.ptr, gemm.b.ptr, gemm.c.ptr)); /* Q K^T */
    EQ_CUDA_TRY(eq_cuda_causal_softmax((int)dt, S, D, gemm.c.ptr, gemm.p.ptr, eq_cuda_stream()));
    EQ_TRY(eq_cuda_sync("the causal softmax kernel"));
    EQ_TRY(eq_cuda_upload_rows(gemm.b.ptr, VT, (size_t)S * elem, (size_t)D, (size_t)S * elem));
    EQ_TRY(gemm_device_locked(dt, S, D, S, gemm.p.ptr, gemm.b.ptr, gemm.a.ptr)); /* P V */
    EQ_TRY(eq_cuda_download_rows(ctx, gemm.a.ptr, (size_t)D * elem, (size_t)S, (size_t)ctx_ld * elem));
cleanup:
    return st;
}

static eq_status cuda_attention_head(eq_dtype dt, int64_t S, int64_t D, const void *Q, const void *K, int64_t qkv_ld,
                                     const void *VT, void *ctx, int64_t ctx_ld)
{
    if (S < 1 || D < 1 || qkv_ld < D || ctx_ld < D || S > INT32_MAX || (int)dt < 0 || (int)dt >= EQ_DTYPE_COUNT)
        return EQ_FAIL(EQ_ERR_INTERNAL, "attention head with bad sizes S=%lld D=%lld", (long long)S, (long long)D);
    pthread_mutex_lock(&gemm_lock);
    eq_status st = attention_head_locked(dt, S, D, Q, K, qkv_ld, VT, ctx, ctx_ld);
    pthread_mutex_unlock(&gemm_lock);
    return st;
}

static eq_status cuda_gemm_nt(eq_dtype dt, int64_t M, int64_t N, int64_t K, const void *A, int64_t lda,
                              const void *B, int64_t ldb, void *C, int64_t ldc)
{
    if (M < 1 || N < 1 || K < 1 || lda < K || ldb < K || ldc < N || M > INT32_MAX || N > INT32_MAX ||
        K > INT32_MAX || (int)dt < 0 || (int)dt >= EQ_DTYPE_COUNT)
        return EQ_FAIL(EQ_ERR_INTERNAL, "GEMM with bad sizes M=%lld N=%lld K=%lld", (long long)M, (long long)N,
                       (long long)K);
    pthread_mutex_lock(&gemm_lock);
    eq_status st = gemm_locked(dt, M, N, K, A, lda, B, ldb, C, ldc);
    pthread_mutex_unlock(&gemm_lock);
    return st;
}

static const char *cuda_describe(char *buf, size_t len)
{
    int version = 0;
    pthread_mutex_lock(&gemm_lock);
    if (gemm.ready) cublas.cublasGetVersion_v2(gemm.blas, &version);
    if (gemm.ready)
        snprintf(buf, len,
                 "cuBLAS %d.%d.%d on %s (sm_%d%d, %d SMs), device %d; fp32 pedantic (no TF32), bf16 with "
                 "CUBLAS_COMPUTE_32F, one stream",
                 version / 10000, version / 100 % 100, version % 100, gemm.device_name, gemm.cc_major,
                 gemm.cc_minor, gemm.sm_count, eq_cuda_device());
    else snprintf(buf, len, "cuBLAS (device not opened)");
    pthread_mutex_unlock(&gemm_lock);
    return buf;
}

const eq_backend eq_backend_cuda = {
    .name = "cuda",
    .gemm_nt = cuda_gemm_nt,
    .describe = cuda_describe,
    .release = cuda_release,
    .ops = &eq_backend_cuda_ops,
    .attention_head = cuda_attention_head,
};

eq_status eq_backend_cuda_time_gemm(eq_dtype dt, int64_t M, int64_t N, int64_t K, int reps, double *seconds)
{
    eq_status st = EQ_OK;
    const size_t elem = eq_dtype_size(dt);
    eq_cuda_buffer a = {0}, b = {0}, c = {0};
    eq_tensor host = {0};
    cudaEvent_t start = NULL, stop = NULL;
    float ms = 0;
    pthread_mutex_lock(&gemm_lock);
    EQ_TRY(open_locked());
    EQ_TRY(eq_tensor_init_2d(&host, dt, M > N ? M : N, K));
    eq_rng_fill_normal(&host, 11, "bench", 1.0);
    EQ_TRY(eq_cuda_buffer_reserve(&a, (size_t)(M * K) * elem, "bench A"));
    EQ_TRY(eq_cuda_buffer_reserve(&b, (size_t)(N * K) * elem, "bench B"));
    EQ_TRY(eq_cuda_buffer_reserve(&c, (size_t)(M * N) * elem, "bench C"));
    EQ_TRY(eq_cuda_upload_rows(a.ptr, host.data, (size_t)(M * K) * elem, 1, (size_t)(M * K) * elem));
    EQ_TRY(eq_cuda_upload_rows(b.ptr, host.data, (size_t)(N * K) * elem, 1, (size_t)(N * K) * elem));
    EQ_CUDA_TRY(cudaEventCreate(&start));
    EQ_CUDA_TRY(cudaEventCreate(&stop));
    EQ_TRY(gemm_device_locked(dt, M, N, K, a.ptr, b.ptr, c.ptr)); /* warm-up: cuBLAS picks and loads its kernel */
    EQ_CUDA_TRY(cudaEventRecord(start, eq_cuda_stream()));
    for (int r = 0; r < reps; r++) EQ_TRY(gemm_device_locked(dt, M, N, K, a.ptr, b.ptr, c.ptr));
    EQ_CUDA_TRY(cudaEventRecord(stop, eq_cuda_stream()));
    EQ_CUDA_TRY(cudaEventSynchronize(stop));
    EQ_CUDA_TRY(cudaEventElapsedTime(&ms, start, stop));
    *seconds = 1e-3 * (double)ms / reps;
cleanup:
    if (start != NULL) cudaEventDestroy(start);
    if (stop != NULL) cudaEventDestroy(stop);
    eq_cuda_buffer_free(&a), eq_cuda_buffer_free(&b), eq_cuda_buffer_free(&c);
    eq_tensor_free(&host);
    pthread_mutex_unlock(&gemm_lock);
    return st;
}

eq_status eq_backend_cuda_open(void)
{
    pthread_mutex_lock(&gemm_lock);
    eq_status st = open_locked();
    pthread_mutex_unlock(&gemm_lock);
    return st;
}
