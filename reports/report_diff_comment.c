/* equiv diff, its second half: the Markdown pull-request comment from the classified cells
 * (report_diff.h says what it holds). */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "harness/run_cell.h"
#include "reports/report.h"
#include "reports/report_diff_cells.h"

/* GitHub refuses a comment over 65536 characters. Text from a report is cut (names at NAME_TEXT,
 * paths at PATH_TEXT, diagnoses at DIAGNOSIS_TEXT characters, escapes included), so a table row
 * stays under ~400 characters and MAX_TABLE_ROWS of them (over all tables) under 24000; a block
 * holds at most MAX_TENSOR_ROWS rows of under ~550 and a chart of 2 x MAX_CHART_NAMES lines of
 * at most MAX_CHART_LAYERS points with its legend, under 15000 in all; no block starts once
 * BLOCK_BUDGET characters are written: the comment ends below ~60000. */
#define BLOCK_BUDGET 44000
#define MAX_TABLE_ROWS 60
#define MAX_TENSOR_ROWS 20
#define MAX_CHART_LAYERS 64
#define MAX_CHART_NAMES 3 /* tensor names a chart follows: 2 lines each (base, head) */
#define NAME_TEXT 40
#define PATH_TEXT 100
#define DIAGNOSIS_TEXT 200

typedef struct {
    FILE *f;
    long written; /* characters so far, against GitHub's limit */
} comment;

static void __attribute__((format(printf, 2, 3))) emit(comment *out, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vfprintf(out->f, fmt, ap);
    va_end(ap);
    if (n > 0) out->written += n;
}

/* Text from a report in the comment, at most about `limit` characters of it (cut between UTF-8
 * sequences, "..." after): '|' escaped (GFM splits table cells on it even in code spans), '`'
 * escaped outside code and a quote inside (a code span cannot escape it), HTML's < > & as
 * entities outside code, line breaks as spaces. */
static void emit_text(comment *out, const char *s, long limit, int in_code)
{
    long start = out->written;
    size_t i;
    for (i = 0; s[i] != '\0' && (out->written - start < limit || ((unsigned char)s[i] & 0xC0) == 0x80); i++) {
        char c = s[i];
        if (c == '|' || (c == '`' && !in_code)) emit(out, "\\%c", c);
        else if (c == '`') emit(out, "'");
        else if (!in_code && c == '<') emit(out, "&lt;");
        else if (!in_code && c == '>') emit(out, "&gt;");
        else if (!in_code && c == '&') emit(out, "&amp;");
        else emit(out, "%c", c == '\n' || c == '\r' ? ' ' : c);
    }
    if (s[i] != '\0') emit(out, "...");
}

/* "3.0x", "200x", "5.0e+04x"; "from noise" after a factor over the noise floor rather than over
 * the base (which was under it). */
static const char *format_factor(double factor, int from_noise, char *buf, size_t len)
{
    const char *tail = from_noise ? " from noise" : "";
    if (isnan(factor)) snprintf(buf, len, "-");
    else if (isinf(factor)) snprintf(buf, len, "from 0");
    else if (factor < 100.0) snprintf(buf, len, "%.1fx%s", factor, tail);
    else snprintf(buf, len, factor < 1e4 ? "%.0fx%s" : "%.1ex%s", factor, tail);
    return buf;
}

/* "ok" when every tensor is as expected, else "3 FAIL"; "missing" for a side without the cell. */
static const char *format_verdict(const json_t *cmp, char *buf, size_t len)
{
    size_t i, failing = 0;
    json_t *r, *results = json_object_get(cmp, "results");
    json_array_foreach(results, i, r) failing += !json_is_true(json_object_get(r, "as_expected"));
    if (cmp == NULL) snprintf(buf, len, "missing");
    else if (failing == 0) snprintf(buf, len, "ok");
    else snprintf(buf, len, "%zu FAIL", failing);
    return buf;
}

