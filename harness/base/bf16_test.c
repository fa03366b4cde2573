/* bf16 conversion: round to nearest even, NaN, Inf, overflow, subnormals, and fp64 -> bf16
 * without double rounding. Expected bit patterns are worked out by hand from the format:
 * bf16 = top 16 bits of binary32; 1.0 = 0x3f80, spacing at 1.0 is 2^-7. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "harness/base/bf16.h"
#include "harness/base/testing.h"

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* The round-to-odd step as first written, with nextafterf: the reference for the bit-twiddled one. */
static uint16_t f64_to_bf16_nextafter(double d)
{
    float f = (float)d;
    if (!isnan(d) && (double)f != d) {
        if (fabs((double)f) > fabs(d)) f = nextafterf(f, 0.0f);
        uint32_t u;
        memcpy(&u, &f, sizeof u);
        u |= 1u;
        memcpy(&f, &u, sizeof f);
    }
    return eq_f32_to_bf16(f);
}

/* eq_f64_to_bf16 against the nextafterf form on 2 million doubles: random bit patterns (every
 * exponent, both signs, NaN, Inf, subnormals) and values within a few fp64 ulps of floats, where
 * the step toward zero decides. */
static void check_against_nextafter(void)
{
    uint64_t state = 0x9e3779b97f4a7c15u;
    int mismatches = 0;
    for (int i = 0; i < 2000000; i++) {
        state ^= state << 13, state ^= state >> 7, state ^= state << 17; /* xorshift64 */
        double d;
        if (i % 2 == 0) {
            memcpy(&d, &state, sizeof d);
        } else { /* a float, nudged by -3..3 fp64 ulps */
            float f = from_bits((uint32_t)state);
            d = (double)f;
            uint64_t bits;
            memcpy(&bits, &d, sizeof bits);
            bits += (uint64_t)((int64_t)(state >> 61) - 3);
            memcpy(&d, &bits, sizeof d);
        }
        mismatches += eq_f64_to_bf16(d) != f64_to_bf16_nextafter(d);
    }
    EQ_EXPECT(mismatches == 0, "%d of 2000000 doubles round differently from the nextafterf form", mismatches);
}

