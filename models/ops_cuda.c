/* The device ops' host side: uploads, launches, downloads (models/ops_cuda.h). */
#include "models/ops_cuda.h"

#include <pthread.h>

#include "models/backend.h"
#include "reductions/cuda_device.h"
#include "models/ops.h"
#include "models/ops_cuda_kernel.h"

_Static_assert(EQ_FP32 == 0 && EQ_BF16 == 1 && EQ_FP64 == 2, "models/ops_cuda.cu mirrors eq_dtype");

#define OP_BUFFERS 6
static eq_cuda_buffer op_buf[OP_BUFFERS];
static pthread_mutex_t op_lock = PTHREAD_MUTEX_INITIALIZER;

void eq_ops_cuda_release(void)
{
    pthread_mutex_lock(&op_lock);
    for (int i = 0; i < OP_BUFFERS; i++) eq_cuda_buffer_free(&op_buf[i]);
    pthread_mutex_unlock(&op_lock);
}

/* Device buffer i holding a copy of host[bytes] (host may be NULL: room only). */
static eq_status stage(int i, const void *host, size_t bytes, const char *what)
{
    eq_status st = EQ_OK;
    EQ_TRY(eq_cuda_buffer_reserve(&op_buf[i], bytes, what));
    if (host != NULL) EQ_TRY(eq_cuda_upload_rows(op_buf[i].ptr, host, bytes, 1, bytes));
cleanup:
    return st;
}

static eq_status layernorm_locked(eq_dtype dt, int64_t rows, int64_t H, void *out, double *mean, double *rstd,
                                  const void *in, const void *gamma, const void *beta)
{
    eq_status st = EQ_OK;
    const size_t elem = eq_dtype_size(dt), n = (size_t)(rows * H);
    EQ_TRY(eq_cuda_open(-1));
    EQ_TRY(stage(0, in, n * elem, "LayerNorm input"));
    EQ_TRY(stage(1, gamma, (size_t)H * elem, "LayerNorm gamma"));
    EQ_TRY(stage(2, beta, (size_t)H * elem, "LayerNorm beta"));
    EQ_TRY(stage(3, NULL, n * elem, "LayerNorm output"));
    EQ_TRY(stage(4, NULL, (size_t)rows * sizeof(double), "LayerNorm mean"));
    EQ_TRY(stage(5, NULL, (size_t)rows * sizeof(double), "LayerNorm rstd"));
    EQ_CUDA_TRY(eq_cuda_layernorm_forward((int)dt, rows, H, op_buf[3].ptr, op_buf[4].ptr, op_buf[5].ptr, op_buf[0].ptr,
                                          op_buf[1].ptr, op_buf[2].ptr, EQ_LAYERNORM_EPS, eq_cuda_stream()));
    EQ_TRY(eq_cuda_sync("the LayerNorm kernel"));
    EQ_TRY(eq_cuda_download_rows(out, op_buf[3].ptr, n * elem, 1, n * elem));
    EQ_TRY(eq_cuda_download_rows(mean, op_buf[4].ptr, (size_t)rows * sizeof(double), 1, (size_t)rows * sizeof(double)));
    EQ_TRY(eq_cuda_download_rows(rstd, op_buf[5].ptr, (size_t)rows * sizeof(double), 1, (size_t)rows * sizeof(double)));
cleanup:
    return st;
}

static eq_status cuda_layernorm_forward(eq_dtype dt, int64_t rows, int64_t H, void *out, double *mean, double *rstd,
                                        const void *in, const void *gamma, const void *beta)
{
    if (rows < 0 || H < 1)
        return EQ_FAIL(EQ_ERR_INTERNAL, "layernorm over %lld rows of %lld", (long long)rows, (long long)H);
    if (rows == 0) return EQ_OK;
    pthread_mutex_lock(&op_lock);
    eq_status st = layernorm_locked(dt, rows, H, out, mean, rstd, in, gamma, beta);
    pthread_mutex_unlock(&op_lock);
    return st;
}

static eq_status gelu_locked(eq_dtype dt, int64_t n, void *out, const void *in)
{
    eq_status st = EQ_OK;
    const size_t bytes = (size_t)n * eq_dtype_size(dt);
    EQ_TRY(eq_cuda_open(-1));
    EQ_TRY(stage(0, in, bytes, "GELU input"));
    EQ_TRY(stage(1, NULL, bytes, "GELU output"));
    EQ_CUDA_TRY(eq_cuda_gelu_forward((int)dt, n, op_buf[1].ptr, op_buf[0].ptr, eq_cuda_stream()));
    EQ_TRY(eq_cuda_sync("the GELU kernel"));
    EQ_TRY(eq_cuda_download_rows(out, op_buf[1].ptr, bytes, 1, bytes));
cleanup:
    return st;
}

static eq_status cuda_gelu_forward(eq_dtype dt, int64_t n, void *out, const void *in)
{
    if (n < 0) return EQ_FAIL(EQ_ERR_INTERNAL, "GELU over %lld elements", (long long)n);
    if (n == 0) return EQ_OK;
    pthread_mutex_lock(&op_lock);
    eq_status st = gelu_locked(dt, n, out, in);
    pthread_mutex_unlock(&op_lock);
    return st;
}

static eq_status softmax_locked(eq_dtype dt, int64_t S, int64_t D, const void *scores, void *P)
{
    eq_status st = EQ_OK;
    const size_t bytes = (size_t)(S * S) * eq_dtype_size(dt);
    EQ_TRY(eq_cuda_open(-1));
    EQ_TRY(stage(0, scores, bytes, "attention scores"));
    EQ_TRY(stage(1, NULL, bytes, "attention probabilities"));
    EQ_CUDA_TRY(eq_cuda_causal_softmax((int)dt, S, D, op_buf[0].ptr, op_buf[1].ptr, eq_cuda_stream()));
    EQ_TRY(eq_cuda_sync("the causal softmax kernel"));
    EQ_TRY(eq_cuda_download_rows(P, op_buf[1].ptr, bytes, 1, bytes));
cleanup:
    return st;
}

static eq_status cuda_causal_softmax(eq_dtype dt, int64_t S, int64_t D, const void *scores, void *P)
{
    if (S < 0 || D < 1) return EQ_FAIL(EQ_ERR_INTERNAL, "causal softmax: S=%lld D=%lld", (long long)S, (long long)D);
    if (S == 0) return EQ_OK;
    pthread_mutex_lock(&op_lock);
    eq_status st = softmax_locked(dt, S, D, scores, P);
    pthread_mutex_unlock(&op_lock);
    return st;
}

const eq_backend_ops eq_backend_cuda_ops = {
    .layernorm_forward = cuda_layernorm_forward,
    .gelu_forward = cuda_gelu_forward,
    .causal_softmax = cuda_causal_softmax,
};
