/* Case files: the shipped cases load and name known models; malformed files are one clear
 * EQ_ERR_INPUT naming the file; layouts parse; expectations resolve most specific first. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "equiv_config.h"
#include "harness/case_file.h"
#include "harness/driver/runner.h"
#include "harness/base/testing.h"
#include "models/models.h"

static char temp_dir[256];

static const char *write_case(const char *name, const char *text)
{
    static char path[512];
    snprintf(path, sizeof path, "%s/%s.ini", temp_dir, name);
    eq_test_write_text(path, text);
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

/* Sizes are checked before anything is allocated: a shape whose bytes overflow or pass 2^40 is an
 * input error, in the tensor primitives and in every model's check; the shipped sizes pass at every
 * layout their cases list. */
static void test_sizes_that_overflow(void)
{
    const int64_t fits[3] = {1 << 20, 1 << 10, 1 << 8}, too_big[3] = {1 << 20, 1 << 10, 1 << 9};
    const int64_t overflow[3] = {INT64_C(4294967296), INT64_C(4294967296), 256}, negative[2] = {4, -1};
    EQ_EXPECT(eq_shape_bytes(3, fits, 4) == INT64_C(1) << 40, "2^38 fp32 elements: %lld bytes",
              (long long)eq_shape_bytes(3, fits, 4));
    EQ_EXPECT(eq_shape_bytes(3, too_big, 4) == -1, "2^39 fp32 elements accepted");
    EQ_EXPECT(eq_shape_numel(3, overflow) == -1 && eq_shape_bytes(3, overflow, 2) == -1, "2^72 elements accepted");
    EQ_EXPECT(eq_shape_numel(2, negative) == -1, "a negative extent accepted");
    eq_tensor t;
    EQ_EXPECT(eq_tensor_init(&t, EQ_FP32, 3, overflow) == EQ_ERR_INPUT && t.data == NULL && t.ndim == 0,
              "an overflowing shape allocated: %s", eq_error_message());
    EQ_EXPECT(strstr(eq_error_message(), "[4294967296, 4294967296, 256]") != NULL, "message: %s", eq_error_message());
    eq_error_clear();

    /* Each model refuses, in its check, a size that makes a tensor overflow or pass 2^40 bytes. */
    static const struct {
        const char *model, *sizes;
    } models[] = {
        {"row_parallel", "seq = 2147483647\nbatch = 2147483646\nin_features = 8\nout_features = 4\n"},
        {"column_parallel", "seq = 4\nbatch = 2\nin_features = 2147483647\nout_features = 2147483646\n"},
        {"mlp_stack", "seq = 2147483647\nbatch = 2\nhidden = 2147483647\nffn = 4\nlayers = 2\n"},
        {"gpt", "seq = 2147483647\nbatch = 2\nhidden = 8\nheads = 2\nffn = 8\nlayers = 2\n"},
        {"gpt", "seq = 4\nbatch = 2\nhidden = 2147483646\nheads = 2\nffn = 8\nlayers = 2\n"},
        {"spd", "batch = 2\nseq = 4\nd_model = 2147483647\nd_mlp = 8\nlayers = 1\nc_fc = 4\nc_down = 4\n"
                "ci_hidden = 4\nstep = 1\nsteps = 2\n"},
        {"spd", "batch = 2147483647\nseq = 1048576\nd_model = 8\nd_mlp = 8\nlayers = 1\nc_fc = 4\nc_down = 4\n"
                "ci_hidden = 4\nstep = 1\nsteps = 2\n"},
        {"probe", "vocab = 2147483647\nseq = 4\nhidden = 2147483646\nheads = 2\nffn = 8\nlayers = 2\n"
                  "dataset = 8\nbatch_e = 4\nbatch_u = 4\n"},
        {"probe", "vocab = 8\nseq = 2147483647\nhidden = 8\nheads = 2\nffn = 2147483647\nlayers = 2\n"
                  "dataset = 8\nbatch_e = 4\nbatch_u = 4\n"},
    };
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        char text[1024], name[32];
        snprintf(text, sizeof text, "[case]\nmodel = %s\ndtypes = fp32\nlayouts = dp1-tp1, dp1-tp2\n[size.ci]\n%s"
                 "[tolerance]\nfp32 = fp32_1_layer\n", models[i].model, models[i].sizes);
        snprintf(name, sizeof name, "overflow_%zu", i);
        eq_case c;
        eq_run_spec spec;
        EQ_EXPECT_OK(eq_case_load(write_case(name, text), &c));
        EQ_EXPECT_OK(eq_run_spec_init(&spec, &c, "ci"));
        spec.step.dtype = EQ_FP32;
        spec.step.layout = (eq_layout){1, 2};
        eq_status st = eq_run_check(&spec);
        EQ_EXPECT(st == EQ_ERR_INPUT && strstr(eq_error_message(), "more than 2^40 bytes") &&
                      strstr(eq_error_message(), "[size.ci]") && strstr(eq_error_message(), name),
                  "%s (%s): status %s: %s", models[i].model, name, eq_status_name(st), eq_error_message());
        eq_error_clear();
    }

    /* The shipped cases at every size, dtype and layout they list: none refused for its size (a
     * layout may not divide the docs size: a usage error, said as such). */
    char names[32][EQ_CASE_KEY_MAX];
    int n = 0;
    EQ_EXPECT_OK(eq_case_list(EQUIV_SOURCE_ROOT "/cases", names, 32, &n));
    for (int i = 0; i < n; i++) {
        eq_case c;
        eq_run_spec spec;
        EQ_EXPECT_OK(eq_case_load_named(EQUIV_SOURCE_ROOT "/cases", names[i], &c));
        for (int s = 0; s < c.n_sizes; s++) {
            EQ_EXPECT_OK(eq_run_spec_init(&spec, &c, c.sizes[s].name));
            for (int d = 0; d < c.n_dtypes; d++) {
                for (int l = 0; l < c.n_layouts; l++) {
                    spec.step.dtype = c.dtypes[d];
                    spec.step.layout = c.layouts[l];
                    eq_status st = eq_run_check(&spec);
                    EQ_EXPECT(st == EQ_OK || (st == EQ_ERR_USAGE && strstr(eq_error_message(), "does not divide")),
                              "%s [size.%s] refused: %s", c.name, c.sizes[s].name, eq_error_message());
                    eq_error_clear();
                }
            }
        }
    }
}

