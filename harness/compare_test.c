/* Comparison metrics on hand-computed tensors, ULPs at the reference's own scale, planted
 * differences on realistic tensors (each must be observed and named), and capture matching. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/base/bf16.h"
#include "harness/compare.h"
#include "harness/base/testing.h"
#include "harness/compare_fixtures.h"
#include "harness/verdict.h"

static void test_hand_computed(void)
{
    /* ref   1   2     -4    0.5  0      8
     * test  1   2.5   -4.5  0.5  2^-10  8
     * |d|   0   0.5   0.5   0    2^-10  0     (2^-10 = 0.0009765625, just below 1e-3) */
    const double r[6] = {1, 2, -4, 0.5, 0, 8}, t[6] = {1, 2.5, -4.5, 0.5, 0x1p-10, 8};
    eq_tensor ref, test;
    make_1d(&ref, EQ_FP32, r, 6);
    make_1d(&test, EQ_FP32, t, 6);
    eq_metrics m = compare(&ref, &test, &tol_fp32);
    EQ_EXPECT(m.count == 6 && m.n_finite == 6 && m.n_differ == 3, "count %lld finite %lld differ %lld",
              (long long)m.count, (long long)m.n_finite, (long long)m.n_differ);
    EQ_EXPECT(m.max_abs == 0.5 && m.argmax == 1, "max %g at %lld, want 0.5 at 1 (first)", m.max_abs,
              (long long)m.argmax);
    EXPECT_NEAR(m.mean_abs, (1.0 + 0x1p-10) / 6.0, 1e-15); /* (0.5 + 0.5 + 2^-10) / 6 */
    /* sorted |d|: 0 0 0 2^-10 0.5 0.5 -> mean of the middle two = 2^-11 */
    EQ_EXPECT(m.median_abs == 0x1p-11, "median %.17g, want 2^-11", m.median_abs);
    /* > 1e-4: 3 of 6; > 1e-3, > 5e-3, > 1e-2: 2 of 6 (2^-10 < 1e-3) */
    EQ_EXPECT(m.frac_above[0] == 0.5, "frac > 1e-4 = %g", m.frac_above[0]);
    for (int k = 1; k < EQ_N_THRESHOLDS; k++)
        EQ_EXPECT(m.frac_above[k] == 2.0 / 6.0, "frac > %g = %g", eq_thresholds[k], m.frac_above[k]);
    /* ||d||^2 = 0.25 + 0.25 + 2^-20; ||r||^2 = 1 + 4 + 16 + 0.25 + 0 + 64 = 85.25;
     * ||t||^2 = 1 + 6.25 + 20.25 + 0.25 + 2^-20 + 64 = 91.75 + 2^-20; <t,r> = 1 + 5 + 18 + 0.25 + 64 = 88.25 */
    EXPECT_NEAR(m.rel_fro, sqrt((0.5 + 0x1p-20) / 85.25), 1e-15);
    EXPECT_NEAR(m.cosine, 88.25 / sqrt(85.25 * (91.75 + 0x1p-20)), 1e-15);
    EXPECT_NEAR(m.ls_scale, 88.25 / 85.25, 1e-15);
    /* ULPs in fp32 (p = 24) at max(|ref|, rms(ref)), rms(ref) = sqrt(85.25 / 6) = 3.77 in [2, 4):
     * at 2 the scale is 3.77, spacing 2^-22, so 0.5 is 2^21; at -4, 2^-21 -> 2^20; at 0 the
     * scale is 3.77 too, so 2^-10 is 2^12 ULP (not 2^139 against the subnormal spacing). */
    EQ_EXPECT(m.ulp_floor == sqrt(85.25 / 6.0), "ULP floor %.17g, want rms(ref)", m.ulp_floor);
    EQ_EXPECT(m.max_ulp == 0x1p21, "max ULP %g, want 2^21", m.max_ulp);
    /* The max |d| (0.5, first at index 1, ref 2) at its scale 3.77: 0.5 / 2^-22 = 2^21. */
    EQ_EXPECT(m.ulp_at_max == 0x1p21, "ULP at max %g, want 2^21", m.ulp_at_max);
    /* atol = rtol = 1e-3: bounds 3e-3 at 2 (ratio 166.7), 5e-3 at -4 (100), 1e-3 at 0 (0.977) */
    EQ_EXPECT(m.n_outside == 2, "outside %lld, want 2", (long long)m.n_outside);
    EXPECT_NEAR(m.max_tol_ratio, 0.5 / 3e-3, 1e-12);
    /* ref: absmax 8, mean 7.5 / 6 = 1.25, deviations -0.25 0.75 -5.25 -0.75 -1.25 6.75,
     * squares sum to 75.875, population std sqrt(75.875 / 6) */
    EQ_EXPECT(m.ref_absmax == 8.0, "ref absmax %g", m.ref_absmax);
    EXPECT_NEAR(m.ref_mean, 1.25, 1e-15);
    EXPECT_NEAR(m.ref_std, sqrt(75.875 / 6.0), 1e-15);
    EQ_EXPECT(eq_observe(&m) == EQ_OBS_OUTSIDE, "observed %s", eq_observed_name(eq_observe(&m)));
    eq_tensor_free(&ref);
    eq_tensor_free(&test);

    /* An odd count: |d| = 3 1 2 -> median 2. */
    const double zeros[3] = {0, 0, 0}, odd[3] = {3, -1, 2};
    make_1d(&ref, EQ_FP64, zeros, 3);
    make_1d(&test, EQ_FP64, odd, 3);
    m = compare(&ref, &test, &tol_zero);
    EQ_EXPECT(m.median_abs == 2.0, "median %g, want 2", m.median_abs);
    /* zero tolerance: every nonzero |d| is outside with ratio inf; an all-zero reference gives
     * ls 1 (no scale to fit), cosine 0 (only one side is zero) and rel_fro inf */
    EQ_EXPECT(m.n_outside == 3 && isinf(m.max_tol_ratio), "outside %lld ratio %g", (long long)m.n_outside,
              m.max_tol_ratio);
    EQ_EXPECT(m.ls_scale == 1.0 && m.cosine == 0.0 && isinf(m.rel_fro), "ls %g cos %g rel %g", m.ls_scale,
              m.cosine, m.rel_fro);
    eq_tensor_free(&test);
    make_1d(&test, EQ_FP64, zeros, 3);
    m = compare(&ref, &test, &tol_zero);
    EQ_EXPECT(m.cosine == 1.0 && m.ls_scale == 1.0 && m.rel_fro == 0.0 && m.argmax == -1,
              "all zero: cos %g ls %g rel %g argmax %lld", m.cosine, m.ls_scale, m.rel_fro, (long long)m.argmax);
    eq_tensor_free(&ref);
    eq_tensor_free(&test);
}


