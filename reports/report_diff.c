/* equiv diff: two JSON reports (base, head) -> a Markdown pull-request comment on what the change
 * did to every tensor's divergence. The rules are in report_diff.h. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "harness/input_file.h"
#include "harness/run_cell.h"
#include "reports/report.h"
#include "reports/report_diff.h"

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
/* A few ULPs of the reference: a max |d| up to NOISE_ULPS units in the last place of the
 * reference's largest magnitude (in the run's dtype) is what one or two roundings of that element
 * make, whatever the layout. */
#define NOISE_ULPS 4
#define NAME_TEXT 40
#define PATH_TEXT 100
#define DIAGNOSIS_TEXT 200

/* What happened to a tensor, the regressions first and worst first. */
typedef enum {
    CHANGE_NONE, CHANGE_NEW_FAILURE, CHANGE_STOPPED_EXACT, CHANGE_GREW, CHANGE_ONLY_BASE, CHANGE_ONLY_HEAD,
    CHANGE_FIXED, CHANGE_BECAME_EXACT, CHANGE_SHRANK, CHANGE_COUNT
} change_kind;
static const char *const change_names[CHANGE_COUNT] = {
    "unchanged",    "new failure", "no longer bit-exact", "grew",  "only in base",
    "only in head", "fixed",       "became bit-exact",    "shrank"};
#define IS_REGRESSION(kind) ((kind) >= CHANGE_NEW_FAILURE && (kind) <= CHANGE_GREW)

typedef struct {
    json_t *base, *head; /* the result objects; one is NULL for a tensor on one side only */
    change_kind kind;
    double factor;       /* head / base of max or mean |d|, whichever rose more, the base taken
                            at least at the noise floor (NAN: none) */
    int from_noise;      /* the base of that factor was at or under the noise floor */
    int order;           /* capture order, to keep ties in it */
} tensor_change;

typedef struct {
    json_t *base, *head;    /* the comparison objects; one is NULL for a cell on one side only */
    tensor_change *changes; /* every tensor that changed, worst first */
    int n_changes, n_regressed;
    int counts[CHANGE_COUNT];
    double worst_factor; /* largest factor of a tensor on both sides (NAN: none) */
    int worst_from_noise; /* that factor's base was noise */
} cell_diff;

typedef struct {
    FILE *f;
    long written; /* characters so far, against GitHub's limit */
} comment;

static const char *text(const json_t *object, const char *key)
{
    const char *s = json_string_value(json_object_get(object, key));
    return s != NULL ? s : "";
}

/* A number as report_json.c writes it: a JSON number, or "NaN", "Infinity", "-Infinity". */
static int read_number(const json_t *value, double *out)
{
    const char *s = json_string_value(value);
    if (json_is_number(value)) *out = json_number_value(value);
    else if (s != NULL && strcmp(s, "NaN") == 0) *out = NAN;
    else if (s != NULL && strcmp(s, "Infinity") == 0) *out = INFINITY;
    else if (s != NULL && strcmp(s, "-Infinity") == 0) *out = -INFINITY;
    else return 0;
    return 1;
}

static double metric(const json_t *result, const char *key)
{
    double v = NAN;
    read_number(json_object_get(json_object_get(result, "metrics"), key), &v);
    return v;
}

/* An integer field in lo..hi. */
static int is_integer_in(const json_t *value, long long lo, long long hi)
{
    return json_is_integer(value) && json_integer_value(value) >= lo && json_integer_value(value) <= hi;
}

/* A |d| metric: a number >= 0 (Infinity too: a difference of two fp64 values may overflow), never
 * NaN or negative. 1, or 0 with what is wrong in why. */
static int check_abs_metric(const json_t *result, const char *key, char *why, size_t len)
{
    const json_t *value = json_object_get(json_object_get(result, "metrics"), key);
    double v;
    if (!read_number(value, &v)) snprintf(why, len, "lacks \"metrics.%s\" or has the wrong type there", key);
    else if (isnan(v)) snprintf(why, len, "metrics.%s is NaN (a |d| is a number >= 0)", key);
    else if (v < 0.0) snprintf(why, len, "metrics.%s is %g, negative (a |d| is >= 0)", key, v);
    else return 1;
    return 0;
}

/* The fields the diff reads, checked once so that the rest can take them as given: 1 when cmp
 * holds every one with a sound value, else 0 and what is wrong in why ("result 3: ..."). */
