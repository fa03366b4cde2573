/* The many-step driver's bookkeeping (harness/driver/train.h) on a toy model whose every number the test
 * can recompute: a least-squares fit, w [4] trained, a frozen [2] without a gradient.
 *   1. The reference against itself under SGD: the curve is identical; the parameters the model
 *      receives at step 2 are p0 - lr g0 from step 1's capture (one fp32 rounding), the frozen
 *      ones unchanged; step t runs batch t - 1; step 1's point holds the capture's loss and the
 *      fp64 norm of its gradient.
 *   2. A layout whose gradients are halved (an injected bug): grad norm ratio 0.5 at step 1,
 *      drift 0.5 after it (SGD moves it half as far), and the curve is a bug's as expected.
 *   3. The gpt hook (models/gpt.c): a step started from its own initial parameters is bit for bit
 *      the step from the seed; step_index 1 draws another batch; a parameter of the wrong dtype,
 *      or one missing, is EQ_ERR_INPUT naming its path. */
#include <math.h>
#include <string.h>

#include "harness/base/rng.h"
#include "harness/base/testing.h"
#include "harness/driver/train.h"
#include "models/models.h"

#define TOY_ROWS 8
#define TOY_MAX_CALLS 32

static int toy_calls;
static float toy_seen_w[TOY_MAX_CALLS][4], toy_seen_frozen[TOY_MAX_CALLS][2];
static int toy_seen_step[TOY_MAX_CALLS];

static eq_status toy_check(const eq_step *step)
{
    (void)step;
    return EQ_OK;
}

/* A parameter from step->params, or its initial values. */
static eq_status toy_param(const eq_step *step, const char *path, const float *init, int64_t n, eq_tensor *t)
{
    eq_status st = eq_tensor_init(t, EQ_FP32, 1, &n);
    if (st != EQ_OK) return st;
    const eq_capture_entry *e = step->params != NULL ? eq_capture_find(step->params, path) : NULL;
    if (step->params != NULL && (e == NULL || !eq_tensor_same_shape(&e->tensor, t)))
        return EQ_FAIL(EQ_ERR_INPUT, "toy: no parameter %s", path);
    memcpy(t->data, e != NULL ? e->tensor.data : init, (size_t)n * sizeof(float));
    return EQ_OK;
}

/* loss = mean_r (x_r . w - y_r)^2 over TOY_ROWS rows; w_grad = 2/TOY_ROWS sum_r (x_r . w - y_r) x_r,
 * halved when the step carries any bug. */
static eq_status toy_run(const eq_step *step, eq_capture *cap)
{
    eq_status st = EQ_OK;
    static const float w0[4] = {0.5f, -0.25f, 1.0f, 0.125f}, frozen0[2] = {3.0f, 4.0f};
    const int64_t x_shape[2] = {TOY_ROWS, 4}, rows = TOY_ROWS, one = 1, four = 4;
    eq_tensor w = {0}, frozen = {0}, x = {0}, y = {0}, g = {0}, loss = {0};
    char name[64];
    EQ_TRY(toy_param(step, "layers/00/w", w0, 4, &w));
    EQ_TRY(toy_param(step, "layers/00/frozen", frozen0, 2, &frozen));
    if (toy_calls < TOY_MAX_CALLS) {
        memcpy(toy_seen_w[toy_calls], w.data, sizeof toy_seen_w[0]);
        memcpy(toy_seen_frozen[toy_calls], frozen.data, sizeof toy_seen_frozen[0]);
        toy_seen_step[toy_calls] = step->step_index;
    }
    toy_calls++;
    EQ_TRY(eq_tensor_init(&x, EQ_FP32, 2, x_shape));
    EQ_TRY(eq_tensor_init(&y, EQ_FP32, 1, &rows));
    EQ_TRY(eq_tensor_init(&g, EQ_FP32, 1, &four));
    EQ_TRY(eq_tensor_init(&loss, EQ_FP64, 1, &one));
    snprintf(name, sizeof name, "x %d", step->step_index);
    eq_rng_fill_normal(&x, step->seed, name, 1.0);
    snprintf(name, sizeof name, "y %d", step->step_index);
    eq_rng_fill_normal(&y, step->seed, name, 1.0);
    double sum = 0.0, grad[4] = {0};
    for (int r = 0; r < TOY_ROWS; r++) {
        double e = -eq_tensor_get(&y, r);
        for (int k = 0; k < 4; k++) e += eq_tensor_get(&x, 4 * r + k) * eq_tensor_get(&w, k);
        sum += e * e;
        for (int k = 0; k < 4; k++) grad[k] += 2.0 / TOY_ROWS * e * eq_tensor_get(&x, 4 * r + k);
    }
    for (int k = 0; k < 4; k++) eq_tensor_set(&g, k, grad[k] * (step->bugs != 0 ? 0.5 : 1.0));
    eq_tensor_set(&loss, 0, sum / TOY_ROWS);
    EQ_TRY(eq_capture_add(cap, 0, "w", EQ_ROLE_PARAM, &w));
    EQ_TRY(eq_capture_add(cap, 0, "frozen", EQ_ROLE_PARAM, &frozen));
    EQ_TRY(eq_capture_add(cap, 0, "w_grad", EQ_ROLE_GRAD, &g));
    EQ_TRY(eq_capture_add(cap, 0, "loss", EQ_ROLE_LOSS, &loss));
cleanup:
    eq_tensor_free(&w), eq_tensor_free(&frozen), eq_tensor_free(&x), eq_tensor_free(&y), eq_tensor_free(&g);
    eq_tensor_free(&loss);
    return st;
}

