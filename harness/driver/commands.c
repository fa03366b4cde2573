#include "harness/driver/commands.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "equiv_config.h"
#include "harness/base/atomic_file.h"
#include "harness/driver/cells.h"
#include "harness/comms.h"
#include "harness/compare.h"
#include "harness/driver/data_home.h"
#include "harness/dump.h"
#include "harness/driver/out_dir.h"
#include "harness/base/phase_time.h"
#include "harness/plan.h"
#include "harness/driver/runner.h"
#include "harness/driver/run_settings.h"
#include "harness/driver/train.h"
#include "reductions/world.h"
#include "models/backend.h"
#include "models/models.h"
#include "reports/report.h"
#include "reports/report_diff.h"

#define MAX_COMPARISONS 64

void eq_paths_resolve(const eq_cli *cli, eq_paths *p)
{
    char home[1536];
    eq_data_home(home, sizeof home);
    if (cli->cases_dir) snprintf(p->cases_dir, sizeof p->cases_dir, "%s", cli->cases_dir);
    else snprintf(p->cases_dir, sizeof p->cases_dir, "%s/cases", home);
    if (cli->tolerances_path) snprintf(p->tolerances, sizeof p->tolerances, "%s", cli->tolerances_path);
    else snprintf(p->tolerances, sizeof p->tolerances, "%s/golden/tolerances.ini", home);
    snprintf(p->golden_dir, sizeof p->golden_dir, "%s/golden/envelopes", home);
}

eq_status eq_console_open(eq_console *c)
{
    memset(c, 0, sizeof *c);
    c->fp = open_memstream(&c->text, &c->len);
    return c->fp != NULL ? EQ_OK : EQ_FAIL(EQ_ERR_NOMEM, "no memory for the report");
}

eq_status eq_console_close(eq_console *c)
{
    if (c->fp == NULL) return EQ_OK;
    const int failed = fclose(c->fp) != 0;
    c->fp = NULL;
    return failed ? EQ_FAIL(EQ_ERR_NOMEM, "no memory for the report") : EQ_OK;
}

void eq_console_free(eq_console *c)
{
    if (c->fp != NULL) fclose(c->fp);
    free(c->text);
    memset(c, 0, sizeof *c);
}

eq_status eq_cmd_finish(eq_console *c, eq_out *out)
{
    eq_status st = EQ_OK;
    EQ_TRY(eq_console_close(c));
    EQ_TRY(eq_phase_times_finish());
    const int written = c->len == 0 || fwrite(c->text, 1, c->len, stdout) == c->len;
    const int flushed = fflush(stdout) == 0;
    if (!written || !flushed || ferror(stdout)) {
        st = EQ_FAIL(EQ_ERR_IO, "cannot write to standard output: %s", strerror(errno));
        goto cleanup;
    }
    if (out != NULL) EQ_TRY(eq_out_commit(out));
cleanup:
    return st;
}

/* Reports to console (the console's format), and with --out also report.md, report.json,
 * report.html. */
static eq_status write_reports(const eq_cli *cli, eq_out *out, FILE *console, const eq_comparison *cmps, int n)
{
    eq_status st = EQ_OK;
    typedef eq_status (*writer)(FILE *fp, const eq_comparison *cmps, int n);
    static const struct {
        const char *name;
        writer write;
    } files[] = {{"report.md", eq_report_markdown}, {"report.json", eq_report_json}, {"report.html", eq_report_html}};
    eq_atomic_file af = {0};
    const eq_phase_mark mark = eq_phase_enter(EQ_PHASE_REPORT);
    switch (cli->format) {
    case EQ_FORMAT_JSON: st = eq_report_json(console, cmps, n); break;
    case EQ_FORMAT_HTML: st = eq_report_html(console, cmps, n); break;
    case EQ_FORMAT_MARKDOWN: st = eq_report_markdown(console, cmps, n); break;
    }
    if (st != EQ_OK || !eq_out_active(out)) goto cleanup;
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char path[4400];
        EQ_TRY(eq_out_path(out, files[i].name, path, sizeof path));
        EQ_TRY(eq_atomic_begin(&af, path, 1));
        EQ_TRY(files[i].write(af.fp, cmps, n));
        EQ_TRY(eq_atomic_commit(&af));
    }
