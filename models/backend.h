/* Where compute runs. Every backend offers the same ops with the same rounding contract, so a
 * difference between layouts is due to the layout, and a difference between backends is named.
 *
 * GEMM contract (cuBLAS's CUBLAS_COMPUTE_32F semantic): C = A * B^T with
 *   fp32: fp32 inputs, fp32 accumulation, fp32 output;
 *   bf16: bf16 inputs widened exactly to fp32, fp32 accumulation, output rounded once to bf16;
 *   fp64: fp64 throughout (the truth runs). */
#ifndef EQUIV_MODELS_BACKEND_H
#define EQUIV_MODELS_BACKEND_H

#include <stdint.h>

#include "harness/base/status.h"
#include "harness/base/tensor.h"
#include "reductions/collectives.h"
#include "reductions/gpu_describe.h" /* eq_gpu_describe, for the callers that name the backend */

/* The row and element ops a backend runs, with the signatures and rounding contract of
 * models/ops.h (eq_layernorm_forward, eq_gelu_forward, and the causal softmax of the attention).
 * The models call them through step->backend->ops. */
typedef struct {
    eq_status (*layernorm_forward)(eq_dtype dt, int64_t rows, int64_t H, void *out, double *mean, double *rstd,
                                   const void *in, const void *gamma, const void *beta);
    eq_status (*gelu_forward)(eq_dtype dt, int64_t n, void *out, const void *in);
    /* P[S,S] = softmax over j <= i of scores[i,j] / sqrt(D), 0 for j > i (models/ops.c). */
    eq_status (*causal_softmax)(eq_dtype dt, int64_t S, int64_t D, const void *scores, void *P);
} eq_backend_ops;

typedef struct {
    const char *name;
    /* C[M,N] (row stride ldc) = A[M,K] (row stride lda) * B[N,K]^T (row stride ldb), in dtype dt.
     * C is overwritten. */
    eq_status (*gemm_nt)(eq_dtype dt, int64_t M, int64_t N, int64_t K, const void *A, int64_t lda,
                         const void *B, int64_t ldb, void *C, int64_t ldc);
    /* One line on what runs underneath ("OpenBLAS 0.3.21 SKYLAKEX, 2 threads"). */
    const char *(*describe)(char *buf, size_t len);
    /* Frees what the backend holds (device buffers, handles); NULL when it holds nothing. Safe to
     * call twice; the backend opens again on its next use. */
    void (*release)(void);
    const eq_backend_ops *ops;
    /* Optional (NULL: the model makes the three calls): one attention head's forward,
     * ctx[S,D] (row stride ctx_ld) = causal_softmax(Q K^T / sqrt(D)) V, for Q, K [S,D] (row stride
     * qkv_ld) and VT [D,S] packed. It must give the bits of gemm_nt(Q, K), ops->causal_softmax and
     * gemm_nt(P, VT) made one after the other; a device backend keeps the [S,S] matrices where
     * they are computed. */
    eq_status (*attention_head)(eq_dtype dt, int64_t S, int64_t D, const void *Q, const void *K, int64_t qkv_ld,
                                const void *VT, void *ctx, int64_t ctx_ld);
    /* 1 where a GEMM over some rows and a prefix of the columns rounds every element as the full
     * GEMM does (the CPU backend, by construction); then the attention may skip the blocks of its
     * scores above the diagonal. cuBLAS picks a kernel per shape: 0. */
    int shape_invariant;
} eq_backend;

/* GEMMs through OpenBLAS, or a fixed-order C GEMM where OpenBLAS fails its shape probe
 * (models/backend_cpu.c). OpenBLAS is opened on first use (harness/base/openblas.h: the kernels and
 * threads equiv asks of it, and why); eq_backend_cpu_open opens it now, so that a missing library
 * is one error before a run starts (EQ_ERR_BACKEND "cannot load OpenBLAS: ..."); a program that
 * takes eq_backend_cpu directly gets that error from its first GEMM instead. */
extern const eq_backend eq_backend_cpu;
eq_status eq_backend_cpu_open(void);

/* The CPU backend with every fp32 GEMM's inputs rounded to TF32 (10-bit mantissa, to nearest, ties
 * to even) and the sum in fp32, as an NVIDIA GPU computes an fp32 GEMM with TF32 allowed; all else
 * the CPU backend's (models/backend_tf32.c). Named "cpu": the dump's numerics attribute says TF32. */
extern const eq_backend eq_backend_cpu_tf32;
float eq_tf32_round(float x);
eq_status eq_tf32_gemm_nt(eq_dtype dt, int64_t M, int64_t N, int64_t K, const void *A, int64_t lda, const void *B,
                          int64_t ldb, void *C, int64_t ldc);
const char *eq_tf32_describe(char *buf, size_t len);

/* Built with the cuda feature only (equiv_config.h: EQUIV_HAVE_CUDA): cuBLAS GEMMs
 * (models/backend_cuda.c). eq_backend_cuda_open picks the device and creates the handles now, so a
 * missing device is reported before anything runs. */
extern const eq_backend eq_backend_cuda;
eq_status eq_backend_cuda_open(void);
/* Seconds per C[M,N] = A[M,K] B[N,K]^T on device-resident operands (normal random values), the
 * backend's own cuBLAS call and math mode, the mean of `reps` after one warm-up, timed with CUDA
 * events: what the GEMM costs without the copies (models/gemm_cuda_bench.c). */
eq_status eq_backend_cuda_time_gemm(eq_dtype dt, int64_t M, int64_t N, int64_t K, int reps, double *seconds);
extern const eq_backend_ops eq_backend_cuda_ops; /* models/ops_cuda.c */

/* The backends --backend names, one row each (models/backends.c): what the driver asks instead of
 * the name, and what `equiv --list` prints. A new backend is its eq_backend and a row. */
typedef struct {
    const char *name;          /* --backend NAME */
    const char *summary;       /* one line for equiv --list */
    const eq_backend *backend; /* NULL: not in this build */
    eq_status (*open)(void);   /* readies it before anything runs (picks the device); NULL: nothing to */
    /* The transport of a run whose ranks all live in this process (--comm sim): the emulated
     * collectives, folded where this backend keeps its data. */
    const eq_transport *in_process;
    int host; /* 1: the CPU's ordered GEMMs: host-only models and --algo tp_invariant run on it */
    const char *lacking, *remedy; /* a build without it: what it lacks ("CUDA"), and how to get it */
} eq_backend_choice;

extern const eq_backend_choice eq_backend_choices[];
extern const int eq_backend_choice_count;

/* The row named `name` (built or not); EQ_ERR_USAGE "unknown backend 'NAME' (known: cpu, cuda)". */
eq_status eq_backend_choice_find(const char *name, const eq_backend_choice **out);

/* "cpu" -> the CPU backend, OpenBLAS opened (EQ_ERR_BACKEND "cannot load OpenBLAS: ..."). "cuda" ->
 * the CUDA backend, opened (EQ_ERR_BACKEND "no CUDA device" when there is none), or EQ_ERR_USAGE "equiv was built without CUDA". EQ_ERR_USAGE otherwise. */
eq_status eq_backend_find(const char *name, const eq_backend **out);

/* The CPU model ("AMD EPYC 9R14 96-Core Processor", from /proc/cpuinfo; "unknown" elsewhere). */
const char *eq_cpu_model(char *buf, size_t len);

#endif
