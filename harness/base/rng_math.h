/* The fp64 maths of the normal generator (harness/base/rng.c): ln u and (sin, cos) of 2 pi u for a
 * uniform u in (0, 1], from + - * / and bit operations only (IEEE, each operation rounded once;
 * the project builds with -ffp-contract=off), so a value's bits are the same on every machine,
 * C library and vector width. No libm: glibc's log/sin/cos may differ between versions and do not
 * vectorise. Inline so the generator's lane loops vectorise them; rng_test checks them against
 * long double libm to a few ulp.
 *
 * ln: fdlibm's e_log.c (Sun Microsystems, 1993) without its special cases: u = 2^k m with m in
 * [sqrt(1/2), sqrt(2)) found by integer operations on u's bits, f = m - 1 (exact), s = f / (2 + f),
 * ln m = 2 atanh(s) = f - f^2/2 + s (f^2/2 + R(s^2)) with fdlibm's Lg1..Lg7 (|s| <= 0.1716,
 * |R error| < 2^-58.45), plus k ln2 with ln2 split hi (k ln2_hi exact for |k| < 2^11) and lo.
 *
 * sin/cos of 2 pi u: 4u is exact, q = its nearest integer (by the 1.5 2^52 trick), f = u - q/4 is
 * exact (|f| <= 1/8), x = 2 pi f = f 2pi_hi + f 2pi_lo (|x| <= pi/4), then fdlibm's k_sin.c and
 * k_cos.c polynomials, and the quadrant q mod 4 picks and signs them. */
#ifndef EQUIV_HARNESS_BASE_RNG_MATH_H
#define EQUIV_HARNESS_BASE_RNG_MATH_H

#include <stdint.h>
#include <string.h>

/* Inlined even into the generator's target_clones lane loops, which vectorise only without calls. */
#if defined(__GNUC__)
#define EQ_RNG_INLINE static inline __attribute__((always_inline))
#else
#define EQ_RNG_INLINE static inline
#endif

EQ_RNG_INLINE uint64_t eq_f64_bits(double x)
{
    uint64_t bits;
    memcpy(&bits, &x, sizeof bits);
    return bits;
}

EQ_RNG_INLINE double eq_f64_from_bits(uint64_t bits)
{
    double x;
    memcpy(&x, &bits, sizeof x);
    return x;
}

/* n as a double, n < 2^53, exactly; integer operations and one subtraction (AVX2 has no
 * 64-bit integer to double conversion, so (double)n would keep a loop from vectorising). */
EQ_RNG_INLINE double eq_u53_to_f64(uint64_t n)
{
    const double low = eq_f64_from_bits(0x4330000000000000ull | (n & 0xfffffffffffffull)) - 0x1p52;
    return low + (double)(uint32_t)(n >> 52) * 0x1p52; /* both exact, and so is their sum */
}

/* ln u for u in [2^-1022, 2^1024): normal, positive, finite (the generator's u in (0, 1]). */
EQ_RNG_INLINE double eq_rng_ln(double u)
{
    static const double ln2_hi = 6.93147180369123816490e-01, /* 0x3fe62e42fee00000 */
        ln2_lo = 1.90821492927058770002e-10,                 /* 0x3dea39ef35793c76 */
        lg1 = 6.666666666666735130e-01, lg2 = 3.999999999940941908e-01, lg3 = 2.857142874366239149e-01,
                        lg4 = 2.222219843214978396e-01, lg5 = 1.818357216161805012e-01,
                        lg6 = 1.531383769920937332e-01, lg7 = 1.479819860511658591e-01;
    const uint64_t bits = eq_f64_bits(u);
    /* sqrt(1/2)'s bits: tmp's exponent field is k mod 2^12, where u = 2^k m, m in [sqrt(1/2), sqrt(2)). */
    const uint64_t tmp = bits - 0x3fe6a09e667f3bcdull;
    const double m = eq_f64_from_bits(bits - (tmp & 0xfff0000000000000ull));
    const uint64_t k_biased = ((tmp >> 52) + 1024u) & 0xfffu; /* k + 1024, k in [-1022, 1023] */
    const double k = eq_f64_from_bits(0x4330000000000000ull | k_biased) - (0x1p52 + 1024.0);
    const double f = m - 1.0; /* exact: m in [1/2, 2] */
    const double s = f / (2.0 + f), z = s * s, w = z * z;
    const double r = z * (lg1 + w * (lg3 + w * (lg5 + w * lg7))) + w * (lg2 + w * (lg4 + w * lg6));
    const double half_f2 = 0.5 * f * f;
    return k * ln2_hi - ((half_f2 - (s * (half_f2 + r) + k * ln2_lo)) - f);
}

