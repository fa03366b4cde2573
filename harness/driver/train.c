#include "harness/driver/train.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/verdict.h"
#include "models/model.h"

static int trains(const eq_model *model) { return model->trains; }

eq_status eq_train_check(const eq_cli *cli, const eq_run_spec *spec)
{
    if (cli->steps <= 1 || spec->model->trains) return EQ_OK;
    char known[256];
    return EQ_FAIL(EQ_ERR_USAGE, "--steps %d: case %s (model %s) does not train its parameters yet (models that do: %s)",
                   cli->steps, spec->kase->name, spec->model->name, eq_model_names(trains, known, sizeof known));
}

void eq_train_optimizer(const eq_cli *cli, eq_optimizer_config *out)
{
    eq_optimizer_defaults((eq_optimizer_kind)cli->optimizer, out);
    if (cli->has_lr) out->lr = cli->lr;
}

/* One trained parameter of both runs. */
typedef struct {
    int entry;                /* its index in the trainer's current-parameter captures */
    eq_param_state ref, test; /* the master weights (and Adam's moments) of each run */
    eq_tensor ref_start;      /* the reference's master weights before step 1 */
} trained_param;

typedef struct {
    eq_run_spec ref_spec, test_spec; /* steps 2..N: lean captures, the parameters below */
    eq_case_size lean_size;
    eq_capture params_ref, params_test; /* every parameter each run starts its next step from */
    trained_param *trained;             /* [n_trained], in capture order */
    int n_trained;
} trainer;

static void trainer_free(trainer *tr)
{
    for (int k = 0; tr->trained != NULL && k < tr->n_trained; k++) {
        eq_param_state_free(&tr->trained[k].ref);
        eq_param_state_free(&tr->trained[k].test);
        eq_tensor_free(&tr->trained[k].ref_start);
    }
    free(tr->trained);
    eq_capture_free(&tr->params_ref);
    eq_capture_free(&tr->params_test);
}

/* The gradient "<path>_grad" of parameter `path` in cap, or NULL. */
static const eq_capture_entry *find_grad(const eq_capture *cap, const char *path)
{
    char grad[EQ_NAME_MAX + 8];
    snprintf(grad, sizeof grad, "%s_grad", path);
    return eq_capture_find(cap, grad);
}

/* The size steps 2..N run at: `size` with lean_capture = 1 (models that read it capture only what
 * the driver and a per-layer table of block outputs need; the others ignore the key). */
static void lean_size_of(const eq_case_size *size, eq_case_size *out)
{
    *out = *size;
    for (int i = 0; i < out->count; i++) {
        if (strcmp(out->params[i].key, "lean_capture") == 0) {
            out->params[i].value = 1;
            return;
        }
    }
    if (out->count == EQ_CASE_MAX_PARAMS) return; /* no room: the full capture, the same numbers */
    snprintf(out->params[out->count].key, sizeof out->params[out->count].key, "lean_capture");
    out->params[out->count++].value = 1;
}

/* Every parameter of step 1 into the current-parameter captures, and a state for each trained one
 * (its gradient captured), the one-parameter curves sized for n_steps. */
static eq_status trainer_init(trainer *tr, const eq_capture *ref1, const eq_capture *test1, int n_steps,
                              const eq_optimizer_config *opt, eq_steps_curve *out)
{
    eq_status st = EQ_OK;
    eq_tensor copy = {0};
    int n_params = 0;
    for (int i = 0; i < ref1->count; i++) n_params += ref1->entries[i].role == EQ_ROLE_PARAM;
    tr->trained = calloc((size_t)(n_params > 0 ? n_params : 1), sizeof *tr->trained);
    out->params = calloc((size_t)(n_params > 0 ? n_params : 1), sizeof *out->params);
    if (tr->trained == NULL || out->params == NULL) return EQ_FAIL(EQ_ERR_NOMEM, "no memory for %d parameters", n_params);
    for (int i = 0; i < ref1->count; i++) {
        const eq_capture_entry *e = &ref1->entries[i];
        if (e->role != EQ_ROLE_PARAM) continue;
        const eq_capture_entry *t = eq_capture_find(test1, e->path);
        if (t == NULL) {
            st = EQ_FAIL(EQ_ERR_INPUT, "--steps: the test run lacks parameter %s", e->path);
            goto cleanup;
        }
        const int entry = tr->params_ref.count;
        EQ_TRY(eq_tensor_clone(&copy, &e->tensor));
        EQ_TRY(eq_capture_add_path(&tr->params_ref, e->path, e->layer, EQ_ROLE_PARAM, &copy));
        EQ_TRY(eq_tensor_clone(&copy, &t->tensor));
        EQ_TRY(eq_capture_add_path(&tr->params_test, e->path, e->layer, EQ_ROLE_PARAM, &copy));
        if (find_grad(ref1, e->path) == NULL) {
            out->n_frozen++;
            continue;
        }
        trained_param *p = &tr->trained[tr->n_trained];
        eq_param_curve *c = &out->params[tr->n_trained];
        tr->n_trained++, out->n_params++;
        p->entry = entry;
        snprintf(c->path, sizeof c->path, "%s", e->path);
        c->rel = calloc((size_t)n_steps, sizeof *c->rel);
        if (c->rel == NULL) {
            st = EQ_FAIL(EQ_ERR_NOMEM, "no memory for the curve of %s", e->path);
            goto cleanup;
        }
        EQ_TRY(eq_param_state_init(opt, &e->tensor, &p->ref));
        EQ_TRY(eq_param_state_init(opt, &t->tensor, &p->test));
        EQ_TRY(eq_tensor_clone(&p->ref_start, &p->ref.master));
    }
    if (tr->n_trained == 0) st = EQ_FAIL(EQ_ERR_INPUT, "--steps: %s captures no parameter with a gradient to train",
                                         ref1->meta.case_name);
cleanup:
    eq_tensor_free(&copy);
    return st;
}

