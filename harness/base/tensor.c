#define _DEFAULT_SOURCE /* madvise */
#include "harness/base/tensor.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "harness/base/bf16.h"

size_t eq_dtype_size(eq_dtype dt)
{
    switch (dt) {
    case EQ_FP32: return 4;
    case EQ_BF16: return 2;
    case EQ_FP64: return 8;
    }
    return 0;
}

const char *eq_dtype_name(eq_dtype dt)
{
    switch (dt) {
    case EQ_FP32: return "fp32";
    case EQ_BF16: return "bf16";
    case EQ_FP64: return "fp64";
    }
    return "?";
}

eq_status eq_dtype_parse(const char *name, eq_dtype *out)
{
    for (int d = 0; d < EQ_DTYPE_COUNT; d++) {
        if (strcmp(name, eq_dtype_name((eq_dtype)d)) == 0) {
            *out = (eq_dtype)d;
            return EQ_OK;
        }
    }
    return EQ_FAIL(EQ_ERR_USAGE, "unknown dtype '%s' (known: fp32, bf16, fp64)", name);
}

double eq_dtype_unit_roundoff(eq_dtype dt)
{
    switch (dt) {
    case EQ_FP32: return 0x1p-24;
    case EQ_BF16: return 0x1p-8;
    case EQ_FP64: return 0x1p-53;
    }
    return 0.0;
}

int64_t eq_shape_numel(int ndim, const int64_t *shape)
{
    if (ndim < 1 || ndim > EQ_MAX_DIMS) return ndim == 0 ? 0 : -1;
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        if (shape[i] < 0 || __builtin_mul_overflow(n, shape[i], &n)) return -1;
    return n;
}

int64_t eq_shape_bytes(int ndim, const int64_t *shape, size_t elem_bytes)
{
    int64_t n = eq_shape_numel(ndim, shape), bytes;
    if (n < 0 || elem_bytes > (size_t)INT64_MAX || __builtin_mul_overflow(n, (int64_t)elem_bytes, &bytes) ||
        bytes > EQ_TENSOR_MAX_BYTES)
        return -1;
    return bytes;
}

int64_t eq_tensor_numel(const eq_tensor *t) { return eq_shape_numel(t->ndim, t->shape); }

size_t eq_tensor_bytes(const eq_tensor *t)
{
    int64_t n = eq_tensor_numel(t);
    return n < 0 ? SIZE_MAX : (size_t)n * eq_dtype_size(t->dtype);
}

/* A large tensor's whole 2 MiB pages of memory asked to be huge pages where the kernel gives them
 * on request (transparent_hugepage "madvise"): calloc leaves such an allocation untouched, and a
 * 64 MiB tensor then faults 32 times where it faulted 16384, each page zeroed by the kernel once
 * either way. A hint: nothing changes where it is refused. */
static void huge_pages(void *data, size_t bytes)
{
#ifdef MADV_HUGEPAGE
    enum { HUGE = 2u << 20 };
    if (bytes < 4 * (size_t)HUGE) return;
    const uintptr_t begin = ((uintptr_t)data + HUGE - 1) & ~(uintptr_t)(HUGE - 1),
                    end = ((uintptr_t)data + bytes) & ~(uintptr_t)(HUGE - 1);
    (void)madvise((void *)begin, end - begin, MADV_HUGEPAGE);
#else
    (void)data, (void)bytes;
#endif
}

eq_status eq_tensor_init(eq_tensor *t, eq_dtype dt, int ndim, const int64_t *shape)
{
    memset(t, 0, sizeof *t);
    if (ndim < 1 || ndim > EQ_MAX_DIMS) return EQ_FAIL(EQ_ERR_INTERNAL, "tensor of %d dims", ndim);
    t->dtype = dt;
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) {
            memset(t, 0, sizeof *t);
            return EQ_FAIL(EQ_ERR_INTERNAL, "negative extent %lld", (long long)shape[i]);
        }
        t->shape[i] = shape[i];
    }
    /* Sizes come from case files and dumps: a shape whose bytes overflow or pass the limit is
     * refused before anything is allocated (models check their shapes earlier still). */
    if (eq_shape_bytes(ndim, shape, eq_dtype_size(dt)) < 0) {
        char text[160];
        eq_tensor_shape_str(t, text, sizeof text);
        memset(t, 0, sizeof *t);
        return EQ_FAIL(EQ_ERR_INPUT, "a %s tensor of shape %s would take more than 2^40 bytes", eq_dtype_name(dt),
                       text);
    }
    size_t bytes = eq_tensor_bytes(t);
    t->data = calloc(bytes > 0 ? bytes : 1, 1);
    if (t->data == NULL) {
        memset(t, 0, sizeof *t);
        return EQ_FAIL(EQ_ERR_NOMEM, "cannot allocate %zu bytes for a tensor", bytes);
    }
    huge_pages(t->data, bytes);
    return EQ_OK;
}

