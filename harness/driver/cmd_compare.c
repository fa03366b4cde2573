/* `equiv compare REF TEST`: two runs, a file or a directory of rank files each, read a batch of
 * tensors at a time (harness/driver/compare_stream.h), judged and reported; under `--comm mpi`
 * each process compares its batches and rank 0 writes the one report; runs of many steps go to
 * harness/driver/compare_steps.c. */
#include "harness/driver/commands.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/comms.h"
#include "harness/compare.h"
#include "harness/driver/compare_stream.h"
#include "harness/driver/data_home.h"
#include "harness/driver/out_dir.h"
#include "harness/driver/run_settings.h"
#include "harness/driver/runner.h"
#include "harness/plan.h"
#include "harness/run_load.h"
#include "harness/run_steps.h"
#include "reductions/world.h"
#include "reports/report.h"

/* A run that names no case: the name of its directory or file ("runs/ddp_dp4" -> "ddp_dp4"). */
static void name_run(eq_run_meta *meta, const char *path)
{
    if (meta->case_name[0] != '\0') return;
    size_t end = strlen(path);
    while (end > 1 && path[end - 1] == '/') end--; /* "runs/dp4/" names dp4 too */
    size_t start = end;
    while (start > 0 && path[start - 1] != '/') start--;
    snprintf(meta->case_name, sizeof meta->case_name, "%.*s", (int)(end - start), path + start);
}

/* A name that can only mean a file in the cases directory: letters, digits, '_', '-', '.', not
 * starting with '.' (a dump's "case" attribute is data: "../../x" must not reach outside). */
static int is_case_name(const char *name)
{
    return name[0] != '\0' && name[0] != '.' &&
           strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.") == strlen(name);
}

/* The tolerances of `equiv compare`: --atol/--rtol, else --tolerance NAME, else the case's entries
 * (an equiv dump of a case this tree has), else the table's default for the reference's dtype,
 * which names itself in the report. */
static eq_status compare_tolerances(const eq_cli *cli, const eq_paths *paths, const eq_tolerance_table *table,
                                    const eq_case *kase, int known_case, eq_dtype dtype, eq_tolerance *tol,
                                    eq_tolerance *grad_tol)
{
    eq_status st = EQ_OK;
    if (cli->has_atol_rtol) {
        memset(tol, 0, sizeof *tol);
        snprintf(tol->name, sizeof tol->name, "--atol %g --rtol %g", cli->atol, cli->rtol);
        snprintf(tol->source, sizeof tol->source, "the command line");
        tol->atol = cli->atol;
        tol->rtol = cli->rtol;
        *grad_tol = *tol;
        return EQ_OK;
    }
    char entry[EQ_TOL_NAME_MAX];
    const char *who = "--tolerance";
    if (cli->tolerance_name != NULL) {
        snprintf(entry, sizeof entry, "%s", cli->tolerance_name);
    } else if (known_case && kase->tolerance[dtype][0] != '\0') {
        snprintf(entry, sizeof entry, "%s", kase->tolerance[dtype]);
        who = "the case";
    } else {
        snprintf(entry, sizeof entry, "default_%s", eq_dtype_name(dtype));
        who = "a run of no case (the default for its dtype)";
    }
    EQ_TRY(eq_plan_tolerance(table, paths->tolerances, entry, who, tol));
    *grad_tol = *tol;
    if (cli->tolerance_name == NULL && known_case && kase->grad_tolerance[dtype][0] != '\0')
        EQ_TRY(eq_plan_tolerance(table, paths->tolerances, kase->grad_tolerance[dtype], "the case", grad_tol));
cleanup:
    return st;
}

/* What `equiv compare` settles before it compares: the runs open (their indexes read), their
 * tolerances and expectation, and the case whose [expect.<grads>] lines apply (NULL: none). */