/* The run's loss: its first tensor of role loss (a model that trains captures the global loss). */
static eq_status read_loss(const eq_capture *cap, const char *who, int t, double *out)
{
    for (int i = 0; i < cap->count; i++) {
        if (cap->entries[i].role == EQ_ROLE_LOSS && eq_tensor_numel(&cap->entries[i].tensor) >= 1) {
            *out = eq_tensor_get(&cap->entries[i].tensor, 0);
            return EQ_OK;
        }
    }
    return EQ_FAIL(EQ_ERR_INPUT, "--steps: step %d of the %s captures no loss", t, who);
}

static double sum_squares(const eq_tensor *a)
{
    double s = 0.0;
    for (int64_t i = 0; i < eq_tensor_numel(a); i++) s += eq_tensor_get(a, i) * eq_tensor_get(a, i);
    return s;
}

/* sum (a - b)^2 in fp64, and max |a - b| into *max_abs (kept when larger). */
static double distance_squared(const eq_tensor *a, const eq_tensor *b, double *max_abs)
{
    double s = 0.0;
    for (int64_t i = 0; i < eq_tensor_numel(a); i++) {
        const double d = eq_tensor_get(a, i) - eq_tensor_get(b, i);
        s += d * d;
        if (fabs(d) > *max_abs) *max_abs = fabs(d);
    }
    return s;
}

/* Step t (1-based) of both runs from their captures: the point's losses and gradient norms, the
 * optimizer's update of both runs' parameters, then the distances. */
static eq_status take_step(trainer *tr, const eq_optimizer_config *opt, int t, const eq_capture *cap_ref,
                           const eq_capture *cap_test, eq_steps_curve *out)
{
    eq_status st = EQ_OK;
    eq_step_point *pt = &out->points[t - 1];
    double grad_ref = 0.0, grad_test = 0.0, dist = 0.0, trained = 0.0, max_abs = 0.0, unused = 0.0;
    EQ_TRY(read_loss(cap_ref, "reference", t, &pt->loss_ref));
    EQ_TRY(read_loss(cap_test, "layout", t, &pt->loss_test));
    for (int k = 0; k < tr->n_trained; k++) {
        trained_param *p = &tr->trained[k];
        const char *path = out->params[k].path;
        const eq_capture_entry *g_ref = find_grad(cap_ref, path), *g_test = find_grad(cap_test, path);
        if (g_ref == NULL || g_test == NULL) {
            st = EQ_FAIL(EQ_ERR_INPUT, "--steps: step %d of the %s captures no %s_grad", t,
                         g_ref == NULL ? "reference" : "layout", path);
            goto cleanup;
        }
        grad_ref += sum_squares(&g_ref->tensor);
        grad_test += sum_squares(&g_test->tensor);
        EQ_TRY(eq_optimizer_step(opt, t, &p->ref, &g_ref->tensor, &tr->params_ref.entries[p->entry].tensor));
        EQ_TRY(eq_optimizer_step(opt, t, &p->test, &g_test->tensor, &tr->params_test.entries[p->entry].tensor));
        const double d2 = distance_squared(&p->test.master, &p->ref.master, &max_abs);
        const double moved2 = distance_squared(&p->ref.master, &p->ref_start, &unused);
        out->params[k].rel[t - 1] = moved2 > 0.0 ? sqrt(d2 / moved2) : 0.0;
        dist += d2, trained += moved2;
    }
    pt->grad_norm_ref = sqrt(grad_ref);
    pt->grad_norm_test = sqrt(grad_test);
    pt->param_dist = sqrt(dist);
    pt->trained_dist = sqrt(trained);
    pt->param_max_abs = max_abs;
cleanup:
    return st;
}