/* "34 new failures, 2 grew, 1 fixed" for the kinds from `first` on, or "-" when none. */
static void emit_counts(comment *out, const int *counts, int first)
{
    int named = 0;
    for (int k = first; k < CHANGE_COUNT; k++)
        if (counts[k] > 0)
            emit(out, "%s%d %s%s", named++ ? ", " : "", counts[k], eq_diff_change_names[k],
                 k == CHANGE_NEW_FAILURE && counts[k] != 1 ? "s" : "");
    if (named == 0) emit(out, "-");
}

/* "gpt bf16 dp8-tp2 (ring, avg, ci)": the cell's title (harness/run_cell.h: case, dtype, layout),
 * then its other EQ_CELL_DIFF fields (algorithm, gradients, size) that are not empty, those written
 * only when set with their key ("numerics megatron"). */
static void emit_cell_name(comment *out, const cell_diff *cell)
{
    const json_t *t = json_object_get(cell->base != NULL ? cell->base : cell->head, "test");
    int shown = 0;
    for (int k = 0; k < eq_cell_field_count; k++) {
        const eq_cell_field *f = &eq_cell_fields[k];
        const json_t *value = json_object_get(t, f->key);
        if (!(f->flags & (EQ_CELL_TITLE | EQ_CELL_DIFF)) || value == NULL) continue;
        if (!(f->flags & EQ_CELL_TITLE) && json_is_string(value) && json_string_value(value)[0] == '\0')
            continue; /* a user's run leaves equiv's algorithm, convention and size empty */
        if (f->flags & EQ_CELL_TITLE) emit(out, "%s", f->title_part);
        else if (f->flags & EQ_CELL_JSON) emit(out, "%s", shown++ ? ", " : " (");
        else emit(out, "%s%s ", shown++ ? ", " : " (", f->key); /* written only when set: say which */
        if (json_is_string(value)) emit_text(out, json_string_value(value), NAME_TEXT, 0);
        else if (json_is_real(value)) emit(out, "%g", json_real_value(value));
        else emit(out, "%lld", (long long)json_integer_value(value));
    }
    if (shown) emit(out, ")");
}

/* 0 regressed, 1 changed otherwise, 2 unchanged: the order of the table. */
static int cell_rank(const cell_diff *cell)
{
    if (cell->n_regressed > 0 || cell->head == NULL) return 0;
    return cell->n_changes > 0 || cell->base == NULL ? 1 : 2;
}

/* The cells of ranks first..last, in that order; *shown counts the rows of every table so far,
 * which stop at MAX_TABLE_ROWS in all ("... and N more cells"). */
static void write_table(comment *out, const cell_diff *cells, int n_cells, int first, int last, int *shown)
{
    int rows = 0, room = MAX_TABLE_ROWS - *shown;
    char base_verdict[32], head_verdict[32], factor[48];
    emit(out, "| Cell | Base -> Head | Worst growth | Changes |\n|------|--------------|-------------:|---------|\n");
    for (int rank = first; rank <= last; rank++) {
        for (int c = 0; c < n_cells; c++) {
            const cell_diff *cell = &cells[c];
            if (cell_rank(cell) != rank || rows++ >= room) continue;
            emit(out, "| ");
            emit_cell_name(out, cell);
            emit(out, " | %s -> %s%s%s | %s | ", format_verdict(cell->base, base_verdict, sizeof base_verdict),
                 rank == 0 ? "**" : "", format_verdict(cell->head, head_verdict, sizeof head_verdict),
                 rank == 0 ? "**" : "", format_factor(cell->worst_factor, cell->worst_from_noise, factor, sizeof factor));
            if (cell->head == NULL) emit(out, "missing from head");
            else if (cell->base == NULL) emit(out, "new in head");
            else emit_counts(out, cell->counts, CHANGE_NEW_FAILURE);
            emit(out, " |\n");
        }
    }
    if (rows > room) emit(out, "\n... and %d more cells\n", rows - room);
    *shown += rows < room ? rows : room;
    emit(out, "\n");
}

/* Is a's factor larger than b's (a factor beats none)? */
static int grew_more(const tensor_change *a, const tensor_change *b)
{
    return !isnan(a->factor) && (isnan(b->factor) || a->factor > b->factor);
}

