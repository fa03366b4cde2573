/* equiv diff on small reports written by hand (jansson) to a temporary folder: a cell of a
 * 4-layer model (input and weight bit-exact, fc1_out and out per layer, a loss) changed one way
 * per test. Identical reports have no regression; a max grown 3x, a new failure, a tensor no
 * longer bit-exact and a cell missing from head are one each; a fixed failure, a shrunk tensor,
 * growth below the floor and tensors on one side only are none; missing, non-JSON and
 * non-equiv files are EQ_ERR_INPUT naming the file. The comment's verdict line, worst-first
 * order, escaping, Mermaid chart, balanced <details> and its 65536-character limit are checked. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "harness/base/testing.h"
#include "reports/report_diff.h"

#define EXPECT_HAS(text, part) EQ_EXPECT(strstr((text), (part)) != NULL, "comment lacks '%s'", (part))
#define EXPECT_LACKS(text, part) EQ_EXPECT(strstr((text), (part)) == NULL, "comment has '%s'", (part))
#define EXPECT_STARTS(text, part) \
    EQ_EXPECT(strncmp((text), (part), strlen(part)) == 0, "comment starts '%.80s', want '%s'", (text), (part))
#define N_RESULTS 11
#define MAX_FILES 64

static char scratch[64];
static char written[MAX_FILES][128];
static int n_written;

typedef struct {
    char path[160], name[16];
    int layer, as_expected;
    const char *observed, *diagnosis;
    double max_abs, mean_abs;
    double ref_absmax, det_bound; /* written when nonzero (metrics.ref_absmax, theory.det_bound_max) */
} fake_result;

/* The base cell: layers/00/input and weight bit-exact, fc1_out and out within for layers 0-3,
 * layers/04/loss; |d| grows with depth as in a real run. */
static void base_results(fake_result *r)
{
    int n = 0;
    r[n++] = (fake_result){"layers/00/input", "input", 0, 1, "bit-exact", "bit-exact", 0.0, 0.0, 0.0, 0.0};
    r[n++] = (fake_result){"layers/00/weight", "weight", 0, 1, "bit-exact", "bit-exact", 0.0, 0.0, 0.0, 0.0};
    for (int layer = 0; layer < 4; layer++)
        for (int k = 0; k < 2; k++) {
            fake_result *x = &r[n++];
            *x = (fake_result){"", "", layer, 1, "within", "rounding: max 2 ULP, rel 1.0e-03",
                               0.01 * (layer + 1) * (k + 1), 0.001 * (layer + 1) * (k + 1), 0.0, 0.0};
            snprintf(x->name, sizeof x->name, "%s", k == 0 ? "fc1_out" : "out");
            snprintf(x->path, sizeof x->path, "layers/%02d/%s", layer, x->name);
        }
    r[n++] = (fake_result){"layers/04/loss", "loss", 4, 1, "within", "rounding: max 1 ULP", 0.002, 0.002, 0.0, 0.0};
}

static fake_result *find(fake_result *r, int n, const char *path)
{
    for (int i = 0; i < n; i++)
        if (strcmp(r[i].path, path) == 0) return &r[i];
    fprintf(stderr, "no fake result %s\n", path);
    abort();
}

/* One comparison as report_json.c writes it (the metrics the diff does not read included, some
 * of them the strings it uses for non-finite values). */
static json_t *cell_json(const char *dtype, int tp, const fake_result *r, int n)
{
    json_t *results = json_array();
    for (int i = 0; i < n; i++) {
        json_t *x = json_pack("{s:s, s:i, s:s, s:s, s:s, s:s, s:b, s:s, s:{s:I, s:f, s:f, s:s, s:s}}", "path",
                              r[i].path, "layer", r[i].layer, "name", r[i].name, "role", "activation", "expect",
                              "within", "observed", r[i].observed, "as_expected", r[i].as_expected, "diagnosis",
                              r[i].diagnosis, "metrics", "count", (json_int_t)64, "max_abs", r[i].max_abs, "mean_abs",
                              r[i].mean_abs, "max_tol_ratio", "Infinity", "rel_fro", "NaN");
        if (r[i].ref_absmax > 0.0)
            json_object_set_new(json_object_get(x, "metrics"), "ref_absmax", json_real(r[i].ref_absmax));
        if (r[i].det_bound > 0.0) json_object_set_new(x, "theory", json_pack("{s:f}", "det_bound_max", r[i].det_bound));
        json_array_append_new(results, x);
    }
    return json_pack("{s:{s:s, s:s, s:i, s:i}, s:{s:s, s:s, s:s, s:i, s:i, s:s, s:s, s:s}, s:s, s:o}",
                     "reference", "case", "toy", "dtype", dtype, "dp", 1, "tp", 1, "test", "case", "toy", "dtype",
                     dtype, "size", "ci", "dp", 1, "tp", tp, "algorithm", "ring", "grads", "avg", "injected", "none",
                     "expect", "within", "results", results);
}

