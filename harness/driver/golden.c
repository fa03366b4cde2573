#include "harness/driver/golden.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness/base/atomic_file.h"
#include "harness/run_cell.h"

/* A diff needs a table of (old lines + 1) x (new lines + 1) ints; past this many cells (64 MiB)
 * the changed region is shown as all old lines, then all new lines. */
#define DIFF_MAX_CELLS (16L * 1024 * 1024)

/* One tensor of an envelope file. */
typedef struct {
    char dtype[16], layout[32], path[EQ_NAME_MAX];
    int bit_exact;
    double max_abs, mean_abs;
    int seen; /* matched by a tensor of the run */
} recorded_tensor;

typedef struct {
    recorded_tensor *tensors;
    int count;
} envelope;

static int is_judged_role(eq_role role)
{
    return role == EQ_ROLE_ACTIVATION || role == EQ_ROLE_GRAD || role == EQ_ROLE_LOSS;
}

static int has_case(const eq_matrix *m, const char *case_name)
{
    for (int i = 0; i < m->count; i++)
        if (strcmp(m->rows[i].case_name, case_name) == 0) return 1;
    return 0;
}

/* What every cell of case_name in m ran at, as a run's identity (harness/run_cell.h): the fields an
 * envelope records (EQ_CELL_GOLDEN) come from the matrix's options, the rest stay at their
 * defaults, as a matrix runs them. */
static void matrix_cell(const eq_matrix *m, const char *case_name, eq_run_meta *cell)
{
    eq_cell_defaults(cell);
    snprintf(cell->case_name, sizeof cell->case_name, "%s", case_name);
    snprintf(cell->size, sizeof cell->size, "%s", m->size);
    snprintf(cell->algorithm, sizeof cell->algorithm, "%s", eq_algo_name(m->algo));
    cell->seed = m->seed;
}

/* A JSON string literal of text (quotes and escapes by jansson) on out; 0 on failure. */
static int put_json_string(FILE *out, const char *text)
{
    json_t *s = json_string(text);
    char *encoded = s ? json_dumps(s, JSON_ENCODE_ANY) : NULL;
    if (encoded) fputs(encoded, out);
    free(encoded);
    json_decref(s);
    return encoded != NULL;
}

/* One tensor's line; numbers with %.9g (max |d| is never NaN or Inf: it is taken over the
 * finite pairs), so that a diff reads value by value. 0 on failure. */
static int put_tensor_line(FILE *out, const eq_matrix_row *row, const eq_tensor_result *r, int last)
{
    char layout[32];
    int ok = 1;
    fprintf(out, "    {\"dtype\": \"%s\", \"layout\": \"%s\", \"path\": ", eq_dtype_name(row->dtype),
            eq_layout_name(row->layout, layout, sizeof layout));
    ok &= put_json_string(out, r->path);
    ok &= isfinite(r->m.max_abs) && isfinite(r->m.mean_abs);
    fprintf(out, ", \"role\": \"%s\", \"bit_exact\": %s, \"max_abs\": %.9g, \"mean_abs\": %.9g}%s\n",
            eq_role_name(r->role), r->observed == EQ_OBS_BIT_EXACT ? "true" : "false", r->m.max_abs, r->m.mean_abs,
            last ? "" : ",");
    return ok;
}

