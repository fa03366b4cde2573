/* Case files: the shipped cases load and name known models; malformed files are one clear
 * EQ_ERR_INPUT naming the file; layouts parse; expectations resolve most specific first. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "equiv_config.h"
#include "harness/case_file.h"
#include "harness/testing.h"
#include "models/models.h"

static char temp_dir[256];

static const char *write_case(const char *name, const char *text)
{
    static char path[512];
    snprintf(path, sizeof path, "%s/%s.ini", temp_dir, name);
    FILE *fp = fopen(path, "w");
    fputs(text, fp);
    fclose(fp);
    return path;
}

static void expect_malformed(const char *name, const char *text, const char *part)
{
    eq_case c;
    const char *path = write_case(name, text);
    eq_status st = eq_case_load(path, &c);
    EQ_EXPECT(st == EQ_ERR_INPUT, "%s: status %s", name, eq_status_name(st));
    EQ_EXPECT(strstr(eq_error_message(), path) != NULL, "%s: message lacks the path: %s", name, eq_error_message());
    EQ_EXPECT(strstr(eq_error_message(), part) != NULL, "%s: message lacks '%s': %s", name, part, eq_error_message());
    eq_error_clear();
}

#define GOOD_HEAD "[case]\nmodel = row_parallel\ndtypes = bf16, fp32\nlayouts = dp1-tp1, dp1-tp4\n"
#define GOOD_SIZE "[size.ci]\nseq = 4\nbatch = 2\nin_features = 8\nout_features = 4\n"
#define GOOD_TOL "[tolerance]\nbf16 = bf16_28_layers\nfp32 = fp32_1_layer\n"

int main(void)
{
    snprintf(temp_dir, sizeof temp_dir, "/tmp/equiv_case_test.XXXXXX");
    if (mkdtemp(temp_dir) == NULL) return 1;

    /* Every shipped case loads, names a model in the table, and has a ci and a docs size. */
    char names[32][EQ_CASE_KEY_MAX];
    int n = 0;
    EQ_EXPECT_OK(eq_case_list(EQUIV_SOURCE_ROOT "/cases", names, 32, &n));
    EQ_EXPECT(n >= 3, "only %d cases", n);
    for (int i = 0; i < n; i++) {
        eq_case c;
        const eq_model *m;
        const eq_case_size *s;
        EQ_EXPECT_OK(eq_case_load_named(EQUIV_SOURCE_ROOT "/cases", names[i], &c));
        EQ_EXPECT_OK(eq_model_find(c.model, &m));
        EQ_EXPECT_OK(eq_case_find_size(&c, "ci", &s));
        EQ_EXPECT_OK(eq_case_find_size(&c, "docs", &s));
    }
    eq_case c;
    EQ_EXPECT(eq_case_load_named(EQUIV_SOURCE_ROOT "/cases", "nope", &c) == EQ_ERR_USAGE, "unknown case accepted");
    EQ_EXPECT(strstr(eq_error_message(), "row_parallel") != NULL, "unknown case lists no known ones");
    eq_error_clear();

    /* A good file and what it says. */
    EQ_EXPECT_OK(eq_case_load(write_case("good", GOOD_HEAD GOOD_SIZE GOOD_TOL
                                         "[expect]\ndefault = within\ndp1-tp4 = differs\nbf16.dp1-tp4 = must_fail\n"),
                              &c));
    EQ_EXPECT(strcmp(c.name, "good") == 0 && c.n_dtypes == 2 && c.n_layouts == 2, "parsed %s %d %d", c.name,
              c.n_dtypes, c.n_layouts);
    int64_t v = 0;
    EQ_EXPECT_OK(eq_size_get(&c.sizes[0], "in_features", &v));
    EQ_EXPECT(v == 8, "in_features = %lld", (long long)v);
    EQ_EXPECT(eq_size_get(&c.sizes[0], "hidden", &v) == EQ_ERR_INPUT, "missing size accepted");
    EQ_EXPECT(strstr(eq_error_message(), "hidden") != NULL, "missing size not named");
    eq_error_clear();
    /* Most specific first; the reference against itself is always bit-exact. */
    EQ_EXPECT(eq_case_expectation(&c, EQ_BF16, (eq_layout){1, 4}) == EQ_EXPECT_MUST_FAIL, "dtype.layout key");
    EQ_EXPECT(eq_case_expectation(&c, EQ_FP32, (eq_layout){1, 4}) == EQ_EXPECT_DIFFERS, "layout key");
    EQ_EXPECT(eq_case_expectation(&c, EQ_FP32, (eq_layout){1, 2}) == EQ_EXPECT_WITHIN, "default key");
    EQ_EXPECT(eq_case_expectation(&c, EQ_FP32, (eq_layout){1, 1}) == EQ_EXPECT_BIT_EXACT, "reference");

    /* A gradient tolerance entry per dtype. */
    EQ_EXPECT_OK(eq_case_load(write_case("grads", GOOD_HEAD GOOD_SIZE GOOD_TOL "bf16.grad = bf16_grads\n"), &c));
    EQ_EXPECT(strcmp(c.grad_tolerance[EQ_BF16], "bf16_grads") == 0 && c.grad_tolerance[EQ_FP32][0] == '\0',
              "grad tolerances '%s' '%s'", c.grad_tolerance[EQ_BF16], c.grad_tolerance[EQ_FP32]);

    /* Per-tensor expectations under one convention: globs, first match wins, only where dp > 1. */
    EQ_EXPECT_OK(eq_case_load(write_case("tensor_expect", GOOD_HEAD GOOD_SIZE GOOD_TOL
                                         "[expect.avg]\nci_*_grad.imp_min = differs\nci_*_grad* = must_fail\n"
                                         "[expect.sum]\nloss = bit_exact\n"), &c));
    eq_expect e = EQ_EXPECT_WITHIN;
    EQ_EXPECT(c.n_tensor_expects == 3, "%d tensor expectations, want 3", c.n_tensor_expects);
    EQ_EXPECT(eq_case_tensor_expectation(&c, "avg", (eq_layout){8, 1}, "ci_w1_grad.imp_min", &e) &&
                  e == EQ_EXPECT_DIFFERS, "first matching glob");
    EQ_EXPECT(eq_case_tensor_expectation(&c, "avg", (eq_layout){8, 1}, "ci_w2_grad.stoch", &e) &&
                  e == EQ_EXPECT_MUST_FAIL, "second glob");
    EQ_EXPECT(!eq_case_tensor_expectation(&c, "avg", (eq_layout){8, 1}, "V_grad", &e), "no glob matches V_grad");
    EQ_EXPECT(!eq_case_tensor_expectation(&c, "sum", (eq_layout){8, 1}, "ci_w1_grad.imp_min", &e),
              "an avg line applied under sum");
    EQ_EXPECT(eq_case_tensor_expectation(&c, "sum", (eq_layout){2, 2}, "loss", &e) && e == EQ_EXPECT_BIT_EXACT,
              "[expect.sum]");
    EQ_EXPECT(!eq_case_tensor_expectation(&c, "avg", (eq_layout){1, 4}, "ci_w1_grad.imp_min", &e),
              "applied at dp 1, where the conventions agree");
    expect_malformed("tensor_expect_convention", GOOD_HEAD GOOD_SIZE GOOD_TOL "[expect.mean]\nloss = differs\n",
                     "unknown section [expect.mean]");
    expect_malformed("tensor_expect_value", GOOD_HEAD GOOD_SIZE GOOD_TOL "[expect.avg]\nloss = close\n",
                     "[expect.avg] loss = 'close'");

    /* Malformed files. */
    expect_malformed("bad_tolerance_role", GOOD_HEAD GOOD_SIZE GOOD_TOL "bf16.act = x\n", "dtype.grad");
    expect_malformed("syntax", GOOD_HEAD "[size.ci\nseq = 4\n", "syntax");
    expect_malformed("unknown_section", GOOD_HEAD GOOD_SIZE GOOD_TOL "[extras]\na = 1\n", "unknown section");
    expect_malformed("unknown_key", GOOD_HEAD "colour = red\n" GOOD_SIZE GOOD_TOL, "unknown key");
    expect_malformed("bad_number", GOOD_HEAD "[size.ci]\nseq = 4x\n" GOOD_TOL, "not a positive integer");
    expect_malformed("zero_size", GOOD_HEAD "[size.ci]\nseq = 0\n" GOOD_TOL, "not a positive integer");
    expect_malformed("bad_dtype", "[case]\nmodel = m\ndtypes = fp8\n", "unknown dtype");
    expect_malformed("bad_layout", "[case]\nmodel = m\ndtypes = bf16\nlayouts = tp4\n", "bad layout");
    expect_malformed("bad_expect", GOOD_HEAD GOOD_SIZE GOOD_TOL "[expect]\ndefault = close\n", "want bit_exact");
    expect_malformed("no_model", "[case]\ndtypes = bf16\nlayouts = dp1-tp1\n" GOOD_SIZE GOOD_TOL, "no model");
    expect_malformed("no_tolerance", GOOD_HEAD GOOD_SIZE "[tolerance]\nbf16 = x\n", "no entry for fp32");
    expect_malformed("no_size", GOOD_HEAD GOOD_TOL, "no [size");
    eq_status st = eq_case_load("/nonexistent/case.ini", &c);
    EQ_EXPECT(st == EQ_ERR_INPUT && strstr(eq_error_message(), "/nonexistent/case.ini"), "missing file: %s",
              eq_error_message());
    eq_error_clear();

    /* Layout names. */
    eq_layout l;
    EQ_EXPECT_OK(eq_layout_parse("dp8-tp2", &l));
    EQ_EXPECT(l.dp == 8 && l.tp == 2, "dp8-tp2 parsed as %d %d", l.dp, l.tp);
    const char *bad_layouts[] = {"dp0-tp1", "dp1-tp", "dp1-tp2x", "tp2", "dp-1-tp1"};
    for (size_t i = 0; i < sizeof bad_layouts / sizeof bad_layouts[0]; i++) {
        EQ_EXPECT(eq_layout_parse(bad_layouts[i], &l) == EQ_ERR_USAGE, "'%s' accepted", bad_layouts[i]);
        eq_error_clear();
    }

    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", temp_dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", temp_dir);
    return eq_test_finish("case_file_test");
}