static json_t *report_json(json_t *cells)
{
    return json_pack("{s:i, s:s, s:o, s:{s:i}}", "equiv_report", 1, "version", "0.1.0", "comparisons", cells,
                     "summary", "comparisons", (int)json_array_size(cells));
}

static const char *write_file(const char *name, const char *contents)
{
    if (n_written == MAX_FILES) abort();
    char *path = written[n_written++];
    snprintf(path, sizeof written[0], "%s/%s", scratch, name);
    if (!eq_test_write_text(path, contents)) abort();
    return path;
}

/* A report of one fp32 tp2 cell (and a bf16 tp2 cell when two_cells) written as name. */
static const char *write_report(const char *name, const fake_result *r, int n, int two_cells)
{
    json_t *cells = json_array();
    json_array_append_new(cells, cell_json("fp32", 2, r, n));
    if (two_cells) json_array_append_new(cells, cell_json("bf16", 2, r, n));
    json_t *doc = report_json(cells);
    char *text = json_dumps(doc, JSON_INDENT(1));
    const char *path = write_file(name, text);
    free(text);
    json_decref(doc);
    return path;
}

/* The comment for base vs head (malloc'd; "" on an error), the status in *st. */
static char *diff(const char *base, const char *head, const eq_diff_options *opt, int *n_regressions, eq_status *st)
{
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    if (out == NULL) abort();
    *n_regressions = -1;
    *st = eq_report_diff(base, head, opt, out, n_regressions);
    fclose(out);
    return text;
}

static char *diff_ok(const char *base, const char *head, int *n_regressions)
{
    eq_status st;
    char *text = diff(base, head, NULL, n_regressions, &st);
    EQ_EXPECT(st == EQ_OK, "diff failed: %s", eq_error_message());
    eq_error_clear();
    return text;
}

static int count(const char *text, const char *part)
{
    int n = 0;
    for (const char *at = strstr(text, part); at != NULL; at = strstr(at + 1, part)) n++;
    return n;
}

/* ```mermaid, xychart-beta, an x-axis of k quoted layers, two line series of k plain numbers
 * (Mermaid reads no exponent), the closing fence: for every chart in the comment. */
static void expect_charts_well_formed(const char *text, int want_charts)
{
    int charts = 0;
    for (const char *at = strstr(text, "```mermaid\n"); at != NULL; at = strstr(at + 1, "```mermaid\n")) {
        const char *end = strstr(at + 11, "```\n");
        EQ_EXPECT(end != NULL, "chart %d not closed", charts);
        if (end == NULL) return;
        char chart[4096];
        snprintf(chart, sizeof chart, "%.*s", (int)(end - at), at);
        EQ_EXPECT(strncmp(chart + 11, "xychart-beta\n", 13) == 0, "chart %d: %s", charts, chart);
        const char *axis = strstr(chart, "\n    x-axis \"layer\" [");
        EQ_EXPECT(axis != NULL, "chart %d has no x-axis: %s", charts, chart);
        int lines = count(chart, "\n    line \"");
        EQ_EXPECT(lines >= 2 && lines <= 6 && lines % 2 == 0, "chart %d wants 2, 4 or 6 lines (base, head per "
                  "tensor): %s", charts, chart);
        int categories = axis ? count(axis, "\", \"") + 1 : 0;
        for (const char *line = strstr(chart, "\n    line \""); line; line = strstr(line + 1, "\n    line \"")) {
            const char *values = strchr(line, '['), *close = values ? strchr(values, ']') : NULL;
            int commas = 0, bad = values == NULL || close == NULL;
            for (const char *c = values; !bad && c < close; c++) {
                commas += *c == ',';
                bad |= strchr("[0123456789., ", *c) == NULL;
            }
            EQ_EXPECT(!bad && commas + 1 == categories, "chart %d: %d categories, series '%.60s'", charts, categories,
                      line + 1);
        }
        charts++;
    }
    EQ_EXPECT(charts == want_charts, "%d charts, want %d", charts, want_charts);
}

static void expect_details_balanced(const char *text)
{
    EQ_EXPECT(count(text, "<details>") == count(text, "</details>"), "%d <details>, %d </details>",
              count(text, "<details>"), count(text, "</details>"));
    EQ_EXPECT(count(text, "<summary>") == count(text, "</summary>"), "unbalanced <summary>");
}