/* sin x and cos x for |x| <= pi/4 (fdlibm's __kernel_sin and __kernel_cos, tail y = 0). */
EQ_RNG_INLINE double eq_rng_kernel_sin(double x)
{
    static const double s1 = -1.66666666666666324348e-01, s2 = 8.33333333332248946124e-03,
                        s3 = -1.98412698298579493134e-04, s4 = 2.75573137070700676789e-06,
                        s5 = -2.50507602534068634195e-08, s6 = 1.58969099521155010221e-10;
    const double z = x * x, v = z * x;
    const double r = s2 + z * (s3 + z * (s4 + z * (s5 + z * s6)));
    return x + v * (s1 + z * r);
}

EQ_RNG_INLINE double eq_rng_kernel_cos(double x)
{
    static const double c1 = 4.16666666666666019037e-02, c2 = -1.38888888888741095749e-03,
                        c3 = 2.48015872894767294178e-05, c4 = -2.75573143513906633035e-07,
                        c5 = 2.08757232129817482790e-09, c6 = -1.13596475577881948265e-11;
    const double z = x * x, w = z * z;
    const double r = z * (c1 + z * (c2 + z * c3)) + w * w * (c4 + z * (c5 + z * c6));
    const double half_z = 0.5 * z, one_minus = 1.0 - half_z;
    return one_minus + (((1.0 - one_minus) - half_z) + z * r);
}

/* sin(2 pi u) and cos(2 pi u) for u in [0, 1]. */
EQ_RNG_INLINE void eq_rng_sincos_2pi(double u, double *sin_out, double *cos_out)
{
    static const double two_pi_hi = 6.28318530717958623200e+00, /* 0x401921fb54442d18, 2 pi rounded */
        two_pi_lo = 2.44929359829470635446e-16;                 /* 2 pi - two_pi_hi */
    const double shifted = 4.0 * u + 0x1.8p52;                  /* ulp 1: 4u rounded to nearest even */
    const double q = shifted - 0x1.8p52;
    const uint64_t quadrant = eq_f64_bits(shifted) & 3u; /* q mod 4 */
    const double f = u - 0.25 * q;                       /* exact, |f| <= 1/8 */
    const double x = f * two_pi_hi + f * two_pi_lo;
    const double sin_x = eq_rng_kernel_sin(x), cos_x = eq_rng_kernel_cos(x);
    /* sin(q pi/2 + x), cos(q pi/2 + x): q odd swaps them, q = 2, 3 negates sin, q = 1, 2 cos. By bit
     * operations (a select, a sign flip), which vectorise where branches would not. */
    const uint64_t swap = 0 - (quadrant & 1u);
    const uint64_t sin_x_bits = eq_f64_bits(sin_x), cos_x_bits = eq_f64_bits(cos_x);
    const uint64_t sin_flip = (quadrant & 2u) << 62, cos_flip = ((quadrant + 1u) & 2u) << 62;
    *sin_out = eq_f64_from_bits(((cos_x_bits & swap) | (sin_x_bits & ~swap)) ^ sin_flip);
    *cos_out = eq_f64_from_bits(((sin_x_bits & swap) | (cos_x_bits & ~swap)) ^ cos_flip);
}

#endif
