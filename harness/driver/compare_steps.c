/* equiv compare RUN_A RUN_B where the runs hold light records (harness/run_steps.h): the training
 * curve (harness/run_steps_curve.h), then every step both runs captured in full (RUN/step_NNNNNN,
 * ordinary run directories) through eq_cmd_compare, unchanged; one report of every captured
 * step's comparison, the first carrying the curve and the records' findings. Every input is read
 * and judged before anything is printed or written. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "harness/driver/commands.h"
#include "harness/run_steps.h"
#include "harness/run_steps_curve.h"
#include "harness/verdict.h"
#include "reports/report.h"

static int is_dir(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

/* The steps both runs captured in full, in order (at most n_max), into steps; their count. */
static int common_full_steps(const eq_run_steps *a, const eq_run_steps *b, int *steps, int n_max)
{
    int n = 0;
    for (int i = 0; i < a->n_full && n < n_max; i++) {
        for (int j = 0; j < b->n_full; j++) {
            if (a->full_steps[i] != b->full_steps[j]) continue;
            char da[4400], db[4400];
            eq_run_steps_dir(a, "step", a->full_steps[i], da, sizeof da);
            eq_run_steps_dir(b, "step", b->full_steps[j], db, sizeof db);
            if (is_dir(da) && is_dir(db)) steps[n++] = a->full_steps[i];
            break;
        }
    }
    return n;
}

/* The records' findings into cmp's, "reference: steps: ..." / "test run: steps: ...". */
static eq_status add_findings(eq_comparison *cmp, const eq_run_steps *run, const char *who)
{
    const int extra = run->n_findings + (run->n_findings_dropped > 0);
    if (extra == 0) return EQ_OK;
    char(*grown)[EQ_FINDING_MAX] = realloc(cmp->findings, (size_t)(cmp->n_findings + extra) * sizeof *grown);
    if (grown == NULL) return EQ_FAIL(EQ_ERR_NOMEM, "no memory for the findings");
    cmp->findings = grown;
    for (int i = 0; i < run->n_findings; i++)
        snprintf(cmp->findings[cmp->n_findings++], EQ_FINDING_MAX, "%s: steps: %.*s", who, EQ_FINDING_MAX - 32, run->findings[i]);
    if (run->n_findings_dropped > 0)
        snprintf(cmp->findings[cmp->n_findings++], EQ_FINDING_MAX, "%s: steps: %d findings more", who, run->n_findings_dropped);
    return EQ_OK;
}

eq_status eq_cmd_compare_steps(const eq_cli *cli, int *n_unexpected)
{
    eq_status st = EQ_OK;
    eq_run_steps ref = {0}, test = {0};
    eq_steps_curve *curve = calloc(1, sizeof *curve);
    eq_comparison *cmps = NULL;
    int n_cmps = 0, *steps = NULL;
    eq_out out = {0};
    eq_console console = {0};
    if (curve == NULL) return EQ_FAIL(EQ_ERR_NOMEM, "no memory for the curve");
    for (int i = 0; i < 2; i++) {
        if (eq_run_steps_present(cli->compare_paths[i])) continue;
        st = EQ_FAIL(EQ_ERR_INPUT, "%s holds light records (steps/), %s does not: compare two runs of many steps, or a step "
                     "captured in full (RUN/step_NNNNNN) against a run of one", cli->compare_paths[1 - i], cli->compare_paths[i]);
        goto cleanup;
    }
    EQ_TRY(eq_run_steps_load(cli->compare_paths[0], &ref));
    EQ_TRY(eq_run_steps_load(cli->compare_paths[1], &test));
    EQ_TRY(eq_run_steps_curve(&ref, &test, curve));
    steps = calloc((size_t)(ref.n_full > 0 ? ref.n_full : 1), sizeof *steps);
    cmps = calloc((size_t)(ref.n_full > 0 ? ref.n_full : 1), sizeof *cmps);
    if (steps == NULL || cmps == NULL) {
        st = EQ_FAIL(EQ_ERR_NOMEM, "no memory for the captured steps");
        goto cleanup;
    }
    const int n_steps = common_full_steps(&ref, &test, steps, ref.n_full);
    if (n_steps == 0) {
        st = EQ_FAIL(EQ_ERR_INPUT, "%s and %s have no step captured in full by both (RUN/step_NNNNNN, StepRecorder's "
                     "full_steps): the report's per-layer tables need one", cli->compare_paths[0], cli->compare_paths[1]);
        goto cleanup;
    }
    for (int i = 0; i < n_steps; i++) { /* each captured step through the single-step path */
        char paths[2][4400];
        eq_run_steps_dir(&ref, "step", steps[i], paths[0], sizeof paths[0]);
        eq_run_steps_dir(&test, "step", steps[i], paths[1], sizeof paths[1]);
        eq_comparison_sink sink = {0};
        eq_cli sub = *cli;
        sub.compare_paths[0] = paths[0], sub.compare_paths[1] = paths[1];
        sub.out_dir = NULL;
        sub.collect = &sink;
        int unused = 0;
        EQ_TRY(eq_cmd_compare(&sub, &unused));
        if (!sink.taken) {
            st = EQ_FAIL(EQ_ERR_INTERNAL, "step %d: no comparison", steps[i]);
            goto cleanup;
        }
        cmps[n_cmps++] = sink.cmp;
    }
    eq_comparison *first = &cmps[0]; /* the curve and the records' findings ride on the first step's comparison */
    EQ_TRY(add_findings(first, &ref, "reference"));
    EQ_TRY(add_findings(first, &test, "test run"));
    for (int i = 0; i < 2; i++) {
        eq_run_meta *m = i == 0 ? &first->ref_meta : &first->test_meta;
        m->steps = curve->n_steps;
        snprintf(m->optimizer, sizeof m->optimizer, "%s", eq_optimizer_name(curve->opt.kind));
        m->lr = curve->opt.lr;
    }
    first->steps = curve;
    curve = NULL;
    eq_judge(first);
    EQ_TRY(eq_out_open(&out, cli->out_dir));
    EQ_TRY(eq_console_open(&console));
    EQ_TRY(eq_cmd_write_reports(cli, &out, console.fp, cmps, n_cmps));
    EQ_TRY(eq_cmd_finish(&console, &out));
    *n_unexpected = eq_report_unexpected(cmps, n_cmps);
cleanup:
    eq_out_discard(&out);
    eq_console_free(&console);
    for (int i = 0; i < n_cmps; i++) eq_comparison_free(&cmps[i]);
    free(cmps);
    free(steps);
    if (curve != NULL) eq_steps_curve_free(curve);
    free(curve);
    eq_run_steps_free(&ref);
    eq_run_steps_free(&test);
    return st;
}