int main(void)
{
    check_against_nextafter();
    /* Exact values keep their bits. */
    EQ_EXPECT_EQ_U64(eq_f32_to_bf16(1.0f), 0x3f80);
    EQ_EXPECT_EQ_U64(eq_f32_to_bf16(-2.0f), 0xc000);
    EQ_EXPECT_EQ_U64(eq_f32_to_bf16(0.0f), 0x0000);
    EQ_EXPECT_EQ_U64(eq_f32_to_bf16(-0.0f), 0x8000);

    /* Ties: 1 + 2^-8 is halfway between 1 (0x3f80, even) and 1 + 2^-7 (0x3f81): goes to even. */
    EQ_EXPECT_EQ_U64(eq_f32_to_bf16(1.0f + 0x1p-8f), 0x3f80);
    /* 1 + 3*2^-8 is halfway between 0x3f81 (odd) and 0x3f82 (even): goes up to even. */
    EQ_EXPECT_EQ_U64(eq_f32_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);
    /* Just above the tie rounds up, just below rounds down. */
    EQ_EXPECT_EQ_U64(eq_f32_to_bf16(from_bits(0x3f808001u)), 0x3f81);
    EQ_EXPECT_EQ_U64(eq_f32_to_bf16(from_bits(0x3f807fffu)), 0x3f80);
    /* Negative ties behave the same (sign-magnitude). */
    EQ_EXPECT_EQ_U64(eq_f32_to_bf16(-(1.0f + 0x1p-8f)), 0xbf80);

    /* Infinities stay infinities; NaN stays NaN (quiet bit set), with its sign. */
    EQ_EXPECT_EQ_U64(eq_f32_to_bf16(INFINITY), 0x7f80);
    EQ_EXPECT_EQ_U64(eq_f32_to_bf16(-INFINITY), 0xff80);
    uint16_t qnan = eq_f32_to_bf16(NAN);
    EQ_EXPECT((qnan & 0x7f80) == 0x7f80 && (qnan & 0x007f) != 0, "NaN became 0x%04x", qnan);
    /* A signalling NaN whose payload lives only in the low 16 bits must not become Inf. */
    uint16_t snan = eq_f32_to_bf16(from_bits(0x7f800001u));
    EQ_EXPECT(isnan(eq_bf16_to_f32(snan)), "sNaN became 0x%04x", snan);
    EQ_EXPECT_EQ_U64(eq_f32_to_bf16(from_bits(0xff800001u)) & 0x8000, 0x8000);

    /* Overflow: the largest bf16 is 0x7f7f = (2 - 2^-7) * 2^127. The tie point to the next
     * (which would be 2^128, i.e. Inf) is 0x7f7f8000: at and above it, Inf; below it, max. */
    EQ_EXPECT_EQ_U64(eq_f32_to_bf16(from_bits(0x7f7f7fffu)), 0x7f7f);
    EQ_EXPECT_EQ_U64(eq_f32_to_bf16(from_bits(0x7f7f8000u)), 0x7f80); /* tie, 0x7f7f odd: up */
    EQ_EXPECT_EQ_U64(eq_f32_to_bf16(from_bits(0x7f7fffffu)), 0x7f80); /* FLT_MAX */
    EQ_EXPECT_EQ_U64(eq_f32_to_bf16(from_bits(0xff7fffffu)), 0xff80);

    /* Subnormals: the smallest bf16 subnormal is 0x0001 = 2^-133. */
    EQ_EXPECT_EQ_U64(eq_f32_to_bf16(0x1p-133f), 0x0001);
    EQ_EXPECT_EQ_U64(eq_f32_to_bf16(0x1p-134f), 0x0000); /* half of it: tie to even 0 */
    EQ_EXPECT_EQ_U64(eq_f32_to_bf16(0x1.8p-134f), 0x0001); /* above the tie */

    /* Widening is exact: every non-NaN pattern survives the round trip. */
    int roundtrip_bad = 0;
    for (uint32_t h = 0; h <= 0xffff; h++) {
        float f = eq_bf16_to_f32((uint16_t)h);
        if (!isnan(f) && eq_f32_to_bf16(f) != h) roundtrip_bad++;
    }
    EQ_EXPECT(roundtrip_bad == 0, "%d patterns changed in a round trip", roundtrip_bad);

    /* fp64 -> bf16 rounds once. 1 + 2^-8 + 2^-30 is above the bf16 tie, so the answer is
     * 0x3f81; going through fp32 first would round to 1 + 2^-8 (the tie) and then to 0x3f80. */
    double above_tie = 1.0 + 0x1p-8 + 0x1p-30;
    EQ_EXPECT_EQ_U64(eq_f32_to_bf16((float)above_tie), 0x3f80); /* the double-rounding trap */
    EQ_EXPECT_EQ_U64(eq_f64_to_bf16(above_tie), 0x3f81);
    EQ_EXPECT_EQ_U64(eq_f64_to_bf16(1.0 + 0x1p-8), 0x3f80);          /* exact tie: to even */
    EQ_EXPECT_EQ_U64(eq_f64_to_bf16(1.0 + 0x1p-8 - 0x1p-40), 0x3f80); /* just below the tie */
    EQ_EXPECT_EQ_U64(eq_f64_to_bf16(1e300), 0x7f80);
    EQ_EXPECT_EQ_U64(eq_f64_to_bf16(-1e300), 0xff80);
    EQ_EXPECT(isnan(eq_bf16_to_f32(eq_f64_to_bf16(NAN))), "fp64 NaN lost");
    EQ_EXPECT_EQ_U64(eq_f64_to_bf16(1e-300), 0x0000);

    /* Device-style arithmetic: one rounding per operation. */
    EQ_EXPECT_EQ_U64(eq_bf16_add(0x3f80, 0x3b80), 0x3f80); /* 1 + 2^-8: tie to even */
    EQ_EXPECT_EQ_U64(eq_bf16_mul(0x4000, 0x3f81), 0x4001); /* 2 * (1 + 2^-7), exact */

    return eq_test_finish("bf16_test");
}
