/* harness/optimizer.h on values worked by hand (exact rational arithmetic, each rounding to the
 * nearest float taken by hand): SGD and Adam for two steps, the single rounding of torch's fused
 * add, bf16 parameters rounded to nearest even from an fp32 master that keeps what bf16 drops, the
 * fp64 path, and the errors. harness/optimizer_torch_test.py checks the bits against torch itself. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "harness/base/bf16.h"
#include "harness/optimizer.h"
#include "harness/base/testing.h"

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* A 1-element parameter of dtype dt holding v, its state, a gradient of dtype dt and an output. */
typedef struct {
    eq_tensor param, grad, out;
    eq_param_state state;
} one_param;

static void one_param_init(one_param *o, const eq_optimizer_config *c, eq_dtype dt, double v)
{
    const int64_t shape[1] = {1};
    memset(o, 0, sizeof *o);
    EQ_EXPECT_OK(eq_tensor_init(&o->param, dt, 1, shape));
    EQ_EXPECT_OK(eq_tensor_init(&o->grad, dt, 1, shape));
    EQ_EXPECT_OK(eq_tensor_init(&o->out, dt, 1, shape));
    eq_tensor_set(&o->param, 0, v);
    EQ_EXPECT_OK(eq_param_state_init(c, &o->param, &o->state));
}

/* Step t with gradient g; the output element widened. */
static double one_step(one_param *o, const eq_optimizer_config *c, int64_t t, double g)
{
    eq_tensor_set(&o->grad, 0, g);
    EQ_EXPECT_OK(eq_optimizer_step(c, t, &o->state, &o->grad, &o->out));
    return eq_tensor_get(&o->out, 0);
}

static void one_param_free(one_param *o)
{
    eq_tensor_free(&o->param);
    eq_tensor_free(&o->grad);
    eq_tensor_free(&o->out);
    eq_param_state_free(&o->state);
}

/* SGD, p <- p - lr g. lr 0.25, p0 1: g 0.5 gives 1 - 0.125 = 0.875, then g -2 gives 0.875 + 0.5
 * = 1.375, both exact.
 * The fused add (torch's param.add_(grad, alpha=-lr) is one fma): lr 0.1, whose float is
 * a = -13421773 / 2^27; p0 1, g 21/8: g a = -281857233 / 2^30 exactly, 1 + g a =
 * 0.737499996088..., 12373196.73 units of 2^-24: one rounding gives 12373197 / 2^24 (0x3f3ccccd).
 * Rounding g a first (to 8808039 / 2^25, its ulp being 2^-25) leaves 1 - that = 12373196.5 units,
 * a tie that goes to the even 0x3f3ccccc: the two-rounding add is an ulp off. */
static void test_sgd(void)
{
    eq_optimizer_config c;
    eq_optimizer_defaults(EQ_OPT_SGD, &c);
    c.lr = 0.25;
    one_param o;
    one_param_init(&o, &c, EQ_FP32, 1.0);
    EQ_EXPECT(one_step(&o, &c, 1, 0.5) == 0.875, "sgd step 1");
    EQ_EXPECT(one_step(&o, &c, 2, -2.0) == 1.375, "sgd step 2");
    EQ_EXPECT(o.state.exp_avg.data == NULL && o.state.exp_avg_sq.data == NULL, "sgd keeps no moments");
    one_param_free(&o);

    c.lr = 0.1;
    one_param_init(&o, &c, EQ_FP32, 1.0);
    const uint32_t fused_bits = f32_bits((float)one_step(&o, &c, 1, 21.0 / 8.0));
    EQ_EXPECT_EQ_U64(fused_bits, 0x3f3ccccdu);
    one_param_free(&o);
}