/* The envelope file's text for case_name's rows of m, in a malloc'd string. */
static eq_status envelope_text(const eq_matrix *m, const char *case_name, char **text)
{
    size_t size = 0;
    int ok = 1, last_row = -1, last_result = -1;
    *text = NULL;
    FILE *out = open_memstream(text, &size);
    if (out == NULL) return EQ_FAIL(EQ_ERR_NOMEM, "no memory for the envelope of %s", case_name);
    for (int i = 0; i < m->count; i++)
        for (int k = 0; k < m->comparisons[i].count; k++)
            if (strcmp(m->rows[i].case_name, case_name) == 0 && is_judged_role(m->comparisons[i].results[k].role)) {
                last_row = i;
                last_result = k;
            }
    /* the cell the envelope applies to, each field as a JSON string ("seed": "1234") */
    eq_run_meta cell;
    char value[EQ_NAME_MAX];
    matrix_cell(m, case_name, &cell);
    fprintf(out, "{\n  \"equiv_golden\": 1");
    for (int slot = 0; eq_cell_by_json_slot(slot) != NULL; slot++) { /* in the reports' order */
        const eq_cell_field *field = eq_cell_by_json_slot(slot);
        /* a field the reports write only when set (EQ_CELL_JSON_IF_SET) likewise: older envelopes stay valid */
        if (!(field->flags & EQ_CELL_GOLDEN) || (!(field->flags & EQ_CELL_JSON) && eq_cell_is_default(&cell, field)))
            continue;
        fprintf(out, ",\n  \"%s\": ", field->key);
        ok &= put_json_string(out, eq_cell_text(&cell, field, value, sizeof value));
    }
    fprintf(out, ",\n  \"recorded_with\": ");
    ok &= put_json_string(out, m->backend);
    fprintf(out, ",\n  \"tensors\": [\n");
    for (int i = 0; i < m->count && ok; i++) {
        if (strcmp(m->rows[i].case_name, case_name) != 0) continue;
        const eq_comparison *c = &m->comparisons[i];
        for (int k = 0; k < c->count && ok; k++)
            if (is_judged_role(c->results[k].role))
                ok &= put_tensor_line(out, &m->rows[i], &c->results[k], i == last_row && k == last_result);
    }
    fprintf(out, "  ]\n}\n");
    if (fclose(out) != 0 || !ok) {
        free(*text);
        *text = NULL;
        return EQ_FAIL(EQ_ERR_INTERNAL, "cannot build the envelope of %s (out of memory, a name not UTF-8, or a "
                                        "non-finite max |d|)", case_name);
    }
    return EQ_OK;
}

static eq_status write_text(const char *path, const char *text)
{
    eq_status st = EQ_OK;
    eq_atomic_file af = {0};
    EQ_TRY(eq_atomic_begin(&af, path, 1));
    if (fputs(text, af.fp) == EOF) {
        st = EQ_FAIL(EQ_ERR_IO, "cannot write %s", path);
        goto cleanup;
    }
    EQ_TRY(eq_atomic_commit(&af));
cleanup:
    eq_atomic_abort(&af);
    return st;
}

eq_status eq_golden_write(const char *path, const eq_matrix *m, const char *case_name)
{
    eq_status st = EQ_OK;
    char *text = NULL;
    if (!has_case(m, case_name)) return EQ_FAIL(EQ_ERR_USAGE, "the matrix has no cell of case %s", case_name);
    EQ_TRY(envelope_text(m, case_name, &text));
    EQ_TRY(write_text(path, text));
cleanup:
    free(text);
    return st;
}

static int copy_string(json_t *o, const char *key, char *dst, size_t len)
{
    const char *s = json_string_value(json_object_get(o, key));
    if (s == NULL || strlen(s) >= len) return 0;
    memcpy(dst, s, strlen(s) + 1);
    return 1;
}

/* Reads the envelope at path, checking that it applies to case_name and to the cell m runs it at
 * (its EQ_CELL_GOLDEN fields: size, algorithm, seed). */
