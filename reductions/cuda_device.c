/* The CUDA device, its stream and device buffers (reductions/cuda_device.h). */
#include "reductions/cuda_device.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "equiv_config.h"
#if EQUIV_HAVE_NCCL
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes" /* nccl.h's ncclGroupStart() */
#include <nccl.h>
#pragma GCC diagnostic pop
#endif
#include "reductions/world.h"
#include "reductions/gpu_describe.h"

static struct {
    int open;
    int device;
    cudaStream_t stream;
    char who[48]; /* "rank 3/8: " under a multi-process transport, else "" */
} dev = {0, -1, NULL, ""};

/* eq_gpu_describe's line, made once per opened device (every run's dump asks for it; NVML is
 * loaded to make it); cleared when cuBLAS is noted or the device closed. */
static char described[320];

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
    if (local_rank < 0) { /* the launcher's local rank, if it gives one (reductions/world.h) */
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

static struct {
    int on; /* -1 not read yet */
    double seconds[EQ_CUDA_T_COUNT];
    size_t bytes[EQ_CUDA_T_COUNT];
    long calls[EQ_CUDA_T_COUNT];
} timing = {-1, {0}, {0}, {0}};

int eq_cuda_timing(void)
{
    if (timing.on < 0) timing.on = getenv("EQUIV_CUDA_TIMES") != NULL;
    return timing.on;
}

double eq_cuda_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void eq_cuda_time_add(eq_cuda_time_kind kind, double seconds, size_t bytes)
{
    if ((unsigned)kind >= EQ_CUDA_T_COUNT) return;
    timing.seconds[kind] += seconds;
    timing.bytes[kind] += bytes;
    timing.calls[kind]++;
}

static void print_timing(void)
{
    if (!eq_cuda_timing()) return;
    const double gb = 1e-9;
    fprintf(stderr,
            "equiv: device time: uploads %.2f GB in %.3f s (%ld), downloads %.2f GB in %.3f s (%ld), cuBLAS GEMMs "
            "%.2f TFLOP in %.3f s (%ld, %.1f TFLOP/s), kernels %.3f s (%ld)\n",
            (double)timing.bytes[EQ_CUDA_T_UPLOAD] * gb, timing.seconds[EQ_CUDA_T_UPLOAD], timing.calls[EQ_CUDA_T_UPLOAD],
            (double)timing.bytes[EQ_CUDA_T_DOWNLOAD] * gb, timing.seconds[EQ_CUDA_T_DOWNLOAD],
            timing.calls[EQ_CUDA_T_DOWNLOAD], (double)timing.bytes[EQ_CUDA_T_GEMM] * 1e-12, timing.seconds[EQ_CUDA_T_GEMM],
            timing.calls[EQ_CUDA_T_GEMM],
            timing.seconds[EQ_CUDA_T_GEMM] > 0 ? (double)timing.bytes[EQ_CUDA_T_GEMM] * 1e-12 / timing.seconds[EQ_CUDA_T_GEMM]
                                               : 0.0,
            timing.seconds[EQ_CUDA_T_KERNEL], timing.calls[EQ_CUDA_T_KERNEL]);
    memset(timing.seconds, 0, sizeof timing.seconds);
    memset(timing.bytes, 0, sizeof timing.bytes);
    memset(timing.calls, 0, sizeof timing.calls);
}

void eq_cuda_close(void)
{
    if (!dev.open) return;
    print_timing();
    described[0] = '\0';
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
    const double t0 = eq_cuda_timing() ? eq_cuda_now() : 0;
    EQ_CUDA_TRY(cudaMemcpy2DAsync(device_ptr, row_bytes, host, host_pitch, row_bytes, rows, cudaMemcpyHostToDevice,
                                  dev.stream));
    EQ_CUDA_TRY(cudaStreamSynchronize(dev.stream));
    if (eq_cuda_timing()) eq_cuda_time_add(EQ_CUDA_T_UPLOAD, eq_cuda_now() - t0, row_bytes * rows);
cleanup:
    return st;
}

eq_status eq_cuda_download_rows(void *host, const void *device_ptr, size_t row_bytes, size_t rows, size_t host_pitch)
{
    eq_status st = EQ_OK;
    if (rows == 0 || row_bytes == 0) return EQ_OK;
    const double t0 = eq_cuda_timing() ? eq_cuda_now() : 0;
    EQ_CUDA_TRY(cudaMemcpy2DAsync(host, host_pitch, device_ptr, row_bytes, row_bytes, rows, cudaMemcpyDeviceToHost,
                                  dev.stream));
    EQ_CUDA_TRY(cudaStreamSynchronize(dev.stream));
    if (eq_cuda_timing()) eq_cuda_time_add(EQ_CUDA_T_DOWNLOAD, eq_cuda_now() - t0, row_bytes * rows);
cleanup:
    return st;
}

eq_status eq_cuda_sync(const char *what)
{
    eq_status st = EQ_OK;
    const double t0 = eq_cuda_timing() ? eq_cuda_now() : 0;
    cudaError_t err = cudaGetLastError(); /* a launch that failed to start */
    if (err == cudaSuccess) err = cudaStreamSynchronize(dev.stream);
    if (eq_cuda_timing()) eq_cuda_time_add(EQ_CUDA_T_KERNEL, eq_cuda_now() - t0, 0);
    if (err != cudaSuccess)
        st = EQ_FAIL(err == cudaErrorMemoryAllocation ? EQ_ERR_NOMEM : EQ_ERR_BACKEND, "%s%s on device %d: %s (%s)",
                     dev.who, what, dev.device, cudaGetErrorString(err), cudaGetErrorName(err));
    return st;
}

/* cuBLAS's version once --backend cuda has loaded it (models/backend_cuda.c), 0 before. */
static int cublas_version;

void eq_cuda_note_cublas_version(int version)
{
    cublas_version = version;
    described[0] = '\0';
}

/* The driver's own version ("580.159.04"): NVML when its library loads, else the kernel module's
 * line in /proc; "" when neither answers. */
static void driver_version(char *buf, size_t len)
{
    buf[0] = '\0';
    void *nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (nvml != NULL) {
        int (*init)(void) = (int (*)(void))dlsym(nvml, "nvmlInit_v2");
        int (*version)(char *, unsigned) = (int (*)(char *, unsigned))dlsym(nvml, "nvmlSystemGetDriverVersion");
        int (*shutdown)(void) = (int (*)(void))dlsym(nvml, "nvmlShutdown");
        if (init != NULL && version != NULL && shutdown != NULL && init() == 0) {
            if (version(buf, (unsigned)len) != 0) buf[0] = '\0';
            shutdown();
        }
        dlclose(nvml);
    }
    if (buf[0] != '\0') return;
    FILE *fp = fopen("/proc/driver/nvidia/version", "r");
    char line[256];
    if (fp == NULL) return;
    if (fgets(line, sizeof line, fp) != NULL) { /* "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04  ..." */
        const char *k = strstr(line, "Kernel Module");
        if (k != NULL) {
            k += strlen("Kernel Module");
            while (*k == ' ') k++;
            snprintf(buf, len, "%.*s", (int)strcspn(k, " \n"), k);
        }
    }
    fclose(fp);
}

const char *eq_gpu_describe(char *buf, size_t len)
{
    struct cudaDeviceProp prop;
    int driver_api = 0, runtime = 0;
    char driver[64];
    if (len == 0) return buf;
    buf[0] = '\0';
    if (!dev.open) return buf;
    if (described[0] != '\0') {
        snprintf(buf, len, "%s", described);
        return buf;
    }
    if (cudaGetDeviceProperties(&prop, dev.device) != cudaSuccess) return buf;
    cudaDriverGetVersion(&driver_api);
    cudaRuntimeGetVersion(&runtime);
    driver_version(driver, sizeof driver);
    size_t w = (size_t)snprintf(buf, len, "%s (sm_%d%d, %d SMs, %zu GiB), driver %s (CUDA %d.%d), runtime %d.%d", prop.name,
                                prop.major, prop.minor, prop.multiProcessorCount, prop.totalGlobalMem >> 30,
                                driver[0] ? driver : "unknown", driver_api / 1000, driver_api % 1000 / 10,
                                runtime / 1000, runtime % 1000 / 10);
    if (w < len && cublas_version > 0)
        w += (size_t)snprintf(buf + w, len - w, ", cuBLAS %d.%d.%d", cublas_version / 10000, cublas_version / 100 % 100,
                              cublas_version % 100);
#if EQUIV_HAVE_NCCL
    int nccl = 0;
    if (w < len && ncclGetVersion(&nccl) == ncclSuccess) /* NCCL_VERSION_CODE: major*10000 + minor*100 + patch */
        snprintf(buf + w, len - w, ", NCCL %d.%d.%d", nccl / 10000, nccl / 100 % 100, nccl % 100);
#endif
    snprintf(described, sizeof described, "%s", buf);
    return buf;
}
