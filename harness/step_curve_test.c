/* harness/step_curve.h on synthetic curves, each built so that its class follows from how it was
 * made, not from the classifier: a random walk of rounding size, a gradient scaled by a constant,
 * updates scaled by a constant, an exponentially growing divergence, a power law faster than
 * rounding, a diverged layout, and the inputs it refuses. */
#include <math.h>
#include <string.h>

#include "harness/step_curve.h"
#include "harness/base/testing.h"

#define MAX_STEPS 64

/* A curve of n steps: the reference trains `step_len` per step in a straight line (trained_dist
 * = step_len s), loses 0.01 per step from 3, and its gradient norm is 1 + 0.1 s; the layout's
 * quantities are filled in by each test. */
static void base_curve(eq_step_point *pts, int n, double step_len)
{
    memset(pts, 0, sizeof(eq_step_point) * MAX_STEPS);
    for (int i = 0; i < n; i++) {
        const double s = i + 1;
        pts[i].trained_dist = step_len * s;
        pts[i].loss_ref = pts[i].loss_test = 3.0 - 0.01 * s;
        pts[i].grad_norm_ref = pts[i].grad_norm_test = 1.0 + 0.1 * s;
    }
}

static eq_curve_verdict classify(const eq_step_point *pts, int n, eq_dtype dt)
{
    eq_curve_verdict v;
    EQ_EXPECT_OK(eq_curve_classify(pts, n, dt, &v));
    return v;
}

/* Rounding in bf16: param_dist = 2e-4 sqrt(s) (a random walk's expected size, with a +-1% wiggle
 * that cannot move the fitted exponent by 0.05), so b is 0.5; drift at step 40 is
 * 2e-4 sqrt(40) / 0.4 = 0.0032, far below 0.1; gradient norms 0.4% (an ulp of bf16) apart at
 * step 1, 0.2% after, alternating; losses within 1e-3. */
static void test_rounding(void)
{
    eq_step_point pts[MAX_STEPS];
    const int n = 40;
    base_curve(pts, n, 0.01);
    for (int i = 0; i < n; i++) {
        const double s = i + 1;
        pts[i].param_dist = 2e-4 * sqrt(s) * (1.0 + 0.01 * sin(s));
        pts[i].param_max_abs = pts[i].param_dist / 10;
        pts[i].grad_norm_test = pts[i].grad_norm_ref * (1.0 + (i == 0 ? -0.004 : i % 2 ? 0.002 : -0.002));
        pts[i].loss_test = pts[i].loss_ref * (1.0 + 1e-3);
    }
    const eq_curve_verdict v = classify(pts, n, EQ_BF16);
    EQ_EXPECT(v.cls == EQ_CURVE_ROUNDING, "class %s: %s", eq_curve_class_name(v.cls), v.why);
    EQ_EXPECT(fabs(v.growth_exponent - 0.5) < 0.05, "growth exponent %g, want 0.5", v.growth_exponent);
    EQ_EXPECT(fabs(v.drift - 2e-4 * sqrt(40.0) * (1.0 + 0.01 * sin(40.0)) / 0.4) < 1e-12, "drift %g", v.drift);
    EQ_EXPECT(fabs(v.loss_rel - 1e-3) < 1e-12, "loss_rel %g", v.loss_rel);
    EQ_EXPECT(fabs(v.grad_ratio - 0.996) < 1e-12 && v.grad_ratio_step == 1, "grad ratio %g at %d", v.grad_ratio,
              v.grad_ratio_step);
    EQ_EXPECT(strstr(v.why, "step^0.5") != NULL, "why: %s", v.why);
}

/* A gradient scaled by 0.5 at every step (a sum where a mean of 2 was meant, hidden from the
 * parameters by Adam: their distance stays at rounding size) and by 2 (the other way). */
static void test_factor_gradient(void)
{
    eq_step_point pts[MAX_STEPS];
    const int n = 10;
    const double factors[2] = {0.5, 2.0};
    for (int f = 0; f < 2; f++) {
        base_curve(pts, n, 0.01);
        for (int i = 0; i < n; i++) {
            pts[i].grad_norm_test = factors[f] * pts[i].grad_norm_ref;
            pts[i].param_dist = 1e-6 * sqrt(i + 1.0);
        }
        const eq_curve_verdict v = classify(pts, n, EQ_BF16);
        EQ_EXPECT(v.cls == EQ_CURVE_FACTOR, "x%g: class %s: %s", factors[f], eq_curve_class_name(v.cls), v.why);
        EQ_EXPECT(v.grad_ratio == factors[f] && v.grad_ratio_step == 1, "x%g: grad ratio %g at step %d", factors[f],
                  v.grad_ratio, v.grad_ratio_step);
        EQ_EXPECT(strstr(v.why, factors[f] == 0.5 ? "0.500x" : "2.000x") && strstr(v.why, "step 1"), "why: %s", v.why);
    }
}