static int check_comparison(const json_t *cmp, char *why, size_t len)
{
    static const char *const result_keys[] = {"path", "name", "observed", "diagnosis"};
    static const char *const observed[] = {"bit-exact", "within", "OUTSIDE", "NON-FINITE"};
    const json_t *test = json_object_get(cmp, "test"), *results = json_object_get(cmp, "results");
    json_t *r;
    size_t i;
    char what[200];
    if (!json_is_object(cmp)) return snprintf(why, len, "is not an object"), 0;
    /* the keys cells are matched on that every report has (harness/run_cell.h): texts, then numbers */
    for (int pass = 0; pass < 2; pass++)
        for (int k = 0; k < eq_cell_field_count; k++) {
            const eq_cell_field *f = &eq_cell_fields[k];
            const int is_text = f->type == EQ_CELL_TEXT || f->type == EQ_CELL_DTYPE;
            if (!(f->flags & EQ_CELL_DIFF) || !(f->flags & EQ_CELL_JSON) || is_text != (pass == 0)) continue;
            if (is_text && !json_is_string(json_object_get(test, f->key)))
                return snprintf(why, len, "lacks \"test.%s\" or has the wrong type there", f->key), 0;
            if (!is_text && !is_integer_in(json_object_get(test, f->key), f->lo, f->hi))
                return snprintf(why, len, "test.%s is not an integer in %lld..%lld", f->key, (long long)f->lo,
                                (long long)f->hi), 0;
        }
    if (!json_is_array(results)) return snprintf(why, len, "lacks \"results\" or has the wrong type there"), 0;
    json_array_foreach(results, i, r) {
        int ok = json_is_object(r);
        if (!ok) snprintf(what, sizeof what, "is not an object");
        for (size_t k = 0; ok && k < sizeof result_keys / sizeof result_keys[0]; k++)
            if (!json_is_string(json_object_get(r, result_keys[k])))
                ok = 0, snprintf(what, sizeof what, "lacks \"%s\" or has the wrong type there", result_keys[k]);
        if (ok && !is_integer_in(json_object_get(r, "layer"), 0, 9999))
            ok = 0, snprintf(what, sizeof what, "layer is not an integer in 0..9999");
        if (ok && !json_is_boolean(json_object_get(r, "as_expected")))
            ok = 0, snprintf(what, sizeof what, "lacks \"as_expected\" or has the wrong type there");
        if (ok) {
            size_t k = 0;
            while (k < sizeof observed / sizeof observed[0] && strcmp(text(r, "observed"), observed[k]) != 0) k++;
            if (k == sizeof observed / sizeof observed[0])
                ok = 0, snprintf(what, sizeof what, "observed '%.40s' is not bit-exact, within, OUTSIDE or NON-FINITE",
                                 text(r, "observed"));
        }
        if (ok) ok = check_abs_metric(r, "max_abs", what, sizeof what) && check_abs_metric(r, "mean_abs", what, sizeof what);
        if (!ok) return snprintf(why, len, "result %zu %s", i, what), 0;
    }
    return 1;
}

static eq_status load_report(const char *path, json_t **out)
{
    eq_status st = EQ_OK;
    json_error_t err;
    json_t *root = NULL, *cmp;
    FILE *fp = NULL;
    size_t i;
    char why[300];
    /* a regular file of bounded size (a FIFO or /dev/zero would be read forever); a key given
     * twice is an error, not the last one winning */
    EQ_TRY(eq_input_open(path, "report", EQ_JSON_MAX_BYTES, &fp));
    root = json_loadf(fp, JSON_REJECT_DUPLICATES, &err);
    if (root == NULL) {
        st = EQ_FAIL(EQ_ERR_INPUT, "%s is not JSON: %s (line %d, column %d)", path, err.text, err.line, err.column);
        goto cleanup;
    }
    const json_t *tag = json_object_get(root, "equiv_report"), *list = json_object_get(root, "comparisons");
    if (!json_is_integer(tag) || json_integer_value(tag) != 1 || !json_is_array(list)) {
        st = EQ_FAIL(EQ_ERR_INPUT, "%s is not an equiv report (no \"equiv_report\": 1 and \"comparisons\" list)", path);
        goto cleanup;
    }
    json_array_foreach(list, i, cmp) {
        if (!check_comparison(cmp, why, sizeof why)) {
            st = EQ_FAIL(EQ_ERR_INPUT, "%s: comparison %zu %s", path, i, why);
            goto cleanup;
        }
    }
    *out = root;
    root = NULL;
cleanup:
    if (fp != NULL) fclose(fp);
    json_decref(root);
    return st;
}

/* Two comparisons are the same cell when their test runs agree on the EQ_CELL_DIFF fields
 * (harness/run_cell.h); a key that neither has (numerics, written only when set) agrees. */
