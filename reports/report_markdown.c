/* Markdown report: the per-layer tables of seed 002 (sections 2.2, 3, 4), per comparison one for
 * each of activations, gradients and losses it holds, for a pull-request comment. ASCII only. The
 * verdict comes first in every table ("pass" or "**FAIL**"), then what was observed in one word
 * (bit-exact, within, OUTSIDE, NON-FINITE) with the expectation beside it where it is not the
 * comparison's own or the row fails; numbers are in significant digits (reports/number_format.h).
 * README.md's "How to read this report" defines every column. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness/rounding_bound.h"
#include "harness/truth.h"
#include "reports/number_format.h"
#include "reports/report.h"
#include "reports/report_columns.h"
#include "reports/report_steps.h"

const char *eq_report_format_value(double v, int decimals, char *buf, size_t len)
{
    /* Seed 002 prints Max with 6 decimals and Mean/Median with 8; a nonzero value below 1e-6
     * would print as zeros there (fp32 differences are that small), so it switches to %.3e. */
    if (v != 0.0 && fabs(v) < 1e-6) snprintf(buf, len, "%.3e", v);
    else snprintf(buf, len, "%.*f", decimals, v);
    return buf;
}

const char *eq_report_format_share(double fraction, char *buf, size_t len)
{
    /* seed 002's %.2f%%, except that a nonzero share below 0.005% shows as "<0.01%" rather
     * than vanishing into "0.00%" */
    double percent = 100.0 * fraction;
    if (percent > 0.0 && percent < 0.005) snprintf(buf, len, "<0.01%%");
    else snprintf(buf, len, "%.2f%%", percent);
    return buf;
}

const char *eq_report_verdict_word(const eq_tensor_result *r) { return r->as_expected ? "pass" : "FAIL"; }

/* "OUTSIDE", "OUTSIDE (expected differs)" where the tensor's expectation is not the comparison's,
 * "OUTSIDE (expected within)" on a failing row. */
const char *eq_report_observed_text(const eq_tensor_result *r, eq_expect comparison_expect, char *buf, size_t len)
{
    if (!r->as_expected || r->expect != comparison_expect)
        snprintf(buf, len, "%s (expected %s)", eq_observed_name(r->observed), eq_expect_name(r->expect));
    else snprintf(buf, len, "%s", eq_observed_name(r->observed));
    return buf;
}

/* "2 parameters bit-identical after gathering, 1 input bit-identical" (or how many are not). */
static void write_params_line(FILE *out, const eq_comparison *c)
{
    int n_param = 0, exact_param = 0, n_input = 0, exact_input = 0;
    for (int i = 0; i < c->count; i++) {
        const eq_tensor_result *r = &c->results[i];
        int exact = r->observed == EQ_OBS_BIT_EXACT;
        if (r->role == EQ_ROLE_PARAM) {
            n_param++;
            exact_param += exact;
        } else if (r->role == EQ_ROLE_INPUT) {
            n_input++;
            exact_input += exact;
        }
    }
    if (n_param + n_input == 0) {
        fprintf(out, "Parameters and inputs: none captured.\n\n");
        return;
    }
    fprintf(out, "Parameters and inputs: ");
    if (n_param > 0 && exact_param == n_param)
        fprintf(out, "%d parameter%s bit-identical after gathering", n_param, n_param == 1 ? "" : "s");
    else if (n_param > 0)
        fprintf(out, "%d of %d parameters **differ** after gathering (listed below)", n_param - exact_param,
                n_param);
    const char *separator = n_param > 0 ? ", " : "";
    if (n_input > 0 && exact_input == n_input)
        fprintf(out, "%s%d input%s bit-identical", separator, n_input, n_input == 1 ? "" : "s");
    else if (n_input > 0)
        fprintf(out, "%s%d of %d inputs **differ** (listed below)", separator, n_input - exact_input, n_input);
    fprintf(out, ".\n\n");
}