/* One element pair: |d| in ULPs of the reference's own scale. */
static double ulps_of(eq_dtype dt, double r, double t)
{
    eq_tensor ref, test;
    make_1d(&ref, dt, &r, 1);
    make_1d(&test, dt, &t, 1);
    eq_metrics m = compare(&ref, &test, &tol_zero);
    eq_tensor_free(&ref);
    eq_tensor_free(&test);
    return m.max_ulp;
}

static void test_ulp_at_scale(void)
{
    /* bf16 (p = 8): [4, 8) has spacing 2^(2-7) = 0.03125, so 5 vs 5.03125 is 1 ULP (not 4). */
    EQ_EXPECT(ulps_of(EQ_BF16, 5.0, 5.03125) == 1.0, "bf16 5 vs 5.03125: %g ULP", ulps_of(EQ_BF16, 5.0, 5.03125));
    /* [1, 2) has spacing 2^-7 = 0.0078125 */
    EQ_EXPECT(ulps_of(EQ_BF16, 1.0, 1.0078125) == 1.0, "bf16 1 vs 1.0078125");
    /* below 1 the next value down is 2^-8 away: half an ULP at the reference's scale */
    EQ_EXPECT(ulps_of(EQ_BF16, 1.0, 0.99609375) == 0.5, "bf16 1 vs 0.99609375");
    EQ_EXPECT(ulps_of(EQ_BF16, -3.0, -3.015625) == 1.0, "bf16 -3 vs -3.015625"); /* [2,4): 2^-6 */
    EQ_EXPECT(ulps_of(EQ_FP32, 1.0, nextafterf(1.0f, 2.0f)) == 1.0, "fp32 1 vs nextafterf");
    EQ_EXPECT(ulps_of(EQ_FP32, 0.0, 0x1p-149) == 1.0, "fp32 0 vs the smallest subnormal");
    EQ_EXPECT(ulps_of(EQ_BF16, 0.0, 0x1p-133) == 1.0, "bf16 0 vs the smallest subnormal");
    EQ_EXPECT(ulps_of(EQ_FP64, 1.0, nextafter(1.0, 2.0)) == 1.0, "fp64 1 vs nextafter");
    EQ_EXPECT(ulps_of(EQ_FP64, 0.0, 0x1p-1074) == 1.0, "fp64 0 vs the smallest subnormal");
}

/* ULPs where the reference is 0, near 0, or changes sign, planted in bf16: each is measured at the
 * tensor's scale rms(ref) = sqrt((4 + 4 + 2^-20 + 2^-18 + 4 x 4) / 8) = 1.73 in [1, 2), spacing
 * 2^-7, instead of the subnormal spacing 2^-133 (which made 3 x 2^-7 at a zero reference
 * 3 x 2^126 ULP). */
static void test_ulp_near_zero(void)
{
    const double r[8] = {0.0, 0x1p-10, 0x1p-9, 2.0, 2.0, -2.0, 2.0, -2.0};
    const double t[8] = {3 * 0x1p-7, 0x1p-10 + 0x1p-7, -0x1p-8, 2.0 + 0x1p-6, 2.0, -2.0, 2.0, -2.0};
    eq_tensor ref, test;
    make_1d(&ref, EQ_BF16, r, 8);
    make_1d(&test, EQ_BF16, t, 8);
    for (int i = 0; i < 8; i++) /* the planted values are bf16 numbers */
        EQ_EXPECT(eq_tensor_get(&test, i) == t[i] && eq_tensor_get(&ref, i) == r[i], "value %d not bf16", i);
    eq_metrics m = compare(&ref, &test, &tol_zero);
    /* zero reference: 3 x 2^-7 / 2^-7 = 3, the max (it is also the max |d|: 0.0234 > 2^-6 at 2) */
    EQ_EXPECT(m.max_ulp == 3.0 && m.ulp_at_max == 3.0 && m.argmax == 0, "zero ref: max ULP %g, at max %g, index %lld",
              m.max_ulp, m.ulp_at_max, (long long)m.argmax);
    eq_tensor_free(&ref), eq_tensor_free(&test);
    /* each alone (the other elements kept equal): near zero 2^-7 -> 1 ULP; the sign change
     * 2^-9 -> -2^-8, |d| = 3 x 2^-9 -> 0.75 ULP; at 2 (spacing 2^-6) one step -> 1 ULP */
    const double want[4] = {3.0, 1.0, 0.75, 1.0};
    for (int k = 1; k < 4; k++) {
        double only[8];
        memcpy(only, r, sizeof only);
        only[k] = t[k];
        make_1d(&ref, EQ_BF16, r, 8);
        make_1d(&test, EQ_BF16, only, 8);
        m = compare(&ref, &test, &tol_zero);
        EQ_EXPECT(m.max_ulp == want[k] && m.ulp_at_max == want[k], "element %d: %g ULP, want %g", k, m.max_ulp,
                  want[k]);
        eq_tensor_free(&ref), eq_tensor_free(&test);
    }
}