static int same_cell(const json_t *a, const json_t *b)
{
    const json_t *test_a = json_object_get(a, "test"), *test_b = json_object_get(b, "test");
    for (int k = 0; k < eq_cell_field_count; k++) {
        if (!(eq_cell_fields[k].flags & EQ_CELL_DIFF)) continue;
        const json_t *va = json_object_get(test_a, eq_cell_fields[k].key), *vb = json_object_get(test_b, eq_cell_fields[k].key);
        if ((va != NULL || vb != NULL) && !json_equal(va, vb)) return 0;
    }
    return 1;
}

/* The cells in base order, then those only in head. A head comparison pairs with the first base
 * comparison of its cell not yet paired, so a cell a report holds twice pairs in order. */
static eq_status match_cells(json_t *base, json_t *head, cell_diff **cells, int *n_cells)
{
    json_t *base_list = json_object_get(base, "comparisons"), *head_list = json_object_get(head, "comparisons");
    int n_base = (int)json_array_size(base_list), n_head = (int)json_array_size(head_list), n = n_base;
    cell_diff *out = calloc((size_t)(n_base + n_head) + 1, sizeof *out);
    if (out == NULL) return EQ_FAIL(EQ_ERR_NOMEM, "out of memory matching the cells of two reports");
    for (int c = 0; c < n_base; c++) out[c].base = json_array_get(base_list, (size_t)c);
    for (int j = 0; j < n_head; j++) {
        json_t *h = json_array_get(head_list, (size_t)j);
        int c = 0;
        while (c < n_base && (out[c].head != NULL || !same_cell(out[c].base, h))) c++;
        out[c < n_base ? c : n++].head = h;
    }
    for (int c = 0; c < n; c++) out[c].worst_factor = NAN;
    *cells = out;
    *n_cells = n;
    return EQ_OK;
}

/* Spacing of dtype's numbers at |x|'s scale, 2^(floor(log2|x|) - p + 1) (0 for x 0 or not finite;
 * an unknown dtype as fp64). */
static double ulp_of(double x, const char *dtype)
{
    int p = strcmp(dtype, "bf16") == 0 ? 8 : strcmp(dtype, "fp32") == 0 ? 24 : 53, e;
    if (!isfinite(x) || x == 0.0) return 0.0;
    frexp(fabs(x), &e);
    return ldexp(1.0, e - p);
}

/* The |d| at or under which a tensor's difference is noise: the larger of the option's absolute
 * floor, the rounding-error bound of the tensor where a report has one (theory.det_bound_max: no
 * summation order exceeds it), and NOISE_ULPS ULPs of its reference's largest magnitude in the
 * run's dtype; over both sides (the reference itself may have changed). A report without those
 * fields gets the absolute floor. */
static double noise_floor(const json_t *b, const json_t *h, const char *dtype, const eq_diff_options *opt)
{
    double floor_abs = opt->floor;
    const json_t *sides[2] = {b, h};
    for (int k = 0; k < 2; k++) {
        double bound = NAN, ref_absmax = NAN;
        read_number(json_object_get(json_object_get(sides[k], "theory"), "det_bound_max"), &bound);
        read_number(json_object_get(json_object_get(sides[k], "metrics"), "ref_absmax"), &ref_absmax);
        if (isfinite(bound)) floor_abs = fmax(floor_abs, bound);
        floor_abs = fmax(floor_abs, NOISE_ULPS * ulp_of(ref_absmax, dtype));
    }
    return floor_abs;
}

/* head / base of a |d|, the base taken at least at the floor: 1 when both are at or below it
 * (noise), head / floor when only the base is (growth from noise, *from_noise set). */
static double growth_factor(double base, double head, double floor_abs, int *from_noise)
{
    *from_noise = 0;
    if (isnan(base) || isnan(head)) return NAN;
    if (head <= floor_abs && base <= floor_abs) return 1.0;
    if (base > floor_abs) return head / base;
    *from_noise = 1;
    return floor_abs > 0.0 ? head / floor_abs : INFINITY;
}

