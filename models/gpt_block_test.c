/* One GPT block, forward and backward, in fp64 against central finite differences: the input
 * gradient and every parameter gradient (a sample of each weight's elements). Then the same
 * block under tp = 2 and 4 agrees with tp = 1 to fp64 rounding, which checks the sharding of
 * attention heads and of both parallel linears in the backward. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "harness/base/rng.h"
#include "harness/base/testing.h"
#include "models/gpt_block.h"

static const gpt_sizes sizes = {.seq = 5, .batch = 2, .hidden = 8, .heads = 4, .ffn = 16, .layers = 1};

static eq_step make_step(int tp)
{
    eq_step s = {0};
    s.dtype = EQ_FP64;
    s.layout = (eq_layout){1, tp};
    s.algo = EQ_ALGO_RING;
    s.backend = &eq_backend_cpu;
    s.transport = &eq_transport_sim;
    return s;
}

/* f = sum_i w_i out_i for fixed random w, by a full forward. */
static double objective(const gpt_block_params *p, const eq_tensor *x, const eq_tensor *w)
{
    gpt_block_acts a;
    eq_step s = make_step(1);
    double f = NAN;
    if (gpt_acts_alloc(&a, &sizes, sizes.batch, EQ_FP64) != EQ_OK) return f;
    if (gpt_block_forward(&s, &sizes, p, x, &a) == EQ_OK) {
        f = 0;
        for (int64_t i = 0; i < eq_tensor_numel(w); i++) f += eq_tensor_get(w, i) * eq_tensor_get(&a.out, i);
    }
    gpt_acts_free(&a);
    return f;
}

/* Worst |analytic - FD| / max(1, |analytic|) over elements 0, stride, 2 stride, ... of t. FD step
 * h = 1e-6: truncation O(h^2) ~ 1e-12, cancellation O(eps |f| / h) ~ 1e-9 for |f| ~ 10. */
static double worst_fd(gpt_block_params *p, eq_tensor *x, const eq_tensor *w, eq_tensor *t, const eq_tensor *grad,
                       int64_t stride)
{
    const double h = 1e-6;
    double worst = 0;
    for (int64_t i = 0; i < eq_tensor_numel(t); i += stride) {
        double v = eq_tensor_get(t, i);
        eq_tensor_set(t, i, v + h);
        double up = objective(p, x, w);
        eq_tensor_set(t, i, v - h);
        double down = objective(p, x, w);
        eq_tensor_set(t, i, v);
        double err = fabs(eq_tensor_get(grad, i) - (up - down) / (2 * h)) / fmax(1.0, fabs(eq_tensor_get(grad, i)));
        if (!(err <= worst)) worst = err; /* NaN counts as worst */
    }
    return worst;
}