/* The header and alignment rows of a per-layer table (reports/report_columns.h): '|' escaped,
 * each alignment cell as wide as its header plus two, numbers right-aligned. */
static void write_table_header(FILE *out)
{
    fputc('|', out);
    for (int k = 0; k < eq_report_n_columns; k++) {
        if (!(eq_report_columns[k].shown_in & EQ_COLUMN_MARKDOWN)) continue;
        fputc(' ', out);
        for (const char *ch = eq_report_columns[k].header; *ch != '\0'; ch++) {
            if (*ch == '|') fputc('\\', out);
            fputc(*ch, out);
        }
        fputs(" |", out);
    }
    fputs("\n|", out);
    for (int k = 0; k < eq_report_n_columns; k++) {
        if (!(eq_report_columns[k].shown_in & EQ_COLUMN_MARKDOWN)) continue;
        for (size_t d = strlen(eq_report_columns[k].header) + 1; d > 0; d--) fputc('-', out);
        fputs(eq_report_columns[k].kind == EQ_COLUMN_NUMBER ? ":|" : "-|", out);
    }
    fputc('\n', out);
}

/* mean(dist/ref) where some element's reference is at least the tensor's rms, else "-". */
static const char *format_mean_ratio(const eq_metrics *m, char *buf, size_t len)
{
    if (m->n_mean_ratio == 0) snprintf(buf, len, "-");
    else eq_format_sig(m->mean_ratio, 4, buf, len);
    return buf;
}

/* One row: a cell per column; a FAIL in bold; an empty cell as " |". */
static void write_row(FILE *out, const eq_tensor_result *r, eq_expect comparison_expect)
{
    fputc('|', out);
    for (int k = 0; k < eq_report_n_columns; k++) {
        const eq_report_column *col = &eq_report_columns[k];
        char text[160];
        if (!(col->shown_in & EQ_COLUMN_MARKDOWN)) continue;
        col->text(r, comparison_expect, text, sizeof text);
        const char *bold = col->kind == EQ_COLUMN_VERDICT && !r->as_expected ? "**" : "";
        if (text[0] == '\0') fputs(" |", out);
        else fprintf(out, " %s%s%s |", bold, text, bold);
    }
    fputc('\n', out);
}

static void write_tables(FILE *out, const eq_comparison *c)
{
    int tables = 0;
    for (int s = 0; s < eq_report_n_sections; s++) {
        int rows = 0;
        for (int i = 0; i < c->count; i++) {
            const eq_tensor_result *r = &c->results[i];
            if (r->role != eq_report_sections[s].role) continue;
            if (rows++ == 0) {
                fprintf(out, "#### %s\n\n", eq_report_sections[s].heading);
                write_table_header(out);
            }
            write_row(out, r, c->expect);
        }
        if (rows > 0) fprintf(out, "\n");
        tables += rows > 0;
    }
    if (tables == 0) {
        write_table_header(out);
        /* verdict and Layer "-", the note under Tensor, the other cells empty */
        int cell = 0;
        fputc('|', out);
        for (int k = 0; k < eq_report_n_columns; k++) {
            if (!(eq_report_columns[k].shown_in & EQ_COLUMN_MARKDOWN)) continue;
            fputs(cell < 2 ? " - |" : cell == 2 ? " (no activations, gradients or losses captured) |" : " |", out);
            cell++;
        }
        fprintf(out, "\n\n");
    }
}

