/* equiv --list: the cases, and the tables of what a run can be (models, algorithms, backends,
 * comms), each printed from its table, what this build lacks named as such. */
#include <stdio.h>
#include <stdlib.h>

#include "harness/driver/commands.h"
#include "harness/comms.h"
#include "models/backend.h"
#include "models/models.h"

/* --list's algorithms, backends and comms, from their tables; what this build lacks is named too. */
static void print_tables(FILE *out)
{
    char algos[128];
    fprintf(out, "algorithms:\n");
    for (int a = 0; a < EQ_ALGO_NAMED; a++) {
        fprintf(out, "  %-16s %s (--comm", eq_algo_name((eq_algo)a), eq_algo_summary((eq_algo)a));
        for (int i = 0; i < eq_comm_count; i++)
            if (eq_comms[i].algos & EQ_ALGO_BIT(a)) fprintf(out, " %s", eq_comms[i].name);
        fprintf(out, ")\n");
    }
    fprintf(out, "layouts: dpD-tpT; a case's layouts divide its sizes (--dp, --tp pick one)\n");
    fprintf(out, "expectations: bit_exact within differs must_fail\nbackends:\n");
    for (int i = 0; i < eq_backend_choice_count; i++) {
        const eq_backend_choice *b = &eq_backend_choices[i];
        fprintf(out, "  %-16s %s", b->name, b->summary);
        if (b->backend == NULL) fprintf(out, " (not built: no %s; %s)", b->lacking, b->remedy);
        fprintf(out, "\n");
    }
    fprintf(out, "comms:\n");
    for (int i = 0; i < eq_comm_count; i++) {
        const eq_comm *c = &eq_comms[i];
        eq_algo_names(c->algos, " ", algos, sizeof algos);
        fprintf(out, "  %-16s %s", c->name, c->summary);
        if (!c->built) fprintf(out, " (not built: no %s; %s)", c->lacking, c->remedy);
        fprintf(out, "\n  %-16s algorithms: %s", "", algos);
        if (c->multi_process) {
            fprintf(out, "; models:");
            for (int m = 0; eq_models[m] != NULL; m++)
                if (eq_models[m]->multi_process) fprintf(out, " %s", eq_models[m]->name);
        }
        fprintf(out, "\n");
    }
}

/* The list is printed whole once every case file has been read: a malformed one is its one error
 * line, with nothing on standard output before it. */
eq_status eq_cmd_list(const eq_cli *cli)
{
    eq_status st = EQ_OK;
    eq_paths paths;
    char names[64][EQ_CASE_KEY_MAX];
    int n = 0;
    eq_console console = {0};
    eq_case *kase = calloc(1, sizeof *kase);
    if (kase == NULL) return EQ_FAIL(EQ_ERR_NOMEM, "no memory for the case list");
    eq_paths_resolve(cli, &paths);
    EQ_TRY(eq_case_list(paths.cases_dir, names, 64, &n));
    EQ_TRY(eq_console_open(&console));
    FILE *out = console.fp;
    fprintf(out, "cases (%s):\n", paths.cases_dir);
    for (int i = 0; i < n; i++) {
        char path[sizeof paths.cases_dir + EQ_CASE_KEY_MAX + 8], layout[32];
        snprintf(path, sizeof path, "%s/%.*s.ini", paths.cases_dir, (int)sizeof names[i], names[i]);
        EQ_TRY(eq_case_load(path, kase));
        fprintf(out, "  %-16s %s\n", kase->name, kase->summary);
        fprintf(out, "  %-16s layouts:", "");
        for (int j = 0; j < kase->n_layouts; j++)
            fprintf(out, " %s", eq_layout_name(kase->layouts[j], layout, sizeof layout));
        fprintf(out, "; dtypes:");
        for (int j = 0; j < kase->n_dtypes; j++) fprintf(out, " %s", eq_dtype_name(kase->dtypes[j]));
        fprintf(out, "; sizes:");
        for (int j = 0; j < kase->n_sizes; j++) fprintf(out, " %s", kase->sizes[j].name);
        fprintf(out, "\n");
    }
    fprintf(out, "models:");
    for (int i = 0; eq_models[i] != NULL; i++) fprintf(out, " %s", eq_models[i]->name);
    fprintf(out, "\ndtypes: bf16 fp32 fp64\n");
    print_tables(out);
    EQ_TRY(eq_cmd_finish(&console, NULL));
cleanup:
    eq_console_free(&console);
    free(kase);
    return st;
}