static const eq_model toy_model = {.name = "toy", .summary = "least squares", .check = toy_check, .run = toy_run,
                                   .trains = 1};

static void toy_spec(const eq_case *kase, const eq_case_size *size, unsigned bugs, eq_run_spec *spec)
{
    memset(spec, 0, sizeof *spec);
    spec->kase = kase;
    spec->size = size;
    spec->model = &toy_model;
    spec->step.size = size;
    spec->step.dtype = EQ_FP32;
    spec->step.layout = (eq_layout){1, 1};
    spec->step.seed = 7;
    spec->step.backend = &eq_backend_cpu;
    spec->step.transport = &eq_transport_sim;
    spec->step.bugs = bugs;
}

static const float *entry_f32(const eq_capture *cap, const char *path)
{
    const eq_capture_entry *e = eq_capture_find(cap, path);
    return e != NULL ? e->tensor.data : NULL;
}

static void test_identical_and_bookkeeping(const eq_case *kase, const eq_case_size *size)
{
    eq_run_spec spec;
    eq_capture ref1 = {0}, test1 = {0};
    eq_steps_curve curve = {0};
    eq_optimizer_config opt;
    eq_optimizer_defaults(EQ_OPT_SGD, &opt);
    opt.lr = 0.1;
    toy_spec(kase, size, 0, &spec);
    EQ_EXPECT_OK(eq_run(&spec, &ref1));
    EQ_EXPECT_OK(eq_run(&spec, &test1));
    toy_calls = 0;
    EQ_EXPECT_OK(eq_train_curve(&spec, &spec, &ref1, &test1, 3, &opt, &curve));
    EQ_EXPECT(toy_calls == 4, "steps 2 and 3 of both runs: %d model calls, want 4", toy_calls);
    EQ_EXPECT(curve.n_params == 1 && curve.n_frozen == 1, "%d trained, %d frozen; want 1 and 1", curve.n_params,
              curve.n_frozen);
    EQ_EXPECT(curve.verdict.cls == EQ_CURVE_IDENTICAL && curve.as_expected, "class %s, as expected %d",
              eq_curve_class_name(curve.verdict.cls), curve.as_expected);
    for (int t = 0; t < 3 && curve.points != NULL; t++)
        EQ_EXPECT(curve.points[t].param_dist == 0.0 && curve.points[t].trained_dist > 0.0,
                  "step %d: param_dist %g, trained_dist %g", t + 1, curve.points[t].param_dist,
                  curve.points[t].trained_dist);
    /* step 2 (call 0: the reference) starts from p0 - lr g0 of step 1's capture */
    const float *p0 = entry_f32(&ref1, "layers/00/w"), *g0 = entry_f32(&ref1, "layers/00/w_grad");
    double g_norm = 0.0;
    for (int k = 0; k < 4 && p0 != NULL && g0 != NULL; k++) {
        const double want = (double)p0[k] - 0.1 * (double)g0[k];
        /* torch's fp32 add_(grad, alpha=-lr) rounds its operands and result: within 2u (|p0| + |lr g0|) */
        const double bound = 0x1p-23 * (fabs((double)p0[k]) + fabs(0.1 * (double)g0[k]));
        EQ_EXPECT(fabs((double)toy_seen_w[0][k] - want) <= bound, "w[%d] at step 2: %.9g, want p0 - lr g0 = %.9g",
                  k, toy_seen_w[0][k], want);
        g_norm += (double)g0[k] * g0[k];
    }
    EQ_EXPECT(toy_seen_frozen[0][0] == 3.0f && toy_seen_frozen[0][1] == 4.0f && toy_seen_frozen[3][1] == 4.0f,
              "frozen parameter changed: %g %g", toy_seen_frozen[0][0], toy_seen_frozen[0][1]);
    EQ_EXPECT(toy_seen_step[0] == 1 && toy_seen_step[1] == 1 && toy_seen_step[2] == 2 && toy_seen_step[3] == 2,
              "batches %d %d %d %d, want 1 1 2 2", toy_seen_step[0], toy_seen_step[1], toy_seen_step[2],
              toy_seen_step[3]);
    if (curve.points != NULL) {
        const eq_capture_entry *loss = eq_capture_find(&ref1, "layers/00/loss");
        EQ_EXPECT(loss != NULL && curve.points[0].loss_ref == eq_tensor_get(&loss->tensor, 0), "step 1 loss %g",
                  curve.points[0].loss_ref);
        EQ_EXPECT(fabs(curve.points[0].grad_norm_ref - sqrt(g_norm)) <= 1e-15 * sqrt(g_norm),
                  "step 1 grad norm %.17g, want %.17g", curve.points[0].grad_norm_ref, sqrt(g_norm));
        EQ_EXPECT(fabs(curve.points[0].trained_dist - 0.1 * sqrt(g_norm)) <= 1e-6 * sqrt(g_norm),
                  "step 1 trained distance %.9g, want lr |g0| = %.9g", curve.points[0].trained_dist, 0.1 * sqrt(g_norm));
    }
    eq_steps_curve_free(&curve);
    eq_capture_free(&ref1);
    eq_capture_free(&test1);
}

