/* torch.optim.SGD (no momentum, no weight decay) and torch.optim.Adam (no amsgrad, no weight
 * decay), element by element in the order and precision of torch's CPU kernels, so that a run
 * here and torch.optim on the same fp32 (or fp64) tensors give the same bits
 * (harness/optimizer_torch_test.py checks it against the installed torch).
 *
 * How torch computes each step on CPU (torch/optim/sgd.py, adam.py; ATen's AVX2/AVX512 kernels,
 * which every x86-64 CPU since 2013 dispatches):
 * - The python scalars (lr, betas, eps, and bias corrections computed from them) are doubles;
 *   every scalar reaches an fp32 kernel rounded once to float (Scalar::to<float>, or a wrapped
 *   0-dim double tensor cast to the fp32 common dtype), and enters an fp64 kernel unrounded.
 * - add_(x, alpha=a) is one fused multiply-add fma(x, a, self) (vec::fmadd); lerp_(end, w) is
 *   fma(w, end - self, self) for |w| < 0.5, else fma(w - 1, end - self, end);
 *   addcmul_(t1, t2, value=c) is fma(c * t1, t2, self) (the compiler contracts the kernel's
 *   self + c * t1 * t2); addcdiv_(t1, t2, value=c) is self + (c * t1) / t2, two roundings after
 *   the product; mul_, sqrt, division by a scalar and add_ of a scalar each round once.
 * - Adam's bias corrections are python doubles: 1 - beta ** step (C's pow, as CPython's float
 *   power calls it), lr / bias_correction1, math.sqrt(bias_correction2).
 * torch built for no SIMD (ATEN_CPU_CAPABILITY=default) rounds a + alpha * b twice and differs
 * from both torch on AVX2 and this file by an ulp or two now and then.
 *
 * This file is built with -ffp-contract=off (meson.build): every fma here is written out, and no
 * other product is fused. */
#include "harness/optimizer.h"

#include <math.h>
#include <string.h>

static const char *const optimizer_names[EQ_OPT_COUNT] = {[EQ_OPT_SGD] = "sgd", [EQ_OPT_ADAM] = "adam"};

const char *eq_optimizer_name(eq_optimizer_kind k)
{
    return k >= 0 && k < EQ_OPT_COUNT ? optimizer_names[k] : "unknown";
}

eq_status eq_optimizer_parse(const char *name, eq_optimizer_kind *out)
{
    for (int k = 0; k < EQ_OPT_COUNT; k++) {
        if (strcmp(name, optimizer_names[k]) == 0) {
            *out = (eq_optimizer_kind)k;
            return EQ_OK;
        }
    }
    return EQ_FAIL(EQ_ERR_USAGE, "unknown optimizer '%s' (known: sgd, adam)", name);
}

/* sgd: torch 1.x has no default lr (a required argument) and torch 2.2+ takes 1e-3, Adam's;
 * equiv takes 1e-2, so that a few steps of plain SGD move the parameters well past the rounding
 * of their own fp32 masters. adam: torch.optim.Adam's defaults. */
void eq_optimizer_defaults(eq_optimizer_kind k, eq_optimizer_config *out)
{
    memset(out, 0, sizeof *out);
    out->kind = k;
    if (k == EQ_OPT_ADAM) {
        out->lr = 1e-3;
        out->beta1 = 0.9;
        out->beta2 = 0.999;
        out->eps = 1e-8;
        out->moment_form = EQ_ADAM_LERP;
    } else {
        out->lr = 1e-2;
    }
}

/* torch's own checks (Invalid learning rate, beta parameter, epsilon value), as usage errors. */
eq_status eq_optimizer_check(const eq_optimizer_config *c)
{
    if (c->kind < 0 || c->kind >= EQ_OPT_COUNT) return EQ_FAIL(EQ_ERR_USAGE, "unknown optimizer kind %d", (int)c->kind);
    if (!(c->lr >= 0.0) || isinf(c->lr)) return EQ_FAIL(EQ_ERR_USAGE, "invalid learning rate %g (want finite, >= 0)", c->lr);
    if (c->kind == EQ_OPT_SGD) return EQ_OK;
    if (!(c->beta1 >= 0.0 && c->beta1 < 1.0) || !(c->beta2 >= 0.0 && c->beta2 < 1.0))
        return EQ_FAIL(EQ_ERR_USAGE, "invalid adam betas (%g, %g) (want each in [0, 1))", c->beta1, c->beta2);
    if (!(c->eps >= 0.0) || isinf(c->eps)) return EQ_FAIL(EQ_ERR_USAGE, "invalid adam eps %g (want finite, >= 0)", c->eps);
    if (c->moment_form != EQ_ADAM_LERP && c->moment_form != EQ_ADAM_MUL_ADD)
        return EQ_FAIL(EQ_ERR_USAGE, "unknown adam moment form %d", (int)c->moment_form);
    return EQ_OK;
}