typedef struct {
    eq_paths paths;
    eq_stream_compare runs;
    eq_case *kase;
    eq_tolerance_table *table;
    eq_tolerance tol, grad_tol;
    eq_expect expect;
    const eq_case *lines;
} compare_setup;

static void compare_setup_free(compare_setup *s)
{
    eq_run_stream_close(s->runs.ref);
    eq_run_stream_close(s->runs.test);
    eq_run_stream_close(s->runs.truth);
    free(s->kase);
    free(s->table);
    memset(s, 0, sizeof *s);
}

/* The tolerance table first (before --out is made). */
static eq_status compare_tables(const eq_cli *cli, compare_setup *s)
{
    s->kase = calloc(1, sizeof *s->kase);
    s->table = calloc(1, sizeof *s->table);
    if (s->kase == NULL || s->table == NULL) return EQ_FAIL(EQ_ERR_NOMEM, "no memory for the comparison");
    eq_paths_resolve(cli, &s->paths);
    return eq_tolerance_load(s->paths.tolerances, s->table);
}

/* Then the runs (a dump, or a directory of per-rank files, each read by a reader process a batch
 * of tensors at a time: harness/run_stream.h; here their indexes only) and the rest. */
static eq_status compare_open(const eq_cli *cli, eq_progress *progress, compare_setup *s)
{
    eq_status st = EQ_OK;
    eq_stream_compare *runs = &s->runs;
    runs->ref_path = cli->compare_paths[0];
    runs->test_path = cli->compare_paths[1];
    runs->truth_path = cli->truth_path;
    runs->progress = progress;
    eq_progress_run(progress, "compare");
    eq_progress_phase(progress, "open the runs", 0, 0, -1.0);
    EQ_TRY(eq_run_stream_open(cli->compare_paths[0], &runs->ref));
    EQ_TRY(eq_run_stream_open(cli->compare_paths[1], &runs->test));
    runs->ref_meta = eq_run_stream_index(runs->ref)->meta;
    runs->test_meta = eq_run_stream_index(runs->test)->meta;
    if (cli->truth_path != NULL) {
        EQ_TRY(eq_run_stream_open(cli->truth_path, &runs->truth));
        const eq_dtype truth_dtype = eq_run_stream_index(runs->truth)->meta.dtype;
        if (eq_dtype_unit_roundoff(truth_dtype) >= eq_dtype_unit_roundoff(runs->ref_meta.dtype)) {
            st = EQ_FAIL(EQ_ERR_INPUT, "%s: the truth run is %s, no wider than the reference's %s (a truth is the "
                         "reference's step one precision up: fp32 for a bf16 run, fp64 for fp32)", cli->truth_path,
                         eq_dtype_name(truth_dtype), eq_dtype_name(runs->ref_meta.dtype));
            goto cleanup;
        }
    }
    name_run(&runs->ref_meta, cli->compare_paths[0]);
    name_run(&runs->test_meta, cli->compare_paths[1]);

    /* An equiv dump of a case this tree has: the case names tolerance and expectation. A user's run
     * never does, whatever it calls itself. */
    const eq_run_meta *ref = &runs->ref_meta;
    char case_path[4400];
    snprintf(case_path, sizeof case_path, "%s/%s.ini", s->paths.cases_dir, ref->case_name);
    int known_case = 0;
    FILE *probe = ref->source[0] == '\0' && ref->model[0] != '\0' && is_case_name(ref->case_name)
                      ? fopen(case_path, "r")
                      : NULL;
    if (probe != NULL) {
        fclose(probe);
        EQ_TRY(eq_case_load(case_path, s->kase));
        known_case = 1;
    }
    /* A declared dtype must agree with the data (harness/run_load.h), but where a case of a model
     * that keeps tensors wider than its dtype names the tolerances (models/model.h). */
    const eq_model *model = NULL;
    if (known_case && eq_model_find(s->kase->model, &model) != EQ_OK) eq_error_clear(); /* load checked it */
    runs->check_dtype = model == NULL || !model->stores_wider;
    EQ_TRY(compare_tolerances(cli, &s->paths, s->table, s->kase, known_case, ref->dtype, &s->tol, &s->grad_tol));
    s->expect = EQ_EXPECT_WITHIN;
    if (cli->has_expect) s->expect = cli->expect;
    else if (known_case) s->expect = eq_case_expectation(s->kase, runs->test_meta.backend, ref->dtype,
                                                         (eq_layout){runs->test_meta.dp, runs->test_meta.tp});
    s->lines = known_case && !cli->has_expect ? s->kase : NULL;
cleanup:
    return st;
}