/* What rounding-error theory says of the GEMM outputs it applies to (harness/rounding_bound.h). */
static void write_theory(FILE *out, const eq_comparison *c)
{
    int rows = 0;
    for (int i = 0; i < c->count; i++) {
        const eq_tensor_result *r = &c->results[i];
        const eq_theory *th = &r->theory;
        if (!th->applies) continue;
        if (rows++ == 0) {
            fprintf(out, "#### Rounding-error theory\n\n");
            fprintf(out, "The GEMMs whose operands are bit-identical in both runs, against the bound on |d| that rounding "
                         "allows each element for the split of K: deterministic (Higham's gamma_n: no summation order "
                         "exceeds it) and the 99.9%% bound (Higham and Mary's probabilistic bound, lambda chosen so that "
                         "it fails at an element with probability at most %g under their model of independent rounding "
                         "errors). `max |d|/det` is the largest of the per-element ratios |d_i| / det bound_i, not "
                         "max |d| over the largest bound; above 1 it is not rounding.\n\n",
                    th->prob_failure);
            fprintf(out, "| reading | Layer | Tensor | K | split ref -> test | max \\|d\\| | max \\|d\\|/det | "
                         "max \\|d\\|/99.9%% | largest det bound | largest 99.9%% bound | lambda |\n");
            fprintf(out, "|---------|------:|--------|--:|------------------|--------:|-------------:|"
                         "---------------:|------------------:|--------------------:|-------:|\n");
        }
        char max[32], layer[16], det_ratio[32], prob_ratio[32], det[32], prob[32], lambda[32];
        const char *reading = eq_theory_reading(th, r->m.max_abs);
        const char *bold = th->det_ratio > 1.0 ? "**" : "";
        fprintf(out, "| %s%s%s | %s | %s | %lld | %d -> %d | %s | %s | %s | %s | %s | %s |\n", bold, reading, bold,
                eq_report_format_layer(r->layer, layer, sizeof layer), r->name, (long long)th->terms, th->ref_partitions,
                th->test_partitions, eq_format_sig(r->m.max_abs, 3, max, sizeof max),
                eq_format_sig(th->det_ratio, 3, det_ratio, sizeof det_ratio),
                eq_format_sig(th->prob_ratio, 3, prob_ratio, sizeof prob_ratio),
                eq_format_sig(th->det_bound_max, 3, det, sizeof det), eq_format_sig(th->prob_bound_max, 3, prob, sizeof prob),
                eq_format_sig(th->prob_lambda, 3, lambda, sizeof lambda));
    }
    if (rows > 0) fprintf(out, "\n");
    /* A user's run: say where no bound was computed, rather than leave it to be guessed. */
    if (c->test_meta.source[0] != '\0' || c->ref_meta.source[0] != '\0')
        fprintf(out, "Rounding-error bound: computed for %d tensor%s (GEMM outputs whose operands the capture recorded, "
                     "bit-identical in both runs); not computed for the other %d.\n\n", rows, rows == 1 ? "" : "s",
                c->count - rows);
}

/* --truth: each run against the fp64 run of the same step (harness/truth.h). */
static void write_truth(FILE *out, const eq_comparison *c)
{
    int rows = 0;
    for (int i = 0; i < c->count; i++) {
        const eq_tensor_result *r = &c->results[i];
        if (!r->truth.applies) continue;
        if (rows++ == 0) {
            fprintf(out, "#### Against the fp64 truth\n\n");
            fprintf(out, "Each run against the fp64 dp1-tp1 run of the same step: is the layout less accurate than the "
                         "reference, or only rounded differently?\n\n");
            fprintf(out, "| reading | Layer | Tensor | ref max \\|d\\| | test max \\|d\\| | ref rel | test rel |\n");
            fprintf(out, "|---------|------:|--------|--------------:|---------------:|--------:|---------:|\n");
        }
        char ref_max[32], test_max[32], ref_rel[32], test_rel[32], reading[64], layer[16];
        fprintf(out, "| %s | %s | %s | %s | %s | %s | %s |\n", eq_truth_reading(&r->truth, reading, sizeof reading),
                eq_report_format_layer(r->layer, layer, sizeof layer), r->name,
                eq_format_sig(r->truth.ref_max, 3, ref_max, sizeof ref_max),
                eq_format_sig(r->truth.test_max, 3, test_max, sizeof test_max),
                eq_format_sig(r->truth.ref_rel, 3, ref_rel, sizeof ref_rel),
                eq_format_sig(r->truth.test_rel, 3, test_rel, sizeof test_rel));
    }
    if (rows > 0) fprintf(out, "\n");
}

