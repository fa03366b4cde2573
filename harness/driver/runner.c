#include "harness/driver/runner.h"

#include <stdio.h>
#include <string.h>

#include "equiv_config.h"
#include "harness/base/phase_time.h"
#include "harness/run_cell.h"
#include "harness/structure.h"
#include "harness/truth.h"
#include "harness/verdict.h"
#include "reductions/collectives.h"

eq_status eq_run_spec_init(eq_run_spec *spec, const eq_case *kase, const char *size_name)
{
    memset(spec, 0, sizeof *spec);
    spec->kase = kase;
    eq_status st = eq_case_find_size(kase, size_name, &spec->size);
    if (st != EQ_OK) return st;
    st = eq_model_find(kase->model, &spec->model);
    if (st == EQ_OK) st = eq_model_check_case(spec->model, kase); /* every size key one the model reads */
    if (st != EQ_OK) return st;
    spec->step.size = spec->size;
    spec->step.dtype = kase->dtypes[0];
    spec->step.layout = (eq_layout){1, 1};
    spec->step.algo = EQ_ALGO_RING;
    spec->step.seed = EQ_SEED_DEFAULT;
    spec->step.backend = &eq_backend_cpu;
    spec->step.transport = &eq_transport_sim;
    return eq_numerics_of(spec->size, -1, &spec->step.numerics); /* the case file's; --numerics overrides */
}

eq_status eq_run_check(const eq_run_spec *spec)
{
    const eq_status st = eq_model_check_bugs(spec->model, spec->step.bugs);
    return st != EQ_OK ? st : spec->model->check(&spec->step);
}

static void fill_meta(const eq_run_spec *spec, eq_run_meta *m)
{
    memset(m, 0, sizeof *m);
    snprintf(m->case_name, sizeof m->case_name, "%s", spec->kase->name);
    snprintf(m->model, sizeof m->model, "%s", spec->model->name);
    snprintf(m->size, sizeof m->size, "%s", spec->size->name);
    m->dtype = spec->step.dtype;
    m->dp = spec->step.layout.dp;
    m->tp = spec->step.layout.tp;
    snprintf(m->transport, sizeof m->transport, "%s", spec->step.transport->name);
    snprintf(m->algorithm, sizeof m->algorithm, "%s", eq_algo_name(spec->step.algo));
    if (spec->step.nccl.channels != 0 || spec->step.nccl.proto != EQ_NCCL_SIMPLE) {
        m->nccl_channels = spec->step.nccl.channels != 0 ? spec->step.nccl.channels : 1;
        snprintf(m->nccl_proto, sizeof m->nccl_proto, "%s", eq_nccl_proto_name(spec->step.nccl.proto));
    }
    snprintf(m->backend, sizeof m->backend, "%s", spec->step.backend->name);
    if (spec->step.numerics != EQ_NUMERICS_EQUIV)
        snprintf(m->numerics, sizeof m->numerics, "%s", eq_numerics_name(spec->step.numerics));
    if (spec->step.backend->describe != NULL) spec->step.backend->describe(m->kernel, sizeof m->kernel);
    eq_cpu_model(m->cpu, sizeof m->cpu);
    eq_gpu_describe(m->gpu, sizeof m->gpu);
    m->seed = spec->step.seed;
    snprintf(m->version, sizeof m->version, "%s", EQUIV_VERSION);
    snprintf(m->grads, sizeof m->grads, "%s", eq_grad_convention_name(spec->step.grads));
    m->injected[0] = '\0';
    for (unsigned bit = 1; bit != 0 && bit <= spec->step.bugs; bit <<= 1)
        if (spec->step.bugs & bit)
            snprintf(m->injected + strlen(m->injected), sizeof m->injected - strlen(m->injected), "%s%s",
                     m->injected[0] ? "+" : "", eq_bug_name((eq_bug)bit));
    if (m->injected[0] == '\0') snprintf(m->injected, sizeof m->injected, "none");
}