/* The comparison's reports: to standard output, and with --out to its files. */
static eq_status compare_report(const eq_cli *cli, eq_out *out, const eq_comparison *cmp, eq_progress *progress,
                                int *n_unexpected)
{
    eq_status st = EQ_OK;
    eq_console console = {0};
    eq_progress_clear(progress); /* the report starts on a line of its own */
    EQ_TRY(eq_console_open(&console));
    EQ_TRY(eq_cmd_write_reports(cli, out, console.fp, cmp, 1));
    EQ_TRY(eq_cmd_finish(&console, out));
    *n_unexpected = eq_report_unexpected(cmp, 1);
cleanup:
    eq_console_free(&console);
    return st;
}

/* Every rank's status of a step they all took: 1 where every rank succeeded; else 0, and each
 * rank goes on to eq_world_finish with its own status, where the first that failed prints its
 * line. */
static int every_rank_ok(const eq_world *world, eq_status *st)
{
    int failed_rank = -1;
    const eq_status agreed = eq_world_agree(world, *st, &failed_rank);
    if (agreed == EQ_OK) return 1;
    if (failed_rank < 0) *st = agreed; /* the agreement itself failed */
    return 0;
}

/* `equiv compare` under --comm mpi: the batches spread over the processes, each reading its own
 * from the runs' files, rank 0 gathering the evidence into the one report
 * (harness/driver/compare_stream.h). Every rank opens the runs and compares its batches; an error
 * on any is agreed on before the gather, and printed once by that rank. Rank 0 alone writes. */
