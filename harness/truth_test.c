/* --truth (truth.h): a reference and a test run, both fp32 roundings of an fp64 truth, the test
 * with errors three times the reference's, must read "less accurate (x3)"; swapped, "more
 * accurate"; equal noise "as accurate", and so are two errors both at rounding level; the numbers are the max and relative distances computed
 * here by hand; parameters are not judged; a truth of another shape is EQ_ERR_INPUT. */
#include <math.h>
#include <string.h>

#include "harness/base/testing.h"
#include "harness/truth.h"

enum { N = 64 };

/* A capture with one parameter and one activation `out` [N]: truth + scale * e_i. */
static void make_run(eq_capture *cap, eq_dtype dt, double scale)
{
    eq_tensor w = {0}, out = {0};
    eq_capture_init(cap);
    EQ_EXPECT_OK(eq_tensor_init_2d(&w, dt, 1, N));
    EQ_EXPECT_OK(eq_tensor_init_2d(&out, dt, 1, N));
    for (int i = 0; i < N; i++) {
        double truth = 1.0 + i / 16.0, e = (i % 2 ? 1.0 : -1.0) * 0x1p-20;
        eq_tensor_set(&w, i, truth);
        eq_tensor_set(&out, i, truth + scale * e);
    }
    EQ_EXPECT_OK(eq_capture_add(cap, 0, "w", EQ_ROLE_PARAM, &w));
    EQ_EXPECT_OK(eq_capture_add(cap, 0, "out", EQ_ROLE_ACTIVATION, &out));
}

static eq_tensor_result *result_of(eq_comparison *c, const char *path)
{
    for (int i = 0; i < c->count; i++)
        if (strcmp(c->results[i].path, path) == 0) return &c->results[i];
    return NULL;
}

static void check_reading(double ref_scale, double test_scale, const char *want)
{
    static const eq_tolerance loose = {"loose", 1.0, 0.0, "test", EQ_ATOL_ABSOLUTE};
    eq_capture ref, test, truth;
    eq_comparison cmp = {0};
    make_run(&ref, EQ_FP32, ref_scale);
    make_run(&test, EQ_FP32, test_scale);
    make_run(&truth, EQ_FP64, 0.0);
    EQ_EXPECT_OK(eq_compare_captures(&ref, &test, &loose, EQ_EXPECT_WITHIN, &cmp));
    EQ_EXPECT_OK(eq_truth_apply(&cmp, &ref, &test, &truth));
    eq_tensor_result *out = result_of(&cmp, "layers/00/out"), *w = result_of(&cmp, "layers/00/w");
    EQ_EXPECT(out != NULL && out->truth.applies, "no truth for out");
    EQ_EXPECT(w != NULL && !w->truth.applies, "a parameter judged against the truth");
    if (out != NULL) {
        /* |e_i| = 2^-20 everywhere: max = scale 2^-20; rel = scale 2^-20 sqrt(N) / ||truth|| */
        double norm = 0;
        for (int i = 0; i < N; i++) norm += (1.0 + i / 16.0) * (1.0 + i / 16.0);
        norm = sqrt(norm);
        EQ_EXPECT(fabs(out->truth.ref_max - ref_scale * 0x1p-20) < 1e-12, "ref max %g", out->truth.ref_max);
        EQ_EXPECT(fabs(out->truth.test_max - test_scale * 0x1p-20) < 1e-12, "test max %g", out->truth.test_max);
        EQ_EXPECT(fabs(out->truth.test_rel - test_scale * 0x1p-20 * sqrt((double)N) / norm) < 1e-12, "test rel %g",
                  out->truth.test_rel);
        char buf[64];
        EQ_EXPECT(strncmp(eq_truth_reading(&out->truth, buf, sizeof buf), want, strlen(want)) == 0,
                  "%g vs %g: '%s', want '%s'", ref_scale, test_scale, buf, want);
    }
    eq_comparison_free(&cmp);
    eq_capture_free(&ref);
    eq_capture_free(&test);
    eq_capture_free(&truth);
}

static void check_shape_mismatch(void)
{
    static const eq_tolerance loose = {"loose", 1.0, 0.0, "test", EQ_ATOL_ABSOLUTE};
    eq_capture ref, truth;
    eq_comparison cmp = {0};
    eq_tensor other = {0};
    make_run(&ref, EQ_FP32, 1.0);
    eq_capture_init(&truth);
    EQ_EXPECT_OK(eq_tensor_init_2d(&other, EQ_FP64, 2, N / 2));
    EQ_EXPECT_OK(eq_capture_add(&truth, 0, "out", EQ_ROLE_ACTIVATION, &other));
    EQ_EXPECT_OK(eq_compare_captures(&ref, &ref, &loose, EQ_EXPECT_WITHIN, &cmp));
    eq_status st = eq_truth_apply(&cmp, &ref, &ref, &truth);
    EQ_EXPECT(st == EQ_ERR_INPUT && strstr(eq_error_message(), "layers/00/out") != NULL, "status %d: %s", (int)st,
              eq_error_message());
    eq_error_clear();
    eq_comparison_free(&cmp);
    eq_capture_free(&ref);
    eq_capture_free(&truth);
}

int main(void)
{
    check_reading(1.0, 3.0, "less accurate (x3)");
    check_reading(3.0, 1.0, "more accurate (x0.333)");
    check_reading(2.0, 2.0, "as accurate");
    check_reading(2.0, 3.0, "as accurate (x1.5)");
    /* 5x apart, both at rounding level in fp32 (u = 6e-8): the ratio says nothing; 5x above it does */
    char buf[64];
    eq_truth tiny = {.applies = 1, .ref_rel = 1e-8, .test_rel = 5e-8, .unit_roundoff = 0x1p-24, .elements = 4096},
             small = {.applies = 1, .ref_rel = 1e-6, .test_rel = 5e-6, .unit_roundoff = 0x1p-24, .elements = 4096};
    EQ_EXPECT(strcmp(eq_truth_reading(&tiny, buf, sizeof buf), "as accurate, both within 4 u") == 0, "'%s'", buf);
    EQ_EXPECT(strcmp(eq_truth_reading(&small, buf, sizeof buf), "less accurate (x5)") == 0, "'%s'", buf);
    /* judged (a user's run with --truth DIR): more than 3x the reference's error and above 1 u */
    EQ_EXPECT(!eq_truth_flagged(&small), "a truth that informs only must not judge");
    small.judged = tiny.judged = 1;
    EQ_EXPECT(eq_truth_flagged(&small), "5x less accurate, far above 1 u: not rounding");
    EQ_EXPECT(!eq_truth_flagged(&tiny), "5x at 1 u: rounding explains it");
    eq_truth close = {.applies = 1, .judged = 1, .ref_rel = 1e-3, .test_rel = 2.9e-3, .unit_roundoff = 0x1p-8,
                      .elements = 4096};
    EQ_EXPECT(!eq_truth_flagged(&close), "x2.9 in bf16: within the allowed x3");
    close.test_rel = 3.5e-3;
    EQ_EXPECT(!eq_truth_flagged(&close), "x3.5 but below 1 u = 3.9e-3: a few roundings explain it");
    close.test_rel = 4.5e-3;
    EQ_EXPECT(eq_truth_flagged(&close), "x4.5 and above 1 u: not rounding");
    close.elements = 1; /* a loss: one rounding against another */
    EQ_EXPECT(!eq_truth_flagged(&close), "x4.5 of a scalar says nothing");
    check_shape_mismatch();
    return eq_test_finish("truth_test");
}