static eq_status envelope_load(const char *path, const eq_matrix *m, const char *case_name, envelope *env)
{
    eq_status st = EQ_OK;
    json_error_t err;
    eq_run_meta run, recorded;
    char kase[EQ_CASE_KEY_MAX], recorded_text[EQ_NAME_MAX], run_text[EQ_NAME_MAX], said[512] = "", now[512] = "";
    int differs = 0;
    memset(env, 0, sizeof *env);
    matrix_cell(m, case_name, &run);
    recorded = run;
    json_t *root = json_load_file(path, 0, &err);
    if (root == NULL) {
        st = EQ_FAIL(EQ_ERR_INPUT, "envelope %s: %s (line %d)", path, err.text, err.line);
        goto cleanup;
    }
    json_t *tensors = json_object_get(root, "tensors");
    int complete = json_integer_value(json_object_get(root, "equiv_golden")) == 1 && json_is_array(tensors) &&
                   copy_string(root, "case", kase, sizeof kase);
    for (int f = 0; complete && f < eq_cell_field_count; f++) {
        const eq_cell_field *field = &eq_cell_fields[f];
        if (!(field->flags & EQ_CELL_GOLDEN)) continue;
        if (!(field->flags & EQ_CELL_JSON) && json_object_get(root, field->key) == NULL)
            complete = eq_cell_parse(&recorded, field, field->fallback[0] ? field->fallback : ""); /* the default */
        else
            complete = copy_string(root, field->key, recorded_text, sizeof recorded_text) &&
                       eq_cell_parse(&recorded, field, recorded_text);
    }
    if (!complete) {
        st = EQ_FAIL(EQ_ERR_INPUT, "envelope %s is not an equiv golden envelope (equiv_golden 1, case, size, "
                                   "algorithm, seed, tensors)", path);
        goto cleanup;
    }
    if (strcmp(kase, case_name) != 0) {
        st = EQ_FAIL(EQ_ERR_INPUT, "envelope %s is for case %s, not %s", path, kase, case_name);
        goto cleanup;
    }
    /* the other fields, each said as "size ci", in the reports' order */
    for (int slot = 0; eq_cell_by_json_slot(slot) != NULL; slot++) {
        const eq_cell_field *field = eq_cell_by_json_slot(slot);
        if (!(field->flags & EQ_CELL_GOLDEN) || field->offset == offsetof(eq_run_meta, case_name)) continue;
        eq_cell_text(&recorded, field, recorded_text, sizeof recorded_text);
        eq_cell_text(&run, field, run_text, sizeof run_text);
        differs |= strcmp(recorded_text, run_text) != 0;
        snprintf(said + strlen(said), sizeof said - strlen(said), "%s%s %s", said[0] ? ", " : "", field->key,
                 recorded_text);
        snprintf(now + strlen(now), sizeof now - strlen(now), "%s%s %s", now[0] ? ", " : "", field->key, run_text);
    }
    if (differs) {
        st = EQ_FAIL(EQ_ERR_USAGE, "envelope %s was recorded at %s; the run is %s", path, said, now);
        goto cleanup;
    }
    env->tensors = calloc(json_array_size(tensors) + 1, sizeof *env->tensors);
    if (env->tensors == NULL) {
        st = EQ_FAIL(EQ_ERR_NOMEM, "no memory for envelope %s", path);
        goto cleanup;
    }
    for (size_t i = 0; i < json_array_size(tensors); i++) {
        json_t *t = json_array_get(tensors, i);
        recorded_tensor *r = &env->tensors[i];
        json_t *exact = json_object_get(t, "bit_exact"), *max_abs = json_object_get(t, "max_abs"),
               *mean_abs = json_object_get(t, "mean_abs");
        if (!copy_string(t, "dtype", r->dtype, sizeof r->dtype) || !copy_string(t, "layout", r->layout, sizeof r->layout) ||
            !copy_string(t, "path", r->path, sizeof r->path) || !json_is_boolean(exact) || !json_is_number(max_abs) ||
            !json_is_number(mean_abs)) {
            st = EQ_FAIL(EQ_ERR_INPUT, "envelope %s: tensor %zu lacks dtype, layout, path, bit_exact, max_abs or "
                                       "mean_abs", path, i + 1);
            goto cleanup;
        }
        r->bit_exact = json_is_true(exact);
        r->max_abs = json_number_value(max_abs);
        r->mean_abs = json_number_value(mean_abs);
        env->count++;
    }
cleanup:
    json_decref(root);
    if (st != EQ_OK) {
        free(env->tensors);
        memset(env, 0, sizeof *env);
    }
    return st;
}