/* A clean comment: the verdict line, then only the table of n_cells cells, collapsed. */
static void expect_clean(const char *text, int n_cells)
{
    char start[200];
    snprintf(start, sizeof start, "**equiv: no divergence regressions** (%d cell%s compared)\n\n<details><summary>%d "
             "cell%s</summary>\n\n| Cell |", n_cells, n_cells == 1 ? "" : "s", n_cells, n_cells == 1 ? "" : "s");
    EXPECT_STARTS(text, start);
    size_t len = strlen(text);
    EQ_EXPECT(len > 11 && strcmp(text + len - 11, "</details>\n") == 0, "a clean comment ends '%s'",
              len > 40 ? text + len - 40 : text);
    EQ_EXPECT(count(text, "<details>") == 1 && count(text, "```mermaid") == 0, "a clean comment has more than its table");
}

static void test_identical(void)
{
    fake_result r[N_RESULTS];
    base_results(r);
    const char *base = write_report("same_base.json", r, N_RESULTS, 1);
    const char *head = write_report("same_head.json", r, N_RESULTS, 1);
    int n;
    char *text = diff_ok(base, head, &n);
    EQ_EXPECT(n == 0, "identical reports: %d regressions", n);
    expect_clean(text, 2);
    EXPECT_HAS(text, "| toy fp32 dp1-tp2 (ring, avg, ci) | ok -> ok | 1.0x | - |");
    free(text);
    /* the same results in another order pair by path */
    fake_result reversed[N_RESULTS];
    for (int i = 0; i < N_RESULTS; i++) reversed[i] = r[N_RESULTS - 1 - i];
    head = write_report("reversed_head.json", reversed, N_RESULTS, 1);
    text = diff_ok(base, head, &n);
    EQ_EXPECT(n == 0, "reordered results: %d regressions", n);
    EXPECT_HAS(text, "| toy fp32 dp1-tp2 (ring, avg, ci) | ok -> ok | 1.0x | - |");
    free(text);
}

/* layers/02/out's max |d| x3 (mean unchanged), layers/01/fc1_out's x10: two regressions, the
 * 10x first; a diagnosis with '|' escaped in the table. */
static void test_grew(void)
{
    fake_result r[N_RESULTS], h[N_RESULTS];
    base_results(r);
    base_results(h);
    find(h, N_RESULTS, "layers/02/out")->max_abs *= 3.0;
    find(h, N_RESULTS, "layers/02/out")->diagnosis = "not rounding: max |d| 0.18 at <index> 3";
    find(h, N_RESULTS, "layers/01/fc1_out")->mean_abs *= 10.0;
    const char *base = write_report("grew_base.json", r, N_RESULTS, 0);
    const char *head = write_report("grew_head.json", h, N_RESULTS, 0);
    int n;
    char *text = diff_ok(base, head, &n);
    EQ_EXPECT(n == 2, "grown tensors: %d regressions, want 2", n);
    EXPECT_STARTS(text, "**equiv: 2 regressions** in 1 of 1 cells (2 grew)\n");
    EXPECT_HAS(text, "| `layers/02/out` | grew | 0.060000 | 0.180000 | 3.0x | within -> within |");
    EXPECT_HAS(text, "max \\|d\\| 0.18 at &lt;index&gt; 3 |");
    EXPECT_HAS(text, "| ok -> **ok** | 10.0x | 2 grew |");
    const char *ten = strstr(text, "`layers/01/fc1_out`"), *three = strstr(text, "`layers/02/out`");
    EQ_EXPECT(ten != NULL && three != NULL && ten < three, "10x not listed before 3x");
    expect_charts_well_formed(text, 1);
    /* the chart follows the regressed names, worst growth first: fc1_out (10x, its mean; max
     * 0.01 .. 0.04 unchanged), then out (3x at layer 2); layers 0-3 in units of 1e-1 */
    EXPECT_HAS(text, "Lines, in the order the chart draws them: 1. `fc1_out` in base, 2. `fc1_out` in head (worst: "
                     "`layers/01/fc1_out`, grew, 10.0x); 3. `out` in base, 4. `out` in head (worst: `layers/02/out`, "
                     "grew, 3.0x).\n");
    EXPECT_HAS(text, "x-axis \"layer\" [\"0\", \"1\", \"2\", \"3\"]\n    y-axis \"max |d| (x 1e-1)\"\n");
    EXPECT_HAS(text, "    line \"1 base\" [0.1000, 0.2000, 0.3000, 0.4000]\n"
                     "    line \"2 head\" [0.1000, 0.2000, 0.3000, 0.4000]\n"
                     "    line \"3 base\" [0.2000, 0.4000, 0.6000, 0.8000]\n"
                     "    line \"4 head\" [0.2000, 0.4000, 1.8000, 0.8000]\n");
    expect_details_balanced(text);
    free(text);
}