/* Every model names the [size.NAME] keys it reads (models/model.h: size_keys); a case file's other
 * keys, in any of its sizes, are refused at their line, and the numerics keys only where the model
 * follows numerics. */
static void test_size_keys(void)
{
    for (int m = 0; eq_models[m] != NULL; m++)
        EQ_EXPECT(eq_models[m]->size_keys != NULL && eq_models[m]->size_keys[0] != NULL, "model %s names no size keys",
                  eq_models[m]->name);
    static const struct {
        const char *name, *text, *part;
    } refused[] = {
        {"key_typo", "[case]\nmodel = gpt\ndtypes = fp32\nlayouts = dp1-tp1\n[size.ci]\nseq = 4\nbatch = 2\n"
                     "hidden = 8\nheads = 2\nffn = 8\nlayers = 1\nmegatron_int = 1\n[tolerance]\nfp32 = fp32_1_layer\n",
         "key_typo.ini:12: unknown key 'megatron_int' in [size.ci] (model gpt reads: seq, batch, hidden, heads, ffn, "
         "layers, lean_capture, megatron_init, tf32)"},
        {"key_numerics", GOOD_HEAD GOOD_SIZE "tf32 = 1\n" GOOD_TOL,
         "key_numerics.ini:10: unknown key 'tf32' in [size.ci] (model row_parallel reads: seq, batch, in_features, "
         "out_features)"},
        {"key_other_size", GOOD_HEAD GOOD_SIZE "[size.docs]\nseq = 4\nbatch = 2\nin_features = 8\nout_features = 4\n"
                           "foo = 1\n" GOOD_TOL,
         "key_other_size.ini:15: unknown key 'foo' in [size.docs]"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        eq_case c;
        eq_run_spec spec;
        EQ_EXPECT_OK(eq_case_load(write_case(refused[i].name, refused[i].text), &c));
        eq_status st = eq_run_spec_init(&spec, &c, "ci");
        EQ_EXPECT(st == EQ_ERR_INPUT && strstr(eq_error_message(), refused[i].part) != NULL, "%s: status %s: %s",
                  refused[i].name, eq_status_name(st), eq_error_message());
        eq_error_clear();
    }
    /* gpt's optional keys are its own */
    eq_case c;
    eq_run_spec spec;
    EQ_EXPECT_OK(eq_case_load(write_case("key_optional", "[case]\nmodel = gpt\ndtypes = fp32\nlayouts = dp1-tp1\n"
                                         "[size.ci]\nseq = 4\nbatch = 2\nhidden = 8\nheads = 2\nffn = 8\n"
                                         "layers = 1\nmegatron_init = 1\ntf32 = 1\nlean_capture = 1\n"
                                         "[tolerance]\nfp32 = fp32_1_layer\n"),
                              &c));
    EQ_EXPECT_OK(eq_run_spec_init(&spec, &c, "ci"));
    EQ_EXPECT(spec.step.numerics == EQ_NUMERICS_MEGATRON_TF32, "numerics %d", (int)spec.step.numerics);
}

/* Any number of cases: each loads by name whatever the directory order, and a listing that
 * cannot hold them all says so instead of leaving some out. */
static void test_many_cases(void)
{
    char dir[300], name[32], path[400];
    snprintf(dir, sizeof dir, "%s/many", temp_dir);
    EQ_EXPECT(mkdir(dir, 0700) == 0, "cannot make %s", dir);
    enum { N = 70 };
    for (int i = 0; i < N; i++) {
        snprintf(path, sizeof path, "%s/case_%02d.ini", dir, i);
        FILE *fp = fopen(path, "w");
        if (fp == NULL) continue;
        fputs(GOOD_HEAD GOOD_SIZE GOOD_TOL, fp);
        fclose(fp);
    }
    eq_case c;
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof name, "case_%02d", i);
        EQ_EXPECT_OK(eq_case_load_named(dir, name, &c));
    }
    char (*names)[EQ_CASE_KEY_MAX] = calloc(N, sizeof *names);
    int n = 0;
    EQ_EXPECT(eq_case_list(dir, names, 64, &n) == EQ_ERR_INPUT && strstr(eq_error_message(), "70 case files"),
              "70 cases listed into 64: %s", eq_error_message());
    eq_error_clear();
    EQ_EXPECT_OK(eq_case_list(dir, names, N, &n));
    EQ_EXPECT(n == N && strcmp(names[0], "case_00") == 0 && strcmp(names[N - 1], "case_69") == 0,
              "%d cases listed, first %s", n, names[0]);
    free(names);
    /* A name is a file name in the folder: no path, nothing hidden. */
    const char *not_names[] = {"../many/case_01", "", ".hidden", "case_01/x"};
    for (size_t i = 0; i < sizeof not_names / sizeof not_names[0]; i++) {
        EQ_EXPECT(eq_case_load_named(dir, not_names[i], &c) == EQ_ERR_USAGE &&
                      strstr(eq_error_message(), "unknown case"),
                  "'%s': %s", not_names[i], eq_error_message());
        EQ_EXPECT(strstr(eq_error_message(), ", ...") != NULL, "a long list not cut with ...: %s", eq_error_message());
        eq_error_clear();
    }
}

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
                                         "[expect]\ndefault = within\ndp1-tp4 = differs\nbf16.dp1-tp4 = must_fail\n"
                                         "cuda.fp32 = bit_exact\n"),
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
    EQ_EXPECT(eq_case_expectation(&c, "cpu", EQ_BF16, (eq_layout){1, 4}) == EQ_EXPECT_MUST_FAIL, "dtype.layout key");
    EQ_EXPECT(eq_case_expectation(&c, "cpu", EQ_FP32, (eq_layout){1, 4}) == EQ_EXPECT_DIFFERS, "layout key");
    EQ_EXPECT(eq_case_expectation(&c, "cpu", EQ_FP32, (eq_layout){1, 2}) == EQ_EXPECT_WITHIN, "default key");
    EQ_EXPECT(eq_case_expectation(&c, "cpu", EQ_FP32, (eq_layout){1, 1}) == EQ_EXPECT_BIT_EXACT, "reference");
    /* A backend's key wins on that backend only, over every plain key. */
    EQ_EXPECT(eq_case_expectation(&c, "cuda", EQ_FP32, (eq_layout){1, 4}) == EQ_EXPECT_BIT_EXACT, "backend key");
    EQ_EXPECT(eq_case_expectation(&c, "cuda", EQ_BF16, (eq_layout){1, 4}) == EQ_EXPECT_MUST_FAIL, "other dtype");
    EQ_EXPECT(eq_case_expectation(&c, NULL, EQ_FP32, (eq_layout){1, 4}) == EQ_EXPECT_DIFFERS,
              "no backend");

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
    /* A differs may state its size: a range of the worst relative error or of the fitted factor. */
    EQ_EXPECT_OK(eq_case_load(write_case("tensor_expect_sized", GOOD_HEAD GOOD_SIZE GOOD_TOL
                                         "[expect.avg]\nloss.imp_min = differs rel 2e-5..1e-2\n"
                                         "V_grad = differs factor -0.13..-0.12\nloss = differs\n"), &c));
    eq_expect_size size = {EQ_SIZE_ANY, 0, 0};
    EQ_EXPECT(eq_case_tensor_expectation_sized(&c, "avg", (eq_layout){8, 1}, "loss.imp_min", &e, &size) &&
                  e == EQ_EXPECT_DIFFERS && size.metric == EQ_SIZE_REL && size.lo == 2e-5 && size.hi == 1e-2,
              "differs rel 2e-5..1e-2 read as %d %g..%g", (int)size.metric, size.lo, size.hi);
    EQ_EXPECT(eq_case_tensor_expectation_sized(&c, "avg", (eq_layout){8, 1}, "V_grad", &e, &size) &&
                  size.metric == EQ_SIZE_FACTOR && size.lo == -0.13 && size.hi == -0.12,
              "differs factor -0.13..-0.12 read as %d %g..%g", (int)size.metric, size.lo, size.hi);
    EQ_EXPECT(eq_case_tensor_expectation_sized(&c, "avg", (eq_layout){8, 1}, "loss", &e, &size) &&
                  e == EQ_EXPECT_DIFFERS && size.metric == EQ_SIZE_ANY, "bare differs has a size");
    expect_malformed("differs_reversed", GOOD_HEAD GOOD_SIZE GOOD_TOL "[expect.avg]\nloss = differs rel 1e-2..1e-3\n",
                     "LO is above HI");
    expect_malformed("differs_no_range", GOOD_HEAD GOOD_SIZE GOOD_TOL "[expect.avg]\nloss = differs rel 1e-3\n",
                     "is not LO..HI");
    expect_malformed("differs_metric", GOOD_HEAD GOOD_SIZE GOOD_TOL "[expect.avg]\nloss = differs max 1..2\n",
                     "unknown size 'max'");
    expect_malformed("differs_negative", GOOD_HEAD GOOD_SIZE GOOD_TOL "[expect.avg]\nloss = differs rel -1..2\n",
                     "a relative error is >= 0");
    expect_malformed("differs_nan", GOOD_HEAD GOOD_SIZE GOOD_TOL "[expect.avg]\nloss = differs rel 0..nan\n",
                     "not finite numbers");
    expect_malformed("differs_word", GOOD_HEAD GOOD_SIZE GOOD_TOL "[expect.avg]\nloss = differs rel 0..1e-2x\n",
                     "not finite numbers");
    expect_malformed("differs_extra", GOOD_HEAD GOOD_SIZE GOOD_TOL "[expect.avg]\nloss = differs rel 0..1 or so\n",
                     "want differs rel LO..HI");
    expect_malformed("within_sized", GOOD_HEAD GOOD_SIZE GOOD_TOL "[expect.avg]\nloss = within rel 0..1\n",
                     "only differs takes a size");
    expect_malformed("sized_in_layout_expect", GOOD_HEAD GOOD_SIZE GOOD_TOL "[expect]\ndefault = differs rel 0..1\n",
                     "want bit_exact");
    /* [expect.any]: under either convention; a line of the convention's own section before it wins. */
    EQ_EXPECT_OK(eq_case_load(write_case("tensor_expect_any", GOOD_HEAD GOOD_SIZE GOOD_TOL
                                         "[expect.sum]\nB_U = differs\n[expect.any]\nB_* = bit_exact\n"), &c));
    EQ_EXPECT(eq_case_tensor_expectation(&c, "avg", (eq_layout){16, 1}, "B_E", &e) && e == EQ_EXPECT_BIT_EXACT,
              "[expect.any] not applied under avg");
    EQ_EXPECT(eq_case_tensor_expectation(&c, "sum", (eq_layout){2, 1}, "B_E", &e) && e == EQ_EXPECT_BIT_EXACT,
              "[expect.any] not applied under sum");
    EQ_EXPECT(eq_case_tensor_expectation(&c, "sum", (eq_layout){2, 1}, "B_U", &e) && e == EQ_EXPECT_DIFFERS,
              "the earlier [expect.sum] line did not win");
    EQ_EXPECT(!eq_case_tensor_expectation(&c, "avg", (eq_layout){1, 1}, "B_E", &e), "[expect.any] applied at dp 1");
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
    /* What used to pass silently: every duplicate, an empty value or item, a value out of range. */
    expect_malformed("dtype_twice", "[case]\nmodel = m\ndtypes = bf16, bf16, bf16\n", ":3: dtype 'bf16' listed twice");
    expect_malformed("layout_twice", "[case]\nmodel = m\ndtypes = bf16\nlayouts = dp1-tp2,dp1-tp1, dp1-tp2\n",
                     ":4: layout 'dp1-tp2' listed twice");
    expect_malformed("size_key_twice", GOOD_HEAD "[size.ci]\nseq = 4\nbatch = 2\nseq = 8\n" GOOD_TOL,
                     ":8: 'seq' given twice in [size.ci]");
    expect_malformed("case_key_twice", GOOD_HEAD "model = spd\n" GOOD_SIZE GOOD_TOL, ":5: 'model' given twice");
    expect_malformed("tolerance_key_twice", GOOD_HEAD GOOD_SIZE GOOD_TOL "bf16 = other\n", "'bf16' given twice");
    expect_malformed("expect_key_twice", GOOD_HEAD GOOD_SIZE GOOD_TOL "[expect]\ndefault = within\ndefault = differs\n",
                     "'default' given twice in [expect]");
    expect_malformed("tensor_expect_twice", GOOD_HEAD GOOD_SIZE GOOD_TOL "[expect.avg]\nloss = differs\nloss = within\n",
                     "'loss' given twice in [expect.avg]");
    expect_malformed("continued", GOOD_HEAD GOOD_SIZE "[tolerance]\nbf16 = bf16_28_layers\n  fp32 = x\n",
                     "'bf16' given twice");
    expect_malformed("section_twice", GOOD_HEAD GOOD_SIZE GOOD_TOL "[size.ci]\nseq = 8\n",
                     ":13: section [size.ci] appears twice (first at line 5)");
    expect_malformed("case_twice", GOOD_HEAD GOOD_SIZE GOOD_TOL "[case]\nsummary = s\n", "section [case] appears twice");
    expect_malformed("size_too_big", GOOD_HEAD "[size.ci]\nseq = 4294967296\n" GOOD_TOL,
                     "seq = 4294967296 is out of range (1..2147483647)");
    expect_malformed("size_huge", GOOD_HEAD "[size.ci]\nseq = 99999999999999999999999\n" GOOD_TOL, "out of range");
    expect_malformed("size_negative", GOOD_HEAD "[size.ci]\nseq = -4\n" GOOD_TOL, "not a positive integer");
    expect_malformed("size_sign", GOOD_HEAD "[size.ci]\nseq = +4\n" GOOD_TOL, "not a positive integer");
    expect_malformed("empty_value", "[case]\nmodel =\n", ":2: 'model' in [case] has no value");
    expect_malformed("empty_item", "[case]\nmodel = m\ndtypes = bf16,,fp32\n", "has an empty item");
    expect_malformed("trailing_comma", "[case]\nmodel = m\ndtypes = bf16,\n", "has an empty item");
    expect_malformed("outside", "model = m\n" GOOD_HEAD, ":1: 'model' is outside any [section]");
    expect_malformed("empty_section", GOOD_HEAD "[size.docs]\n" GOOD_SIZE GOOD_TOL, ":5: [size.docs] has no keys");
    expect_malformed("no_case", GOOD_SIZE GOOD_TOL, "no [case] section");
    expect_malformed("empty", "", "no [case] section");
    expect_malformed("comments_only", "# nothing\n; here\n", "no [case] section");

    /* Names are kept whole or refused, never cut: inih keeps 49 characters of a section name. */
    expect_malformed("long_section", GOOD_HEAD GOOD_SIZE GOOD_TOL
                     "[size.a_size_name_long_enough_to_be_cut_by_inih_at_49]\nseq = 1\n",
                     ":13: section name 'size.a_size_name_long_enough_to_be_cut_by_inih_at_49' is longer than 49");
    expect_malformed("long_key", GOOD_HEAD "[size.ci]\na_size_key_long_enough_to_be_cut_by_inih_at_49_chars = 1\n",
                     "is longer than 49 characters");
    expect_malformed("long_model", "[case]\nmodel = a_model_name_longer_than_the_forty_seven_kept_characters\n",
                     "model 'a_model_name_longer_than_the_forty_seven_kept_characters' is longer than 47");
    expect_malformed("long_tolerance_entry", GOOD_HEAD GOOD_SIZE
                     "[tolerance]\nbf16 = an_entry_name_longer_than_the_forty_seven_kept_chars\n",
                     "is longer than 47");

    /* The message names the first bad line with that line's own text, not a later one's. */
    expect_malformed("two_errors", GOOD_HEAD "colour = red\n[size.ci]\nseq = x\n", ":5: unknown key 'colour'");
    expect_malformed("error_then_syntax", GOOD_HEAD "colour = red\nnot a key\n", ":5: unknown key 'colour'");
    expect_malformed("syntax_then_error", GOOD_HEAD "not a key\ncolour = red\n", ":5: syntax error");

    /* Files that are not case files: refused at once, never read. */
    const char *not_files[] = {"/dev/zero", temp_dir};
    const char *why[] = {"not a regular file", "is a directory"};
    for (int i = 0; i < 2; i++) {
        EQ_EXPECT(eq_case_load(not_files[i], &c) == EQ_ERR_INPUT && strstr(eq_error_message(), why[i]) &&
                      strstr(eq_error_message(), "case file"),
                  "%s: %s", not_files[i], eq_error_message());
        eq_error_clear();
    }
    {
        static const char binary[] = "[case]\nmodel = m\0\x01\x02\n";
        char path[600];
        snprintf(path, sizeof path, "%s/binary.ini", temp_dir);
        FILE *fp = fopen(path, "wb");
        if (fp != NULL) {
            fwrite(binary, 1, sizeof binary - 1, fp);
            fclose(fp);
        }
        EQ_EXPECT(eq_case_load(path, &c) == EQ_ERR_INPUT && strstr(eq_error_message(), ":2: a NUL byte"),
                  "binary: %s", eq_error_message());
        eq_error_clear();
        unlink(path);
    }

    /* The case's name is the file name without .ini, whole. */
    EQ_EXPECT_OK(eq_case_load(write_case("with.dots", GOOD_HEAD GOOD_SIZE GOOD_TOL), &c));
    EQ_EXPECT(strcmp(c.name, "with.dots") == 0, "with.dots.ini named '%s'", c.name);
    unlink(write_case("with.dots", ""));
    expect_malformed("a_case_file_name_longer_than_forty_seven_characters", GOOD_HEAD GOOD_SIZE GOOD_TOL,
                     "longer than 47 characters");
    unlink(write_case("a_case_file_name_longer_than_forty_seven_characters", ""));

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

    test_many_cases();
    test_sizes_that_overflow();
    test_size_keys();

    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", temp_dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", temp_dir);
    return eq_test_finish("case_file_test");
}