static eq_status compare_world(const eq_cli *cli, int *n_unexpected)
{
    eq_status st = EQ_OK;
    eq_world world = {0};
    eq_rank_env env;
    eq_world_settings settings;
    compare_setup setup = {0};
    eq_comparison cmp = {0};
    eq_out out = {0};
    void *part = NULL, **parts = NULL;
    size_t part_bytes = 0, *sizes = NULL;
    int have_world = 0, have_cmp = 0;
    eq_progress progress;
    eq_progress_init(&progress, stderr, EQ_PROGRESS_OFF, NULL, NULL);
    EQ_TRY(eq_comm_check(cli->comm, cli->algo)); /* a build with MPI */
    EQ_TRY(eq_rank_env_read(eq_env_get, &env));
    eq_paths paths; /* every rank must compare alike (harness/driver/run_settings.h) */
    eq_paths_resolve(cli, &paths);
    eq_compare_settings(cli, paths.tolerances, &settings);
    have_world = 1;
    /* one process per part of the tensors: a dp x 1 world of the launcher's size */
    EQ_TRY(cli->comm->start_world(&world, (eq_layout){env.found ? env.size : 1, 1}, cli->algo, &settings));
    const int root = eq_world_is_root(&world);
    eq_progress_free(&progress);
    eq_progress_init(&progress, stderr, root ? eq_progress_mode_for(stderr, cli->verbose) : EQ_PROGRESS_OFF, NULL,
                     NULL);
    st = compare_tables(cli, &setup);
    if (root && st == EQ_OK) st = eq_out_open(&out, cli->out_dir); /* a folder that cannot be made fails at once */
    if (st == EQ_OK) st = compare_open(cli, &progress, &setup);
    if (!every_rank_ok(&world, &st)) goto cleanup;
    st = eq_compare_streams_part(&setup.runs, &setup.tol, &setup.grad_tol, setup.expect, world.rank, world.size,
                                 &part, &part_bytes);
    if (!every_rank_ok(&world, &st)) goto cleanup;
    if (root) {
        parts = calloc((size_t)world.size, sizeof *parts);
        sizes = calloc((size_t)world.size, sizeof *sizes);
        if (parts == NULL || sizes == NULL) st = EQ_FAIL(EQ_ERR_NOMEM, "rank 0: no memory to gather the results");
    }
    if (st == EQ_OK) st = eq_world_gather_bytes(&world, part, part_bytes, parts, sizes);
    if (st != EQ_OK) eq_world_abort(&world); /* the others may wait in the gather: end them all */
    eq_world_root_alone(&world); /* the others wait for rank 0's verdict while it lives */
    if (root) {
        EQ_TRY(eq_compare_streams_merge(&setup.runs, &setup.tol, &setup.grad_tol, setup.expect, setup.lines, parts,
                                        sizes, world.size, &cmp));
        have_cmp = 1;
        EQ_TRY(compare_report(cli, &out, &cmp, &progress, n_unexpected));
    }
    EQ_TRY(eq_world_share_int(&world, n_unexpected)); /* rank 0's verdict everywhere */
cleanup:
    eq_progress_free(&progress);
    eq_out_discard(&out);
    if (have_cmp) eq_comparison_free(&cmp);
    for (int r = 0; parts != NULL && r < world.size; r++) free(parts[r]);
    free(parts);
    free(sizes);
    free(part);
    compare_setup_free(&setup); /* the readers end before MPI does */
    if (have_world) st = eq_world_finish(&world, st); /* one outcome on every rank, printed once */
    return st;
}

eq_status eq_cmd_compare(const eq_cli *cli, int *n_unexpected)
{
    /* Two runs of many steps (harness/run_steps.h): the curve, then each step captured in full
     * through this path again (cli->collect set), in one report: harness/driver/compare_steps.c. */
    if (cli->collect == NULL && (eq_run_steps_present(cli->compare_paths[0]) || eq_run_steps_present(cli->compare_paths[1]))) {
        if (cli->comm->multi_process)
            return EQ_FAIL(EQ_ERR_USAGE, "runs of many steps are compared under --comm sim only (--comm %s is not "
                           "supported for them yet)", cli->comm->name);
        return eq_cmd_compare_steps(cli, n_unexpected);
    }
    if (cli->comm->multi_process) return compare_world(cli, n_unexpected);
    eq_status st = EQ_OK;
    compare_setup setup = {0};
    eq_comparison cmp = {0};
    eq_out out = {0};
    int have_cmp = 0;
    eq_progress progress; /* big runs take a while to read and compare */
    eq_progress_init(&progress, stderr, eq_progress_mode_for(stderr, cli->verbose), NULL, NULL);
    EQ_TRY(compare_tables(cli, &setup));
    EQ_TRY(eq_out_open(&out, cli->out_dir)); /* a folder that cannot be made fails at once */
    EQ_TRY(compare_open(cli, &progress, &setup));
    EQ_TRY(eq_compare_streams(&setup.runs, &setup.tol, &setup.grad_tol, setup.expect, setup.lines, &cmp));
    have_cmp = 1;
    if (cli->collect != NULL) { /* a captured step of a multi-step compare: the comparison, no report */
        cli->collect->cmp = cmp;
        cli->collect->taken = 1;
        have_cmp = 0;
        goto cleanup;
    }
    EQ_TRY(compare_report(cli, &out, &cmp, &progress, n_unexpected));
cleanup:
    eq_progress_free(&progress);
    eq_out_discard(&out);
    if (have_cmp) eq_comparison_free(&cmp);
    compare_setup_free(&setup);
    return st;
}
