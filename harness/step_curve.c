/* The classes of harness/step_curve.h and where each threshold comes from.
 *
 * u is the run dtype's unit roundoff (eq_dtype_unit_roundoff: 2^-8 bf16, 2^-24 fp32, 2^-53 fp64).
 *
 * What rounding can do to a norm: ROUNDING_UNITS u = 8u. The layouts compute each gradient
 * element from the same inputs in another order or with other partial sums, each rounding moving
 * the element by at most u relative and a gradient passing a few such roundings (a reduction
 * order, a layer's output, a cast); 8u is a few units times a few roundings. A norm of a vector
 * whose every element moved by relative <= r moves by relative <= r (|x + e| - |x| <= |e| <= r|x|),
 * so two layouts' gradient norms at the same parameters agree within 8u: 3.1% in bf16, 4.8e-7 in
 * fp32, 8.9e-16 in fp64.
 *
 * A factor: TAU = 0.1, for every dtype. A ratio outside [1/(1+TAU), 1+TAU] is a factor. Above
 * the coarsest dtype's rounding (bf16's 8u = 3.1%, by 3x) and below the smallest factor bug worth
 * catching: 2 or 1/2 (a sum for a mean over 2 ranks), 1/dp, 1/16, and 7/8 (one of 8 ranks'
 * shards missing, 12.5% off). The gradient norm says it only while the parameters going into the
 * step are still rounding apart (step 1, where both runs start from the same parameters, or a
 * step whose parameters drifted no more than rounding can): after a real drift the gradients
 * differ because the parameters do, which is growth, not a factor. Adam hides a factor f in the
 * gradients from the parameters (m / sqrt(v) cancels it) but not from the gradient norm at
 * step 1. The update may carry the factor instead (SGD with a scaled update, a wrong lr): every
 * step's update is then off by |1 - f| of itself, so the parameters drift by |1 - f| of the
 * distance trained from step 1 on, a drift that starts at or above drift_bug (below) and stays
 * within a factor 2 (DRIFT_STEADY) of where it started.
 *
 * Growth: drift = param_dist / trained_dist. Under SGD rounding moves each update by relative
 * ~8u; summed over n steps the differences grow at most like n (the same sign every step) while
 * the distance trained grows at least like sqrt(n) (a random walk), so the drift stays below
 * 8u sqrt(n) (rounding_drift) unless the training itself amplifies it. Adam can do more: its
 * update is about lr for every element whatever the gradient's size, so an element whose gradient
 * is within rounding of 0 may flip its update's sign, moving by 2 lr; the fraction of those grows
 * like u (gradients spread evenly near 0), their share of the distance like sqrt(u). Measured on
 * a 2-layer tanh MLP (harness/step_curve_calibration.py: batch 256 summed in 4 chunks against 1,
 * 200 steps): fp32 SGD and Adam drift 8e-7 (13u) at step 1, 3e-7 after; bf16 SGD 0.0067, then
 * 0.002; bf16 Adam 0.088 = 1.4 sqrt(u) at step 1, 0.017 after; gradient norms within 1.6%. So a drift is a bug past drift_bug = max(TAU, DRIFT_SQRT_UNITS sqrt(u)):
 * 0.25 in bf16 (4 sqrt(u), 3x the Adam measurement), 0.1 in fp32 and fp64. The curve is growing
 * when the last drift passes drift_bug, or when param_dist grows faster than step^1.5
 * (GROWTH_EXPONENT: rounding's random walk is step^0.5, its steady bias step^1) with the drift
 * above rounding_drift. Rounding otherwise; growth_exponent then typically 0.5 to 1.
 *
 * The reference's own numbers must be finite (a diverged reference has nothing to compare
 * against: an input error). A layout whose numbers go non-finite diverged: growing. */
#include "harness/step_curve.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define ROUNDING_UNITS 8.0
#define TAU 0.1
#define DRIFT_STEADY 2.0
#define DRIFT_SQRT_UNITS 4.0
#define GROWTH_EXPONENT 1.5

static const char *const class_names[] = {
    [EQ_CURVE_IDENTICAL] = "identical", [EQ_CURVE_ROUNDING] = "rounding",
    [EQ_CURVE_FACTOR] = "factor",       [EQ_CURVE_GROWING] = "growing",
};

const char *eq_curve_class_name(eq_curve_class c)
{
    return c >= EQ_CURVE_IDENTICAL && c <= EQ_CURVE_GROWING ? class_names[c] : "unknown";
}