static eq_status write_unexpected(FILE *out, const eq_comparison *c)
{
    if (c->n_unexpected == 0) {
        fprintf(out, "All %d tensor%s as expected.\n\n", c->count, c->count == 1 ? "" : "s");
        return EQ_OK;
    }
    const eq_tensor_result **sorted = NULL;
    int n = 0;
    eq_status st = eq_report_unexpected_worst_first(c, &sorted, &n);
    if (st != EQ_OK) return st;
    const eq_tensor_result *first = eq_report_first_unexpected(c);
    if (first != NULL)
        fprintf(out, "Where it starts (the first not as expected, in capture order): `%s`: %s.\n\n", first->path,
                first->diagnosis);
    if (n == 0) {
        fprintf(out, "All %d tensor%s as expected; the assembly findings above are not.\n\n", c->count,
                c->count == 1 ? "" : "s");
        free(sorted);
        return EQ_OK;
    }
    fprintf(out, "Not as expected, worst first (%d of %d tensors):\n\n", n, c->count);
    for (int i = 0; i < n; i++) {
        const eq_tensor_result *r = sorted[i];
        char max[32], ratio[32], tol_ratio[32], rel[32];
        fprintf(out, "- `%s` (%s): %s, expected %s: %s; max |d| %s at index %lld, %lld of %lld outside, "
                     "%s x the tolerance; mean(dist/ref)=%s, worst rel err %s\n",
                r->path, eq_role_name(r->role), eq_observed_name(r->observed), eq_expect_name(r->expect),
                r->diagnosis, eq_format_sig(r->m.max_abs, 3, max, sizeof max), (long long)r->m.argmax,
                (long long)r->m.n_outside, (long long)r->m.count, eq_format_sig(r->m.max_tol_ratio, 3, tol_ratio, sizeof tol_ratio),
                format_mean_ratio(&r->m, ratio, sizeof ratio), eq_format_sig(r->m.worst_rel, 2, rel, sizeof rel));
    }
    fprintf(out, "\n");
    free(sorted);
    return EQ_OK;
}

/* A run equiv did not compute: what wrote it, its world and step, its environment. */
static void write_run(FILE *out, const char *which, const eq_run_meta *m)
{
    if (m->source[0] == '\0') return;
    fprintf(out, "%s: written by %s", which, m->source);
    if (m->world_size > 0) fprintf(out, ", %d rank%s assembled", m->world_size, m->world_size == 1 ? "" : "s");
    fprintf(out, ", step %lld", (long long)m->step);
    if (m->env[0] != '\0') fprintf(out, "; %s", m->env);
    fprintf(out, ".\n\n");
}

static void write_runs(FILE *out, const eq_comparison *c)
{
    write_run(out, "Reference", &c->ref_meta);
    write_run(out, "Test run", &c->test_meta);
}

/* What assembling the runs found: each is not as expected. */
static void write_findings(FILE *out, const eq_comparison *c)
{
    if (c->n_findings == 0) return;
    fprintf(out, "#### Assembly findings (**FAIL**)\n\n");
    for (int i = 0; i < c->n_findings; i++) fprintf(out, "- %s\n", c->findings[i]);
    fprintf(out, "\n");
}