cleanup:
    eq_atomic_abort(&af);
    eq_phase_leave(EQ_PHASE_REPORT, mark);
    return st;
}

eq_status eq_cmd_write_reports(const eq_cli *cli, eq_out *out, FILE *console, const eq_comparison *cmps, int n)
{
    return write_reports(cli, out, console, cmps, n);
}

static double seconds_since(const struct timespec *t0)
{
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0->tv_nsec);
}

/* The run's dump into --out (nothing without --out). */
static eq_status write_dump(eq_out *out, const eq_capture *cap)
{
    if (!eq_out_active(out)) return EQ_OK;
    char name[EQ_DUMP_FILENAME_MAX], path[4400];
    eq_status st = eq_out_path(out, eq_dump_filename(&cap->meta, name, sizeof name), path, sizeof path);
    const eq_phase_mark mark = eq_phase_enter(EQ_PHASE_DUMPS);
    if (st == EQ_OK) st = eq_dump_write(path, cap);
    eq_phase_leave(EQ_PHASE_DUMPS, mark);
    return st;
}

/* Runs spec, dumps it under --out, and says how long it took with -v. Under --comm mpi every rank
 * runs its part and ends with the full capture; only rank 0 writes and speaks. */
static eq_status run_and_dump(const eq_cli *cli, eq_out *out, const eq_run_spec *spec, eq_capture *cap)
{
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    eq_status st = eq_run(spec, cap);
    if (st != EQ_OK) return st;
    char layout[32];
    if (!eq_world_is_root(spec->step.world)) return EQ_OK;
    if (cli->verbose)
        eq_progress_note(spec->step.progress, "equiv: ran %s %s %s (%s) in %.2f s", spec->kase->name,
                         eq_dtype_name(spec->step.dtype), eq_layout_name(spec->step.layout, layout, sizeof layout),
                         spec->step.transport->name, seconds_since(&t0));
    if (eq_out_active(out)) eq_progress_phase(spec->step.progress, "write dump", 0, 0, -1.0);
    return write_dump(out, cap);
}

/* --comm: a comm this build has, running --algo (harness/comms.h), and a case it supports. (One
 * layout only under a multi-process comm, the one of --dp and --tp: start_world insists on them.) */
static int runs_multi_process(const eq_model *model) { return model->multi_process; }

static eq_status check_comm(const eq_cli *cli, const eq_run_spec *spec)
{
    const eq_comm *comm = cli->comm;
    eq_status st = eq_comm_check(comm, cli->algo);
    if (st != EQ_OK) return st;
    if ((cli->nccl.channels != 0 || cli->nccl.proto != EQ_NCCL_SIMPLE) &&
        (comm->multi_process || cli->algo != EQ_ALGO_RING))
        return EQ_FAIL(EQ_ERR_USAGE, "--nccl-channels and --nccl-proto place the elements of the emulated ring: they "
                       "need --algo ring and --comm sim (under --comm nccl, NCCL itself chooses)");
    if (spec != NULL && comm->multi_process && !spec->model->multi_process) {
        char known[256];
        return EQ_FAIL(EQ_ERR_USAGE, "case %s (model %s) does not run under --comm %s yet (models that do: %s)",
                       spec->kase->name, spec->model->name, comm->name,
                       eq_model_names(runs_multi_process, known, sizeof known));
    }
    return EQ_OK;
}

/* --backend names where the step computes: a model that computes on the host only refuses any
 * other backend, so that a dump never says cuda for a step that ran on the CPU. */
static eq_status check_backend(const eq_cli *cli, const eq_run_spec *spec, const eq_backend_choice **choice)
{
    eq_status st = eq_backend_choice_find(cli->backend, choice);
    if (st != EQ_OK || (*choice)->host) return st;
    if (cli->algo == EQ_ALGO_TP_INVARIANT)
        return EQ_FAIL(EQ_ERR_USAGE, "--algo tp_invariant sums over K with the CPU's ordered GEMM: run it with "
                       "--backend cpu");
    if (!spec->model->host_only) return EQ_OK;
    return EQ_FAIL(EQ_ERR_USAGE, "case %s (model %s) computes on the host only (every sum accumulated in fp64 and "
                   "rounded once, in its own order): run it with --backend cpu, under any --comm", spec->kase->name,
                   spec->model->name);
}

