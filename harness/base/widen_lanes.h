/* Four elements of a tensor's storage widened exactly to fp64 in one vector register (GCC and
 * clang vector extension), for the loops that read two tensors side by side without a widened
 * copy of either: the comparison's passes (harness/compare_blocks.h) and the structure tests'
 * (harness/structure.c). The same values as eq_tensor_widen (harness/base/tensor.h): bf16 by its
 * bits moved to fp32's upper half, fp32 by conversion; but a signalling NaN comes back quiet, so
 * these loops take NaN and Inf apart from their bits. */
#ifndef EQUIV_HARNESS_BASE_WIDEN_LANES_H
#define EQUIV_HARNESS_BASE_WIDEN_LANES_H

#include <stdint.h>
#include <string.h>

#include "harness/base/tensor.h"

#ifdef __GNUC__ /* GCC and clang: the vectors pass only between static inline functions, no ABI to keep */
#pragma GCC diagnostic ignored "-Wpsabi"
#endif
typedef double eq_widened4 __attribute__((vector_size(4 * sizeof(double))));
typedef uint32_t eq_widen_u32x4 __attribute__((vector_size(4 * sizeof(uint32_t))));
typedef float eq_widen_f32x4 __attribute__((vector_size(4 * sizeof(float))));

/* Elements [i, i + 4) of storage `data` of dtype dt. (Element by element: GCC 12 makes one
 * vpmovzxwd and one vcvtps2pd of these, where __builtin_convertvector splits them in halves.) */
static inline __attribute__((always_inline)) eq_widened4 eq_load_widened4(const void *data, eq_dtype dt, int64_t i)
{
    switch (dt) {
    case EQ_BF16: {
        const uint16_t *h = (const uint16_t *)data + i;
        const eq_widen_f32x4 f = (eq_widen_f32x4)((eq_widen_u32x4){h[0], h[1], h[2], h[3]} << 16);
        return (eq_widened4){f[0], f[1], f[2], f[3]};
    }
    case EQ_FP32: {
        const float *f = (const float *)data + i;
        return (eq_widened4){f[0], f[1], f[2], f[3]};
    }
    case EQ_FP64: break;
    }
    eq_widened4 v;
    memcpy(&v, (const double *)data + i, sizeof v);
    return v;
}

#endif