/* SGD with every update scaled by 1.5: the layout's parameters sit 0.5 of the distance trained
 * from the reference's from step 1 on; the gradients themselves agree. */
static void test_factor_update(void)
{
    eq_step_point pts[MAX_STEPS];
    const int n = 12;
    base_curve(pts, n, 0.01);
    for (int i = 0; i < n; i++) pts[i].param_dist = 0.5 * pts[i].trained_dist;
    const eq_curve_verdict v = classify(pts, n, EQ_FP32);
    EQ_EXPECT(v.cls == EQ_CURVE_FACTOR, "class %s: %s", eq_curve_class_name(v.cls), v.why);
    EQ_EXPECT(v.drift == 0.5 && v.grad_ratio == 1.0, "drift %g, grad ratio %g", v.drift, v.grad_ratio);
    EQ_EXPECT(fabs(v.growth_exponent - 1.0) < 1e-9, "param_dist = 0.005 s grows like s^1: %g", v.growth_exponent);
}

/* A divergence growing exponentially (e^0.4 per step) from 1.5e-4 at step 1 to 0.3 at step 20:
 * past what rounding reaches in bf16 (even Adam's 4 sqrt(u) = 0.25), and not a factor (small at
 * first, gradients agreeing). */
static void test_growing(void)
{
    eq_step_point pts[MAX_STEPS];
    const int n = 20;
    base_curve(pts, n, 0.01);
    for (int i = 0; i < n; i++) pts[i].param_dist = 0.3 * exp(0.4 * (i + 1 - n)) * pts[i].trained_dist;
    eq_curve_verdict v = classify(pts, n, EQ_BF16);
    EQ_EXPECT(v.cls == EQ_CURVE_GROWING, "class %s: %s", eq_curve_class_name(v.cls), v.why);
    EQ_EXPECT(fabs(v.drift - 0.3) < 1e-12 && v.growth_exponent > 1.5, "drift %g, exponent %g", v.drift, v.growth_exponent);

    /* the same curve whose gradient norm halves at the last step: the parameters were already
     * 0.2 of the distance trained apart going into it (bf16 rounding 8u sqrt(19) = 0.14), so that
     * is growth, not a factor */
    pts[n - 1].grad_norm_test = 0.5 * pts[n - 1].grad_norm_ref;
    v = classify(pts, n, EQ_BF16);
    EQ_EXPECT(v.cls == EQ_CURVE_GROWING, "late ratio: class %s: %s", eq_curve_class_name(v.cls), v.why);
    EQ_EXPECT(v.grad_ratio == 0.5 && v.grad_ratio_step == n, "late ratio %g at %d", v.grad_ratio, v.grad_ratio_step);

    /* fp32, a drift that starts at 0.15 and compounds by 1.2 a step (5x by step 10): a wrong
     * update that feeds on itself, not the same factor every step */
    base_curve(pts, 10, 0.01);
    for (int i = 0; i < 10; i++) pts[i].param_dist = 0.15 * pow(1.2, i) * pts[i].trained_dist;
    v = classify(pts, 10, EQ_FP32);
    EQ_EXPECT(v.cls == EQ_CURVE_GROWING, "compounding: class %s: %s", eq_curve_class_name(v.cls), v.why);

    /* fp32, param_dist = c s^2 reaching a drift of 1e-3: below 0.1, but growing like step^2, far
     * faster than rounding's random walk, and 500x what fp32 rounding gives (8u sqrt(20) = 2e-6) */
    base_curve(pts, n, 0.01);
    for (int i = 0; i < n; i++) pts[i].param_dist = 1e-3 * 0.2 * ((i + 1.0) * (i + 1.0)) / (n * n);
    v = classify(pts, n, EQ_FP32);
    EQ_EXPECT(v.cls == EQ_CURVE_GROWING, "fp32 s^2: class %s: %s", eq_curve_class_name(v.cls), v.why);
    EQ_EXPECT(fabs(v.growth_exponent - 2.0) < 1e-9, "exponent %g", v.growth_exponent);

    /* the same shape at 1e-7 of the distance trained: within fp32 rounding, growth or not */
    for (int i = 0; i < n; i++) pts[i].param_dist *= 1e-4;
    v = classify(pts, n, EQ_FP32);
    EQ_EXPECT(v.cls == EQ_CURVE_ROUNDING, "fp32 s^2 tiny: class %s: %s", eq_curve_class_name(v.cls), v.why);
}