/* Under a multi-process comm the ranks start together before anything else, so that every error
 * after this point is agreed on and printed once, by the rank it happened on, before MPI finalizes
 * (a rank that exits first with an error makes the launcher end the others); first of all they
 * check that every rank runs the same settings. */
static eq_status start_world(const eq_cli *cli, eq_world *world, int *have_world)
{
    const eq_comm *comm = cli->comm;
    if (comm->start_world == NULL) return EQ_OK;
    if (cli->dp == 0 && cli->tp == 0)
        return EQ_FAIL(EQ_ERR_USAGE, "--comm %s runs one layout: give --dp and --tp (the launcher starts dp x tp "
                       "processes)", comm->name);
    eq_status st = check_comm(cli, NULL);
    if (st != EQ_OK) return st;
    eq_paths paths;
    eq_world_settings settings; /* every rank must run them (harness/driver/run_settings.h) */
    eq_paths_resolve(cli, &paths);
    eq_run_settings(cli, paths.cases_dir, &settings);
    *have_world = 1;
    return comm->start_world(world, (eq_layout){cli->dp ? cli->dp : 1, cli->tp ? cli->tp : 1}, cli->algo, &settings);
}

/* A run request, planned: its case, tolerance table and backend, and its cells. */
typedef struct {
    eq_paths paths;
    eq_case kase;
    eq_tolerance_table table;
    const eq_backend *backend; /* released at the end (device buffers) */
    eq_cell cells[MAX_COMPARISONS];
    int n_cells;
} run_plan;

/* The dtypes to run: --dtype's, or with none every dtype the case lists; returns how many. */
static int plan_dtypes(const eq_cli *cli, const eq_case *kase, eq_dtype *dtypes)
{
    if (!cli->all_dtypes) {
        dtypes[0] = cli->dtype;
        return 1;
    }
    memcpy(dtypes, kase->dtypes, sizeof *dtypes * (size_t)kase->n_dtypes);
    return kase->n_dtypes;
}

static int follows_numerics(const eq_model *model) { return model->numerics; }

/* The request's settings of every run, on spec: backend, transport, algorithm, seed, ... */
static eq_status plan_settings(const eq_cli *cli, const run_plan *plan, const eq_backend_choice *backend_choice,
                               eq_run_spec *spec)
{
    spec->step.backend = plan->backend;
    /* every rank in this process: the same algorithm-exact collectives, folded where the backend computes */
    if (!cli->comm->multi_process) spec->step.transport = backend_choice->in_process;
    spec->step.algo = cli->algo;
    spec->step.nccl = cli->nccl;
    spec->step.seed = cli->seed;
    spec->step.grads = (eq_grad_convention)cli->grads;
    spec->step.forward_only = cli->forward_only;
    if (cli->numerics >= 0 && !spec->model->numerics) {
        char follow[128];
        return EQ_FAIL(EQ_ERR_USAGE, "--numerics %s does not apply to case %s (model %s has no numerics to "
                       "choose; --numerics applies to: %s)", eq_numerics_name((eq_numerics)cli->numerics),
                       spec->kase->name, spec->model->name, eq_model_names(follows_numerics, follow, sizeof follow));
    }
    eq_status st = eq_numerics_of(spec->step.size, cli->numerics, &spec->step.numerics);
    if (st != EQ_OK) return st;
    if (spec->step.numerics == EQ_NUMERICS_MEGATRON_TF32 && plan->backend != &eq_backend_cpu)
        return EQ_FAIL(EQ_ERR_USAGE, "numerics megatron_tf32 emulates TF32 on the CPU backend only (--backend %s)",
                       plan->backend->name);
    return EQ_OK;
}

/* Everything the user asked for, checked before anything runs or is written, into plan's cells
 * (their progress: *progress). */