/* Adam, beta1 0.5 (lerp weight 0.5: torch's large-weight branch, g - 0.5 (g - m)), beta2 0.75,
 * eps 0.125, lr 3/8, p0 1; every quantity below is exact in fp32 unless said.
 * Step 1, g 3.875: m = 0.5 * 3.875 = 1.9375; v = 0.25 * 3.875^2 = 961/256 = 3.75390625;
 *   bias corrections 1 - 0.5 = 0.5 and 1 - 0.75 = 0.25: step size lr / 0.5 = 0.75, sqrt(0.25) = 0.5;
 *   denom = sqrt(v) / 0.5 + eps = 1.9375 / 0.5 + 0.125 = 4;
 *   p = 1 + (-0.75 * 1.9375) / 4 = 1 - 1.453125 / 4 = 0.63671875.
 * Step 2, g 1.9375: m = 1.9375 - 0.5 (1.9375 - 1.9375) = 1.9375;
 *   v = 0.75 * 961/256 + 0.25 * 1.9375^2 = 2883/1024 + 3844/4096 = 15376/4096, sqrt 124/64 = 1.9375;
 *   bias corrections 1 - 0.25 = 0.75 (step size 0.375 / 0.75 = 0.5) and 1 - 0.5625 = 0.4375;
 *   sqrt(0.4375) = 0.66143782776..., as a float 11097085 / 2^24 = 0.661437809467 (0x3f2953fd);
 *   1.9375 / that = 2.929224746859... -> 2.929224729538 (0x403b786b); + 0.125 = 3.054224729538
 *   exactly (0x4043786b); -0.5 * 1.9375 = -0.96875, / that = -0.317183601662... ->
 *   -2660729 / 2^23 = -0.317183613777 (0xbea265e4); p = 0.63671875 - 0.317183613777 =
 *   0.319535136223 exactly: 0x3ea39a1c.
 * In fp64 the same steps: step 1 exact as above; step 2 rounds each operation to double instead:
 *   sqrt(0.4375) = 0.6614378277661477, 1.9375 / that + 0.125 = 3.054224665821511,
 *   -0.96875 / that = -0.3171836082790033, p = 0.3195351417209967 = 0x1.4734385e7526dp-2
 *   (python's correctly rounded double operations, one per step above).
 * beta1 differs from beta2 so that the two cannot be swapped unseen; the small-weight branch and
 * the roundings of torch's betas are checked against torch (optimizer_torch_test.py). */
static void test_adam(void)
{
    eq_optimizer_config c;
    eq_optimizer_defaults(EQ_OPT_ADAM, &c);
    c.lr = 3.0 / 8.0;
    c.beta1 = 0.5;
    c.beta2 = 0.75;
    c.eps = 0.125;
    for (int form = EQ_ADAM_LERP; form <= EQ_ADAM_MUL_ADD; form++) { /* both forms are exact here */
        c.moment_form = (eq_adam_moment_form)form;
        one_param o;
        one_param_init(&o, &c, EQ_FP32, 1.0);
        EQ_EXPECT(one_step(&o, &c, 1, 3.875) == 0.63671875, "adam form %d step 1", form);
        EQ_EXPECT(eq_tensor_get(&o.state.exp_avg, 0) == 1.9375, "adam step 1 exp_avg");
        EQ_EXPECT(eq_tensor_get(&o.state.exp_avg_sq, 0) == 3.75390625, "adam step 1 exp_avg_sq");
        const uint32_t p2_bits = f32_bits((float)one_step(&o, &c, 2, 1.9375));
        EQ_EXPECT_EQ_U64(p2_bits, 0x3ea39a1cu);
        EQ_EXPECT(eq_tensor_get(&o.state.exp_avg, 0) == 1.9375, "adam step 2 exp_avg");
        EQ_EXPECT(eq_tensor_get(&o.state.exp_avg_sq, 0) == 3.75390625, "adam step 2 exp_avg_sq");
        one_param_free(&o);

        one_param_init(&o, &c, EQ_FP64, 1.0);
        EQ_EXPECT(o.state.master.dtype == EQ_FP64, "an fp64 parameter keeps an fp64 master");
        EQ_EXPECT(one_step(&o, &c, 1, 3.875) == 0.63671875, "adam fp64 step 1");
        const double p2 = one_step(&o, &c, 2, 1.9375);
        EQ_EXPECT(p2 == 0x1.4734385e7526dp-2, "adam fp64 step 2: %a", p2);
        one_param_free(&o);
    }
}

/* bf16 parameters: the master is fp32 and the output its rounding to nearest, ties to even.
 * lr 1, p0 1: g -2^-8 makes the master 1 + 2^-8, halfway between the bf16 neighbours 1 (0x3f80)
 * and 1 + 2^-7 (0x3f81): the tie goes to the even 0x3f80. g -2^-7 then makes it 1 + 3 2^-8,
 * halfway between 0x3f81 and 0x3f82: to the even 0x3f82. Had the step updated the rounded
 * parameter instead of the master, the second step would give 1 + 2^-7, 0x3f81. */