static change_kind classify(const json_t *b, const json_t *h, const char *dtype, const eq_diff_options *opt,
                            double *factor, int *from_noise)
{
    double b_max = metric(b, "max_abs"), h_max = metric(h, "max_abs");
    double b_mean = metric(b, "mean_abs"), h_mean = metric(h, "mean_abs");
    double floor_abs = noise_floor(b, h, dtype, opt);
    int noise_max, noise_mean;
    double f_max = growth_factor(b_max, h_max, floor_abs, &noise_max);
    double f_mean = growth_factor(b_mean, h_mean, floor_abs, &noise_mean);
    int mean_wins = isnan(f_max) || f_mean > f_max;
    *factor = mean_wins ? f_mean : f_max;
    *from_noise = mean_wins ? noise_mean : noise_max;
    int b_ok = json_is_true(json_object_get(b, "as_expected")), h_ok = json_is_true(json_object_get(h, "as_expected"));
    int b_exact = strcmp(text(b, "observed"), "bit-exact") == 0;
    int h_exact = strcmp(text(h, "observed"), "bit-exact") == 0;
    if (b_ok && !h_ok) return CHANGE_NEW_FAILURE;
    if (b_exact && !h_exact) return CHANGE_STOPPED_EXACT;
    if ((f_max > opt->growth && h_max > floor_abs) || (f_mean > opt->growth && h_mean > floor_abs))
        return CHANGE_GREW;
    if (!b_ok && h_ok) return CHANGE_FIXED;
    if (!b_exact && h_exact) return CHANGE_BECAME_EXACT;
    if ((f_max < 1.0 / opt->growth && b_max > floor_abs) || (f_mean < 1.0 / opt->growth && b_mean > floor_abs))
        return CHANGE_SHRANK;
    return CHANGE_NONE;
}

/* Worst first: by kind (regressions first), then the larger factor, then capture order. */
static int worse_change_first(const void *pa, const void *pb)
{
    const tensor_change *a = pa, *b = pb;
    if (a->kind != b->kind) return a->kind < b->kind ? -1 : 1;
    if (!isnan(a->factor) && (isnan(b->factor) || a->factor > b->factor)) return -1;
    if (!isnan(b->factor) && (isnan(a->factor) || b->factor > a->factor)) return 1;
    return a->order - b->order;
}

static void add_change(cell_diff *cell, json_t *b, json_t *h, change_kind kind, double factor, int from_noise)
{
    cell->changes[cell->n_changes] = (tensor_change){b, h, kind, factor, from_noise, cell->n_changes};
    cell->n_changes++;
    cell->counts[kind]++;
    cell->n_regressed += IS_REGRESSION(kind);
}

/* Whether result j of `results` has r's path. */
static int same_path(const json_t *r, const json_t *results, size_t j)
{
    return strcmp(text(r, "path"), text(json_array_get(results, j), "path")) == 0;
}

/* Pairs the results of a cell by path (looking first at the same position: both sides capture
 * in the same order unless the model changed) and classifies each pair. */
static eq_status diff_cell(cell_diff *cell, const eq_diff_options *opt)
{
    if (cell->base == NULL || cell->head == NULL) return EQ_OK;
    json_t *base_results = json_object_get(cell->base, "results"), *r;
    json_t *head_results = json_object_get(cell->head, "results");
    size_t n_base = json_array_size(base_results), n_head = json_array_size(head_results), i;
    const char *dtype = text(json_object_get(cell->head, "test"), "dtype");
    char *head_paired = calloc(n_head + 1, 1);
    cell->changes = calloc(n_base + n_head + 1, sizeof *cell->changes);
    if (head_paired == NULL || cell->changes == NULL) {
        free(head_paired);
        return EQ_FAIL(EQ_ERR_NOMEM, "out of memory comparing the results of a cell");
    }
    json_array_foreach(base_results, i, r) {
        size_t j = i;
        if (j >= n_head || head_paired[j] || !same_path(r, head_results, j))
            for (j = 0; j < n_head && (head_paired[j] || !same_path(r, head_results, j)); j++) continue;
        if (j == n_head) {
            add_change(cell, r, NULL, CHANGE_ONLY_BASE, NAN, 0);
            continue;
        }
        json_t *h = json_array_get(head_results, j);
        double factor;
        int from_noise;
        change_kind kind = classify(r, h, dtype, opt, &factor, &from_noise);
        head_paired[j] = 1;
        if (!isnan(factor) && (isnan(cell->worst_factor) || factor > cell->worst_factor)) {
            cell->worst_factor = factor;
            cell->worst_from_noise = from_noise;
        }
        if (kind != CHANGE_NONE) add_change(cell, r, h, kind, factor, from_noise);
    }
    json_array_foreach(head_results, i, r) if (!head_paired[i]) add_change(cell, NULL, r, CHANGE_ONLY_HEAD, NAN, 0);
    qsort(cell->changes, (size_t)cell->n_changes, sizeof *cell->changes, worse_change_first);
    free(head_paired);
    return EQ_OK;
}

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
            emit(out, "%s%d %s%s", named++ ? ", " : "", counts[k], change_names[k],
                 k == CHANGE_NEW_FAILURE && counts[k] != 1 ? "s" : "");
    if (named == 0) emit(out, "-");
}