/* The drift past which the parameters are apart by a bug, not rounding (Adam's sign flips included). */
static double drift_bug_of(double u) { return fmax(TAU, DRIFT_SQRT_UNITS * sqrt(u)); }

/* The most drift SGD's rounding gives after `steps` steps (0 before any): 8u sqrt(steps), at most
 * drift_bug. */
static double rounding_drift_after(double u, int steps)
{
    return fmin(drift_bug_of(u), ROUNDING_UNITS * u * sqrt((double)steps));
}

/* a / b for two magnitudes: 0 where both are 0, +inf where only b is. */
static double ratio_or_inf(double a, double b) { return b != 0.0 ? a / b : a == 0.0 ? 0.0 : INFINITY; }

/* param_dist / trained_dist of a point (0 where neither moved, +inf where only the layout did). */
static double drift_of(const eq_step_point *p) { return ratio_or_inf(p->param_dist, p->trained_dist); }

/* grad_norm_test / grad_norm_ref (1 where both are 0). */
static double grad_ratio_of(const eq_step_point *p)
{
    return p->grad_norm_ref == 0.0 && p->grad_norm_test == 0.0 ? 1.0 : ratio_or_inf(p->grad_norm_test, p->grad_norm_ref);
}

/* How far a ratio is from 1, the same for r and 1/r. */
static double log_distance(double r) { return r > 0.0 ? fabs(log(r)) : INFINITY; }

/* b of param_dist ~ c step^b, least squares on (log step, log param_dist) over the points with a
 * finite param_dist > 0; 0 with fewer than 2 of them. */
static double growth_exponent(const eq_step_point *pts, int n)
{
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    int m = 0;
    for (int i = 0; i < n; i++) {
        const double d = pts[i].param_dist;
        if (!(d > 0.0) || !isfinite(d)) continue;
        const double x = log((double)(i + 1)), y = log(d);
        sx += x, sy += y, sxx += x * x, sxy += x * y, m++;
    }
    if (m < 2) return 0.0;
    return (sxy - sx * sy / m) / (sxx - sx * sx / m);
}

/* The first of a side's quantities that is not finite (a norm or distance also not negative),
 * its name and value; NULL where all are. */
typedef struct {
    const char *name;
    double value;
} named_value;

static const named_value *first_bad(const named_value *v, int count, int nonnegative_from)
{
    for (int i = 0; i < count; i++)
        if (!isfinite(v[i].value) || (i >= nonnegative_from && v[i].value < 0.0)) return &v[i];
    return NULL;
}

static eq_status check_reference(const eq_step_point *p, int step)
{
    const named_value ref[] = {{"loss", p->loss_ref}, {"gradient norm", p->grad_norm_ref}, {"distance trained", p->trained_dist}};
    const named_value *bad = first_bad(ref, 3, 1);
    if (bad == NULL) return EQ_OK;
    return EQ_FAIL(EQ_ERR_INPUT, "step %d: the reference's %s is %g: the reference run diverged, nothing to compare against", step,
                   bad->name, bad->value);
}

/* The first step whose layout side is not finite (0: none): the layout's run diverged. */
static int first_diverged(const eq_step_point *pts, int n, named_value *what)
{
    for (int i = 0; i < n; i++) {
        const eq_step_point *p = &pts[i];
        const named_value test[] = {{"loss", p->loss_test}, {"gradient norm", p->grad_norm_test}, {"parameter distance", p->param_dist}};
        const named_value *bad = first_bad(test, 3, 3);
        if (bad == NULL) continue;
        *what = *bad;
        return i + 1;
    }
    return 0;
}

static int all_identical(const eq_step_point *pts, int n)
{
    for (int i = 0; i < n; i++)
        if (pts[i].param_dist != 0.0 || pts[i].loss_test != pts[i].loss_ref || pts[i].grad_norm_test != pts[i].grad_norm_ref)
            return 0;
    return 1;
}