static void test_halved_gradients(const eq_case *kase, const eq_case_size *size)
{
    eq_run_spec ref_spec, test_spec;
    eq_capture ref1 = {0}, test1 = {0};
    eq_steps_curve curve = {0};
    eq_optimizer_config opt;
    eq_optimizer_defaults(EQ_OPT_SGD, &opt);
    opt.lr = 0.1;
    toy_spec(kase, size, 0, &ref_spec);
    toy_spec(kase, size, EQ_BUG_GRAD_AVG_TWICE, &test_spec);
    EQ_EXPECT_OK(eq_run(&ref_spec, &ref1));
    EQ_EXPECT_OK(eq_run(&test_spec, &test1));
    EQ_EXPECT_OK(eq_train_curve(&ref_spec, &test_spec, &ref1, &test1, 4, &opt, &curve));
    /* halving is exact in fp32, and so are the fp64 sum of squares / 4 and its square root / 2 */
    if (curve.points != NULL)
        EQ_EXPECT(curve.points[0].grad_norm_test / curve.points[0].grad_norm_ref == 0.5,
                  "step 1: grad norm ratio %.17g, want 0.5", curve.points[0].grad_norm_test / curve.points[0].grad_norm_ref);
    if (curve.points != NULL)
        EQ_EXPECT(fabs(curve.points[0].param_dist / curve.points[0].trained_dist - 0.5) < 1e-6,
                  "drift after step 1 %.9g, want 0.5", curve.points[0].param_dist / curve.points[0].trained_dist);
    EQ_EXPECT(curve.bug_injected && curve.as_expected &&
                  (curve.verdict.cls == EQ_CURVE_FACTOR || curve.verdict.cls == EQ_CURVE_GROWING),
              "class %s (%s)", eq_curve_class_name(curve.verdict.cls), curve.verdict.why);
    eq_steps_curve_free(&curve);
    eq_capture_free(&ref1);
    eq_capture_free(&test1);
}

static int same_bits(const eq_capture *a, const eq_capture *b)
{
    if (a->count != b->count) return 0;
    for (int i = 0; i < a->count; i++) {
        const eq_tensor *x = &a->entries[i].tensor, *y = &b->entries[i].tensor;
        if (strcmp(a->entries[i].path, b->entries[i].path) != 0 || !eq_tensor_same_shape(x, y) ||
            memcmp(x->data, y->data, eq_tensor_bytes(x)) != 0)
            return 0;
    }
    return 1;
}