/* The tensor names the chart follows: those of the cell's regressed tensors (on both sides), by
 * their worst growth (largest factor first, then the order of cell->changes), at most
 * MAX_CHART_NAMES; *n of them, with each one's worst change in worst[]. */
static void chart_names(const cell_diff *cell, const char **names, const tensor_change **worst, int *n)
{
    *n = 0;
    for (int i = 0; i < cell->n_changes; i++) {
        const tensor_change *ch = &cell->changes[i];
        if (!IS_REGRESSION(ch->kind) || ch->base == NULL || ch->head == NULL) continue;
        const char *name = eq_diff_text(ch->head, "name");
        int k = 0;
        while (k < *n && strcmp(names[k], name) != 0) k++;
        if (k < *n) { /* a name already kept: its worst change may be this one */
            if (grew_more(ch, worst[k])) worst[k] = ch;
        } else if (*n < MAX_CHART_NAMES) {
            names[k] = name, worst[k] = ch, (*n)++;
        } else { /* replace the kept name that grew least, if this one grew more */
            int least = 0;
            for (int j = 1; j < *n; j++)
                if (grew_more(worst[least], worst[j])) least = j;
            if (!grew_more(ch, worst[least])) continue;
            /* a later change of an evicted name may come back: its worst is then compared anew */
            k = least;
            names[k] = name, worst[k] = ch;
        }
        for (; k > 0 && grew_more(worst[k], worst[k - 1]); k--) { /* keep names[] worst first */
            const char *tn = names[k];
            const tensor_change *tw = worst[k];
            names[k] = names[k - 1], worst[k] = worst[k - 1];
            names[k - 1] = tn, worst[k - 1] = tw;
        }
    }
}

/* The result in `results` with this name in this layer, or NULL. */
static const json_t *find_named(const json_t *results, const char *name, int layer)
{
    size_t i;
    json_t *r;
    json_array_foreach(results, i, r)
        if (strcmp(eq_diff_text(r, "name"), name) == 0 && json_integer_value(json_object_get(r, "layer")) == layer) return r;
    return NULL;
}