static recorded_tensor *find_recorded(envelope *env, const char *dtype, const char *layout, const char *path)
{
    for (int i = 0; i < env->count; i++) {
        recorded_tensor *r = &env->tensors[i];
        if (strcmp(r->path, path) == 0 && strcmp(r->layout, layout) == 0 && strcmp(r->dtype, dtype) == 0) return r;
    }
    return NULL;
}

/* Inside the envelope: both below EQ_GOLDEN_ZERO, or both above and within a factor F. A NaN
 * compares false everywhere, so it is outside. */
static int statistic_inside(double recorded, double now)
{
    if (recorded < EQ_GOLDEN_ZERO && now < EQ_GOLDEN_ZERO) return 1;
    if (recorded < EQ_GOLDEN_ZERO || now < EQ_GOLDEN_ZERO) return 0;
    return now <= recorded * EQ_GOLDEN_FACTOR && now >= recorded / EQ_GOLDEN_FACTOR;
}

static void report_statistic(FILE *report, const char *name, double recorded, double now)
{
    if (report == NULL || statistic_inside(recorded, now)) return;
    fprintf(report, " %s recorded %.9g, now %.9g", name, recorded, now);
    if (recorded >= EQ_GOLDEN_ZERO && now >= EQ_GOLDEN_ZERO) fprintf(report, " (x%.3g);", now / recorded);
    else fprintf(report, " (zero is below %g);", EQ_GOLDEN_ZERO);
}

/* One tensor of the run against its record; 1 when it left the envelope. */
static int check_tensor(FILE *report, const char *cell, const eq_tensor_result *r, recorded_tensor *rec)
{
    const int now_exact = r->observed == EQ_OBS_BIT_EXACT;
    if (rec == NULL) {
        if (report)
            fprintf(report, "  %s %s: in this run, not recorded (max_abs %.9g, mean_abs %.9g)\n", cell, r->path,
                    r->m.max_abs, r->m.mean_abs);
        return 1;
    }
    rec->seen = 1;
    if (rec->bit_exact != now_exact) {
        if (report)
            fprintf(report, "  %s %s: %s (max_abs recorded %.9g, now %.9g)\n", cell, r->path,
                    now_exact ? "was not bit-exact, now is" : "was bit-exact, now differs", rec->max_abs, r->m.max_abs);
        return 1;
    }
    if (statistic_inside(rec->max_abs, r->m.max_abs) && statistic_inside(rec->mean_abs, r->m.mean_abs)) return 0;
    if (report) {
        fprintf(report, "  %s %s:", cell, r->path);
        report_statistic(report, "max_abs", rec->max_abs, r->m.max_abs);
        report_statistic(report, "mean_abs", rec->mean_abs, r->m.mean_abs);
        fprintf(report, " outside [recorded / %g, recorded x %g]\n", EQ_GOLDEN_FACTOR, EQ_GOLDEN_FACTOR);
    }
    return 1;
}

eq_status eq_golden_check(const char *path, const eq_matrix *m, const char *case_name, FILE *report,
                          int *n_outside)
{
    eq_status st = EQ_OK;
    envelope env = {0};
    int ran_dtype[EQ_DTYPE_COUNT] = {0}, checked = 0, outside = 0;
    *n_outside = 0;
    if (!has_case(m, case_name)) return EQ_FAIL(EQ_ERR_USAGE, "the matrix has no cell of case %s", case_name);
    EQ_TRY(envelope_load(path, m, case_name, &env));
    for (int i = 0; i < m->count; i++) {
        const eq_matrix_row *row = &m->rows[i];
        if (strcmp(row->case_name, case_name) != 0) continue;
        char layout[32], cell[64];
        eq_layout_name(row->layout, layout, sizeof layout);
        snprintf(cell, sizeof cell, "%s %s", eq_dtype_name(row->dtype), layout);
        ran_dtype[row->dtype] = 1;
        const eq_comparison *c = &m->comparisons[i];
        for (int k = 0; k < c->count; k++) {
            const eq_tensor_result *r = &c->results[k];
            if (!is_judged_role(r->role)) continue;
            checked++;
            outside += check_tensor(report, cell, r, find_recorded(&env, eq_dtype_name(row->dtype), layout, r->path));
        }
    }
    /* recorded tensors of a dtype the run covers that no result matched have disappeared */
    for (int i = 0; i < env.count; i++) {
        const recorded_tensor *rec = &env.tensors[i];
        int covered = 0;
        for (int d = 0; d < EQ_DTYPE_COUNT; d++)
            if (strcmp(rec->dtype, eq_dtype_name((eq_dtype)d)) == 0) covered = ran_dtype[d];
        if (rec->seen || !covered) continue;
        outside++;
        if (report) fprintf(report, "  %s %s %s: recorded, not in this run\n", rec->dtype, rec->layout, rec->path);
    }
    if (report)
        fprintf(report, "golden %s: %d tensors checked against %s, %d outside the envelope (factor %g)\n", case_name,
                checked, path, outside, EQ_GOLDEN_FACTOR);
    *n_outside = outside;
cleanup:
    free(env.tensors);
    return st;
}