/* One later step of a run: spec from `params`, on batch step_index. */
static eq_status run_from(const eq_run_spec *spec, const eq_capture *params, int step_index, eq_capture *out)
{
    eq_run_spec s = *spec;
    s.step.params = params;
    s.step.step_index = step_index;
    return eq_run(&s, out);
}

eq_status eq_train_curve(const eq_run_spec *ref_spec, const eq_run_spec *test_spec, const eq_capture *ref1,
                         const eq_capture *test1, int n_steps, const eq_optimizer_config *opt, eq_steps_curve *out)
{
    eq_status st = EQ_OK;
    trainer tr;
    eq_capture cap_ref = {0}, cap_test = {0};
    memset(&tr, 0, sizeof tr);
    memset(out, 0, sizeof *out);
    eq_capture_init(&tr.params_ref);
    eq_capture_init(&tr.params_test);
    if (n_steps < 1 || n_steps > EQ_STEPS_MAX) return EQ_FAIL(EQ_ERR_INTERNAL, "eq_train_curve: %d steps", n_steps);
    out->n_steps = n_steps;
    out->opt = *opt;
    out->dtype = ref1->meta.dtype;
    out->bug_injected = test_spec->step.bugs != EQ_BUG_NONE;
    out->points = calloc((size_t)n_steps, sizeof *out->points);
    if (out->points == NULL) return EQ_FAIL(EQ_ERR_NOMEM, "no memory for %d steps", n_steps);
    EQ_TRY(trainer_init(&tr, ref1, test1, n_steps, opt, out));
    lean_size_of(test_spec->size, &tr.lean_size);
    tr.ref_spec = *ref_spec;
    tr.test_spec = *test_spec;
    tr.ref_spec.size = tr.ref_spec.step.size = &tr.lean_size;
    tr.test_spec.size = tr.test_spec.step.size = &tr.lean_size;
    EQ_TRY(take_step(&tr, opt, 1, ref1, test1, out));
    for (int t = 2; t <= n_steps; t++) {
        EQ_TRY(run_from(&tr.ref_spec, &tr.params_ref, t - 1, &cap_ref));
        EQ_TRY(run_from(&tr.test_spec, &tr.params_test, t - 1, &cap_test));
        EQ_TRY(take_step(&tr, opt, t, &cap_ref, &cap_test, out));
        eq_capture_free(&cap_ref);
        eq_capture_free(&cap_test);
    }
    EQ_TRY(eq_curve_classify(out->points, n_steps, out->dtype, &out->verdict));
    eq_steps_curve_judge(out);
cleanup:
    eq_capture_free(&cap_ref);
    eq_capture_free(&cap_test);
    trainer_free(&tr);
    return st;
}

eq_status eq_train_steps(const eq_cli *cli, const eq_run_spec *test_spec, const eq_capture *ref1,
                         const eq_capture *test1, eq_comparison *cmp)
{
    if (cli->steps <= 1) return EQ_OK;
    eq_optimizer_config opt;
    eq_train_optimizer(cli, &opt);
    eq_run_spec ref_spec = *test_spec; /* as the caller ran step 1's reference */
    ref_spec.step.layout = (eq_layout){1, 1};
    ref_spec.step.bugs = EQ_BUG_NONE;
    /* the progress line counts these runs too: two per later step */
    eq_progress *progress = test_spec->step.progress;
    if (progress != NULL) eq_progress_plan(progress, progress->n_runs + 2 * (cli->steps - 1));
    eq_run_meta *runs[2] = {&cmp->ref_meta, &cmp->test_meta}; /* the report's run objects say how they trained */
    for (int i = 0; i < 2; i++) {
        runs[i]->steps = cli->steps;
        snprintf(runs[i]->optimizer, sizeof runs[i]->optimizer, "%s", eq_optimizer_name(opt.kind));
        runs[i]->lr = opt.lr;
    }
    cmp->steps = calloc(1, sizeof *cmp->steps);
    if (cmp->steps == NULL) return EQ_FAIL(EQ_ERR_NOMEM, "no memory for the curve");
    eq_status st = eq_train_curve(&ref_spec, test_spec, ref1, test1, cli->steps, &opt, cmp->steps);
    if (st == EQ_OK) eq_judge(cmp); /* the comparison's verdict again, now with the curve */
    return st;
}