static eq_status plan_run(const eq_cli *cli, eq_progress *progress, run_plan *plan)
{
    eq_status st = EQ_OK;
    const eq_backend_choice *backend_choice = NULL;
    eq_dtype dtypes[EQ_DTYPE_COUNT];
    eq_run_spec spec;
    eq_paths_resolve(cli, &plan->paths);
    EQ_TRY(eq_case_load_named(plan->paths.cases_dir, cli->case_name, &plan->kase));
    EQ_TRY(eq_tolerance_load(plan->paths.tolerances, &plan->table));
    EQ_TRY(eq_run_spec_init(&spec, &plan->kase, cli->size));
    EQ_TRY(check_backend(cli, &spec, &backend_choice));
    EQ_TRY(eq_backend_find(cli->backend, &plan->backend));
    EQ_TRY(plan_settings(cli, plan, backend_choice, &spec));
    spec.step.progress = progress;
    const int n_dtypes = plan_dtypes(cli, &plan->kase, dtypes);
    EQ_TRY(check_comm(cli, &spec));
    EQ_TRY(eq_train_check(cli, &spec));
    EQ_TRY(eq_cells_plan(&spec, cli->bugs, &plan->table, plan->paths.tolerances, dtypes, n_dtypes,
                         (eq_layout){cli->dp, cli->tp}, plan->cells, MAX_COMPARISONS, &plan->n_cells));
cleanup:
    return st;
}

/* Progress (rank 0 only): this process's runs, each of about the same work: under a world its part
 * of the layout per dtype, then the fp64 truth, the references and the layouts' runs. */
static void start_progress(const eq_cli *cli, const run_plan *plan, int root, eq_progress *progress)
{
    eq_progress_free(progress);
    eq_progress_init(progress, stderr, root ? eq_progress_mode_for(stderr, cli->verbose) : EQ_PROGRESS_OFF, NULL, NULL);
    eq_progress_plan(progress, (cli->truth ? 1 : 0) + eq_cells_runs(plan->cells, plan->n_cells));
}

/* Under a world, every rank runs its part of each cell (one layout: one cell per dtype) into
 * distributed[] first; rank 0 computes the references afterwards, alone, so that no rank waits in
 * a collective while rank 0 works alone (the collective watchdog bounds those waits). */
static eq_status run_distributed(const eq_cli *cli, eq_world *world, const run_plan *plan, eq_out *out,
                                 eq_capture *distributed)
{
    eq_status st = EQ_OK;
    eq_out not_yet = {0}; /* rank 0 writes the layout's dumps once the others wait for it, below */
    for (int i = 0; i < plan->n_cells; i++) {
        eq_run_spec spec = plan->cells[i].spec;
        spec.step.transport = world->transport;
        spec.step.world = world;
        st = run_and_dump(cli, &not_yet, &spec, &distributed[i]);
        /* a failure on one rank mid-run: the others may wait in a collective, so end them all */
        if (st != EQ_OK) eq_world_abort(world);
    }
    eq_world_root_alone(world); /* the others wait for rank 0 while it lives, not a collective */
    for (int i = 0; i < plan->n_cells && eq_world_is_root(world); i++) EQ_TRY(write_dump(out, &distributed[i]));
cleanup:
    return st;
}

/* The command's own part of the cell loop: each run timed, noted and dumped; --steps after each
 * judged cell. */
typedef struct {
    const eq_cli *cli;
    eq_out *out;
} run_context;

static eq_status run_cell(void *ctx, const eq_run_spec *spec, eq_capture *out)
{
    const run_context *c = ctx;
    return run_and_dump(c->cli, c->out, spec, out);
}

static eq_status train_cell(void *ctx, const eq_run_spec *spec, const eq_capture *ref, const eq_capture *test,
                            eq_comparison *cmp)
{
    const run_context *c = ctx;
    return eq_train_steps(c->cli, spec, ref, test, cmp); /* --steps N: steps 2..N */
}

/* Runs and judges every cell into cmps[*n_cmps] (rank 0 alone): the --truth fp64 run first, each
 * layout's run taken from distributed[] where every rank ran it already. */
static eq_status judge_cells(const eq_cli *cli, eq_out *out, const run_plan *plan, eq_capture *distributed,
                             eq_comparison *cmps, int *n_cmps)
{
    eq_status st = EQ_OK;
    eq_capture truth = {0};
    run_context ctx = {cli, out};
    eq_cell_loop loop = {.run = run_cell, .judged = train_cell, .ctx = &ctx, .truth = cli->truth ? &truth : NULL};
    if (cli->truth) {
        eq_run_spec spec = eq_cell_reference(&plan->cells[0]);
        spec.step.dtype = EQ_FP64;
        EQ_TRY(run_and_dump(cli, out, &spec, &truth));
    }
    for (int i = 0; i < plan->n_cells; i++) {
        EQ_TRY(eq_cell_run_and_judge(&loop, &plan->cells[i], distributed ? &distributed[i] : NULL, &cmps[i]));
        *n_cmps = i + 1;
    }
cleanup:
    eq_cell_loop_free(&loop);
    eq_capture_free(&truth);
    return st;
}

