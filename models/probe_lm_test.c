/* The probe's language model (models/probe_lm.h), forward and backward, in fp64 against central
 * finite differences: every parameter tensor's gradient of coef * log p(unit) (a sample of each
 * tensor's elements; the tokens repeat, so the token embedding's rows sum several positions).
 * Then the check is shown to bite, and a unit's gradient is shown not to depend on the layout the
 * step names (a unit runs whole on one rank). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "harness/base/rng.h"
#include "harness/base/testing.h"
#include "models/probe_lm.h"

static const probe_lm_sizes sizes = {.vocab = 7, .seq = 6, .hidden = 8, .heads = 2, .ffn = 12, .layers = 2};
static const int32_t tokens[6] = {1, 3, 1, 6, 3, 0};
static const double coef = -0.7;

static eq_step make_step(int dp)
{
    eq_step s = {0};
    s.dtype = EQ_FP64;
    s.layout = (eq_layout){dp, 1};
    s.algo = EQ_ALGO_RING;
    s.backend = &eq_backend_cpu;
    s.transport = &eq_transport_sim;
    return s;
}

static double objective(const probe_lm_params *p)
{
    eq_step s = make_step(1);
    double logp = NAN;
    if (probe_lm_unit(&s, &sizes, p, tokens, coef, &logp, NULL) != EQ_OK) return NAN;
    return coef * logp;
}

/* Worst |analytic - FD| / max(1, |analytic|) over elements 0, stride, 2 stride, ... of t. FD step
 * h = 1e-6: truncation O(h^2) ~ 1e-12, cancellation O(eps |f| / h) ~ 1e-9 for |f| ~ 10. */
static double worst_fd(probe_lm_params *p, eq_tensor *t, const eq_tensor *grad, int64_t stride)
{
    const double h = 1e-6;
    double worst = 0;
    for (int64_t i = 0; i < eq_tensor_numel(t); i += stride) {
        const double v = eq_tensor_get(t, i);
        eq_tensor_set(t, i, v + h);
        const double up = objective(p);
        eq_tensor_set(t, i, v - h);
        const double down = objective(p);
        eq_tensor_set(t, i, v);
        const double g = eq_tensor_get(grad, i);
        const double err = fabs(g - (up - down) / (2 * h)) / fmax(1.0, fabs(g));
        if (!(err <= worst)) worst = err; /* NaN counts as worst */
    }
    return worst;
}

int main(void)
{
    probe_lm_params p, g, g8;
    EQ_EXPECT_OK(probe_lm_alloc(&p, &sizes, EQ_FP64));
    EQ_EXPECT_OK(probe_lm_alloc(&g, &sizes, EQ_FP64));
    EQ_EXPECT_OK(probe_lm_alloc(&g8, &sizes, EQ_FP64));
    probe_lm_init(&p, &sizes, 5);
    /* LayerNorm parameters off 1 and 0, so their gradients are exercised fully. */
    const int n = probe_lm_n_tensors(&sizes);
    for (int k = 0; k < n; k++) {
        int layer;
        const char *name;
        eq_tensor *t = probe_lm_tensor(&p, &sizes, k, &layer, &name);
        if (strstr(name, "gamma") || strstr(name, "beta"))
            for (int64_t i = 0; i < eq_tensor_numel(t); i++)
                eq_tensor_set(t, i, eq_tensor_get(t, i) + 0.3 * eq_rng_normal(7, eq_rng_stream(name), (uint64_t)i));
    }
    eq_step s = make_step(1);
    double logp = 0, logp8 = 0;
    EQ_EXPECT_OK(probe_lm_unit(&s, &sizes, &p, tokens, coef, &logp, &g));
    EQ_EXPECT(logp < 0 && isfinite(logp), "log p(unit) = %g", logp);

    for (int k = 0; k < n; k++) {
        int layer;
        const char *name;
        eq_tensor *t = probe_lm_tensor(&p, &sizes, k, &layer, &name);
        const eq_tensor *gt = probe_lm_tensor(&g, &sizes, k, &layer, &name);
        const double e = worst_fd(&p, t, gt, eq_tensor_numel(t) / 8 + 1); /* about 8 of each */
        EQ_EXPECT(e < 1e-6, "layer %d %s gradient vs FD: %.2e", layer, name, e);
    }
    /* Tokens absent from the unit get no embedding gradient; the head's rows do (the softmax). */
    for (int64_t h = 0; h < sizes.hidden; h++) {
        EQ_EXPECT(eq_tensor_get(&g.tok_emb, 2 * sizes.hidden + h) == 0.0, "token 2 is absent but has a gradient");
        EQ_EXPECT(eq_tensor_get(&g.tok_emb, 1 * sizes.hidden + h) != 0.0, "token 1 is present but has no gradient");
    }

    /* The check bites: a gradient off by 1e-4 in one element of the head, or of a block, is seen. */
    eq_tensor_set(&g.head, 3, eq_tensor_get(&g.head, 3) + 1e-4);
    EQ_EXPECT(worst_fd(&p, &p.head, &g.head, 3) > 1e-5, "planted head gradient error missed");
    eq_tensor_set(&g.blocks[1].fc1_weight, 0, eq_tensor_get(&g.blocks[1].fc1_weight, 0) + 1e-4);
    EQ_EXPECT(worst_fd(&p, &p.blocks[1].fc1_weight, &g.blocks[1].fc1_weight, 5) > 1e-5,
              "planted block gradient error missed");

    /* A unit runs as tp = 1 on one rank whatever the step's layout: the same bits under dp 8. */
    eq_step s8 = make_step(8);
    EQ_EXPECT_OK(probe_lm_unit(&s8, &sizes, &p, tokens, coef, &logp8, &g8));
    EQ_EXPECT(logp8 == logp, "log p under dp 8: %.17g, dp 1: %.17g", logp8, logp);
    for (int k = 0; k < n; k++) {
        int layer;
        const char *name;
        const eq_tensor *a = probe_lm_tensor(&g, &sizes, k, &layer, &name);
        const eq_tensor *b = probe_lm_tensor(&g8, &sizes, k, &layer, &name);
        if (strcmp(name, "head") == 0 || strcmp(name, "fc1_weight") == 0) continue; /* planted above */
        EQ_EXPECT(memcmp(a->data, b->data, eq_tensor_bytes(a)) == 0, "%s's gradient depends on the step's layout",
                  name);
    }

    /* A token outside the vocabulary is an error, not a read out of bounds. */
    const int32_t bad[6] = {1, 3, 7, 6, 3, 0};
    EQ_EXPECT(probe_lm_unit(&s, &sizes, &p, bad, coef, &logp, NULL) == EQ_ERR_INTERNAL, "token 7 of 7 accepted");
    eq_error_clear();

    probe_lm_free(&p, &sizes), probe_lm_free(&g, &sizes), probe_lm_free(&g8, &sizes);
    return eq_test_finish("probe_lm_test");
}