/* The whole file at path in a malloc'd string; *text NULL when there is no such file. */
static eq_status read_text(const char *path, char **text)
{
    eq_status st = EQ_OK;
    size_t len = 0, cap = 4096;
    *text = NULL;
    FILE *in = fopen(path, "rb");
    if (in == NULL) {
        if (errno == ENOENT) return EQ_OK;
        return EQ_FAIL(EQ_ERR_INPUT, "cannot read %s: %s", path, strerror(errno));
    }
    char *buf = malloc(cap);
    while (buf != NULL) {
        len += fread(buf + len, 1, cap - len - 1, in);
        if (len + 1 < cap) break;
        char *grown = realloc(buf, cap * 2);
        if (grown == NULL) free(buf);
        buf = grown;
        cap *= 2;
    }
    if (buf == NULL || ferror(in)) {
        st = EQ_FAIL(buf == NULL ? EQ_ERR_NOMEM : EQ_ERR_INPUT, "cannot read %s", path);
        free(buf);
        goto cleanup;
    }
    buf[len] = '\0';
    *text = buf;
cleanup:
    fclose(in);
    return st;
}

typedef struct {
    const char *start;
    int len; /* without the newline */
} text_line;

/* Splits text into lines (pointers into text); *lines is malloc'd. */
static eq_status split_lines(const char *text, text_line **lines, int *n)
{
    int count = 0, cap = 0;
    *lines = NULL;
    *n = 0;
    for (const char *p = text; p && *p;) {
        const char *nl = strchr(p, '\n');
        int len = nl ? (int)(nl - p) : (int)strlen(p);
        if (count == cap) {
            cap = cap ? 2 * cap : 256;
            text_line *grown = realloc(*lines, (size_t)cap * sizeof *grown);
            if (grown == NULL) {
                free(*lines);
                *lines = NULL;
                return EQ_FAIL(EQ_ERR_NOMEM, "no memory to diff an envelope");
            }
            *lines = grown;
        }
        (*lines)[count++] = (text_line){p, len};
        p = nl ? nl + 1 : p + len;
    }
    *n = count;
    return EQ_OK;
}

static int same_line(text_line a, text_line b) { return a.len == b.len && memcmp(a.start, b.start, (size_t)a.len) == 0; }

/* A hunk's range as diff -U0 writes it: "first,count", "first" for one line, "before,0" for none. */
static void print_range(FILE *out, char sign, int start, int end)
{
    if (end - start == 1) fprintf(out, "%c%d", sign, start + 1);
    else fprintf(out, "%c%d,%d", sign, end > start ? start + 1 : start, end - start);
}

/* One hunk: old lines [a0, a1) replaced by new lines [b0, b1). */
static void print_hunk(FILE *out, const text_line *a, int a0, int a1, const text_line *b, int b0, int b1)
{
    fprintf(out, "@@ ");
    print_range(out, '-', a0, a1);
    fputc(' ', out);
    print_range(out, '+', b0, b1);
    fprintf(out, " @@\n");
    for (int i = a0; i < a1; i++) fprintf(out, "-%.*s\n", a[i].len, a[i].start);
    for (int j = b0; j < b1; j++) fprintf(out, "+%.*s\n", b[j].len, b[j].start);
}