/* A loss kept in fp64 counts ULPs of the run's dtype: 1 vs 1 + 2^-21 is 4 fp32 ULPs in an fp32
 * run, 2^-14 bf16 ULPs in a bf16 run, 2^31 fp64 ULPs only in an fp64 run (a bf16 run's loss at
 * relative error 3.9e-7 read as 1.7e9 ULP). The rounding judgement follows it: that change is
 * rounding in fp32, not in fp64. */
static void test_ulp_in_run_dtype(void)
{
    const double r = 1.0, t = 1.0 + 0x1p-21;
    eq_tensor ref, test;
    make_1d(&ref, EQ_FP64, &r, 1);
    make_1d(&test, EQ_FP64, &t, 1);
    const struct {
        eq_dtype run;
        double ulps;
    } cases[3] = {{EQ_FP32, 4.0}, {EQ_BF16, 0x1p-14}, {EQ_FP64, 0x1p31}};
    for (int k = 0; k < 3; k++) {
        eq_metrics m;
        EQ_EXPECT_OK(eq_compare_tensors_of_run(&ref, &test, &tol_fp32, cases[k].run, &m));
        EQ_EXPECT(m.max_ulp == cases[k].ulps && m.dtype == cases[k].run, "%s run: %g ULP, want %g",
                  eq_dtype_name(cases[k].run), m.max_ulp, cases[k].ulps);
    }
    eq_tensor_free(&ref), eq_tensor_free(&test);
}

