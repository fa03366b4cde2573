/* A tensor: dtype, shape (row-major, last index fastest) and owned storage.
 * bf16 elements are uint16_t (harness/base/bf16.h), fp32 float, fp64 double. */
#ifndef EQUIV_HARNESS_BASE_TENSOR_H
#define EQUIV_HARNESS_BASE_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "harness/base/bf16.h"
#include "harness/base/status.h"

typedef enum { EQ_FP32 = 0, EQ_BF16 = 1, EQ_FP64 = 2 } eq_dtype;
#define EQ_DTYPE_COUNT 3

#define EQ_MAX_DIMS 4

typedef struct {
    eq_dtype dtype;
    int ndim;
    int64_t shape[EQ_MAX_DIMS];
    void *data; /* owned; numel * eq_dtype_size(dtype) bytes */
} eq_tensor;

size_t eq_dtype_size(eq_dtype dt);
const char *eq_dtype_name(eq_dtype dt);               /* "fp32", "bf16", "fp64" */
eq_status eq_dtype_parse(const char *name, eq_dtype *out); /* EQ_ERR_USAGE if unknown */
/* Unit roundoff u = 2^-p (p = significand bits incl. the implicit one): 2^-8, 2^-24, 2^-53. */
double eq_dtype_unit_roundoff(eq_dtype dt);

/* The most bytes one tensor may take (1 TiB): sizes come from case files and dumps, and a size
 * past it is an input error before anything is allocated, not an overflow or an OOM kill. */
#define EQ_TENSOR_MAX_BYTES (INT64_C(1) << 40)

/* Elements of a shape: -1 if an extent is negative or the product overflows int64 (0 dims: 0). */
int64_t eq_shape_numel(int ndim, const int64_t *shape);
/* Bytes of a shape of elem_bytes elements: -1 if eq_shape_numel is, or the bytes overflow or pass
 * EQ_TENSOR_MAX_BYTES. */
int64_t eq_shape_bytes(int ndim, const int64_t *shape, size_t elem_bytes);

/* Elements (-1: a shape that overflows, which eq_tensor_init never makes) and bytes (SIZE_MAX
 * then, so that an allocation of it fails). */
int64_t eq_tensor_numel(const eq_tensor *t);
size_t eq_tensor_bytes(const eq_tensor *t);

/* Allocates zeroed storage; a shape past EQ_TENSOR_MAX_BYTES is EQ_ERR_INPUT. On failure `t` is
 * left empty (safe to free). */
eq_status eq_tensor_init(eq_tensor *t, eq_dtype dt, int ndim, const int64_t *shape);
eq_status eq_tensor_init_2d(eq_tensor *t, eq_dtype dt, int64_t rows, int64_t cols);
eq_status eq_tensor_clone(eq_tensor *dst, const eq_tensor *src);
/* The same, for a tensor the caller writes whole before reading it: its storage may be that of a
 * large tensor freed before (of the same bytes), not zeroed, while freed storage is kept. */
eq_status eq_tensor_init_whole(eq_tensor *t, eq_dtype dt, int ndim, const int64_t *shape);
/* Frees storage and resets to empty; safe on an empty or zeroed tensor. */
void eq_tensor_free(eq_tensor *t);
/* From eq_tensor_keep_freed(1) to eq_tensor_keep_freed(0) (which frees what is kept), the storage
 * of a freed tensor of 8 MiB or more is kept for eq_tensor_init_whole, at most 8 and 256 MiB of
 * them. Streaming compare assembles one batch of tensors after another (harness/run_layout.c):
 * each batch's storage then is the last one's, with no fresh page for the kernel to zero and
 * fault in. Off outside it: a model freeing and allocating tensors keeps nothing. */
void eq_tensor_keep_freed(int on);

/* Element i of a raw buffer of dtype dt, widened exactly to double; and v stored rounded (nearest,
 * ties to even, once) to dt. */
double eq_buffer_get(eq_dtype dt, const void *buf, int64_t i);
void eq_buffer_set(eq_dtype dt, void *buf, int64_t i, double v);

/* Element i (flat index) widened exactly to double. */
double eq_tensor_get(const eq_tensor *t, int64_t i);
/* Elements [begin, begin + n) widened exactly to double, the dtype switched once, not per element
 * (inline: the loops that read blocks of a tensor vectorise it). */
static inline void eq_tensor_widen(const eq_tensor *t, int64_t begin, int64_t n, double *out)
{
    switch (t->dtype) {
    case EQ_BF16:
        for (int64_t i = 0; i < n; i++) out[i] = eq_bf16_to_f32(((const uint16_t *)t->data)[begin + i]);
        break;
    case EQ_FP32:
        for (int64_t i = 0; i < n; i++) out[i] = ((const float *)t->data)[begin + i];
        break;
    case EQ_FP64:
        for (int64_t i = 0; i < n; i++) out[i] = ((const double *)t->data)[begin + i];
        break;
    }
}
/* Store v rounded (nearest, ties to even, once) to the tensor's dtype. */
void eq_tensor_set(eq_tensor *t, int64_t i, double v);

/* Same dtype and shape. */
int eq_tensor_same_shape(const eq_tensor *a, const eq_tensor *b);
/* "[4096, 2, 1024]" into buf. */
const char *eq_tensor_shape_str(const eq_tensor *t, char *buf, size_t len);

#endif