static void test_new_failure_and_no_longer_exact(void)
{
    fake_result r[N_RESULTS], h[N_RESULTS];
    base_results(r);
    base_results(h);
    fake_result *loss = find(h, N_RESULTS, "layers/04/loss"), *weight = find(h, N_RESULTS, "layers/00/weight");
    loss->as_expected = 0, loss->observed = "OUTSIDE";
    /* a 1e-9 difference is below the floor, but bit-exactness is lost all the same */
    weight->observed = "within", weight->max_abs = 1e-9, weight->mean_abs = 1e-10;
    const char *base = write_report("fail_base.json", r, N_RESULTS, 0);
    const char *head = write_report("fail_head.json", h, N_RESULTS, 0);
    int n;
    char *text = diff_ok(base, head, &n);
    EQ_EXPECT(n == 2, "new failure + no longer bit-exact: %d regressions, want 2", n);
    EXPECT_HAS(text, "(1 new failure, 1 no longer bit-exact)");
    EXPECT_HAS(text, "| `layers/04/loss` | new failure | 0.002000 | 0.002000 | 1.0x | within -> OUTSIDE |");
    EXPECT_HAS(text, "| `layers/00/weight` | no longer bit-exact | 0.000000 | 1.000e-09 | 1.0x | "
                     "bit-exact -> within |");
    EXPECT_HAS(text, "| ok -> **1 FAIL** |");
    expect_charts_well_formed(text, 1);
    expect_details_balanced(text);
    free(text);
}

/* Base has fp32 and bf16 cells, head only fp32, with one more tensor and one fewer. */
static void test_missing_cell_and_one_sided_tensors(void)
{
    fake_result r[N_RESULTS], h[N_RESULTS];
    base_results(r);
    base_results(h);
    snprintf(find(h, N_RESULTS, "layers/00/input")->path, sizeof h[0].path, "layers/00/tokens");
    const char *base = write_report("cell_base.json", r, N_RESULTS, 1);
    const char *head = write_report("cell_head.json", h, N_RESULTS, 0);
    int n;
    char *text = diff_ok(base, head, &n);
    EQ_EXPECT(n == 1, "a cell missing from head: %d regressions, want 1", n);
    EXPECT_STARTS(text, "**equiv: 1 regression** in 1 of 2 cells (1 cell missing from head)\n");
    EXPECT_HAS(text, "| toy bf16 dp1-tp2 (ring, avg, ci) | ok -> **missing** | - | missing from head |");
    EXPECT_HAS(text, "| toy fp32 dp1-tp2 (ring, avg, ci) | ok -> ok | 1.0x | 1 only in base, 1 only in head |");
    EXPECT_HAS(text, "<summary>toy bf16 dp1-tp2 (ring, avg, ci): 1 regression</summary>");
    expect_details_balanced(text);
    free(text);
    /* the other way round: a cell new in head is no regression */
    text = diff_ok(head, base, &n);
    EQ_EXPECT(n == 0, "a cell new in head: %d regressions", n);
    EXPECT_HAS(text, "| toy bf16 dp1-tp2 (ring, avg, ci) | missing -> ok | - | new in head |");
    free(text);
}

static void test_improvements(void)
{
    fake_result r[N_RESULTS], h[N_RESULTS];
    base_results(r);
    base_results(h);
    fake_result *failing = find(r, N_RESULTS, "layers/03/out");
    failing->as_expected = 0, failing->observed = "OUTSIDE", failing->max_abs = 0.5;
    find(h, N_RESULTS, "layers/01/fc1_out")->max_abs /= 4.0;
    fake_result *exact = find(h, N_RESULTS, "layers/00/out");
    exact->observed = "bit-exact", exact->max_abs = exact->mean_abs = 0.0;
    const char *base = write_report("fixed_base.json", r, N_RESULTS, 0);
    const char *head = write_report("fixed_head.json", h, N_RESULTS, 0);
    int n;
    char *text = diff_ok(base, head, &n);
    EQ_EXPECT(n == 0, "fixed, shrank, became bit-exact: %d regressions", n);
    expect_clean(text, 1);
    EXPECT_HAS(text, "| 1 FAIL -> ok | 1.0x | 1 fixed, 1 became bit-exact, 1 shrank |");
    free(text);
}