static void test_nonfinite(void)
{
    char diag[160];
    const double r1[4] = {1, NAN, INFINITY, 2};
    eq_tensor ref, test;
    make_1d(&ref, EQ_FP32, r1, 4);
    make_1d(&test, EQ_FP32, r1, 4);
    eq_metrics m = compare(&ref, &test, &tol_fp32);
    EQ_EXPECT(m.nan_ref == 1 && m.inf_ref == 1 && m.nan_test == 1 && m.inf_test == 1, "counts");
    EQ_EXPECT(m.nonfinite_mismatch == 0 && m.n_finite == 2, "same NaN/Inf on both sides is no difference");
    /* but a NaN in both runs is no value to judge the layout by: not a pass a reviewer may miss */
    EQ_EXPECT(eq_observe(&m) == EQ_OBS_NONFINITE && eq_nonfinite_in_both(&m), "NaN in both: observed %s",
              eq_observed_name(eq_observe(&m)));
    EXPECT_HAS(eq_diagnose(&m, diag, sizeof diag), "1 of 4 elements NaN in both runs, at the same places");
    eq_tensor_free(&test);
    eq_tensor_free(&ref);
    /* Inf at the same places with a finite rest (a mask's -Inf): equal there, and said */
    const double r3[4] = {1, -INFINITY, -INFINITY, 2};
    make_1d(&ref, EQ_FP32, r3, 4);
    make_1d(&test, EQ_FP32, r3, 4);
    m = compare(&ref, &test, &tol_fp32);
    EQ_EXPECT(eq_observe(&m) == EQ_OBS_BIT_EXACT && !eq_nonfinite_in_both(&m), "shared -Inf: observed %s",
              eq_observed_name(eq_observe(&m)));
    EXPECT_HAS(eq_diagnose(&m, diag, sizeof diag), "bit-exact; 2 of 4 elements Inf in both runs, at the same places");
    eq_tensor_free(&ref);
    eq_tensor_free(&test);
    /* all NaN, all Inf in both runs: nothing was compared */
    const double all_nan[3] = {NAN, NAN, NAN}, all_inf[3] = {INFINITY, -INFINITY, INFINITY};
    make_1d(&ref, EQ_BF16, all_nan, 3);
    make_1d(&test, EQ_BF16, all_nan, 3);
    m = compare(&ref, &test, &tol_bf16);
    EQ_EXPECT(eq_observe(&m) == EQ_OBS_NONFINITE, "all NaN in both: observed %s", eq_observed_name(eq_observe(&m)));
    EXPECT_HAS(eq_diagnose(&m, diag, sizeof diag), "all 3 elements NaN in both runs");
    eq_tensor_free(&ref);
    eq_tensor_free(&test);
    make_1d(&ref, EQ_FP32, all_inf, 3);
    make_1d(&test, EQ_FP32, all_inf, 3);
    m = compare(&ref, &test, &tol_fp32);
    EQ_EXPECT(eq_observe(&m) == EQ_OBS_NONFINITE, "all Inf in both: observed %s", eq_observed_name(eq_observe(&m)));
    EXPECT_HAS(eq_diagnose(&m, diag, sizeof diag), "all 3 elements Inf in both runs, of the same signs: nothing finite to compare");
    eq_tensor_free(&test);
    /* NaN where the reference has 2, 4.5 where it has 4 -> numeric metrics over the other 3 */
    const double r2[4] = {1, 2, 3, 4}, t2[4] = {1, NAN, 3, 4.5};
    eq_tensor_free(&ref);
    make_1d(&ref, EQ_FP32, r2, 4);
    make_1d(&test, EQ_FP32, t2, 4);
    m = compare(&ref, &test, &tol_fp32);
    EQ_EXPECT(m.nonfinite_mismatch == 1 && m.nan_test == 1 && m.n_finite == 3, "NaN on one side");
    EQ_EXPECT(m.max_abs == 0.5 && m.mean_abs == 0.5 / 3.0, "max %g mean %g over 3 pairs", m.max_abs, m.mean_abs);
    EQ_EXPECT(eq_observe(&m) == EQ_OBS_NONFINITE, "observed %s", eq_observed_name(eq_observe(&m)));
    EXPECT_HAS(eq_diagnose(&m, diag, sizeof diag), "1 NaN in test where the reference is finite");
    eq_tensor_free(&ref);
    eq_tensor_free(&test);
    /* +Inf vs -Inf: the counts agree but the values do not */
    const double pinf = INFINITY, minf = -INFINITY;
    make_1d(&ref, EQ_BF16, &pinf, 1);
    make_1d(&test, EQ_BF16, &minf, 1);
    m = compare(&ref, &test, &tol_bf16);
    EQ_EXPECT(m.nonfinite_mismatch == 1 && eq_observe(&m) == EQ_OBS_NONFINITE, "+Inf vs -Inf");
    EXPECT_HAS(eq_diagnose(&m, diag, sizeof diag), "NaN/Inf differ at 1 elements");
    eq_tensor_free(&ref);
    eq_tensor_free(&test);
    /* +0 vs -0: the bits differ, the values do not */
    const double pzero = 0.0, mzero = -0.0;
    make_1d(&ref, EQ_FP32, &pzero, 1);
    make_1d(&test, EQ_FP32, &mzero, 1);
    m = compare(&ref, &test, &tol_zero);
    EQ_EXPECT(m.n_differ == 1 && m.max_abs == 0.0 && m.n_outside == 0, "signed zero");
    EQ_EXPECT(eq_observe(&m) == EQ_OBS_WITHIN, "observed %s", eq_observed_name(eq_observe(&m)));
    EXPECT_HAS(eq_diagnose(&m, diag, sizeof diag), "sign of zero");
    eq_tensor_free(&ref);
    eq_tensor_free(&test);
}

/* The next representable value away from zero: one ULP at the value's own scale. */
static void bump_one_ulp(eq_tensor *t, int64_t i)
{
    if (t->dtype == EQ_BF16) ((uint16_t *)t->data)[i]++;
    else ((float *)t->data)[i] = nextafterf(((float *)t->data)[i], copysignf(INFINITY, ((float *)t->data)[i]));
}