/* The tensors the case file expects something else of ([expect.avg|sum|any]), each name once. */
static void write_tensor_expectations(FILE *out, const eq_comparison *c)
{
    for (int e = 0; e < EQ_EXPECT_COUNT; e++) {
        int shown = 0;
        for (int i = 0; i < c->count; i++) {
            const eq_tensor_result *r = &c->results[i];
            if ((int)r->expect != e || r->expect == c->expect || r->role == EQ_ROLE_INPUT || r->role == EQ_ROLE_PARAM)
                continue;
            int seen = 0;
            for (int j = 0; j < i && !seen; j++)
                seen = (int)c->results[j].expect == e && strcmp(c->results[j].name, r->name) == 0;
            if (seen) continue;
            fprintf(out, "%s`%s`", shown ? ", " : "Expected per tensor (the case file): ", r->name);
            shown++;
        }
        if (shown) fprintf(out, ": %s.\n\n", eq_expect_name((eq_expect)e));
    }
}

static eq_status write_comparison(FILE *out, const eq_comparison *c)
{
    const eq_run_meta *t = &c->test_meta, *r = &c->ref_meta;
    fprintf(out, "### %s %s dp%d-tp%d vs dp%d-tp%d", t->case_name, eq_dtype_name(t->dtype), t->dp, t->tp,
            r->dp, r->tp);
    if (t->algorithm[0] != '\0') fprintf(out, " (%s)", t->algorithm);
    fprintf(out, "\n\n");
    fprintf(out, "Expected: %s (parameters and inputs: bit_exact). Tolerance `%s`: `|d| <= %g%s + %g |ref|` (%s).\n\n",
            eq_expect_name(c->expect), c->tol.name, c->tol.atol, c->tol.atol_scale == EQ_ATOL_REF_RMS ? " rms(ref)" : "",
            c->tol.rtol, c->tol.source[0] ? c->tol.source : "no source given");
    if (strcmp(c->grad_tol.name, c->tol.name) != 0 && c->grad_tol.name[0] != '\0')
        fprintf(out, "Gradients: tolerance `%s`: `|d| <= %g%s + %g |ref|` (%s).\n\n", c->grad_tol.name, c->grad_tol.atol,
                c->grad_tol.atol_scale == EQ_ATOL_REF_RMS ? " rms(ref)" : "", c->grad_tol.rtol,
                c->grad_tol.source[0] ? c->grad_tol.source : "no source given");
    if (t->gpu[0] != '\0' && strcmp(t->gpu, r->gpu) == 0) fprintf(out, "GPU: %s.\n\n", t->gpu);
    else if (t->gpu[0] != '\0' || r->gpu[0] != '\0')
        fprintf(out, "GPU: this run %s; the reference %s.\n\n", t->gpu[0] ? t->gpu : "none",
                r->gpu[0] ? r->gpu : "none");
    if (t->numerics[0] != '\0' || r->numerics[0] != '\0')
        fprintf(out, "Numerics: this run `%s`, the reference `%s` (README, \"Megatron's numerics\").\n\n",
                t->numerics[0] ? t->numerics : "equiv", r->numerics[0] ? r->numerics : "equiv");
    write_tensor_expectations(out, c);
    write_runs(out, c);
    write_findings(out, c);
    write_params_line(out, c);
    eq_report_steps_markdown(out, c);
    write_tables(out, c);
    write_theory(out, c);
    write_truth(out, c);
    return write_unexpected(out, c);
}

eq_status eq_report_markdown(FILE *out, const eq_comparison *cmps, int n)
{
    eq_status st = EQ_OK;
    char summary[512];
    const char *version = n > 0 ? cmps[0].ref_meta.version : "";
    fprintf(out, "## equiv report%s%s\n\n", version[0] ? " " : "", version);
    fprintf(out, "How to read this report: README.md, section \"How to read this report\" (every column and bound "
                 "defined).\n\n");
    for (int i = 0; i < n; i++) EQ_TRY(write_comparison(out, &cmps[i]));
    fprintf(out, "%s\n", eq_report_summary(cmps, n, summary, sizeof summary));
    if (fflush(out) != 0 || ferror(out)) st = EQ_FAIL(EQ_ERR_IO, "cannot write the Markdown report");
cleanup:
    return st;
}