/* 1e-9 -> 5e-8 is 50x but below the 1e-7 floor; -> 2e-7 is above it. */
static void test_floor(void)
{
    fake_result r[N_RESULTS], h[N_RESULTS];
    base_results(r);
    base_results(h);
    find(r, N_RESULTS, "layers/00/fc1_out")->max_abs = 1e-9;
    find(r, N_RESULTS, "layers/00/fc1_out")->mean_abs = 1e-10;
    find(h, N_RESULTS, "layers/00/fc1_out")->max_abs = 5e-8;
    find(h, N_RESULTS, "layers/00/fc1_out")->mean_abs = 1e-10;
    const char *base = write_report("floor_base.json", r, N_RESULTS, 0);
    const char *head = write_report("floor_head.json", h, N_RESULTS, 0);
    int n;
    char *text = diff_ok(base, head, &n);
    EQ_EXPECT(n == 0, "growth below the floor: %d regressions", n);
    free(text);
    find(h, N_RESULTS, "layers/00/fc1_out")->max_abs = 2e-7;
    head = write_report("floor_head2.json", h, N_RESULTS, 0);
    text = diff_ok(base, head, &n);
    EQ_EXPECT(n == 1, "growth across the floor: %d regressions, want 1", n);
    EXPECT_HAS(text, "| 2.0x from noise |"); /* 2e-7 over the floor 1e-7, not over the base 1e-9 */
    free(text);
    /* a larger growth option lets 3x through */
    eq_diff_options loose = eq_diff_options_default();
    EQ_EXPECT(loose.growth == 1.5 && loose.floor == 1e-7, "defaults %g %g", loose.growth, loose.floor);
    loose.growth = 500.0;
    eq_status st;
    text = diff(base, head, &loose, &n, &st);
    EQ_EXPECT(st == EQ_OK && n == 0, "growth 500: status %d, %d regressions", (int)st, n);
    free(text);
    loose.growth = 0.5;
    text = diff(base, head, &loose, &n, &st);
    EQ_EXPECT(st == EQ_ERR_USAGE, "growth 0.5 accepted: %d", (int)st);
    eq_error_clear();
    free(text);
}

/* The noise floor of each tensor (options' floor 0, so that only the tensor's own counts): 4 ULPs
 * of its reference's largest magnitude in the run's dtype, or its rounding-error bound. */
static void test_noise_floors(void)
{
    const eq_diff_options no_floor = {.growth = 1.5, .floor = 0.0};
    fake_result r[N_RESULTS], h[N_RESULTS];
    base_results(r);
    base_results(h);
    for (int i = 0; i < N_RESULTS; i++) r[i].ref_absmax = h[i].ref_absmax = 1.0; /* fp32: 4 ULPs 4.8e-7 */
    /* out at layer 2 regresses 4x; fc1_out at layer 0 grows 10x from 1e-9 to 1e-8, under its floor */
    find(h, N_RESULTS, "layers/02/out")->max_abs *= 4.0;
    fake_result *noisy[2] = {find(r, N_RESULTS, "layers/00/fc1_out"), find(h, N_RESULTS, "layers/00/fc1_out")};
    for (int side = 0; side < 2; side++) noisy[side]->max_abs = side ? 1e-8 : 1e-9, noisy[side]->mean_abs = side ? 1e-9 : 1e-10;
    const char *base = write_report("noise_base.json", r, N_RESULTS, 0);
    const char *head = write_report("noise_head.json", h, N_RESULTS, 0);
    int n;
    eq_status st;
    char *text = diff(base, head, &no_floor, &n, &st);
    EQ_EXPECT(st == EQ_OK && n == 1, "4x and noise: status %d, %d regressions, want 1", (int)st, n);
    EXPECT_HAS(text, "| ok -> **ok** | 4.0x | 1 grew |");
    EXPECT_HAS(text, "Lines, in the order the chart draws them: 1. `out` in base, 2. `out` in head (worst: "
                     "`layers/02/out`, grew, 4.0x).\n");
    EXPECT_LACKS(text, "fc1_out");
    expect_charts_well_formed(text, 1);
    free(text);
    /* the same without ref_absmax (a report that lacks it): the 10x from 1e-9 counts */
    for (int i = 0; i < N_RESULTS; i++) r[i].ref_absmax = h[i].ref_absmax = 0.0;
    head = write_report("noise_head_bare.json", h, N_RESULTS, 0);
    base = write_report("noise_base_bare.json", r, N_RESULTS, 0);
    text = diff(base, head, &no_floor, &n, &st);
    EQ_EXPECT(st == EQ_OK && n == 2, "without ref_absmax: %d regressions, want 2", n);
    EXPECT_HAS(text, "1. `fc1_out` in base");
    free(text);

    /* 1e-3 -> 5e-3 at ref_absmax 1: a regression in fp32, under 4 bf16 ULPs (0.031) in bf16 */
    base_results(r);
    base_results(h);
    fake_result *grown[2] = {find(r, N_RESULTS, "layers/01/out"), find(h, N_RESULTS, "layers/01/out")};
    for (int side = 0; side < 2; side++)
        grown[side]->max_abs = side ? 5e-3 : 1e-3, grown[side]->mean_abs = 1e-5, grown[side]->ref_absmax = 1.0;
    base = write_report("dtype_base.json", r, N_RESULTS, 1);
    head = write_report("dtype_head.json", h, N_RESULTS, 1);
    text = diff(base, head, &no_floor, &n, &st);
    EQ_EXPECT(st == EQ_OK && n == 1, "fp32 and bf16 cells: %d regressions, want 1 (fp32's)", n);
    EXPECT_HAS(text, "<summary>toy fp32 dp1-tp2 (ring, avg, ci): 1 regression</summary>");
    EXPECT_HAS(text, "| toy bf16 dp1-tp2 (ring, avg, ci) | ok -> ok | 1.0x | - |");
    free(text);
    /* the same in fp32 under a rounding-error bound of 1e-2: noise */
    for (int side = 0; side < 2; side++) grown[side]->det_bound = 1e-2;
    base = write_report("bound_base.json", r, N_RESULTS, 0);
    head = write_report("bound_head.json", h, N_RESULTS, 0);
    text = diff(base, head, &no_floor, &n, &st);
    EQ_EXPECT(st == EQ_OK && n == 0, "under the rounding bound: %d regressions", n);
    free(text);
    /* from 1e-9 (noise) to 1e-3: measured from the floor 4 x 2^-23, not from 1e-9 (1e6x) */
    for (int side = 0; side < 2; side++) grown[side]->det_bound = 0.0, grown[side]->max_abs = side ? 1e-3 : 1e-9;
    base = write_report("from_noise_base.json", r, N_RESULTS, 0);
    head = write_report("from_noise_head.json", h, N_RESULTS, 0);
    text = diff(base, head, &no_floor, &n, &st);
    EQ_EXPECT(st == EQ_OK && n == 1, "from noise: %d regressions, want 1", n);
    EXPECT_HAS(text, "| `layers/01/out` | grew | 1.000e-09 | 0.001000 | 2097x from noise |");
    EXPECT_HAS(text, "| ok -> **ok** | 2097x from noise | 1 grew |");
    free(text);
}