static void test_planted(eq_dtype dt)
{
    const eq_tolerance *tol = dt == EQ_BF16 ? &tol_bf16 : &tol_fp32;
    const char *dn = eq_dtype_name(dt);
    char diag[160];
    eq_tensor ref, test;
    make_values(&ref, dt, 64, 64, 2024); /* 4096 values */
    eq_metrics m;

    EQ_EXPECT_OK(eq_tensor_clone(&test, &ref)); /* identical */
    m = compare(&ref, &test, tol);
    EQ_EXPECT(eq_observe(&m) == EQ_OBS_BIT_EXACT && m.n_differ == 0 && m.max_abs == 0.0, "%s identical", dn);
    EQ_EXPECT(strcmp(eq_diagnose(&m, diag, sizeof diag), "bit-exact") == 0, "%s: '%s'", dn, diag);
    EQ_EXPECT(m.ref_std > 0.8 && m.ref_std < 1.2 && fabs(m.ref_mean) < 0.1, "%s: not O(1) data", dn);

    EQ_EXPECT(eq_tensor_get(&ref, 17) != 0.0, "element 17 is zero");
    bump_one_ulp(&test, 17); /* one element off by one ULP */
    m = compare(&ref, &test, tol);
    EQ_EXPECT(eq_observe(&m) == EQ_OBS_WITHIN, "%s 1 ULP: observed %s", dn, eq_observed_name(eq_observe(&m)));
    EQ_EXPECT(m.n_differ == 1 && m.max_ulp == 1.0 && m.argmax == 17, "%s 1 ULP: differ %lld, %g ULP at %lld",
              dn, (long long)m.n_differ, m.max_ulp, (long long)m.argmax);
    EXPECT_HAS(eq_diagnose(&m, diag, sizeof diag), "1 element differs, 1 ULP at index 17");
    EQ_EXPECT(eq_observe(&m) != EQ_OBS_BIT_EXACT, "%s: 1 ULP seen as bit-exact", dn);

    for (int64_t i = 0; i < 4096; i++) eq_tensor_set(&test, i, 8.0 * eq_tensor_get(&ref, i)); /* x8, exact */
    m = compare(&ref, &test, tol);
    EQ_EXPECT(eq_observe(&m) == EQ_OBS_OUTSIDE, "%s x8: observed %s", dn, eq_observed_name(eq_observe(&m)));
    EQ_EXPECT(m.ls_scale == 8.0 && m.cosine > 0.999999, "%s x8: ls %.17g cos %g", dn, m.ls_scale, m.cosine);
    EXPECT_HAS(eq_diagnose(&m, diag, sizeof diag), "uniform scale x8 (ls 8, cos 1.000000)");

    for (int64_t i = 0; i < 4096; i++) eq_tensor_set(&test, i, eq_tensor_get(&ref, i) / 16.0); /* AVG for SUM */
    m = compare(&ref, &test, tol);
    EQ_EXPECT(eq_observe(&m) == EQ_OBS_OUTSIDE && m.ls_scale == 0.0625, "%s x1/16: ls %g", dn, m.ls_scale);
    EXPECT_HAS(eq_diagnose(&m, diag, sizeof diag), "x0.0625 = 1/16");

    eq_tensor_free(&test);
    EQ_EXPECT_OK(eq_tensor_clone(&test, &ref));
    eq_tensor_set(&test, 100, NAN); /* one NaN */
    m = compare(&ref, &test, tol);
    EQ_EXPECT(eq_observe(&m) == EQ_OBS_NONFINITE && m.nan_test == 1 && m.nan_ref == 0, "%s NaN: observed %s",
              dn, eq_observed_name(eq_observe(&m)));
    EXPECT_HAS(eq_diagnose(&m, diag, sizeof diag), "1 NaN in test");

    /* Rounding noise: each element times (1 + e), |e| <= 2u, rounded once: < 3 ULP, inside the table. */
    uint64_t state = 7;
    double u = eq_dtype_unit_roundoff(dt);
    for (int64_t i = 0; i < 4096; i++) {
        state = state * 6364136223846793005u + 1442695040888963407u;
        double e = ((double)(state >> 11) * 0x1p-53 - 0.5) * 4.0 * u;
        eq_tensor_set(&test, i, eq_tensor_get(&ref, i) * (1.0 + e));
    }
    m = compare(&ref, &test, tol);
    EQ_EXPECT(eq_observe(&m) == EQ_OBS_WITHIN, "%s noise: observed %s", dn, eq_observed_name(eq_observe(&m)));
    EQ_EXPECT(m.n_differ > 1000 && m.max_ulp >= 1.0 && m.max_ulp < 3.0, "%s noise: %lld differ, max %g ULP", dn,
              (long long)m.n_differ, m.max_ulp);
    EXPECT_HAS(eq_diagnose(&m, diag, sizeof diag), "rounding: max ");
    eq_tensor_free(&ref);
    eq_tensor_free(&test);
}

/* eq_diagnose on metrics set by hand: the factor names and the order of the checks. */
static void test_diagnose(void)
{
    char diag[160];
    eq_metrics m = {.dtype = EQ_BF16, .count = 4096, .n_finite = 4096, .n_differ = 4000, .max_abs = 1.0,
                    .argmax = 5, .max_ulp = 300, .rel_fro = 7.0, .cosine = 0.99996, .ls_scale = 8.0035};
    /* bf16 noise on top of a x8 bug: named as 8, with the fitted scale beside it */
    EXPECT_HAS(eq_diagnose(&m, diag, sizeof diag), "uniform scale x8 (ls 8.0035, cos 0.999960)");
    m.ls_scale = 0.1251;
    m.rel_fro = 0.87; /* 1/8 within 1e-3 */
    EXPECT_HAS(eq_diagnose(&m, diag, sizeof diag), "uniform scale x0.125 = 1/8 (ls 0.1251");
    m.ls_scale = 1.5;
    EXPECT_HAS(eq_diagnose(&m, diag, sizeof diag), "uniform scale x1.5 (ls 1.5");
    m.ls_scale = -1.0;
    m.cosine = -1.0; /* a sign flip */
    EXPECT_HAS(eq_diagnose(&m, diag, sizeof diag), "uniform scale x-1 (ls -1, cos -1.000000)");
    m.cosine = 0.5; /* off in scale but not in direction: not a uniform factor */
    EXPECT_HAS(eq_diagnose(&m, diag, sizeof diag), "not rounding: rel 8.7e-01, cos 0.500000");
    m.ls_scale = 1.0001;
    m.cosine = 0.99999;
    m.rel_fro = 3.1e-3;
    m.max_ulp = 2;
    EQ_EXPECT(strcmp(eq_diagnose(&m, diag, sizeof diag), "rounding: max 2 ULP, rel 3.1e-03") == 0, "'%s'", diag);
    m.dtype = EQ_FP32; /* the same relative error is 2e4 fp32 units: not rounding there */
    EXPECT_HAS(eq_diagnose(&m, diag, sizeof diag), "not rounding: rel 3.1e-03");
    m.rel_fro = 2e-5; /* but a deep fp32 stack's honest drift is */
    EXPECT_HAS(eq_diagnose(&m, diag, sizeof diag), "rounding: max 2 ULP, rel 2.0e-05");
    m.dtype = EQ_BF16;
    m.rel_fro = 3.1e-3;
    m.n_differ = 3; /* a handful: named before rounding */
    EQ_EXPECT(strcmp(eq_diagnose(&m, diag, sizeof diag), "3 elements differ, max 2 ULP at index 5") == 0, "'%s'",
              diag);
    m.nan_test = 3;
    m.inf_test = 1;
    m.nonfinite_mismatch = 4; /* non-finite comes first */
    EQ_EXPECT(strcmp(eq_diagnose(&m, diag, sizeof diag), "3 NaN, 1 Inf in test where the reference is finite") == 0,
              "'%s'", diag);
}