static void test_bf16(void)
{
    eq_optimizer_config c;
    eq_optimizer_defaults(EQ_OPT_SGD, &c);
    c.lr = 1.0;
    one_param o;
    one_param_init(&o, &c, EQ_BF16, 1.0);
    EQ_EXPECT(o.state.master.dtype == EQ_FP32, "a bf16 parameter keeps an fp32 master");
    one_step(&o, &c, 1, -0x1p-8);
    const uint16_t *out_bits = o.out.data;
    EQ_EXPECT_EQ_U64(out_bits[0], 0x3f80u);
    EQ_EXPECT(eq_tensor_get(&o.state.master, 0) == 1.0 + 0x1p-8, "master after step 1");
    one_step(&o, &c, 2, -0x1p-7);
    EQ_EXPECT_EQ_U64(out_bits[0], 0x3f82u);
    one_param_free(&o);
}

/* fp64: lr 2^-30, g 1, p0 1 gives 1 - 2^-30, which fp64 holds and fp32 would round to 1. */
static void test_fp64(void)
{
    eq_optimizer_config c;
    eq_optimizer_defaults(EQ_OPT_SGD, &c);
    c.lr = 0x1p-30;
    one_param o;
    one_param_init(&o, &c, EQ_FP64, 1.0);
    EQ_EXPECT(one_step(&o, &c, 1, 1.0) == 1.0 - 0x1p-30, "fp64 sgd kept 2^-30");
    one_param_free(&o);
    one_param_init(&o, &c, EQ_FP32, 1.0);
    EQ_EXPECT(one_step(&o, &c, 1, 1.0) == 1.0, "fp32 sgd rounds 1 - 2^-30 to 1");
    one_param_free(&o);
}

static void test_errors(void)
{
    eq_optimizer_config c;
    eq_optimizer_defaults(EQ_OPT_ADAM, &c);
    const int64_t shape_param[2] = {3, 2}, shape_grad[2] = {2, 3};
    eq_tensor param = {0}, grad = {0}, out = {0};
    eq_param_state s;
    EQ_EXPECT_OK(eq_tensor_init(&param, EQ_FP32, 2, shape_param));
    EQ_EXPECT_OK(eq_tensor_init(&grad, EQ_BF16, 2, shape_grad));
    EQ_EXPECT_OK(eq_tensor_init(&out, EQ_BF16, 2, shape_param));
    EQ_EXPECT_OK(eq_param_state_init(&c, &param, &s));
    eq_status st = eq_optimizer_step(&c, 1, &s, &grad, &out);
    EQ_EXPECT(st == EQ_ERR_INPUT && strstr(eq_error_message(), "[2, 3]") && strstr(eq_error_message(), "[3, 2]"),
              "shape mismatch: %s", eq_error_message());
    eq_error_clear();
    st = eq_optimizer_step(&c, 1, &s, &out, &grad); /* the output's shape */
    EQ_EXPECT(st == EQ_ERR_INPUT && strstr(eq_error_message(), "output"), "output mismatch: %s", eq_error_message());
    eq_error_clear();
    st = eq_optimizer_step(&c, 0, &s, &out, &out);
    EQ_EXPECT(st == EQ_ERR_INTERNAL, "step 0 accepted");
    eq_error_clear();
    c.lr = -1.0;
    st = eq_optimizer_step(&c, 1, &s, &out, &out);
    EQ_EXPECT(st == EQ_ERR_USAGE && strstr(eq_error_message(), "learning rate"), "lr -1: %s", eq_error_message());
    eq_error_clear();
    c.lr = 1e-3;
    c.beta2 = 1.0;
    EQ_EXPECT(eq_optimizer_check(&c) == EQ_ERR_USAGE, "beta2 1 accepted");
    eq_error_clear();

    eq_optimizer_kind k;
    EQ_EXPECT_OK(eq_optimizer_parse("adam", &k));
    EQ_EXPECT(k == EQ_OPT_ADAM && strcmp(eq_optimizer_name(EQ_OPT_SGD), "sgd") == 0, "names");
    st = eq_optimizer_parse("adamw", &k);
    EQ_EXPECT(st == EQ_ERR_USAGE && strstr(eq_error_message(), "sgd, adam"), "adamw: %s", eq_error_message());
    eq_error_clear();

    eq_param_state_free(&s);
    eq_tensor_free(&param);
    eq_tensor_free(&grad);
    eq_tensor_free(&out);
}

int main(void)
{
    test_sgd();
    test_adam();
    test_bf16();
    test_fp64();
    test_errors();
    return eq_test_finish("optimizer_test");
}
