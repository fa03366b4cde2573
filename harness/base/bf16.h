/* bfloat16 stored as uint16_t: the top half of an IEEE binary32 (1 sign, 8 exponent, 7 mantissa
 * bits). Widening is exact; narrowing rounds to nearest, ties to even, with NaN kept NaN (quiet,
 * sign kept) and overflow going to +-Inf as IEEE rounding says. HDF5's own conversion is never used
 * for this: it rounds ties up and clamps overflow. */
#ifndef EQUIV_HARNESS_BASE_BF16_H
#define EQUIV_HARNESS_BASE_BF16_H

#include <math.h>
#include <stdint.h>
#include <string.h>

static inline float eq_bf16_to_f32(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline uint16_t eq_f32_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16; /* to nearest, ties to even; carries into Inf */
    const uint32_t quiet_nan = (u >> 16) | 0x0040u;
    /* a select, not a branch: loops of conversions vectorise */
    return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
}

/* fp64 -> bf16 rounded once (no double rounding through fp32: the fp32 step rounds to odd). Where
 * d -> fp32 was inexact (and d is not NaN), truncate toward zero, then set the last bit: 16 spare
 * bits below bf16's last bit make the following round-to-nearest-even give the correctly rounded
 * result. One step toward zero (nextafterf(f, 0)): |f| > |d| >= 0, so f is not zero and the
 * magnitude bits just drop by one (Inf becomes the largest finite float, as there). Selects, not
 * branches: loops of conversions (the generator's stores) vectorise. */
static inline uint16_t eq_f64_to_bf16(double d)
{
    const float f = (float)d;
    const double widened = (double)f;
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    const int inexact = d == d && widened != d;
    const uint32_t toward_zero = u - (fabs(widened) > fabs(d) ? 1u : 0u);
    const uint32_t odd = inexact ? toward_zero | 1u : u;
    float rounded_to_odd;
    memcpy(&rounded_to_odd, &odd, sizeof rounded_to_odd);
    return eq_f32_to_bf16(rounded_to_odd);
}

/* Round a value to what `bf16` can hold, as a float: round-trip through the 16-bit form. */
static inline float eq_round_bf16(float f) { return eq_bf16_to_f32(eq_f32_to_bf16(f)); }

/* Sum of two bf16 values as a bf16 device adds them (__hadd on sm80+: exact fp32 add of the
 * widened values, one rounding to bf16). */
static inline uint16_t eq_bf16_add(uint16_t a, uint16_t b)
{
    return eq_f32_to_bf16(eq_bf16_to_f32(a) + eq_bf16_to_f32(b));
}

/* Product as __hmul: widened multiply, one rounding (a product of two bf16 is exact in fp32). */
static inline uint16_t eq_bf16_mul(uint16_t a, uint16_t b)
{
    return eq_f32_to_bf16(eq_bf16_to_f32(a) * eq_bf16_to_f32(b));
}

#endif
