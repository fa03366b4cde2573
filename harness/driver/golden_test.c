/* Golden envelopes on the real row_parallel case in fp32: written, read back and checked against
 * the same matrix, then against copies of it with changes planted in one tensor each; missing and
 * malformed files; and the update's diff. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "equiv_config.h"
#include "harness/driver/golden.h"
#include "harness/base/testing.h"

/* A deep copy of m's rows and comparisons, for planting changes. */
static eq_matrix copy_matrix(const eq_matrix *m)
{
    eq_matrix c = *m;
    c.rows = malloc((size_t)m->count * sizeof *c.rows);
    c.comparisons = malloc((size_t)m->count * sizeof *c.comparisons);
    if (c.rows == NULL || c.comparisons == NULL) exit(1);
    memcpy(c.rows, m->rows, (size_t)m->count * sizeof *c.rows);
    for (int i = 0; i < m->count; i++) {
        c.comparisons[i] = m->comparisons[i];
        c.comparisons[i].results = malloc((size_t)m->comparisons[i].count * sizeof *c.comparisons[i].results);
        if (c.comparisons[i].results == NULL) exit(1);
        memcpy(c.comparisons[i].results, m->comparisons[i].results,
               (size_t)m->comparisons[i].count * sizeof *c.comparisons[i].results);
    }
    return c;
}

/* The result of `path` in the cell of `layout` (row_parallel fp32 has one cell per layout). */
static eq_tensor_result *find_result(eq_matrix *m, int dp, int tp, const char *path)
{
    for (int i = 0; i < m->count; i++) {
        if (m->rows[i].layout.dp != dp || m->rows[i].layout.tp != tp) continue;
        for (int k = 0; k < m->comparisons[i].count; k++)
            if (strcmp(m->comparisons[i].results[k].path, path) == 0) return &m->comparisons[i].results[k];
    }
    fprintf(stderr, "golden_test: no %s in dp%d-tp%d\n", path, dp, tp);
    exit(1);
}

/* Runs the check into a string; returns the count outside (-1 on an error). */
static int check_into(const char *path, const eq_matrix *m, char **report)
{
    size_t size = 0;
    int n_outside = -1;
    FILE *out = open_memstream(report, &size);
    eq_status st = eq_golden_check(path, m, "row_parallel", out, &n_outside);
    fclose(out);
    EQ_EXPECT(st == EQ_OK, "check: %s (%s)", eq_error_message(), eq_error_where());
    eq_error_clear();
    return st == EQ_OK ? n_outside : -1;
}

/* Plants one change in a copy, checks it, and looks for `in_report` in what the check says. */
typedef void (*planter)(eq_matrix *m);

static void expect_outside(const char *what, const char *path, const eq_matrix *m, planter plant, int want,
                           const char *in_report)
{
    eq_matrix c = copy_matrix(m);
    plant(&c);
    char *report = NULL;
    int n = check_into(path, &c, &report);
    EQ_EXPECT(n == want, "%s: %d outside, want %d; report:\n%s", what, n, want, report);
    EQ_EXPECT(strstr(report, in_report) != NULL, "%s: report lacks '%s':\n%s", what, in_report, report);
    free(report);
    eq_matrix_free(&c);
}

static void max_times_10(eq_matrix *m) { find_result(m, 1, 2, "layers/00/out")->m.max_abs *= 10.0; }
static void max_times_2(eq_matrix *m) { find_result(m, 1, 2, "layers/00/out")->m.max_abs *= 2.0; }
static void mean_over_10(eq_matrix *m) { find_result(m, 1, 4, "layers/00/out")->m.mean_abs /= 10.0; }

static void exact_now_differs(eq_matrix *m)
{
    eq_tensor_result *r = find_result(m, 2, 1, "layers/00/out");
    r->observed = EQ_OBS_WITHIN;
    r->m.n_differ = 1;
    r->m.max_abs = 1.0 / 8388608.0;
    r->m.mean_abs = r->m.max_abs / 8192.0;
}

static void remove_tensor(eq_matrix *m)
{
    eq_comparison *c = &m->comparisons[1]; /* dp1-tp4 */
    for (int k = 0; k < c->count; k++)
        if (strcmp(c->results[k].path, "layers/00/out") == 0) {
            memmove(&c->results[k], &c->results[k + 1], (size_t)(c->count - k - 1) * sizeof *c->results);
            c->count--;
            break;
        }
}