eq_status eq_param_state_init(const eq_optimizer_config *c, const eq_tensor *param, eq_param_state *s)
{
    eq_status st = EQ_OK;
    memset(s, 0, sizeof *s);
    const eq_dtype master_dt = param->dtype == EQ_FP64 ? EQ_FP64 : EQ_FP32;
    EQ_TRY(eq_tensor_init(&s->master, master_dt, param->ndim, param->shape));
    const int64_t n = eq_tensor_numel(param);
    for (int64_t i = 0; i < n; i++) eq_tensor_set(&s->master, i, eq_tensor_get(param, i)); /* exact widening */
    if (c->kind == EQ_OPT_ADAM) {
        EQ_TRY(eq_tensor_init(&s->exp_avg, master_dt, param->ndim, param->shape));
        EQ_TRY(eq_tensor_init(&s->exp_avg_sq, master_dt, param->ndim, param->shape));
    }
cleanup:
    if (st != EQ_OK) eq_param_state_free(s);
    return st;
}

void eq_param_state_free(eq_param_state *s)
{
    eq_tensor_free(&s->master);
    eq_tensor_free(&s->exp_avg);
    eq_tensor_free(&s->exp_avg_sq);
}

/* The python-double scalars of step t, before any rounding to the master's precision. */
typedef struct {
    double neg_lr;                /* sgd: param.add_(grad, alpha=-lr) */
    double beta1, one_minus_beta1; /* adam: exp_avg's decay (lerp weight 1 - beta1) */
    double beta2, one_minus_beta2; /* adam: exp_avg_sq's decay */
    double bias_correction2_sqrt;  /* math.sqrt(1 - beta2 ** t) */
    double eps;
    double neg_step_size;          /* -(lr / (1 - beta1 ** t)) */
} step_scalars;

static step_scalars scalars_of(const eq_optimizer_config *c, int64_t t)
{
    const double bias_correction1 = 1.0 - pow(c->beta1, (double)t);
    const double bias_correction2 = 1.0 - pow(c->beta2, (double)t);
    return (step_scalars){
        .neg_lr = -c->lr,
        .beta1 = c->beta1,
        .one_minus_beta1 = 1.0 - c->beta1,
        .beta2 = c->beta2,
        .one_minus_beta2 = 1.0 - c->beta2,
        .bias_correction2_sqrt = sqrt(bias_correction2),
        .eps = c->eps,
        .neg_step_size = -(c->lr / bias_correction1),
    };
}

/* fp32 master: n elements of param (updated), exp_avg, exp_avg_sq (adam) and grad (widened). */
static void sgd_f32(const step_scalars *k, int64_t n, float *param, const eq_tensor *grad)
{
    const float alpha = (float)k->neg_lr;
    for (int64_t i = 0; i < n; i++) param[i] = fmaf((float)eq_tensor_get(grad, i), alpha, param[i]);
}

static void adam_f32(const step_scalars *k, eq_adam_moment_form form, int64_t n, float *param, float *exp_avg,
                     float *exp_avg_sq, const eq_tensor *grad)
{
    const float beta1 = (float)k->beta1, weight1 = (float)k->one_minus_beta1;
    const float beta2 = (float)k->beta2, value2 = (float)k->one_minus_beta2;
    const float bc2_sqrt = (float)k->bias_correction2_sqrt, eps = (float)k->eps;
    const float value = (float)k->neg_step_size;
    for (int64_t i = 0; i < n; i++) {
        const float g = (float)eq_tensor_get(grad, i);
        if (form == EQ_ADAM_MUL_ADD) exp_avg[i] = fmaf(g, weight1, exp_avg[i] * beta1);
        else if (fabsf(weight1) < 0.5f) exp_avg[i] = fmaf(weight1, g - exp_avg[i], exp_avg[i]);
        else exp_avg[i] = fmaf(weight1 - 1.0f, g - exp_avg[i], g);
        exp_avg_sq[i] = fmaf(value2 * g, g, exp_avg_sq[i] * beta2);
        const float denom = sqrtf(exp_avg_sq[i]) / bc2_sqrt + eps;
        param[i] = param[i] + (value * exp_avg[i]) / denom;
    }
}

