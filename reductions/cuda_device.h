/* The CUDA device equiv runs on (built only with the cuda feature): which device, one stream,
 * device buffers owned by the structs that use them, and the check macros every CUDA, cuBLAS and
 * NCCL call goes through.
 *
 * One device and one stream per process: cuBLAS is bit-wise reproducible run to run only on one
 * stream (cuBLAS Library User Guide, "Results reproducibility"), and every copy and kernel is
 * ordered on it, so nothing races. A process under --comm nccl uses the device of its local rank. */
#ifndef EQUIV_REDUCTIONS_CUDA_DEVICE_H
#define EQUIV_REDUCTIONS_CUDA_DEVICE_H

#include <stddef.h>

#include <cuda_runtime_api.h>

#include "harness/base/status.h"

/* A device allocation grown as needed: reserve() keeps the old one when it is large enough. */
typedef struct {
    void *ptr;
    size_t bytes;
} eq_cuda_buffer;

/* Picks the device (EQUIV_CUDA_DEVICE, else `local_rank` modulo the count when >= 0, else the
 * launcher's local rank (eq_rank_env_read: OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID,
 * MV2_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID) modulo the count, else 0), creates the stream. A
 * malformed launcher variable is EQ_ERR_USAGE naming it. Idempotent. EQ_ERR_BACKEND "no
 * CUDA device" when cudaGetDeviceCount fails or finds none (the driver's reason in the message).
 * CUDA is used from the thread that opened it only (cudaSetDevice is per thread): the CPU GEMM's
 * threads and the MPI watchdog never call it. */
eq_status eq_cuda_open(int local_rank);
/* The stream every copy and kernel runs on (after eq_cuda_open). */
cudaStream_t eq_cuda_stream(void);
/* The device number chosen, -1 before eq_cuda_open. */
int eq_cuda_device(void);
/* Whether a usable device exists, without opening it: 1 yes, 0 no (*why says why). For tests
 * that exit 77 (meson's skip) when there is none. */
int eq_cuda_available(const char **why);
/* Under a multi-process transport: this process's rank, named in every device error from here on
 * ("rank 3/8: cudaMalloc ..."). */
void eq_cuda_set_rank(int rank, int size);
/* Where the device time goes, when EQUIV_CUDA_TIMES is set (any value): copies host -> device and
 * back (bytes and seconds), cuBLAS GEMMs and the ops' kernels (seconds, each waited for, so the
 * times add up to the wall time they took). Printed to stderr as one line by eq_cuda_close. The
 * waits change no result: every call is ordered on the one stream anyway. */
typedef enum { EQ_CUDA_T_UPLOAD, EQ_CUDA_T_DOWNLOAD, EQ_CUDA_T_GEMM, EQ_CUDA_T_KERNEL, EQ_CUDA_T_COUNT } eq_cuda_time_kind;
int eq_cuda_timing(void);
/* Monotonic seconds, for the callers that time a span. */
double eq_cuda_now(void);
void eq_cuda_time_add(eq_cuda_time_kind kind, double seconds, size_t bytes); /* GEMMs: FLOPs in bytes' place */

/* Called by the cuBLAS backend once it has loaded cuBLAS (cublasGetVersion's number), so that
 * eq_gpu_describe (reductions/gpu_describe.h) can name it. */
void eq_cuda_note_cublas_version(int version);
/* Destroys the stream. Safe to call twice. Buffers are freed by their owners first. */
void eq_cuda_close(void);

/* Grows *b to at least `bytes` (contents lost when it grows). EQ_ERR_NOMEM naming the size and the
 * device's free memory when cudaMalloc fails (an out-of-memory device is an error, not a crash). */
eq_status eq_cuda_buffer_reserve(eq_cuda_buffer *b, size_t bytes, const char *what);
void eq_cuda_buffer_free(eq_cuda_buffer *b);

/* Host -> device and back for a matrix of `rows` rows of `row_bytes`, host row stride
 * `host_pitch` bytes, device rows packed. Synchronous on the stream. */
eq_status eq_cuda_upload_rows(void *dev, const void *host, size_t row_bytes, size_t rows, size_t host_pitch);
eq_status eq_cuda_download_rows(void *host, const void *dev, size_t row_bytes, size_t rows, size_t host_pitch);
/* Waits for the stream; a kernel's error (launch or execution) surfaces here. */
eq_status eq_cuda_sync(const char *what);

/* Within a function that has `eq_status st` and a `cleanup:` label. EQ_FAIL records file:line. */
#define EQ_CUDA_TRY(call)                                                                             \
    do {                                                                                              \
        cudaError_t eq_cuda_err_ = (call);                                                            \
        if (eq_cuda_err_ != cudaSuccess) {                                                            \
            st = EQ_FAIL(eq_cuda_err_ == cudaErrorMemoryAllocation ? EQ_ERR_NOMEM : EQ_ERR_BACKEND,    \
                         "%s: %s (%s)", #call, cudaGetErrorString(eq_cuda_err_),                       \
                         cudaGetErrorName(eq_cuda_err_));                                             \
            goto cleanup;                                                                             \
        }                                                                                             \
    } while (0)

#endif