static void rename_tensor(eq_matrix *m) { strcpy(find_result(m, 2, 2, "layers/00/out")->path, "layers/00/renamed"); }

static void expect_input_error(const char *path, const eq_matrix *m, const char *what)
{
    int n = -1;
    eq_status st = eq_golden_check(path, m, "row_parallel", NULL, &n);
    EQ_EXPECT(st == EQ_ERR_INPUT, "%s: %s, want input error", what, eq_status_name(st));
    EQ_EXPECT(strstr(eq_error_message(), path) != NULL, "%s: message '%s' does not name %s", what,
              eq_error_message(), path);
    eq_error_clear();
}

static char *read_all(const char *path)
{
    FILE *f = fopen(path, "r");
    char *text = calloc(1, 1 << 20);
    if (f == NULL || text == NULL) exit(1);
    size_t n = fread(text, 1, (1 << 20) - 1, f);
    text[n] = '\0';
    fclose(f);
    return text;
}

static void check_update(const char *dir, const eq_matrix *m)
{
    char *diff = NULL, path[256];
    size_t size = 0;
    snprintf(path, sizeof path, "%s/row_parallel.json", dir);
    FILE *out = open_memstream(&diff, &size);
    EQ_EXPECT_OK(eq_golden_update(dir, m, out));
    fclose(out);
    EQ_EXPECT(strstr(diff, ": unchanged\n") && strstr(diff, path), "update of the same matrix:\n%s", diff);
    free(diff);

    /* one planted change: the diff shows the old line and the new one with the new value */
    eq_matrix c = copy_matrix(m);
    eq_tensor_result *r = find_result(&c, 1, 2, "layers/00/out");
    char old_value[64], new_value[64];
    snprintf(old_value, sizeof old_value, "\"max_abs\": %.9g", r->m.max_abs);
    r->m.max_abs *= 10.0;
    snprintf(new_value, sizeof new_value, "\"max_abs\": %.9g", r->m.max_abs);
    out = open_memstream(&diff, &size);
    EQ_EXPECT_OK(eq_golden_update(dir, &c, out));
    fclose(out);
    const char *minus = strstr(diff, "\n-    {\"dtype\": \"fp32\", \"layout\": \"dp1-tp2\"");
    const char *plus = strstr(diff, "\n+    {\"dtype\": \"fp32\", \"layout\": \"dp1-tp2\"");
    EQ_EXPECT(strstr(diff, "--- ") == diff && strstr(diff, "\n+++ ") && strstr(diff, "\n@@ -"), "diff:\n%s", diff);
    EQ_EXPECT(minus && plus && minus < plus, "diff lacks the old and new line:\n%s", diff);
    EQ_EXPECT(minus && strstr(minus, old_value) && plus && strstr(plus, new_value), "diff lacks %s -> %s:\n%s",
              old_value, new_value, diff);
    EQ_EXPECT(strstr(diff, "dp1-tp4") == NULL, "diff shows unchanged lines:\n%s", diff);
    free(diff);
    int n = -1;
    EQ_EXPECT_OK(eq_golden_check(path, &c, "row_parallel", NULL, &n));
    EQ_EXPECT(n == 0, "after the update the copy is %d outside", n);
    eq_matrix_free(&c);

    /* a new folder: created, and the diff is against nothing */
    char sub[128];
    snprintf(sub, sizeof sub, "%s/fresh", dir);
    out = open_memstream(&diff, &size);
    EQ_EXPECT_OK(eq_golden_update(sub, m, out));
    fclose(out);
    EQ_EXPECT(strstr(diff, "--- /dev/null\n") == diff && strstr(diff, "\n+  \"case\": \"row_parallel\",\n"),
              "diff of a new file:\n%s", diff);
    free(diff);
    snprintf(path, sizeof path, "%s/row_parallel.json", sub);
    unlink(path);
    rmdir(sub);
}