/* x: input [4, 8] fp32, w: param [8, 8] fp32, out: activation [4, out_cols] in out_dtype. */
static void make_capture(eq_capture *cap, int64_t out_cols, eq_dtype out_dtype, int with_out)
{
    eq_capture_init(cap);
    snprintf(cap->meta.case_name, sizeof cap->meta.case_name, "row_parallel");
    eq_tensor t;
    make_values(&t, EQ_FP32, 4, 8, 1);
    EQ_EXPECT_OK(eq_capture_add(cap, 0, "x", EQ_ROLE_INPUT, &t));
    make_values(&t, EQ_FP32, 8, 8, 2);
    EQ_EXPECT_OK(eq_capture_add(cap, 0, "w", EQ_ROLE_PARAM, &t));
    if (!with_out) return;
    EQ_EXPECT_OK(eq_tensor_init_2d(&t, out_dtype, 4, out_cols));
    for (int64_t i = 0; i < 4 * out_cols; i++) eq_tensor_set(&t, i, 0.25 * (double)(i % 7) - 0.5);
    EQ_EXPECT_OK(eq_capture_add(cap, 0, "out", EQ_ROLE_ACTIVATION, &t));
}

static void expect_capture_error(const eq_capture *ref, const eq_capture *test, const char *a, const char *b)
{
    eq_comparison c;
    EQ_EXPECT(eq_compare_captures(ref, test, &tol_fp32, EQ_EXPECT_WITHIN, &c) == EQ_ERR_INPUT,
              "mismatch not refused (want '%s')", a);
    EXPECT_HAS(eq_error_message(), a);
    EXPECT_HAS(eq_error_message(), b);
    EQ_EXPECT(c.results == NULL && c.count == 0, "comparison not left empty");
    eq_comparison_free(&c);
    eq_error_clear();
}

static void test_captures(void)
{
    eq_capture ref, test;
    make_capture(&ref, 8, EQ_FP32, 1);
    make_capture(&test, 9, EQ_FP32, 1);
    expect_capture_error(&ref, &test, "layers/00/out", "fp32 [4, 8] vs test run fp32 [4, 9]");
    eq_capture_free(&test);
    make_capture(&test, 8, EQ_BF16, 1);
    expect_capture_error(&ref, &test, "layers/00/out", "bf16 [4, 8]");
    eq_capture_free(&test);
    make_capture(&test, 8, EQ_FP32, 0);
    expect_capture_error(&ref, &test, "layers/00/out", "not in the test run");
    expect_capture_error(&test, &ref, "layers/00/out", "in the test run but not in the reference");
    eq_capture_free(&test);

    /* A parameter one ULP off, the activation within: the parameter is not as expected. */
    make_capture(&test, 8, EQ_FP32, 1);
    bump_one_ulp(&test.entries[1].tensor, 3);
    eq_tensor_set(&test.entries[2].tensor, 5, eq_tensor_get(&test.entries[2].tensor, 5) + 1e-4);
    eq_comparison c;
    EQ_EXPECT_OK(eq_compare_captures(&ref, &test, &tol_fp32, EQ_EXPECT_WITHIN, &c));
    eq_judge(&c);
    EQ_EXPECT(c.count == 3 && c.n_unexpected == 1, "count %d unexpected %d", c.count, c.n_unexpected);
    if (c.count == 3) {
        const eq_tensor_result *x = &c.results[0], *w = &c.results[1], *out = &c.results[2];
        EQ_EXPECT(strcmp(w->path, "layers/00/w") == 0 && w->role == EQ_ROLE_PARAM, "order: %s", w->path);
        EQ_EXPECT(x->as_expected && x->observed == EQ_OBS_BIT_EXACT, "input");
        EQ_EXPECT(w->expect == EQ_EXPECT_BIT_EXACT && w->observed == EQ_OBS_WITHIN && !w->as_expected,
                  "param: expect %s observed %s", eq_expect_name(w->expect), eq_observed_name(w->observed));
        /* w[3] = -0.116 (spacing 2^-27) under rms(w) = 1.136 (spacing 2^-23), both from numpy on
         * make_values' LCG: one step of its own is 2^-4 ULP at the tensor's scale */
        EXPECT_HAS(w->diagnosis, "1 element differs, 0.0625 ULP at index 3");
        EQ_EXPECT(out->expect == EQ_EXPECT_WITHIN && out->observed == EQ_OBS_WITHIN && out->as_expected,
                  "activation: observed %s", eq_observed_name(out->observed));
        EQ_EXPECT(strcmp(c.ref_meta.case_name, "row_parallel") == 0 && strcmp(c.tol.name, "fp32_1_layer") == 0,
                  "meta and tolerance not kept");
    }
    eq_comparison_free(&c);
    eq_capture_free(&test);
    eq_capture_free(&ref);
}