static void expect_input_error(const char *base, const char *head, const char *named)
{
    int n;
    eq_status st;
    char *text = diff(base, head, NULL, &n, &st);
    const char *message = eq_error_message();
    EQ_EXPECT(st == EQ_ERR_INPUT, "%s: status %d, want EQ_ERR_INPUT", named, (int)st);
    EQ_EXPECT(strstr(message, named) != NULL && strchr(message, '\n') == NULL, "message '%s' does not name %s", message,
              named);
    eq_error_clear();
    free(text);
}

/* As expect_input_error, and the message says `field` too. */
static void expect_refused_saying(const char *base, const char *head, const char *named, const char *field)
{
    int n;
    eq_status st;
    char *text = diff(base, head, NULL, &n, &st);
    const char *message = eq_error_message();
    EQ_EXPECT(st == EQ_ERR_INPUT, "%s: status %d, want EQ_ERR_INPUT", named, (int)st);
    EQ_EXPECT(strstr(message, named) != NULL && strstr(message, field) != NULL && strchr(message, '\n') == NULL,
              "message '%s' does not name %s and '%s'", message, named, field);
    eq_error_clear();
    free(text);
}

static void test_bad_inputs(void)
{
    fake_result r[N_RESULTS];
    base_results(r);
    const char *good = write_report("good.json", r, N_RESULTS, 0);
    char missing[160];
    snprintf(missing, sizeof missing, "%s/no_such_report.json", scratch);
    expect_input_error(missing, good, "no_such_report.json");
    expect_input_error(good, missing, "no_such_report.json");
    expect_input_error(good, write_file("not_json.json", "equiv: 1 comparison, all as expected\n"), "not_json.json");
    expect_input_error(write_file("other.json", "{\"comparisons\": []}\n"), good, "other.json");
    const char *version2 = write_file("version2.json", "{\"equiv_report\": 2, \"comparisons\": []}\n");
    expect_input_error(good, version2, "version2.json");
    expect_input_error(write_file("array.json", "[1, 2]\n"), good, "array.json");
    /* an equiv report whose result lacks its metrics */
    json_t *doc = report_json(json_array());
    json_t *cell = cell_json("fp32", 2, r, 1);
    json_object_del(json_array_get(json_object_get(cell, "results"), 0), "metrics");
    json_array_append_new(json_object_get(doc, "comparisons"), cell);
    char *text = json_dumps(doc, 0);
    expect_input_error(good, write_file("no_metrics.json", text), "no_metrics.json");
    free(text);
    json_decref(doc);

    /* Values the diff would take as given are checked: a |d| is a number >= 0, never NaN. */
    static const struct {
        const char *file, *key, *field;
    } bad_values[] = {
        {"negative_max.json", "max_abs", "metrics.max_abs is -1, negative"},
        {"negative_mean.json", "mean_abs", "metrics.mean_abs is -1, negative"},
        {"nan_max.json", "max_abs", "metrics.max_abs is NaN"},
        {"minus_inf_mean.json", "mean_abs", "metrics.mean_abs is -inf, negative"},
        {"text_max.json", "max_abs", "lacks \"metrics.max_abs\""},
    };
    for (size_t k = 0; k < sizeof bad_values / sizeof bad_values[0]; k++) {
        json_t *value = k < 2 ? json_real(-1.0) : k == 2 ? json_string("NaN") : k == 3 ? json_string("-Infinity")
                                                                                      : json_string("small");
        doc = report_json(json_array());
        cell = cell_json("fp32", 2, r, 3);
        json_t *metrics = json_object_get(json_array_get(json_object_get(cell, "results"), 2), "metrics");
        json_object_set_new(metrics, bad_values[k].key, value);
        json_array_append_new(json_object_get(doc, "comparisons"), cell);
        text = json_dumps(doc, 0);
        const char *path = write_file(bad_values[k].file, text);
        expect_refused_saying(good, path, bad_values[k].file, bad_values[k].field);
        expect_refused_saying(good, path, bad_values[k].file, "comparison 0 result 2");
        free(text);
        json_decref(doc);
    }
    /* Other fields the diff reads: layer, observed, dp and tp, each element an object. */
    static const struct {
        const char *file, *text, *field;
    } bad_docs[] = {
        {"layer.json", "{\"equiv_report\": 1, \"comparisons\": [{\"test\": {\"case\": \"c\", \"dtype\": \"fp32\", "
                       "\"algorithm\": \"ring\", \"grads\": \"avg\", \"size\": \"ci\", \"dp\": 1, \"tp\": 2}, "
                       "\"results\": [{\"path\": \"p\", \"name\": \"n\", \"observed\": \"within\", \"diagnosis\": \"d\", "
                       "\"layer\": -2, \"as_expected\": true, \"metrics\": {\"max_abs\": 0, \"mean_abs\": 0}}]}]}",
         "layer is not an integer in -1..9999"},
        {"observed.json", "{\"equiv_report\": 1, \"comparisons\": [{\"test\": {\"case\": \"c\", \"dtype\": \"fp32\", "
                          "\"algorithm\": \"ring\", \"grads\": \"avg\", \"size\": \"ci\", \"dp\": 1, \"tp\": 2}, "
                          "\"results\": [{\"path\": \"p\", \"name\": \"n\", \"observed\": \"fine\", \"diagnosis\": \"d\", "
                          "\"layer\": 0, \"as_expected\": true, \"metrics\": {\"max_abs\": 0, \"mean_abs\": 0}}]}]}",
         "observed 'fine'"},
        {"dp0.json", "{\"equiv_report\": 1, \"comparisons\": [{\"test\": {\"case\": \"c\", \"dtype\": \"fp32\", "
                     "\"algorithm\": \"ring\", \"grads\": \"avg\", \"size\": \"ci\", \"dp\": 0, \"tp\": 2}, "
                     "\"results\": []}]}",
         "test.dp is not an integer"},
        {"cell_not_object.json", "{\"equiv_report\": 1, \"comparisons\": [7]}", "comparison 0 is not an object"},
        {"result_not_object.json", "{\"equiv_report\": 1, \"comparisons\": [{\"test\": {\"case\": \"c\", "
                                   "\"dtype\": \"fp32\", \"algorithm\": \"ring\", \"grads\": \"avg\", \"size\": \"ci\", "
                                   "\"dp\": 1, \"tp\": 2}, \"results\": [null]}]}",
         "result 0 is not an object"},
        {"duplicate_key.json", "{\"equiv_report\": 1, \"comparisons\": [], \"comparisons\": []}", "duplicate"},
        {"truncated.json", "{\"equiv_report\": 1, \"comparisons\": [{\"test\": {\"case\": ", "is not JSON"},
        {"empty.json", "", "is not JSON"},
    };
    for (size_t k = 0; k < sizeof bad_docs / sizeof bad_docs[0]; k++) {
        const char *path = write_file(bad_docs[k].file, bad_docs[k].text);
        expect_refused_saying(path, good, bad_docs[k].file, bad_docs[k].field);
    }
    /* Not a regular file: refused at once, never read. */
    expect_input_error("/dev/zero", good, "/dev/zero: is not a regular file");
    expect_input_error(good, scratch, "is a directory");
}

