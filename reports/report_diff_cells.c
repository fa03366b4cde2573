/* equiv diff, its first half: the two JSON reports read and checked, their cells matched, and
 * every tensor's change classified (report_diff.h has the rules). */
#include "reports/report_diff_cells.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness/input_file.h"
#include "harness/run_cell.h"
#include "reports/report.h"

const char *const eq_diff_change_names[CHANGE_COUNT] = {
    "unchanged",    "new failure", "no longer bit-exact", "grew",  "only in base",
    "only in head", "fixed",       "became bit-exact",    "shrank"};

const char *eq_diff_text(const json_t *object, const char *key)
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

double eq_diff_metric(const json_t *result, const char *key)
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

typedef struct {
    const char *path;
    size_t index;
} path_at;

static int by_path_then_index(const void *pa, const void *pb)
{
    const path_at *a = pa, *b = pb;
    int c = strcmp(a->path, b->path);
    return c != 0 ? c : (a->index > b->index) - (a->index < b->index);
}

/* Each tensor path once in a comparison's results (a second copy would be paired with nothing, or
 * with the other side's one copy while its twin regressed unseen): 1, or 0 with the path and both
 * results in why. Sorted, so 100,000 results take milliseconds. */
static int unique_paths(const json_t *results, char *why, size_t len)
{
    size_t n = json_array_size(results);
    int unique = 1;
    if (n < 2) return 1;
    path_at *paths = malloc(n * sizeof *paths);
    if (paths == NULL) return snprintf(why, len, "has %zu results, too many to check for memory", n), 0;
    for (size_t i = 0; i < n; i++) paths[i] = (path_at){eq_diff_text(json_array_get(results, i), "path"), i};
    qsort(paths, n, sizeof *paths, by_path_then_index);
    for (size_t i = 1; i < n && unique; i++)
        if (strcmp(paths[i - 1].path, paths[i].path) == 0) {
            snprintf(why, len, "holds tensor %.200s twice (results %zu and %zu): a comparison has each tensor once",
                     paths[i].path, paths[i - 1].index, paths[i].index);
            unique = 0;
        }
    free(paths);
    return unique;
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
        if (ok && !is_integer_in(json_object_get(r, "layer"), -1, 9999)) /* -1: no layer (report_json.c) */
            ok = 0, snprintf(what, sizeof what, "layer is not an integer in -1..9999");
        if (ok && !json_is_boolean(json_object_get(r, "as_expected")))
            ok = 0, snprintf(what, sizeof what, "lacks \"as_expected\" or has the wrong type there");
        if (ok) {
            size_t k = 0;
            while (k < sizeof observed / sizeof observed[0] && strcmp(eq_diff_text(r, "observed"), observed[k]) != 0) k++;
            if (k == sizeof observed / sizeof observed[0])
                ok = 0, snprintf(what, sizeof what, "observed '%.40s' is not bit-exact, within, OUTSIDE or NON-FINITE",
                                 eq_diff_text(r, "observed"));
        }
        if (ok) ok = check_abs_metric(r, "max_abs", what, sizeof what) && check_abs_metric(r, "mean_abs", what, sizeof what);
        if (!ok) return snprintf(why, len, "result %zu %s", i, what), 0;
    }
    return unique_paths(results, why, len);
}

static int same_cell(const json_t *a, const json_t *b);

/* "case gpt, dtype fp32, dp 8, tp 2, algorithm ring, grads avg, size ci": the EQ_CELL_DIFF fields
 * of a comparison's test run (strings cut at 40 bytes). */
static const char *cell_key(const json_t *cmp, char *buf, size_t len)
{
    const json_t *test = json_object_get(cmp, "test");
    size_t used = 0;
    buf[0] = '\0';
    for (int k = 0; k < eq_cell_field_count && used < len; k++) {
        const eq_cell_field *f = &eq_cell_fields[k];
        const json_t *v = json_object_get(test, f->key);
        if (!(f->flags & EQ_CELL_DIFF) || v == NULL) continue;
        const char *sep = used > 0 ? ", " : "";
        int n = json_is_string(v) ? snprintf(buf + used, len - used, "%s%s %.40s", sep, f->key, json_string_value(v))
                                  : snprintf(buf + used, len - used, "%s%s %lld", sep, f->key,
                                             (long long)json_integer_value(v));
        used += n > 0 ? (size_t)n : 0;
    }
    return buf;
}

eq_status eq_diff_load_report(const char *path, json_t **out)
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
    /* each cell once: a second copy would pair with nothing in the other report, and its
     * regressions go unseen */
    json_array_foreach(list, i, cmp) {
        for (size_t j = 0; j < i; j++)
            if (same_cell(json_array_get(list, j), cmp)) {
                st = EQ_FAIL(EQ_ERR_INPUT, "%s: comparisons %zu and %zu are the same cell (%s): a report holds each "
                             "cell once", path, j, i, cell_key(cmp, why, sizeof why));
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

/* The cells in base order, then those only in head. A head comparison pairs with the base
 * comparison of its cell (each report holds a cell once: eq_diff_load_report). */
eq_status eq_diff_match_cells(json_t *base, json_t *head, cell_diff **cells, int *n_cells)
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
    double b_max = eq_diff_metric(b, "max_abs"), h_max = eq_diff_metric(h, "max_abs");
    double b_mean = eq_diff_metric(b, "mean_abs"), h_mean = eq_diff_metric(h, "mean_abs");
    double floor_abs = noise_floor(b, h, dtype, opt);
    int noise_max, noise_mean;
    double f_max = growth_factor(b_max, h_max, floor_abs, &noise_max);
    double f_mean = growth_factor(b_mean, h_mean, floor_abs, &noise_mean);
    int mean_wins = isnan(f_max) || f_mean > f_max;
    *factor = mean_wins ? f_mean : f_max;
    *from_noise = mean_wins ? noise_mean : noise_max;
    int b_ok = json_is_true(json_object_get(b, "as_expected")), h_ok = json_is_true(json_object_get(h, "as_expected"));
    int b_exact = strcmp(eq_diff_text(b, "observed"), "bit-exact") == 0;
    int h_exact = strcmp(eq_diff_text(h, "observed"), "bit-exact") == 0;
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
    return strcmp(eq_diff_text(r, "path"), eq_diff_text(json_array_get(results, j), "path")) == 0;
}

/* Pairs the results of a cell by path (looking first at the same position: both sides capture
 * in the same order unless the model changed) and classifies each pair. */
eq_status eq_diff_cell(cell_diff *cell, const eq_diff_options *opt)
{
    if (cell->base == NULL || cell->head == NULL) return EQ_OK;
    json_t *base_results = json_object_get(cell->base, "results"), *r;
    json_t *head_results = json_object_get(cell->head, "results");
    size_t n_base = json_array_size(base_results), n_head = json_array_size(head_results), i;
    const char *dtype = eq_diff_text(json_object_get(cell->head, "test"), "dtype");
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
