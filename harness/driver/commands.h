/* The commands behind the CLI. Each returns a status (errors: one line printed by main) and, for
 * commands that compare, the number of results not as expected (exit 1 when > 0). */
#ifndef EQUIV_HARNESS_DRIVER_COMMANDS_H
#define EQUIV_HARNESS_DRIVER_COMMANDS_H

#include <stddef.h>
#include <stdio.h>

#include "harness/compare.h"
#include "harness/driver/cli.h"
#include "harness/driver/out_dir.h"

/* Where a command finds its inputs: --cases-dir and --tolerances, else under $EQUIV_HOME, else
 * under the source tree this binary was built from. golden/envelopes has no option. */
typedef struct {
    char cases_dir[2048];
    char tolerances[2048];
    char golden_dir[2048];
} eq_paths;

void eq_paths_resolve(const eq_cli *cli, eq_paths *p);

/* What a command prints on standard output, held in memory (fp, an open_memstream) until the
 * command has done everything else that can fail: a command that fails prints nothing there. */
typedef struct {
    FILE *fp;   /* write the report here; NULL once closed */
    char *text; /* what was written, once closed */
    size_t len;
} eq_console;

eq_status eq_console_open(eq_console *c);
/* Closes fp (text and len then hold what was written); closing a closed console does nothing. */
eq_status eq_console_close(eq_console *c);
void eq_console_free(eq_console *c);
/* The end of a command that has succeeded so far, in the order that keeps it all or nothing: the
 * phase table (EQUIV_PHASE_TIMES), then the console's text on standard output (flushed, and a
 * failed write an error), then --out moved into place (out may be NULL or not active). At the
 * first failure nothing after it happens, and the caller's eq_out_discard removes --out. */
eq_status eq_cmd_finish(eq_console *c, eq_out *out);

eq_status eq_cmd_run(const eq_cli *cli, int *n_unexpected);
eq_status eq_cmd_compare(const eq_cli *cli, int *n_unexpected);
/* equiv compare of two runs of many steps (harness/run_steps.h; harness/driver/compare_steps.c):
 * the training curve, then each step both captured in full through eq_cmd_compare, all in one
 * report. eq_cmd_compare calls it where either run holds light records. */
eq_status eq_cmd_compare_steps(const eq_cli *cli, int *n_unexpected);
/* Where eq_cmd_compare puts its comparison when cli->collect is set (owned by the caller after). */
typedef struct eq_comparison_sink {
    eq_comparison cmp;
    int taken;
} eq_comparison_sink;
/* The reports of cmps to the console (the console's format) and, with --out, report.md, .json,
 * .html: what eq_cmd_compare writes, for eq_cmd_compare_steps. */
eq_status eq_cmd_write_reports(const eq_cli *cli, eq_out *out, FILE *console, const eq_comparison *cmps, int n);
eq_status eq_cmd_list(const eq_cli *cli);
/* equiv diff BASE.json HEAD.json: the PR comment on stdout (and DIR/comment.md with --out);
 * n_unexpected = regressions. */
eq_status eq_cmd_diff(const eq_cli *cli, int *n_unexpected);
/* Every case x layout x dtype (or --case/--dtype), one summary; n_unexpected = cells not as expected. */
eq_status eq_cmd_matrix(const eq_cli *cli, int *n_unexpected);
/* The ci-size matrix against golden/envelopes (n_unexpected = tensors outside), or --update. */
eq_status eq_cmd_golden(const eq_cli *cli, int *n_unexpected);
/* Runs the benchmark workloads (harness/driver/cmd_bench.c), each as a child equiv, and prints the table. */
eq_status eq_cmd_bench(const eq_cli *cli);

#endif