/* scale = ref_rms: ref {3, 4} has RMS sqrt(12.5) = 3.5355; atol 0.1 becomes 0.35355, so a
 * difference of 0.3 is within and 0.4 is outside, where an absolute atol of 0.1 refuses both. */
static void test_rms_scaled_tolerance(void)
{
    const eq_tolerance rms_tol = {"rms", 0.1, 0.0, "test", EQ_ATOL_REF_RMS};
    const eq_tolerance abs_tol = {"abs", 0.1, 0.0, "test", EQ_ATOL_ABSOLUTE};
    const double r[2] = {3, 4}, near[2] = {3.3, 4}, far[2] = {3, 4.4};
    eq_tensor ref, t_near, t_far;
    make_1d(&ref, EQ_FP64, r, 2);
    make_1d(&t_near, EQ_FP64, near, 2);
    make_1d(&t_far, EQ_FP64, far, 2);
    eq_metrics m = compare(&ref, &t_near, &rms_tol);
    EQ_EXPECT(m.n_outside == 0 && fabs(m.max_tol_ratio - 0.3 / (0.1 * sqrt(12.5))) < 1e-12, "0.3 under rms: ratio %g",
              m.max_tol_ratio);
    m = compare(&ref, &t_far, &rms_tol);
    EQ_EXPECT(m.n_outside == 1, "0.4 under rms: %lld outside", (long long)m.n_outside);
    m = compare(&ref, &t_near, &abs_tol);
    EQ_EXPECT(m.n_outside == 1, "0.3 under absolute 0.1: %lld outside", (long long)m.n_outside);
    eq_tensor_free(&ref), eq_tensor_free(&t_near), eq_tensor_free(&t_far);
}

/* mean(dist/ref) and the worst relative error (seed 001's grad-check line): a hand-computed case,
 * then planted factors 1/8 (AVG where SUM is expected) and 16 (a term contributed on each of 16
 * ranks) on fp32 values, and an identical copy (1 and 0). */
static void test_ratio_metrics(void)
{
    eq_tensor ref, test;
    const double r[4] = {1.0, -2.0, 0.0, 4.0}, t[4] = {2.0, -2.0, 3.0, 2.0};
    make_1d(&ref, EQ_FP64, r, 4);
    make_1d(&test, EQ_FP64, t, 4);
    eq_metrics m = compare(&ref, &test, &tol_fp32);
    /* ratios over |ref| >= rms(ref) = sqrt(21 / 4) = 2.29: only 4 -> 2 / 4 = 0.5 (1 and -2 are below
     * the tensor's scale); max |d| 3 (at ref 0) / max |ref| 4 */
    EQ_EXPECT(m.mean_ratio == 0.5 && m.n_mean_ratio == 1 && m.worst_rel == 0.75,
              "hand: mean(dist/ref) %.17g over %lld, worst %g", m.mean_ratio, (long long)m.n_mean_ratio, m.worst_rel);
    eq_tensor_free(&ref), eq_tensor_free(&test);
    /* A near-zero reference no longer drives it: 1e-6 -> 1e-5 (ratio 10) beside three exact
     * elements at 1 read 3.25 over every nonzero reference; over |ref| >= rms (0.87): 1. */
    const double r_small[4] = {1e-6, 1.0, -1.0, 1.0}, t_small[4] = {1e-5, 1.0, -1.0, 1.0};
    make_1d(&ref, EQ_FP64, r_small, 4);
    make_1d(&test, EQ_FP64, t_small, 4);
    m = compare(&ref, &test, &tol_fp32);
    EQ_EXPECT(m.mean_ratio == 1.0 && m.n_mean_ratio == 3, "near-zero ref: mean(dist/ref) %.17g over %lld",
              m.mean_ratio, (long long)m.n_mean_ratio);
    eq_tensor_free(&ref), eq_tensor_free(&test);
    const double factors[3] = {0.125, 16.0, 1.0};
    for (int f = 0; f < 3; f++) {
        make_values(&ref, EQ_FP32, 64, 64, 77);
        make_values(&test, EQ_FP32, 64, 64, 77);
        for (int64_t i = 0; i < 4096; i++) eq_tensor_set(&test, i, eq_tensor_get(&ref, i) * factors[f]); /* exact */
        m = compare(&ref, &test, &tol_fp32);
        EQ_EXPECT(m.mean_ratio == factors[f], "x%g: mean(dist/ref) %.17g", factors[f], m.mean_ratio);
        EQ_EXPECT(fabs(m.worst_rel - fabs(factors[f] - 1.0)) < 1e-15, "x%g: worst rel %.17g, want %g", factors[f],
                  m.worst_rel, fabs(factors[f] - 1.0));
        eq_tensor_free(&ref), eq_tensor_free(&test);
    }
}

/* A case line "out = differs rel 1e-3..1e-2" (or "factor 0.12..0.13") at dp 8 under avg, applied
 * to out = ref x (1 + delta): the non-invariance at its stated size is as expected; the same at 10x
 * that size, and a one-ULP rounding difference, are not, and the diagnosis says why. */