static int by_value(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

/* A Mermaid xychart (GitHub renders it inline) of the max |d| by layer of the tensors that
 * regressed, worst growth first: per tensor name a base line and a head line (0 where a side lacks
 * that layer or a value is not finite). Mermaid draws no legend, so the text before the chart
 * names the lines in order. Its numbers have no exponent: small values are scaled and the axis
 * says so. */
static void write_chart(comment *out, const cell_diff *cell)
{
    json_t *head_results = json_object_get(cell->head, "results"), *r;
    json_t *base_results = json_object_get(cell->base, "results");
    const char *names[MAX_CHART_NAMES];
    const tensor_change *worst[MAX_CHART_NAMES];
    int n_names = 0, layers[MAX_CHART_LAYERS], n = 0, exponent = 0, cut = 0;
    double values[2 * MAX_CHART_NAMES][MAX_CHART_LAYERS] = {{0}}, largest = 0.0;
    char factor[48];
    size_t i;
    chart_names(cell, names, worst, &n_names);
    if (n_names == 0) return;
    json_array_foreach(head_results, i, r) {
        int named = 0, layer = (int)json_integer_value(json_object_get(r, "layer")), seen = 0;
        for (int k = 0; k < n_names; k++) named |= strcmp(eq_diff_text(r, "name"), names[k]) == 0;
        for (int j = 0; j < n; j++) seen |= layers[j] == layer;
        if (!named || seen) continue;
        if (n == MAX_CHART_LAYERS) cut = 1;
        else layers[n++] = layer;
    }
    qsort(layers, (size_t)n, sizeof layers[0], by_value);
    for (int k = 0; k < n_names; k++) {
        for (int j = 0; j < n; j++) {
            const json_t *h = find_named(head_results, names[k], layers[j]);
            const json_t *b = h != NULL ? NULL : find_named(base_results, names[k], layers[j]);
            if (h != NULL) { /* the base tensor of the same path */
                size_t m;
                json_t *x;
                json_array_foreach(base_results, m, x) if (strcmp(eq_diff_text(x, "path"), eq_diff_text(h, "path")) == 0) b = x;
            }
            values[2 * k][j] = b != NULL ? eq_diff_metric(b, "max_abs") : 0.0;
            values[2 * k + 1][j] = h != NULL ? eq_diff_metric(h, "max_abs") : 0.0;
            for (int side = 0; side < 2; side++) {
                if (!isfinite(values[2 * k + side][j])) values[2 * k + side][j] = 0.0;
                largest = fmax(largest, values[2 * k + side][j]);
            }
        }
    }
    if (largest > 0.0 && (largest < 1.0 || largest >= 1e4)) exponent = (int)floor(log10(largest));
    emit(out, "Max |d| by layer of the tensors that regressed, worst growth first%s. Lines, in the order the chart "
              "draws them:", cut ? " (first layers)" : "");
    for (int k = 0; k < n_names; k++) {
        emit(out, "%s %d. `", k ? ";" : "", 2 * k + 1);
        emit_text(out, names[k], NAME_TEXT, 1);
        emit(out, "` in base, %d. `", 2 * k + 2);
        emit_text(out, names[k], NAME_TEXT, 1);
        emit(out, "` in head (worst: `");
        emit_text(out, eq_diff_text(worst[k]->head, "path"), PATH_TEXT, 1);
        emit(out, "`, %s, %s)", eq_diff_change_names[worst[k]->kind],
             format_factor(worst[k]->factor, worst[k]->from_noise, factor, sizeof factor));
    }
    emit(out, ".\n\n```mermaid\nxychart-beta\n    title \"max |d| by layer: base vs head\"\n    x-axis \"layer\" [");
    for (int k = 0; k < n; k++) { /* layer -1: a tensor of no layer (a loss), "-" as in the reports */
        if (layers[k] < 0) emit(out, "%s\"-\"", k ? ", " : "");
        else emit(out, "%s\"%d\"", k ? ", " : "", layers[k]);
    }
    if (exponent != 0) emit(out, "]\n    y-axis \"max |d| (x 1e%d)\"\n", exponent);
    else emit(out, "]\n    y-axis \"max |d|\"\n");
    for (int line = 0; line < 2 * n_names; line++) {
        emit(out, "    line \"%d %s\" [", line + 1, line % 2 == 0 ? "base" : "head");
        for (int k = 0; k < n; k++) emit(out, "%s%.4f", k ? ", " : "", values[line][k] * pow(10.0, -exponent));
        emit(out, "]\n");
    }
    emit(out, "```\n\n");
}

static void write_block(comment *out, const cell_diff *cell)
{
    char base_max[32], head_max[32], factor[48];
    int rows = 0, regressions = cell->head == NULL ? 1 : cell->n_regressed;
    emit(out, "<details><summary>");
    emit_cell_name(out, cell);
    emit(out, ": %d regression%s</summary>\n\n", regressions, regressions == 1 ? "" : "s");
    if (cell->head == NULL) {
        emit(out, "Missing from head: the head report has no such cell, so none of its %zu tensors was checked.\n\n"
                  "</details>\n\n", json_array_size(json_object_get(cell->base, "results")));
        return;
    }
    emit(out, "| Tensor | Change | Base max | Head max | Factor | Base -> Head | Head diagnosis |\n"
              "|--------|--------|---------:|---------:|-------:|--------------|----------------|\n");
    for (int i = 0; i < cell->n_changes && rows < MAX_TENSOR_ROWS; i++) {
        const tensor_change *ch = &cell->changes[i];
        if (!IS_REGRESSION(ch->kind)) continue;
        emit(out, "| `");
        emit_text(out, eq_diff_text(ch->head, "path"), PATH_TEXT, 1);
        emit(out, "` | %s | %s | %s | %s | ", eq_diff_change_names[ch->kind],
             eq_report_format_value(eq_diff_metric(ch->base, "max_abs"), 6, base_max, sizeof base_max),
             eq_report_format_value(eq_diff_metric(ch->head, "max_abs"), 6, head_max, sizeof head_max),
             format_factor(ch->factor, ch->from_noise, factor, sizeof factor));
        emit_text(out, eq_diff_text(ch->base, "observed"), NAME_TEXT, 0);
        emit(out, " -> ");
        emit_text(out, eq_diff_text(ch->head, "observed"), NAME_TEXT, 0);
        emit(out, " | ");
        emit_text(out, eq_diff_text(ch->head, "diagnosis"), DIAGNOSIS_TEXT, 0);
        emit(out, " |\n");
        rows++;
    }
    if (cell->n_regressed > rows) emit(out, "\n... and %d more\n", cell->n_regressed - rows);
    if (cell->n_changes > cell->n_regressed) {
        emit(out, "\nAlso in this cell: ");
        emit_counts(out, cell->counts, CHANGE_ONLY_BASE);
        emit(out, ".\n");
    }
    emit(out, "\n");
    write_chart(out, cell);
    emit(out, "</details>\n\n");
}

static void write_footnote(comment *out, const eq_diff_options *opt)
{
    emit(out, "<sub>A tensor grew when its max or mean |d| rose above %gx the base and above its noise floor: the "
              "largest of %g, its rounding-error bound where the report has one, and %d ULPs of its reference's "
              "largest magnitude. Growth \"from noise\" is counted from that floor.</sub>\n",
         opt->growth, opt->floor, NOISE_ULPS);
}

static void write_comment(comment *out, const cell_diff *cells, int n_cells, int n_regressions,
                          const eq_diff_options *opt)
{
    int compared = 0, regressed_cells = 0, missing = 0, kinds[CHANGE_COUNT] = {0}, cut = 0, shown = 0;
    for (int c = 0; c < n_cells; c++) {
        compared += cells[c].base != NULL && cells[c].head != NULL;
        regressed_cells += cell_rank(&cells[c]) == 0;
        missing += cells[c].head == NULL;
        for (int k = CHANGE_NEW_FAILURE; k <= CHANGE_GREW; k++) kinds[k] += cells[c].counts[k];
    }
    /* The verdict first: the line a reviewer reads. A clean comparison is that line and the
     * table of cells folded away. */
    if (n_regressions == 0) {
        emit(out, "**equiv: no divergence regressions** (%d cell%s compared)\n\n", compared, compared == 1 ? "" : "s");
        emit(out, "<details><summary>%d cell%s</summary>\n\n", n_cells, n_cells == 1 ? "" : "s");
        write_table(out, cells, n_cells, 0, 2, &shown);
        write_footnote(out, opt);
        emit(out, "\n</details>\n");
        return;
    }
    emit(out, "**equiv: %d regression%s** in %d of %d cells (", n_regressions, n_regressions == 1 ? "" : "s",
         regressed_cells, n_cells);
    if (n_regressions > missing) emit_counts(out, kinds, CHANGE_NEW_FAILURE);
    if (missing > 0)
        emit(out, "%s%d cell%s missing from head", n_regressions > missing ? ", " : "", missing, missing == 1 ? "" : "s");
    emit(out, ")\n\n");
    /* the cells that regressed or changed; the unchanged ones folded away */
    write_table(out, cells, n_cells, 0, 1, &shown);
    int unchanged = 0;
    for (int c = 0; c < n_cells; c++) unchanged += cell_rank(&cells[c]) == 2;
    if (unchanged > 0) {
        emit(out, "<details><summary>%d unchanged cell%s</summary>\n\n", unchanged, unchanged == 1 ? "" : "s");
        write_table(out, cells, n_cells, 2, 2, &shown);
        emit(out, "</details>\n\n");
    }
    for (int c = 0; c < n_cells; c++) {
        if (cell_rank(&cells[c]) != 0) continue;
        if (out->written < BLOCK_BUDGET) write_block(out, &cells[c]);
        else cut++;
    }
    if (cut > 0) emit(out, "... and %d more regressed cells (the JSON reports hold every tensor)\n\n", cut);
    write_footnote(out, opt);
}

void eq_diff_write_comment(FILE *f, const cell_diff *cells, int n_cells, int n_regressions, const eq_diff_options *opt)
{
    comment out = {f, 0};
    write_comment(&out, cells, n_cells, n_regressions, opt);
}