static void test_gpt_hook(void)
{
    static const char *const keys[] = {"seq", "batch", "hidden", "heads", "ffn", "layers"};
    static const int64_t values[] = {4, 2, 8, 2, 16, 2};
    eq_case_size size = {.name = "tiny", .case_path = "train_test"};
    for (int i = 0; i < 6; i++) {
        snprintf(size.params[i].key, sizeof size.params[i].key, "%s", keys[i]);
        size.params[i].value = values[i];
    }
    size.count = 6;
    eq_step step = {.size = &size, .dtype = EQ_FP32, .layout = {1, 1}, .seed = 3, .backend = &eq_backend_cpu,
                    .transport = &eq_transport_sim};
    eq_capture seeded, restarted, next_batch, wrong, bad;
    eq_capture_init(&seeded), eq_capture_init(&restarted), eq_capture_init(&next_batch), eq_capture_init(&wrong);
    eq_capture_init(&bad);
    EQ_EXPECT(eq_model_gpt.trains == 1 && eq_model_row_parallel.trains == 0, "gpt trains, row_parallel does not");
    EQ_EXPECT_OK(eq_model_gpt.run(&step, &seeded));
    step.params = &seeded;
    EQ_EXPECT_OK(eq_model_gpt.run(&step, &restarted));
    EQ_EXPECT(same_bits(&seeded, &restarted), "a step from its own initial parameters differs from the seeded step");
    step.step_index = 1;
    EQ_EXPECT_OK(eq_model_gpt.run(&step, &next_batch));
    const eq_capture_entry *x0 = eq_capture_find(&seeded, "layers/00/input"), *x1 = eq_capture_find(&next_batch, "layers/00/input");
    EQ_EXPECT(x0 != NULL && x1 != NULL && memcmp(x0->tensor.data, x1->tensor.data, eq_tensor_bytes(&x0->tensor)) != 0,
              "step_index 1 drew the same input as step 0");
    const eq_capture_entry *w0 = eq_capture_find(&seeded, "layers/01/fc1_weight"), *w1 = eq_capture_find(&next_batch, "layers/01/fc1_weight");
    EQ_EXPECT(w0 != NULL && w1 != NULL && memcmp(w0->tensor.data, w1->tensor.data, eq_tensor_bytes(&w0->tensor)) == 0,
              "step_index 1 changed the parameters it was given");
    /* a parameter of the wrong dtype, then a capture lacking every parameter */
    for (int i = 0; i < seeded.count; i++) {
        const eq_capture_entry *e = &seeded.entries[i];
        if (e->role != EQ_ROLE_PARAM) continue;
        eq_tensor t = {0};
        EQ_EXPECT_OK(eq_tensor_init(&t, strcmp(e->path, "layers/01/fc1_weight") == 0 ? EQ_BF16 : EQ_FP32,
                                    e->tensor.ndim, e->tensor.shape));
        EQ_EXPECT_OK(eq_capture_add_path(&wrong, e->path, e->layer, EQ_ROLE_PARAM, &t));
    }
    step.params = &wrong;
    eq_status st = eq_model_gpt.run(&step, &bad);
    EQ_EXPECT(st == EQ_ERR_INPUT && strstr(eq_error_message(), "layers/01/fc1_weight") != NULL,
              "a bf16 fc1_weight: status %d, '%s'", (int)st, eq_error_message());
    eq_error_clear();
    eq_capture_free(&bad);
    eq_capture_free(&wrong);
    eq_capture_init(&wrong);
    step.params = &wrong;
    st = eq_model_gpt.run(&step, &bad);
    EQ_EXPECT(st == EQ_ERR_INPUT && strstr(eq_error_message(), "lack layers/") != NULL,
              "no parameters: status %d, '%s'", (int)st, eq_error_message());
    eq_error_clear();
    eq_capture_free(&seeded), eq_capture_free(&restarted), eq_capture_free(&next_batch), eq_capture_free(&wrong);
    eq_capture_free(&bad);
}

int main(void)
{
    static eq_case kase;
    eq_case_size size = {.name = "toy", .case_path = "train_test"};
    snprintf(kase.name, sizeof kase.name, "toy");
    test_identical_and_bookkeeping(&kase, &size);
    test_halved_gradients(&kase, &size);
    test_gpt_hook();
    return eq_test_finish("train_test");
}