/* Adam in bf16 over a short run: the first update's signs flipped on the elements whose gradients
 * are within rounding of 0 put the parameters 0.15 of the distance trained apart, shrinking as the
 * moments average (the classifier's comment: 0.088 measured on a small MLP; sqrt(u) = 0.0625 sets
 * the scale, a larger model flips more). Below 4 sqrt(u) = 0.25: rounding. The same curve in fp32,
 * where sqrt(u) is 2.4e-4, is an update off by a factor from step 1 on. */
static void test_adam_bf16(void)
{
    eq_step_point pts[MAX_STEPS];
    const double drift[5] = {0.15, 0.12, 0.1, 0.09, 0.08};
    base_curve(pts, 5, 0.01);
    for (int i = 0; i < 5; i++) pts[i].param_dist = drift[i] * pts[i].trained_dist;
    eq_curve_verdict v = classify(pts, 5, EQ_BF16);
    EQ_EXPECT(v.cls == EQ_CURVE_ROUNDING, "bf16: class %s: %s", eq_curve_class_name(v.cls), v.why);
    v = classify(pts, 5, EQ_FP32);
    EQ_EXPECT(v.cls == EQ_CURVE_FACTOR, "fp32: class %s: %s", eq_curve_class_name(v.cls), v.why);
}

/* Gradient norms 5% apart in bf16 at step 1: more than 8 units (3.1%) but short of a factor (10%). */
static void test_near_ratio(void)
{
    eq_step_point pts[MAX_STEPS];
    const int n = 5;
    base_curve(pts, n, 0.01);
    for (int i = 0; i < n; i++) pts[i].param_dist = 1e-5 * sqrt(i + 1.0);
    pts[0].grad_norm_test = 1.05 * pts[0].grad_norm_ref;
    const eq_curve_verdict v = classify(pts, n, EQ_BF16);
    EQ_EXPECT(v.cls == EQ_CURVE_ROUNDING, "class %s: %s", eq_curve_class_name(v.cls), v.why);
}

static void test_identical_and_errors(void)
{
    eq_step_point pts[MAX_STEPS];
    memset(pts, 0, sizeof pts);
    eq_curve_verdict v = classify(pts, 7, EQ_FP32); /* all zeros: nothing differs */
    EQ_EXPECT(v.cls == EQ_CURVE_IDENTICAL && v.drift == 0 && v.growth_exponent == 0 && v.grad_ratio == 1 && v.loss_rel == 0,
              "class %s drift %g b %g ratio %g: %s", eq_curve_class_name(v.cls), v.drift, v.growth_exponent, v.grad_ratio, v.why);
    base_curve(pts, 7, 0.01); /* equal nonzero losses and norms, no distance */
    v = classify(pts, 7, EQ_BF16);
    EQ_EXPECT(v.cls == EQ_CURVE_IDENTICAL, "equal: class %s", eq_curve_class_name(v.cls));
    pts[6].loss_test = nextafter(pts[6].loss_ref, 0.0); /* one loss an ulp off: not identical */
    v = classify(pts, 7, EQ_BF16);
    EQ_EXPECT(v.cls == EQ_CURVE_ROUNDING, "an ulp: class %s", eq_curve_class_name(v.cls));

    eq_status st = eq_curve_classify(pts, 0, EQ_FP32, &v);
    EQ_EXPECT(st == EQ_ERR_INPUT, "n = 0 accepted");
    eq_error_clear();

    base_curve(pts, 7, 0.01);
    pts[3].loss_ref = NAN;
    st = eq_curve_classify(pts, 7, EQ_FP32, &v);
    EQ_EXPECT(st == EQ_ERR_INPUT && strstr(eq_error_message(), "step 4: the reference's loss is nan"), "reference nan: %s",
              eq_error_message());
    eq_error_clear();

    base_curve(pts, 7, 0.01);
    for (int i = 0; i < 7; i++) pts[i].param_dist = 1e-6;
    pts[2].loss_test = INFINITY;
    v = classify(pts, 7, EQ_FP32);
    EQ_EXPECT(v.cls == EQ_CURVE_GROWING && strstr(v.why, "diverged") && strstr(v.why, "step 3"), "layout inf: %s: %s",
              eq_curve_class_name(v.cls), v.why);

    EQ_EXPECT(strcmp(eq_curve_class_name(EQ_CURVE_FACTOR), "factor") == 0 && strcmp(eq_curve_class_name(EQ_CURVE_GROWING), "growing") == 0 &&
                  strcmp(eq_curve_class_name(EQ_CURVE_IDENTICAL), "identical") == 0 &&
                  strcmp(eq_curve_class_name(EQ_CURVE_ROUNDING), "rounding") == 0,
              "class names");
}

int main(void)
{
    test_rounding();
    test_factor_gradient();
    test_factor_update();
    test_growing();
    test_near_ratio();
    test_adam_bf16();
    test_identical_and_errors();
    return eq_test_finish("step_curve_test");
}