/* The storage of freed large tensors, kept for eq_tensor_init_whole while `on`. */
enum { KEPT_MAX = 8 };
#define KEPT_MIN_BYTES ((size_t)8 << 20)
#define KEPT_TOTAL_MAX ((size_t)256 << 20)
static struct {
    void *data[KEPT_MAX];
    size_t bytes[KEPT_MAX];
    int count, on;
    size_t total;
    pthread_mutex_t lock;
} kept = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* Kept storage of exactly `bytes`, taken from the store, or NULL. */
static void *take_kept(size_t bytes)
{
    void *data = NULL;
    pthread_mutex_lock(&kept.lock);
    for (int i = 0; i < kept.count && data == NULL; i++)
        if (kept.bytes[i] == bytes) {
            data = kept.data[i];
            kept.total -= bytes;
            kept.count--;
            kept.data[i] = kept.data[kept.count], kept.bytes[i] = kept.bytes[kept.count];
        }
    pthread_mutex_unlock(&kept.lock);
    return data;
}

/* 1 where the store took data (bytes of it), else 0. */
static int keep(void *data, size_t bytes)
{
    int taken = 0;
    if (bytes < KEPT_MIN_BYTES || bytes > KEPT_TOTAL_MAX) return 0;
    pthread_mutex_lock(&kept.lock);
    if (kept.on && kept.count < KEPT_MAX && kept.total + bytes <= KEPT_TOTAL_MAX) {
        kept.data[kept.count] = data, kept.bytes[kept.count] = bytes;
        kept.count++;
        kept.total += bytes;
        taken = 1;
    }
    pthread_mutex_unlock(&kept.lock);
    return taken;
}

void eq_tensor_keep_freed(int on)
{
    pthread_mutex_lock(&kept.lock);
    kept.on = on;
    for (int i = 0; !on && i < kept.count; i++) free(kept.data[i]);
    if (!on) kept.count = 0, kept.total = 0;
    pthread_mutex_unlock(&kept.lock);
}

eq_status eq_tensor_init_whole(eq_tensor *t, eq_dtype dt, int ndim, const int64_t *shape)
{
    if (ndim >= 1 && ndim <= EQ_MAX_DIMS && eq_shape_bytes(ndim, shape, eq_dtype_size(dt)) >= (int64_t)KEPT_MIN_BYTES) {
        void *data = take_kept((size_t)eq_shape_bytes(ndim, shape, eq_dtype_size(dt)));
        if (data != NULL) {
            memset(t, 0, sizeof *t);
            t->dtype = dt;
            t->ndim = ndim;
            for (int i = 0; i < ndim; i++) t->shape[i] = shape[i];
            t->data = data;
            return EQ_OK;
        }
    }
    return eq_tensor_init(t, dt, ndim, shape);
}

eq_status eq_tensor_init_2d(eq_tensor *t, eq_dtype dt, int64_t rows, int64_t cols)
{
    int64_t shape[2] = {rows, cols};
    return eq_tensor_init(t, dt, 2, shape);
}

eq_status eq_tensor_clone(eq_tensor *dst, const eq_tensor *src)
{
    eq_status st = eq_tensor_init(dst, src->dtype, src->ndim, src->shape);
    if (st == EQ_OK) memcpy(dst->data, src->data, eq_tensor_bytes(src));
    return st;
}

void eq_tensor_free(eq_tensor *t)
{
    if (t->data == NULL || !keep(t->data, eq_tensor_bytes(t))) free(t->data);
    memset(t, 0, sizeof *t);
}

double eq_buffer_get(eq_dtype dt, const void *buf, int64_t i)
{
    switch (dt) {
    case EQ_FP32: return ((const float *)buf)[i];
    case EQ_BF16: return eq_bf16_to_f32(((const uint16_t *)buf)[i]);
    case EQ_FP64: return ((const double *)buf)[i];
    }
    return 0.0;
}

void eq_buffer_set(eq_dtype dt, void *buf, int64_t i, double v)
{
    switch (dt) {
    case EQ_FP32: ((float *)buf)[i] = (float)v; break;
    case EQ_BF16: ((uint16_t *)buf)[i] = eq_f64_to_bf16(v); break;
    case EQ_FP64: ((double *)buf)[i] = v; break;
    }
}

double eq_tensor_get(const eq_tensor *t, int64_t i) { return eq_buffer_get(t->dtype, t->data, i); }

void eq_tensor_set(eq_tensor *t, int64_t i, double v) { eq_buffer_set(t->dtype, t->data, i, v); }

int eq_tensor_same_shape(const eq_tensor *a, const eq_tensor *b)
{
    if (a->dtype != b->dtype || a->ndim != b->ndim) return 0;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i]) return 0;
    return 1;
}

const char *eq_tensor_shape_str(const eq_tensor *t, char *buf, size_t len)
{
    size_t used = 0;
    used += (size_t)snprintf(buf + used, len - used, "[");
    for (int i = 0; i < t->ndim && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
    if (used < len) snprintf(buf + used, len - used, "]");
    return buf;
}