/* "gpt bf16 dp8-tp2 (ring, avg, ci)": the cell's title (harness/run_cell.h: case, dtype, layout),
 * then its other EQ_CELL_DIFF fields (algorithm, gradients, size), those written only when set
 * with their key ("numerics megatron"). */
static void emit_cell_name(comment *out, const cell_diff *cell)
{
    const json_t *t = json_object_get(cell->base != NULL ? cell->base : cell->head, "test");
    int shown = 0;
    for (int k = 0; k < eq_cell_field_count; k++) {
        const eq_cell_field *f = &eq_cell_fields[k];
        const json_t *value = json_object_get(t, f->key);
        if (!(f->flags & (EQ_CELL_TITLE | EQ_CELL_DIFF)) || value == NULL) continue;
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
        const char *name = text(ch->head, "name");
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
        if (strcmp(text(r, "name"), name) == 0 && json_integer_value(json_object_get(r, "layer")) == layer) return r;
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
        for (int k = 0; k < n_names; k++) named |= strcmp(text(r, "name"), names[k]) == 0;
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
                json_array_foreach(base_results, m, x) if (strcmp(text(x, "path"), text(h, "path")) == 0) b = x;
            }
            values[2 * k][j] = b != NULL ? metric(b, "max_abs") : 0.0;
            values[2 * k + 1][j] = h != NULL ? metric(h, "max_abs") : 0.0;
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
        emit_text(out, text(worst[k]->head, "path"), PATH_TEXT, 1);
        emit(out, "`, %s, %s)", change_names[worst[k]->kind],
             format_factor(worst[k]->factor, worst[k]->from_noise, factor, sizeof factor));
    }
    emit(out, ".\n\n```mermaid\nxychart-beta\n    title \"max |d| by layer: base vs head\"\n    x-axis \"layer\" [");
    for (int k = 0; k < n; k++) emit(out, "%s\"%d\"", k ? ", " : "", layers[k]);
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
        emit_text(out, text(ch->head, "path"), PATH_TEXT, 1);
        emit(out, "` | %s | %s | %s | %s | ", change_names[ch->kind],
             eq_report_format_value(metric(ch->base, "max_abs"), 6, base_max, sizeof base_max),
             eq_report_format_value(metric(ch->head, "max_abs"), 6, head_max, sizeof head_max),
             format_factor(ch->factor, ch->from_noise, factor, sizeof factor));
        emit_text(out, text(ch->base, "observed"), NAME_TEXT, 0);
        emit(out, " -> ");
        emit_text(out, text(ch->head, "observed"), NAME_TEXT, 0);
        emit(out, " | ");
        emit_text(out, text(ch->head, "diagnosis"), DIAGNOSIS_TEXT, 0);
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

eq_diff_options eq_diff_options_default(void)
{
    return (eq_diff_options){.growth = 1.5, .floor = 1e-7};
}

eq_status eq_report_diff(const char *base_path, const char *head_path, const eq_diff_options *opt,
                         FILE *markdown_out, int *n_regressions)
{
    eq_status st = EQ_OK;
    eq_diff_options defaults = eq_diff_options_default();
    json_t *base = NULL, *head = NULL;
    cell_diff *cells = NULL;
    int n_cells = 0, regressions = 0;
    comment out = {markdown_out, 0};
    if (n_regressions != NULL) *n_regressions = 0;
    if (opt == NULL) opt = &defaults;
    if (!(opt->growth >= 1.0) || !(opt->floor >= 0.0)) {
        st = EQ_FAIL(EQ_ERR_USAGE, "diff: growth %g must be >= 1 and floor %g >= 0", opt->growth, opt->floor);
        goto cleanup;
    }
    EQ_TRY(load_report(base_path, &base));
    EQ_TRY(load_report(head_path, &head));
    EQ_TRY(match_cells(base, head, &cells, &n_cells));
    for (int c = 0; c < n_cells; c++) {
        EQ_TRY(diff_cell(&cells[c], opt));
        regressions += cells[c].n_regressed + (cells[c].head == NULL);
    }
    write_comment(&out, cells, n_cells, regressions, opt);
    if (fflush(markdown_out) != 0 || ferror(markdown_out)) {
        st = EQ_FAIL(EQ_ERR_IO, "cannot write the diff comment");
        goto cleanup;
    }
    if (n_regressions != NULL) *n_regressions = regressions;
cleanup:
    for (int c = 0; c < n_cells; c++) free(cells[c].changes);
    free(cells);
    json_decref(base);
    json_decref(head);
    return st;
}
