/* The generator's own ln and sin/cos of 2 pi u (harness/base/rng_math.h) against long double libm
 * (logl, sinl, cosl: 64-bit significands, so the reference's own error is ~2^-11 of an fp64 ulp),
 * in ulps of the fp64 reference: 10^6 uniforms of the generator's kind, 10^6 spread over every
 * binade of (0, 1], and the edges (u near 0, 1/8, 1/4, 1/2, sqrt(1/2), 1). A few ulp is what
 * fdlibm's kernels give (its own bound for log: < 1 ulp); 4 allows the argument's roundings. */
#include <math.h>
#include <stdio.h>

#include "harness/base/rng.h"
#include "harness/base/rng_math.h"
#include "harness/base/testing.h"

#define MAX_ULP 4.0

/* |got - want| in units of the last place of want rounded to fp64 (0 only where both are 0). */
static double ulp_error(double got, long double want)
{
    const double want64 = (double)want;
    if (want64 == 0.0) return got == 0.0 ? 0.0 : INFINITY;
    const double ulp = ldexp(1.0, ilogb(want64) - 52);
    return (double)fabsl((long double)got - want) / ulp;
}

/* sin and cos of 2 pi u in long double, reduced exactly first: near the zeros (u near 1/4, 1/2, ...)
 * 2 pi u in any precision has lost the small difference the result is made of. q = rint(4u),
 * f = u - q/4 is exact in fp64 (|f| <= 1/8, on u's grid), then (sin, cos)(q pi/2 + 2 pi f). */
static void sincos_2pi_reference(double u, long double *s, long double *c)
{
    static const long double two_pi = 6.283185307179586476925286766559005768L;
    const double q = rint(4.0 * u), f = u - 0.25 * q;
    const long double sf = sinl(two_pi * (long double)f), cf = cosl(two_pi * (long double)f);
    switch ((long)q & 3) {
    case 0: *s = sf, *c = cf; break;
    case 1: *s = cf, *c = -sf; break;
    case 2: *s = -sf, *c = -cf; break;
    default: *s = -cf, *c = sf; break;
    }
}

typedef struct {
    double ln, sin, cos; /* the largest error seen, in ulps */
    double ln_at, sin_at, cos_at;
} worst;

static void check_point(worst *w, double u)
{
    const double ln_err = ulp_error(eq_rng_ln(u), logl((long double)u));
    double s, c;
    long double want_s, want_c;
    eq_rng_sincos_2pi(u, &s, &c);
    sincos_2pi_reference(u, &want_s, &want_c);
    const double sin_err = ulp_error(s, want_s), cos_err = ulp_error(c, want_c);
    if (!(ln_err <= w->ln)) w->ln = ln_err, w->ln_at = u;
    if (!(sin_err <= w->sin)) w->sin = sin_err, w->sin_at = u;
    if (!(cos_err <= w->cos)) w->cos = cos_err, w->cos_at = u;
}

int main(void)
{
    worst w = {0, 0, 0, 0, 0, 0};
    /* The edges: the generator's smallest u (half a step of 2^-53), the largest below 1 and 1
     * itself (which the rounding of (2^53 - 1) + 1/2 gives), and around the quadrant and octant
     * boundaries and ln's reduction point sqrt(1/2). */
    const double edges[] = {0x1p-54, 0x1p-53, 3 * 0x1p-54, 1e-10, 0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 0.875,
                            0.70710678118654752440, 1.0 - 0x1p-53, 1.0};
    for (size_t e = 0; e < sizeof edges / sizeof edges[0]; e++) {
        double u = edges[e];
        for (int step = 0; step < 64; step++) u = nextafter(u, 0.0);
        for (int step = 0; step < 129; step++, u = nextafter(u, 2.0))
            if (u > 0.0 && u <= 1.0) check_point(&w, u);
    }
    /* 10^6 uniforms as the generator draws them, and 10^6 spread evenly in log2 u over (2^-54, 1]. */
    const uint32_t stream = eq_rng_stream("rng_math_test");
    for (uint64_t i = 0; i < 1000000; i++) {
        check_point(&w, eq_rng_uniform(5, stream, i));
        check_point(&w, exp2(-54.0 * eq_rng_uniform(6, stream, i)));
    }
    printf("max error in ulp: ln %.3f (u = %a), sin 2 pi u %.3f (u = %a), cos 2 pi u %.3f (u = %a)\n", w.ln, w.ln_at,
           w.sin, w.sin_at, w.cos, w.cos_at);
    EQ_EXPECT(w.ln <= MAX_ULP, "ln: %.3f ulp at u = %a", w.ln, w.ln_at);
    EQ_EXPECT(w.sin <= MAX_ULP, "sin 2 pi u: %.3f ulp at u = %a", w.sin, w.sin_at);
    EQ_EXPECT(w.cos <= MAX_ULP, "cos 2 pi u: %.3f ulp at u = %a", w.cos, w.cos_at);
    return eq_test_finish("rng_math_test");
}
