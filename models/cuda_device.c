/* The CUDA device, its stream and device buffers (models/cuda_device.h). */
#include "models/cuda_device.h"

#include <stdio.h>
#include <stdlib.h>

#include "harness/world.h"

static struct {
    int open;
    int device;
    cudaStream_t stream;
    char who[48]; /* "rank 3/8: " under a multi-process transport, else "" */
} dev = {0, -1, NULL, ""};

void eq_cuda_set_rank(int rank, int size) { snprintf(dev.who, sizeof dev.who, "rank %d/%d: ", rank, size); }

int eq_cuda_available(const char **why)
{
    static char reason[160];
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess) {
        snprintf(reason, sizeof reason, "cudaGetDeviceCount: %s", cudaGetErrorString(err));
        (void)cudaGetLastError(); /* clear the sticky-free error so later calls start clean */
        *why = reason;
        return 0;
    }
    if (count == 0) {
        *why = "cudaGetDeviceCount found 0 devices";
        return 0;
    }
    *why = "";
    return 1;
}

eq_status eq_cuda_open(int local_rank)
{
    eq_status st = EQ_OK;
    const char *why = "";
    int count = 0;
    if (dev.open) return EQ_OK;
    if (!eq_cuda_available(&why)) return EQ_FAIL(EQ_ERR_BACKEND, "%sno CUDA device (%s)", dev.who, why);
    EQ_CUDA_TRY(cudaGetDeviceCount(&count));
    if (local_rank < 0) { /* the launcher's local rank, if it gives one (harness/world.h) */
        eq_rank_env env;
        EQ_TRY(eq_rank_env_read(eq_env_get, &env));
        local_rank = env.local_rank;
    }
    int device = local_rank >= 0 ? local_rank % count : 0;
    const char *forced = getenv("EQUIV_CUDA_DEVICE");
    if (forced != NULL && forced[0] != '\0') {
        char *end = NULL;
        long d = strtol(forced, &end, 10);
        if (*end != '\0' || d < 0 || d >= count)
            return EQ_FAIL(EQ_ERR_USAGE, "EQUIV_CUDA_DEVICE=%s: not a device number below %d", forced, count);
        device = (int)d;
    }
    EQ_CUDA_TRY(cudaSetDevice(device));
    EQ_CUDA_TRY(cudaStreamCreateWithFlags(&dev.stream, cudaStreamNonBlocking));
    dev.device = device;
    dev.open = 1;
cleanup:
    return st;
}

cudaStream_t eq_cuda_stream(void) { return dev.stream; }

int eq_cuda_device(void) { return dev.open ? dev.device : -1; }

void eq_cuda_close(void)
{
    if (!dev.open) return;
    cudaStreamDestroy(dev.stream);
    dev.stream = NULL;
    dev.device = -1;
    dev.open = 0;
}

eq_status eq_cuda_buffer_reserve(eq_cuda_buffer *b, size_t bytes, const char *what)
{
    if (b->bytes >= bytes && b->ptr != NULL) return EQ_OK;
    eq_cuda_buffer_free(b);
    if (bytes == 0) return EQ_OK;
    cudaError_t err = cudaMalloc(&b->ptr, bytes);
    if (err != cudaSuccess) {
        size_t free_bytes = 0, total_bytes = 0;
        (void)cudaGetLastError();
        cudaMemGetInfo(&free_bytes, &total_bytes);
        b->ptr = NULL;
        return EQ_FAIL(err == cudaErrorMemoryAllocation ? EQ_ERR_NOMEM : EQ_ERR_BACKEND,
                       "%scudaMalloc of %zu bytes for %s on device %d: %s (%zu of %zu MiB free)", dev.who, bytes,
                       what, dev.device, cudaGetErrorString(err), free_bytes >> 20, total_bytes >> 20);
    }
    b->bytes = bytes;
    return EQ_OK;
}

void eq_cuda_buffer_free(eq_cuda_buffer *b)
{
    if (b->ptr != NULL) cudaFree(b->ptr);
    b->ptr = NULL;
    b->bytes = 0;
}

eq_status eq_cuda_upload_rows(void *device_ptr, const void *host, size_t row_bytes, size_t rows, size_t host_pitch)
{
    eq_status st = EQ_OK;
    if (rows == 0 || row_bytes == 0) return EQ_OK;
    EQ_CUDA_TRY(cudaMemcpy2DAsync(device_ptr, row_bytes, host, host_pitch, row_bytes, rows, cudaMemcpyHostToDevice,
                                  dev.stream));
    EQ_CUDA_TRY(cudaStreamSynchronize(dev.stream));
cleanup:
    return st;
}

eq_status eq_cuda_download_rows(void *host, const void *device_ptr, size_t row_bytes, size_t rows, size_t host_pitch)
{
    eq_status st = EQ_OK;
    if (rows == 0 || row_bytes == 0) return EQ_OK;
    EQ_CUDA_TRY(cudaMemcpy2DAsync(host, host_pitch, device_ptr, row_bytes, row_bytes, rows, cudaMemcpyDeviceToHost,
                                  dev.stream));
    EQ_CUDA_TRY(cudaStreamSynchronize(dev.stream));
cleanup:
    return st;
}

eq_status eq_cuda_sync(const char *what)
{
    eq_status st = EQ_OK;
    cudaError_t err = cudaGetLastError(); /* a launch that failed to start */
    if (err == cudaSuccess) err = cudaStreamSynchronize(dev.stream);
    if (err != cudaSuccess)
        st = EQ_FAIL(err == cudaErrorMemoryAllocation ? EQ_ERR_NOMEM : EQ_ERR_BACKEND, "%s%s on device %d: %s (%s)",
                     dev.who, what, dev.device, cudaGetErrorString(err), cudaGetErrorName(err));
    return st;
}