/* The fp64 twins: the same operations, the scalars unrounded. */
static void sgd_f64(const step_scalars *k, int64_t n, double *param, const eq_tensor *grad)
{
    for (int64_t i = 0; i < n; i++) param[i] = fma(eq_tensor_get(grad, i), k->neg_lr, param[i]);
}

static void adam_f64(const step_scalars *k, eq_adam_moment_form form, int64_t n, double *param, double *exp_avg,
                     double *exp_avg_sq, const eq_tensor *grad)
{
    const double weight1 = k->one_minus_beta1;
    for (int64_t i = 0; i < n; i++) {
        const double g = eq_tensor_get(grad, i);
        if (form == EQ_ADAM_MUL_ADD) exp_avg[i] = fma(g, weight1, exp_avg[i] * k->beta1);
        else if (fabs(weight1) < 0.5) exp_avg[i] = fma(weight1, g - exp_avg[i], exp_avg[i]);
        else exp_avg[i] = fma(weight1 - 1.0, g - exp_avg[i], g);
        exp_avg_sq[i] = fma(k->one_minus_beta2 * g, g, exp_avg_sq[i] * k->beta2);
        const double denom = sqrt(exp_avg_sq[i]) / k->bias_correction2_sqrt + k->eps;
        param[i] = param[i] + (k->neg_step_size * exp_avg[i]) / denom;
    }
}

/* Same extents (the dtypes may differ). */
static int same_extents(const eq_tensor *a, const eq_tensor *b)
{
    if (a->ndim != b->ndim) return 0;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d]) return 0;
    return 1;
}

static eq_status check_shape(const char *what, const eq_tensor *t, const eq_tensor *master)
{
    if (same_extents(t, master)) return EQ_OK;
    char got[96], want[96];
    return EQ_FAIL(EQ_ERR_INPUT, "optimizer step: %s shape %s does not match the parameter's %s", what,
                   eq_tensor_shape_str(t, got, sizeof got), eq_tensor_shape_str(master, want, sizeof want));
}

eq_status eq_optimizer_step(const eq_optimizer_config *c, int64_t t, eq_param_state *s, const eq_tensor *grad,
                            eq_tensor *param_out)
{
    eq_status st = EQ_OK;
    EQ_TRY(eq_optimizer_check(c));
    const int adam = c->kind == EQ_OPT_ADAM;
    if (t < 1) {
        st = EQ_FAIL(EQ_ERR_INTERNAL, "optimizer step %lld: steps count from 1", (long long)t);
        goto cleanup;
    }
    if (s->master.data == NULL || (adam && (s->exp_avg.data == NULL || s->exp_avg_sq.data == NULL))) {
        st = EQ_FAIL(EQ_ERR_INTERNAL, "optimizer step: state not initialised for %s", eq_optimizer_name(c->kind));
        goto cleanup;
    }
    EQ_TRY(check_shape("gradient", grad, &s->master));
    EQ_TRY(check_shape("output", param_out, &s->master));

    const step_scalars k = scalars_of(c, t);
    const int64_t n = eq_tensor_numel(&s->master);
    if (s->master.dtype == EQ_FP64) {
        if (adam) adam_f64(&k, c->moment_form, n, s->master.data, s->exp_avg.data, s->exp_avg_sq.data, grad);
        else sgd_f64(&k, n, s->master.data, grad);
    } else {
        if (adam) adam_f32(&k, c->moment_form, n, s->master.data, s->exp_avg.data, s->exp_avg_sq.data, grad);
        else sgd_f32(&k, n, s->master.data, grad);
    }
    /* the master rounded once (nearest, ties to even) to the parameter's dtype */
    for (int64_t i = 0; i < n; i++) eq_tensor_set(param_out, i, eq_tensor_get(&s->master, i));
cleanup:
    return st;
}