eq_status eq_run(const eq_run_spec *spec, eq_capture *out)
{
    eq_capture_init(out);
    fill_meta(spec, &out->meta);
    char name[EQ_CELL_NAME_MAX];
    eq_progress_run(spec->step.progress, eq_cell_title(&out->meta, name, sizeof name)); /* "gpt bf16 dp1-tp4" */
    eq_status st = spec->model->check(&spec->step); /* the bugs it carries: checked when planned */
    /* Every size of the case is a hyperparameter of the step (the dump's /config); the model adds
     * its own constants. */
    for (int i = 0; st == EQ_OK && i < spec->size->count; i++)
        st = eq_capture_config_int(out, spec->size->params[i].key, spec->size->params[i].value);
    if (st == EQ_OK) {
        eq_step step = spec->step;
        if (step.numerics == EQ_NUMERICS_MEGATRON_TF32 && step.backend == &eq_backend_cpu)
            step.backend = &eq_backend_cpu_tf32; /* fp32 GEMMs in TF32; the dump's numerics says so */
        st = spec->model->run(&step, out);
    }
    if (st != EQ_OK) eq_capture_free(out);
    return st;
}

eq_status eq_compare_evidence(const eq_capture *ref, const eq_capture *test, const eq_capture *ref_all,
                              const eq_capture *test_all, const eq_capture *truth, const eq_tolerance *tol,
                              const eq_tolerance *grad_tol, eq_expect expect, eq_comparison *out)
{
    eq_phase_mark mark = eq_phase_enter(EQ_PHASE_COMPARE);
    eq_status st = eq_compare_captures_by_role(ref, test, tol, grad_tol, expect, out);
    eq_phase_leave(EQ_PHASE_COMPARE, mark);
    if (st != EQ_OK) return st;
    const eq_model *model = eq_compare_model(&ref->meta);
    mark = eq_phase_enter(EQ_PHASE_BOUND);
    st = eq_rounding_bounds_apply(out, ref_all, test_all, model != NULL ? model->gemm_sites : NULL);
    eq_phase_leave(EQ_PHASE_BOUND, mark);
    /* A user's run (one equiv did not compute) has no case to judge it but a default table: its
     * structure and, with a truth, its accuracy are evidence too (harness/structure.h, truth.h). */
    const int users_run = ref->meta.source[0] != '\0' || test->meta.source[0] != '\0';
    if (st == EQ_OK && (truth != NULL || users_run)) {
        mark = eq_phase_enter(EQ_PHASE_COMPARE);
        if (truth != NULL) st = eq_truth_apply(out, ref, test, truth);
        for (int i = 0; st == EQ_OK && users_run && i < out->count; i++) out->results[i].truth.judged = 1;
        if (st == EQ_OK && users_run) st = eq_structure_apply(out, ref, test);
        eq_phase_leave(EQ_PHASE_COMPARE, mark);
    }
    if (st != EQ_OK) eq_comparison_free(out);
    return st;
}

const eq_model *eq_compare_model(const eq_run_meta *ref)
{
    const eq_model *model = NULL;
    if (ref->model[0] == '\0' || eq_model_find(ref->model, &model) != EQ_OK) {
        eq_error_clear(); /* a user's run, or a dump of a model this build lacks: recorded operands only */
        model = NULL;
    }
    return model;
}

eq_status eq_compare_runs(const eq_capture *ref, const eq_capture *test, const eq_capture *truth,
                          const eq_tolerance *tol, const eq_tolerance *grad_tol, eq_expect expect,
                          const eq_case *kase, eq_comparison *out)
{
    eq_status st = eq_compare_evidence(ref, test, ref, test, truth, tol, grad_tol, expect, out);
    if (st != EQ_OK) return st;
    if (kase != NULL) eq_comparison_apply_case(out, kase);
    eq_judge(out);
    return EQ_OK;
}