/* A line diff by longest common subsequence over the region between the common head and tail. */
static eq_status print_diff(FILE *out, const char *path, const char *old_text, const char *new_text)
{
    eq_status st = EQ_OK;
    text_line *a = NULL, *b = NULL;
    int na = 0, nb = 0, *lcs = NULL;
    EQ_TRY(split_lines(old_text, &a, &na));
    EQ_TRY(split_lines(new_text, &b, &nb));
    int head = 0, tail = 0;
    while (head < na && head < nb && same_line(a[head], b[head])) head++;
    while (tail < na - head && tail < nb - head && same_line(a[na - 1 - tail], b[nb - 1 - tail])) tail++;
    const int ma = na - head - tail, mb = nb - head - tail, w = mb + 1;
    fprintf(out, "--- %s\n+++ %s (new)\n", old_text ? path : "/dev/null", path);
    if ((long)(ma + 1) * (long)(mb + 1) <= DIFF_MAX_CELLS) lcs = calloc((size_t)(ma + 1) * (size_t)w, sizeof *lcs);
    if (lcs == NULL) { /* too large to align (or no memory): all old lines, then all new ones */
        print_hunk(out, a, head, head + ma, b, head, head + mb);
        goto cleanup;
    }
    /* lcs[i][j]: longest common subsequence of old[head + i ..] and new[head + j ..] in the region */
    for (int i = ma - 1; i >= 0; i--)
        for (int j = mb - 1; j >= 0; j--) {
            const int skip_old = lcs[(i + 1) * w + j], skip_new = lcs[i * w + j + 1];
            if (same_line(a[head + i], b[head + j])) lcs[i * w + j] = lcs[(i + 1) * w + j + 1] + 1;
            else lcs[i * w + j] = skip_old >= skip_new ? skip_old : skip_new;
        }
    int i = 0, j = 0;
    while (i < ma || j < mb) {
        if (i < ma && j < mb && same_line(a[head + i], b[head + j])) {
            i++;
            j++;
            continue;
        }
        const int i0 = i, j0 = j;
        while ((i < ma || j < mb) && !(i < ma && j < mb && same_line(a[head + i], b[head + j]))) {
            if (j >= mb || (i < ma && lcs[(i + 1) * w + j] >= lcs[i * w + j + 1])) i++;
            else j++;
        }
        print_hunk(out, a, head + i0, head + i, b, head + j0, head + j);
    }
cleanup:
    free(lcs);
    free(a);
    free(b);
    return st;
}

eq_status eq_golden_update(const char *dir, const eq_matrix *m, FILE *diff_out)
{
    eq_status st = EQ_OK;
    char *old_text = NULL, *new_text = NULL, path[4096];
    EQ_TRY(eq_ensure_dir(dir));
    for (int i = 0; i < m->count; i++) {
        const char *case_name = m->rows[i].case_name;
        int done_before = 0;
        for (int k = 0; k < i; k++) done_before |= strcmp(m->rows[k].case_name, case_name) == 0;
        if (done_before) continue;
        snprintf(path, sizeof path, "%s/%s.json", dir, case_name);
        EQ_TRY(envelope_text(m, case_name, &new_text));
        EQ_TRY(read_text(path, &old_text));
        if (old_text != NULL && strcmp(old_text, new_text) == 0) {
            if (diff_out) fprintf(diff_out, "%s: unchanged\n", path);
        } else {
            if (diff_out) EQ_TRY(print_diff(diff_out, path, old_text, new_text));
            EQ_TRY(write_text(path, new_text));
        }
        free(old_text);
        free(new_text);
        old_text = new_text = NULL;
    }
    if (diff_out && (fflush(diff_out) != 0 || ferror(diff_out))) st = EQ_FAIL(EQ_ERR_IO, "cannot write the diff");
cleanup:
    free(old_text);
    free(new_text);
    return st;
}