static int sized_verdict(double factor, int bump, eq_expect_size size, char *diagnosis, size_t len)
{
    eq_capture ref, test;
    eq_comparison c;
    eq_case kase;
    memset(&kase, 0, sizeof kase);
    kase.tensor_expects[0] = (eq_case_tensor_expect){"avg", "out", EQ_EXPECT_DIFFERS, size};
    kase.n_tensor_expects = 1;
    make_capture(&ref, 8, EQ_FP32, 1);
    make_capture(&test, 8, EQ_FP32, 1);
    eq_tensor *out = &test.entries[2].tensor;
    for (int64_t i = 0; i < eq_tensor_numel(out); i++) eq_tensor_set(out, i, eq_tensor_get(out, i) * factor);
    if (bump) bump_one_ulp(out, 9);
    EQ_EXPECT_OK(eq_compare_captures(&ref, &test, &tol_fp32, EQ_EXPECT_WITHIN, &c));
    c.test_meta.dp = 8;
    snprintf(c.test_meta.grads, sizeof c.test_meta.grads, "avg");
    eq_comparison_apply_case(&c, &kase);
    eq_judge(&c);
    int ok = c.count == 3 && c.results[2].as_expected;
    EQ_EXPECT(c.count == 3 && c.n_unexpected == !ok, "n_unexpected %d with out %s", c.n_unexpected,
              ok ? "as expected" : "not");
    if (c.count == 3) snprintf(diagnosis, len, "%s", c.results[2].diagnosis);
    EQ_EXPECT(c.count == 3 && c.results[2].expect_size.metric == size.metric, "size not kept on the result");
    eq_comparison_free(&c);
    eq_capture_free(&test);
    eq_capture_free(&ref);
    return ok;
}

static void test_sized_differs(void)
{
    const eq_expect_size rel = {EQ_SIZE_REL, 1e-3, 1e-2}, factor = {EQ_SIZE_FACTOR, 0.12, 0.13};
    const eq_expect_size any = {EQ_SIZE_ANY, 0, 0};
    char diag[320];
    EQ_EXPECT(sized_verdict(1.003, 0, rel, diag, sizeof diag), "x1.003 (rel 3e-3) not as expected: %s", diag);
    EQ_EXPECT(!sized_verdict(1.03, 0, rel, diag, sizeof diag), "x1.03 (rel 3e-2, 10x the size) as expected");
    EXPECT_HAS(diag, "; rel 0.03, expected differs rel 0.001..0.01");
    EQ_EXPECT(!sized_verdict(1.0, 1, rel, diag, sizeof diag), "a one-ULP rounding difference as expected");
    EXPECT_HAS(diag, "expected differs rel 0.001..0.01");
    EQ_EXPECT(sized_verdict(1.0, 1, any, diag, sizeof diag), "bare differs refused a one-ULP difference");
    EQ_EXPECT(!sized_verdict(1.0, 0, rel, diag, sizeof diag), "bit-exact met a differs");
    EQ_EXPECT(sized_verdict(0.125, 0, factor, diag, sizeof diag), "x1/8 not in factor 0.12..0.13: %s", diag);
    EQ_EXPECT(!sized_verdict(0.25, 0, factor, diag, sizeof diag), "x1/4 in factor 0.12..0.13");
    EXPECT_HAS(diag, "; factor 0.25, expected differs factor 0.12..0.13");
}

/* The flat argmax as a position, and the factor's name for the JSON report. */
static void test_index_and_factor_name(void)
{
    const int64_t shape[3] = {32, 2, 128};
    int64_t index[3] = {-1, -1, -1};
    EQ_EXPECT(eq_unflatten_index(3, shape, (5 * 2 + 1) * 128 + 77, index) && index[0] == 5 && index[1] == 1 &&
                  index[2] == 77, "position [%lld, %lld, %lld], want [5, 1, 77]", (long long)index[0],
              (long long)index[1], (long long)index[2]);
    EQ_EXPECT(!eq_unflatten_index(3, shape, -1, index), "argmax -1 has a position");
    EQ_EXPECT(!eq_unflatten_index(3, shape, 32 * 2 * 128, index), "an index past the end has a position");
    eq_metrics m = {.n_differ = 10, .n_finite = 10, .max_abs = 1.0, .cosine = 1.0, .ls_scale = 0.0625};
    char name[32];
    EQ_EXPECT(eq_factor_name(&m, name, sizeof name) != NULL && strcmp(name, "1/16") == 0, "x0.0625 named '%s'", name);
    m.ls_scale = -8.01;
    EQ_EXPECT(eq_factor_name(&m, name, sizeof name) != NULL && strcmp(name, "-8") == 0, "x-8.01 named '%s'", name);
    m.ls_scale = 1.5;
    EQ_EXPECT(eq_factor_name(&m, name, sizeof name) != NULL && strcmp(name, "1.5") == 0, "x1.5 named '%s'", name);
    m.ls_scale = 1.001; /* rounding, not a factor */
    EQ_EXPECT(eq_factor_name(&m, name, sizeof name) == NULL && name[0] == '\0', "x1.001 named '%s'", name);
    m.ls_scale = 0.5, m.cosine = 0.3; /* direction lost: not a uniform factor */
    EQ_EXPECT(eq_factor_name(&m, name, sizeof name) == NULL, "cos 0.3 named '%s'", name);
}


int main(void)
{
    test_sized_differs();
    test_index_and_factor_name();
    test_ratio_metrics();
    test_rms_scaled_tolerance();
    test_hand_computed();
    test_ulp_at_scale();
    test_ulp_near_zero();
    test_ulp_in_run_dtype();
    test_nonfinite();
    test_diagnose();
    test_planted(EQ_BF16);
    test_planted(EQ_FP32);
    test_captures();
    return eq_test_finish("compare_test");
}