/* What compare writes of a tensor of no layer (layer -1: the loss of harness/SCHEMA.md's minimal
 * file) is read, and its regression charted at "-"; a cell or a tensor path twice in one report
 * is refused, naming it: the second copy would pair with nothing and regress unseen. */
static void test_no_layer_and_duplicates(void)
{
    fake_result r[N_RESULTS], h[N_RESULTS];
    base_results(r);
    base_results(h);
    find(r, N_RESULTS, "layers/04/loss")->layer = -1;
    snprintf(find(r, N_RESULTS, "layers/04/loss")->path, sizeof r[0].path, "loss");
    find(h, N_RESULTS, "layers/04/loss")->layer = -1;
    snprintf(find(h, N_RESULTS, "layers/04/loss")->path, sizeof h[0].path, "loss");
    find(h, N_RESULTS, "loss")->max_abs *= 1000.0;
    const char *base = write_report("no_layer_base.json", r, N_RESULTS, 0);
    const char *head = write_report("no_layer_head.json", h, N_RESULTS, 0);
    int n;
    char *text = diff_ok(base, base, &n);
    EQ_EXPECT(n == 0, "a loss of no layer against itself: %d regressions", n);
    free(text);
    text = diff_ok(base, head, &n);
    EQ_EXPECT(n == 1, "a loss of no layer grown x1000: %d regressions, want 1", n);
    EXPECT_HAS(text, "| `loss` | grew |");
    EXPECT_HAS(text, "x-axis \"layer\" [\"-\"]\n");
    expect_charts_well_formed(text, 1);
    free(text);

    /* head holds its cell twice, the second copy regressed x1000 */
    base_results(h);
    find(h, N_RESULTS, "layers/02/out")->max_abs *= 1000.0;
    json_t *cells = json_array();
    json_array_append_new(cells, cell_json("fp32", 2, r, N_RESULTS));
    json_array_append_new(cells, cell_json("fp32", 2, h, N_RESULTS));
    json_t *doc = report_json(cells);
    char *json = json_dumps(doc, 0);
    const char *twice = write_file("cell_twice.json", json);
    free(json);
    json_decref(doc);
    expect_refused_saying(base, twice, "cell_twice.json", "comparisons 0 and 1 are the same cell (case toy, dtype fp32, "
                                                          "dp 1, tp 2, algorithm ring, grads avg, size ci)");
    expect_refused_saying(twice, base, "cell_twice.json", "a report holds each cell once");
    /* one comparison holds a tensor path twice */
    base_results(h);
    snprintf(find(h, N_RESULTS, "layers/03/out")->path, sizeof h[0].path, "layers/01/out");
    const char *path_twice = write_report("path_twice.json", h, N_RESULTS, 0);
    expect_refused_saying(base, path_twice, "path_twice.json",
                          "comparison 0 holds tensor layers/01/out twice (results 5 and 9)");
}