static void init_block(gpt_block_params *p, eq_tensor *x, eq_tensor *w)
{
    const gpt_sizes *z = &sizes;
    EQ_EXPECT_OK(gpt_params_alloc(p, z, EQ_FP64));
    /* Random LayerNorm parameters too (not 1 and 0), so their gradients are exercised fully. */
#define INIT(name, ndim, d0, d1, init, std, split) \
    eq_rng_fill_normal(&p->name, 3, #name, init == GPT_INIT_NORMAL ? 0.5 : 0.3);
    GPT_BLOCK_PARAMS(INIT)
#undef INIT
    for (int64_t i = 0; i < z->hidden; i++) {
        eq_tensor_set(&p->ln1_gamma, i, 1 + eq_tensor_get(&p->ln1_gamma, i));
        eq_tensor_set(&p->ln2_gamma, i, 1 + eq_tensor_get(&p->ln2_gamma, i));
    }
    const int64_t shape[3] = {z->seq, z->batch, z->hidden};
    EQ_EXPECT_OK(eq_tensor_init(x, EQ_FP64, 3, shape));
    EQ_EXPECT_OK(eq_tensor_init(w, EQ_FP64, 3, shape));
    eq_rng_fill_normal(x, 3, "x", 1.0);
    eq_rng_fill_normal(w, 3, "w", 1.0);
}

static void test_block_gradients(void)
{
    gpt_block_params p, g;
    gpt_block_acts a;
    eq_tensor x, w, dx;
    init_block(&p, &x, &w);
    EQ_EXPECT_OK(gpt_params_alloc(&g, &sizes, EQ_FP64));
    EQ_EXPECT_OK(eq_tensor_clone(&dx, &x));
    EQ_EXPECT_OK(gpt_acts_alloc(&a, &sizes, sizes.batch, EQ_FP64));
    eq_step s = make_step(1);
    EQ_EXPECT_OK(gpt_block_forward(&s, &sizes, &p, &x, &a));
    EQ_EXPECT_OK(gpt_block_backward(&s, &sizes, &p, &x, &a, &w, &dx, &g));

    double e = worst_fd(&p, &x, &w, &x, &dx, 1);
    EQ_EXPECT(e < 1e-6, "block input gradient vs FD: %.2e", e);
#define CHECK(name, ndim, d0, d1, init, std, split)                                                  \
    e = worst_fd(&p, &x, &w, &p.name, &g.name, eq_tensor_numel(&p.name) > 64 ? 7 : 1);       \
    EQ_EXPECT(e < 1e-6, #name " gradient vs FD: %.2e", e);
    GPT_BLOCK_PARAMS(CHECK)
#undef CHECK
    /* The check bites: a gradient off by 1e-4 in one element is seen. */
    eq_tensor_set(&g.fc2_weight, 0, eq_tensor_get(&g.fc2_weight, 0) + 1e-4);
    EQ_EXPECT(worst_fd(&p, &x, &w, &p.fc2_weight, &g.fc2_weight, 7) > 1e-5, "planted gradient error missed");

    /* Tensor parallelism: the same block, heads and shards split, agrees to fp64 rounding. */
    for (int tp = 2; tp <= 2 * 2 && sizes.heads % tp == 0; tp *= 2) {
        gpt_block_params g_tp;
        gpt_block_acts a_tp;
        eq_tensor dx_tp;
        eq_step st = make_step(tp);
        EQ_EXPECT_OK(gpt_params_alloc(&g_tp, &sizes, EQ_FP64));
        EQ_EXPECT_OK(gpt_acts_alloc(&a_tp, &sizes, sizes.batch, EQ_FP64));
        EQ_EXPECT_OK(eq_tensor_clone(&dx_tp, &x));
        EQ_EXPECT_OK(gpt_block_forward(&st, &sizes, &p, &x, &a_tp));
        EQ_EXPECT_OK(gpt_block_backward(&st, &sizes, &p, &x, &a_tp, &w, &dx_tp, &g_tp));
        double worst = 0;
        for (int64_t i = 0; i < eq_tensor_numel(&x); i++) {
            worst = fmax(worst, fabs(eq_tensor_get(&a_tp.out, i) - eq_tensor_get(&a.out, i)));
            worst = fmax(worst, fabs(eq_tensor_get(&dx_tp, i) - eq_tensor_get(&dx, i)));
        }
        for (int64_t i = 0; i < eq_tensor_numel(&g.qkv_weight); i++)
            worst = fmax(worst, fabs(eq_tensor_get(&g_tp.qkv_weight, i) - eq_tensor_get(&g.qkv_weight, i)));
        EQ_EXPECT(worst < 1e-12, "tp=%d block differs from tp=1 by %.2e", tp, worst);
        gpt_params_free(&g_tp), gpt_acts_free(&a_tp), eq_tensor_free(&dx_tp);
    }
    gpt_params_free(&p), gpt_params_free(&g), gpt_acts_free(&a);
    eq_tensor_free(&x), eq_tensor_free(&w), eq_tensor_free(&dx);
}

/* The forward-only activations (shared storage) give the block output and LayerNorm statistics
 * bit for bit as the full set does, in each dtype, under tp, and with F below and above 3H (the
 * shared wide buffer is sized by the larger). */
static void test_forward_only_acts(eq_dtype dt, int tp, int64_t ffn)
{
    gpt_sizes z = sizes;
    z.ffn = ffn;
    gpt_block_params p;
    gpt_block_acts full, lean;
    eq_tensor x;
    const int64_t shape[3] = {z.seq, z.batch, z.hidden};
    EQ_EXPECT_OK(gpt_params_alloc(&p, &z, dt));
#define INIT(name, ndim, d0, d1, init, std, split) eq_rng_fill_normal(&p.name, 5, #name, 0.5);
    GPT_BLOCK_PARAMS(INIT)
#undef INIT
    EQ_EXPECT_OK(eq_tensor_init(&x, dt, 3, shape));
    eq_rng_fill_normal(&x, 5, "x", 1.0);
    EQ_EXPECT_OK(gpt_acts_alloc(&full, &z, z.batch, dt));
    EQ_EXPECT_OK(gpt_acts_alloc_forward_only(&lean, &z, z.batch, dt));
    eq_step s = make_step(tp);
    s.dtype = dt;
    EQ_EXPECT_OK(gpt_block_forward(&s, &z, &p, &x, &full));
    EQ_EXPECT_OK(gpt_block_forward(&s, &z, &p, &x, &lean));
    const size_t stats = (size_t)(z.seq * z.batch) * sizeof(double);
    const int same = memcmp(full.out.data, lean.out.data, eq_tensor_bytes(&full.out)) == 0 &&
                     memcmp(full.ln1_rstd, lean.ln1_rstd, stats) == 0 && memcmp(full.ln2_rstd, lean.ln2_rstd, stats) == 0;
    EQ_EXPECT(same, "%s tp=%d ffn=%lld: the forward-only activations change the block output", eq_dtype_name(dt), tp,
              (long long)ffn);
    gpt_params_free(&p), gpt_acts_free(&full), gpt_acts_free(&lean), eq_tensor_free(&x);
}

int main(void)
{
    test_block_gradients();
    const eq_dtype dtypes[3] = {EQ_BF16, EQ_FP32, EQ_FP64};
    for (int d = 0; d < 3; d++)
        for (int tp = 1; tp <= 4; tp *= 2) {
            test_forward_only_acts(dtypes[d], tp, sizes.ffn);
            test_forward_only_acts(dtypes[d], tp, 4 * sizes.ffn);
        }
    return eq_test_finish("gpt_block_test");
}