eq_status eq_curve_classify(const eq_step_point *pts, int n, eq_dtype dtype, eq_curve_verdict *out)
{
    eq_status st = EQ_OK;
    memset(out, 0, sizeof *out);
    if (n < 1 || pts == NULL) {
        st = EQ_FAIL(EQ_ERR_INPUT, "a step curve needs at least 1 step, got %d", n);
        goto cleanup;
    }
    for (int i = 0; i < n; i++) EQ_TRY(check_reference(&pts[i], i + 1));

    const double u = eq_dtype_unit_roundoff(dtype);
    const double rounding_rel = ROUNDING_UNITS * u; /* a gradient norm's rounding */
    const char *dt = eq_dtype_name(dtype);
    const eq_step_point *last = &pts[n - 1];
    out->drift = drift_of(last);
    out->growth_exponent = growth_exponent(pts, n);
    out->loss_rel = ratio_or_inf(fabs(last->loss_test - last->loss_ref), fabs(last->loss_ref));
    /* the gradient ratio furthest from 1 (the first of equals), and the furthest among the steps
     * whose parameters were still rounding apart: the one a factor is read from */
    int factor_step = 0;
    double drift_before = 0.0; /* before step 1 both runs hold the same parameters */
    out->grad_ratio = 1.0;
    for (int i = 0; i < n; i++) {
        const double r = grad_ratio_of(&pts[i]);
        if (out->grad_ratio_step == 0 || log_distance(r) > log_distance(out->grad_ratio)) {
            out->grad_ratio = r;
            out->grad_ratio_step = i + 1;
        }
        const int params_rounding_apart = drift_before <= rounding_drift_after(u, i);
        if (params_rounding_apart && log_distance(r) > log1p(TAU) &&
            (factor_step == 0 || log_distance(r) > log_distance(grad_ratio_of(&pts[factor_step - 1]))))
            factor_step = i + 1;
        drift_before = drift_of(&pts[i]);
    }
    const double rounding_drift = rounding_drift_after(u, n), drift_bug = drift_bug_of(u);
    const double drift_first = drift_of(&pts[0]);
    double drift_min = drift_first, drift_max = drift_first;
    for (int i = 1; i < n; i++) {
        drift_min = fmin(drift_min, drift_of(&pts[i]));
        drift_max = fmax(drift_max, drift_of(&pts[i]));
    }
    named_value what = {0};
    const int diverged = first_diverged(pts, n, &what);

    if (all_identical(pts, n)) {
        out->cls = EQ_CURVE_IDENTICAL;
        snprintf(out->why, sizeof out->why, "every one of the %d steps bit-identical: losses, gradient norms, parameters", n);
    } else if (diverged) {
        out->cls = EQ_CURVE_GROWING;
        snprintf(out->why, sizeof out->why, "the layout's run diverged: its %s is %g at step %d (the reference's loss %.6g)",
                 what.name, what.value, diverged, pts[diverged - 1].loss_ref);
    } else if (factor_step > 0) {
        const double r = grad_ratio_of(&pts[factor_step - 1]);
        out->cls = EQ_CURVE_FACTOR;
        snprintf(out->why, sizeof out->why,
                 "gradient norm %.3fx the reference's at step %d, from parameters equal up to rounding (a factor: %s rounding "
                 "moves a norm by at most %.2g%%, a factor is %.0f%% or more)",
                 r, factor_step, dt, 100.0 * rounding_rel, 100.0 * TAU);
    } else if (drift_first >= drift_bug && drift_min >= drift_first / DRIFT_STEADY && drift_max <= drift_first * DRIFT_STEADY) {
        out->cls = EQ_CURVE_FACTOR;
        snprintf(out->why, sizeof out->why,
                 "parameters %.3g of the distance trained away from the reference's from step 1 on (%.3g to %.3g over %d "
                 "steps): every update off by a factor, not the gradients",
                 drift_first, drift_min, drift_max, n);
    } else if (out->drift > drift_bug) {
        out->cls = EQ_CURVE_GROWING;
        snprintf(out->why, sizeof out->why,
                 "drift %.3g of the distance trained at step %d, above the %.2g no %s rounding reaches, growing like step^%.2f",
                 out->drift, n, drift_bug, dt, out->growth_exponent);
    } else if (out->growth_exponent > GROWTH_EXPONENT && out->drift > rounding_drift) {
        out->cls = EQ_CURVE_GROWING;
        snprintf(out->why, sizeof out->why,
                 "drift %.3g of the distance trained at step %d, above %s rounding's %.2g, growing like step^%.2f, faster than "
                 "rounding's step^%.1f at most",
                 out->drift, n, dt, rounding_drift, out->growth_exponent, GROWTH_EXPONENT);
    } else {
        out->cls = EQ_CURVE_ROUNDING;
        snprintf(out->why, sizeof out->why,
                 "drift %.3g of the distance trained at step %d (%s rounding's %.2g, a bug's %.2g), growing like step^%.2f "
                 "(rounding's: 0.5 to 1); loss off by %.3g relative",
                 out->drift, n, dt, rounding_drift, drift_bug, out->growth_exponent, out->loss_rel);
    }
cleanup:
    return st;
}