/* 100 cells of 70 tensors (more than a chart shows), every tensor grown, diagnoses of 300
 * characters that each grow 5x when escaped, paths of over 100: the comment stays under GitHub's
 * limit. */
static void test_length_limit(void)
{
    enum { CELLS = 100, TENSORS = 70 };
    json_t *cells[2] = {json_array(), json_array()};
    fake_result r[TENSORS];
    char diagnosis[301];
    memset(diagnosis, '&', 300);
    diagnosis[300] = '\0';
    for (int side = 0; side < 2; side++)
        for (int c = 0; c < CELLS; c++) {
            for (int i = 0; i < TENSORS; i++) {
                r[i] = (fake_result){"", "out", i, 1, "within", diagnosis, (side ? 9.0 : 1.0) * 1e-3, 1e-4, 0.0, 0.0};
                snprintf(r[i].path, sizeof r[i].path, "layers/%02d/|%s|%d", i, diagnosis + 200, i);
            }
            json_array_append_new(cells[side], cell_json("fp32", c + 1, r, TENSORS));
        }
    const char *paths[2];
    for (int side = 0; side < 2; side++) {
        json_t *doc = report_json(cells[side]);
        char *text = json_dumps(doc, 0);
        paths[side] = write_file(side ? "big_head.json" : "big_base.json", text);
        free(text);
        json_decref(doc);
    }
    int n;
    char *text = diff_ok(paths[0], paths[1], &n);
    EQ_EXPECT(n == CELLS * TENSORS, "%d regressions, want %d", n, CELLS * TENSORS);
    EQ_EXPECT(strlen(text) < 65536, "comment of %zu characters", strlen(text));
    EXPECT_HAS(text, "\n... and 40 more cells\n");
    EXPECT_HAS(text, "\n... and 50 more\n");
    EXPECT_HAS(text, "worst growth first (first layers). Lines,");
    EXPECT_HAS(text, "| &amp;&amp;");
    EXPECT_HAS(text, "&amp;... |\n");
    EXPECT_HAS(text, "more regressed cells (the JSON reports hold every tensor)");
    expect_details_balanced(text);
    expect_charts_well_formed(text, count(text, "<details>"));
    free(text);
}

int main(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(scratch, sizeof scratch, "%s/report_diff_test.XXXXXX", tmp != NULL && tmp[0] ? tmp : "/tmp");
    if (mkdtemp(scratch) == NULL) {
        perror(scratch);
        return 1;
    }
    test_identical();
    test_grew();
    test_new_failure_and_no_longer_exact();
    test_missing_cell_and_one_sided_tensors();
    test_improvements();
    test_floor();
    test_noise_floors();
    test_bad_inputs();
    test_no_layer_and_duplicates();
    test_length_limit();
    for (int i = 0; i < n_written; i++) unlink(written[i]);
    rmdir(scratch);
    return eq_test_finish("report_diff_test");
}