/* Plan the cells, run and judge each, write the dumps (as they run) and the reports. */
eq_status eq_cmd_run(const eq_cli *cli, int *n_unexpected)
{
    eq_status st = EQ_OK;
    run_plan *plan = calloc(1, sizeof *plan);
    eq_comparison cmps[MAX_COMPARISONS];
    eq_capture distributed[EQ_DTYPE_COUNT]; /* --comm mpi: the layout's runs, one per dtype */
    eq_world world = {0};
    eq_out out = {0};
    eq_console console = {0};
    eq_progress progress; /* rank 0's, from the first run on */
    eq_progress_init(&progress, stderr, EQ_PROGRESS_OFF, NULL, NULL);
    int n_cmps = 0, have_world = 0;
    memset(distributed, 0, sizeof distributed);
    if (plan == NULL) {
        st = EQ_FAIL(EQ_ERR_NOMEM, "no memory for the case");
        goto cleanup;
    }

    EQ_TRY(start_world(cli, &world, &have_world));
    EQ_TRY(plan_run(cli, &progress, plan));
    const int root = eq_world_is_root(have_world ? &world : NULL);
    if (root) EQ_TRY(eq_out_open(&out, cli->out_dir));
    start_progress(cli, plan, root, &progress);
    if (have_world) EQ_TRY(run_distributed(cli, &world, plan, &out, distributed));
    if (root) EQ_TRY(judge_cells(cli, &out, plan, have_world ? distributed : NULL, cmps, &n_cmps));
    eq_progress_clear(&progress); /* the report starts on a line of its own */
    if (root) {
        EQ_TRY(eq_console_open(&console));
        EQ_TRY(write_reports(cli, &out, console.fp, cmps, n_cmps));
        EQ_TRY(eq_cmd_finish(&console, &out));
        *n_unexpected = eq_report_unexpected(cmps, n_cmps);
    }
    if (have_world) EQ_TRY(eq_world_share_int(&world, n_unexpected)); /* rank 0's verdict everywhere */
cleanup:
    eq_progress_free(&progress); /* the line wiped before main's error line */
    eq_out_discard(&out); /* a failure leaves nothing in --out */
    eq_console_free(&console);
    if (have_world) st = eq_world_finish(&world, st); /* one outcome on every rank, printed once */
    for (int i = 0; i < n_cmps; i++) eq_comparison_free(&cmps[i]);
    for (int i = 0; i < EQ_DTYPE_COUNT; i++) eq_capture_free(&distributed[i]);
    if (plan != NULL && plan->backend != NULL && plan->backend->release != NULL) plan->backend->release();
    free(plan);
    return st;
}

eq_status eq_cmd_diff(const eq_cli *cli, int *n_unexpected)
{
    eq_status st = EQ_OK;
    eq_atomic_file comment = {0};
    eq_out out = {0};
    eq_console console = {0};
    eq_diff_options opt = eq_diff_options_default();
    opt.growth = cli->growth;
    /* The comment is built whole, and written to --out, before anything is printed: an input error
     * or a full disk prints nothing. */
    EQ_TRY(eq_console_open(&console));
    EQ_TRY(eq_report_diff(cli->compare_paths[0], cli->compare_paths[1], &opt, console.fp, n_unexpected));
    EQ_TRY(eq_console_close(&console));
    if (cli->out_dir != NULL) {
        char path[4400];
        EQ_TRY(eq_out_open(&out, cli->out_dir));
        EQ_TRY(eq_out_path(&out, "comment.md", path, sizeof path));
        EQ_TRY(eq_atomic_begin(&comment, path, 1));
        fwrite(console.text, 1, console.len, comment.fp);
        EQ_TRY(eq_atomic_commit(&comment));
    }
    EQ_TRY(eq_cmd_finish(&console, &out));
cleanup:
    eq_atomic_abort(&comment);
    eq_out_discard(&out);
    eq_console_free(&console);
    return st;
}