int main(void)
{
    eq_matrix m;
    eq_matrix_options opt = {.cases_dir = EQUIV_SOURCE_ROOT "/cases",
                             .tolerances_path = EQUIV_SOURCE_ROOT "/golden/tolerances.ini",
                             .case_filter = "row_parallel", .dtype_filter = EQ_FP32, .size = "ci",
                             .algo = EQ_ALGO_RING, .seed = 1234};
    EQ_EXPECT_OK(eq_matrix_run(&opt, &m));
    if (m.count != 4) return eq_test_finish("golden_test");
    char dir[] = "/tmp/equiv_golden_test.XXXXXX", path[256], other[256];
    EQ_EXPECT(mkdtemp(dir) != NULL, "mkdtemp");
    snprintf(path, sizeof path, "%s/row_parallel.json", dir);
    snprintf(other, sizeof other, "%s/other.json", dir);

    /* written twice: the same bytes, one line per tensor in a fixed key order */
    EQ_EXPECT_OK(eq_golden_write(path, &m, "row_parallel"));
    EQ_EXPECT_OK(eq_golden_write(other, &m, "row_parallel"));
    char *first = read_all(path), *second = read_all(other);
    EQ_EXPECT(strcmp(first, second) == 0, "two writes differ");
    EQ_EXPECT(strstr(first, "\n    {\"dtype\": \"fp32\", \"layout\": \"dp2-tp1\", \"path\": \"layers/00/out\", "
                            "\"role\": \"activation\", \"bit_exact\": true, \"max_abs\": 0, \"mean_abs\": 0},\n"),
              "dp2-tp1 line:\n%s", first);
    EQ_EXPECT(strstr(first, "\"seed\": \"1234\"") && strstr(first, "\"size\": \"ci\""), "header:\n%s", first);
    free(first);
    free(second);
    EQ_EXPECT(eq_golden_write(path, &m, "gpt") == EQ_ERR_USAGE, "writing a case the matrix lacks");
    eq_error_clear();

    char *report = NULL;
    int n = check_into(path, &m, &report);
    EQ_EXPECT(n == 0, "the same matrix is %d outside:\n%s", n, report);
    EQ_EXPECT(strstr(report, "golden row_parallel: 4 tensors checked") != NULL, "closing line:\n%s", report);
    free(report);

    expect_outside("max_abs x10", path, &m, max_times_10, 1, "dp1-tp2 layers/00/out: max_abs recorded");
    expect_outside("max_abs x2", path, &m, max_times_2, 0, "0 outside");
    expect_outside("mean_abs / 10", path, &m, mean_over_10, 1, "mean_abs recorded");
    expect_outside("bit-exact now differs", path, &m, exact_now_differs, 1, "fp32 dp2-tp1 layers/00/out: was bit-exact");
    expect_outside("removed tensor", path, &m, remove_tensor, 1, "fp32 dp1-tp4 layers/00/out: recorded, not in");
    expect_outside("renamed tensor", path, &m, rename_tensor, 2, "layers/00/renamed: in this run, not recorded");

    /* missing, corrupt, incomplete, and recorded for another seed */
    snprintf(other, sizeof other, "%s/missing.json", dir);
    expect_input_error(other, &m, "missing file");
    snprintf(other, sizeof other, "%s/corrupt.json", dir);
    eq_test_write_text(other, "{\"equiv_golden\": 1, \"case\": \"row_pa");
    expect_input_error(other, &m, "corrupt file");
    eq_test_write_text(other, "{\"equiv_golden\": 1, \"case\": \"row_parallel\", \"size\": \"ci\", \"algorithm\": \"ring\", "
                      "\"seed\": \"1234\", \"tensors\": [{\"dtype\": \"fp32\", \"path\": \"layers/00/out\"}]}\n");
    expect_input_error(other, &m, "incomplete tensor");
    eq_matrix reseeded = m;
    reseeded.seed = 99;
    int outside = -1;
    EQ_EXPECT(eq_golden_check(path, &reseeded, "row_parallel", NULL, &outside) == EQ_ERR_USAGE, "other seed");
    eq_error_clear();
    unlink(other);

    check_update(dir, &m);
    unlink(path);
    snprintf(other, sizeof other, "%s/other.json", dir);
    unlink(other);
    rmdir(dir);
    eq_matrix_free(&m);
    return eq_test_finish("golden_test");
}
