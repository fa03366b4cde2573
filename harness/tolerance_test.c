/* Tolerance tables: the golden file holds seed 002 section 7's numbers, every malformed file is
 * refused with one line naming FILE:LINE, and the expectation logic is the documented table.
 *   tolerance_test [PATH-TO/golden/tolerances.ini]
 * Without an argument the golden file is found beside this source file, so the test runs from the
 * repository root (gcc harness/tolerance_test.c) and from a meson build directory alike. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness/base/testing.h"
#include "harness/tolerance.h"

static char temp_dir[] = "/tmp/equiv_tolerance_XXXXXX";

/* Writes `text` to temp_dir/name; returns the path in buf. */
static const char *write_temp(const char *name, const char *text, char *buf, size_t len)
{
    snprintf(buf, len, "%s/%s", temp_dir, name);
    eq_test_write_text(buf, text);
    return buf;
}

/* Loading `text` must fail with EQ_ERR_INPUT, one line naming "FILE:LINE" and `words`. */
static void expect_refused(const char *name, const char *text, int line, const char *words)
{
    char path[256], where[300];
    eq_tolerance_table table;
    write_temp(name, text, path, sizeof path);
    eq_status st = eq_tolerance_load(path, &table);
    const char *msg = eq_error_message();
    snprintf(where, sizeof where, "%s:%d:", path, line);
    EQ_EXPECT(st == EQ_ERR_INPUT, "%s: status %s, want input error", name, eq_status_name(st));
    EQ_EXPECT(strstr(msg, where) != NULL, "%s: message '%s' lacks '%s'", name, msg, where);
    EQ_EXPECT(strstr(msg, words) != NULL, "%s: message '%s' lacks '%s'", name, msg, words);
    EQ_EXPECT(strstr(msg, "tolerance file") == msg, "%s: message '%s'", name, msg);
    EQ_EXPECT(strchr(msg, '\n') == NULL, "%s: message is not one line: '%s'", name, msg);
    EQ_EXPECT(table.count == 0, "%s: %d entries left after a failure", name, table.count);
    unlink(path);
    eq_error_clear();
}

static void test_golden(const char *golden)
{
    eq_tolerance_table table;
    EQ_EXPECT_OK(eq_tolerance_load(golden, &table));
    EQ_EXPECT(table.count == 11, "%d entries in %s, want 11", table.count, golden);
    /* seed 002 section 7: fp32, 1 layer: atol 1e-3, rtol 1e-3; bf16, 28 layers: atol 0.15, rtol 0 */
    const eq_tolerance *fp32 = eq_tolerance_find(&table, "fp32_1_layer");
    const eq_tolerance *bf16 = eq_tolerance_find(&table, "bf16_28_layers");
    EQ_EXPECT(fp32 != NULL && bf16 != NULL, "entries missing from %s", golden);
    if (fp32 != NULL) {
        EQ_EXPECT(fp32->atol == 1e-3 && fp32->rtol == 1e-3, "fp32_1_layer atol %g rtol %g", fp32->atol,
                  fp32->rtol);
        EQ_EXPECT(strstr(fp32->source, "seed 002 section 7") != NULL, "source '%s'", fp32->source);
        EQ_EXPECT(strstr(fp32->source, "test_tp_vs_dp_fp32_equivalence") != NULL, "source '%s'", fp32->source);
    }
    if (bf16 != NULL) {
        EQ_EXPECT(bf16->atol == 0.15 && bf16->rtol == 0.0, "bf16_28_layers atol %g rtol %g", bf16->atol,
                  bf16->rtol);
        EQ_EXPECT(strstr(bf16->source, "test_tp_vs_dp_equivalence") != NULL, "source '%s'", bf16->source);
    }
    EQ_EXPECT(eq_tolerance_find(&table, "fp16_1_layer") == NULL, "found an entry that is not there");
    /* The gradient entries are measured envelopes, relative to the reference's RMS, and say so. */
    const char *grads[6] = {"fp32_grads_measured", "bf16_grads_measured", "probe_fp32_buffers", "probe_fp32_scalars",
                            "probe_bf16_scalars", "probe_fp64"};
    for (int i = 0; i < 6; i++) {
        const eq_tolerance *g = eq_tolerance_find(&table, grads[i]);
        EQ_EXPECT(g != NULL && g->atol_scale == EQ_ATOL_REF_RMS && strstr(g->source, "measured") != NULL,
                  "%s missing, absolute, or without its source", grads[i]);
    }
    /* A run of no case gets default_<dtype>: one per dtype, relative to rms(ref), saying it is a default. */
    const char *defaults[3] = {"default_bf16", "default_fp32", "default_fp64"};
    for (int i = 0; i < 3; i++) {
        const eq_tolerance *d = eq_tolerance_find(&table, defaults[i]);
        EQ_EXPECT(d != NULL && d->atol_scale == EQ_ATOL_REF_RMS && d->atol > 0 && strstr(d->source, "default") != NULL,
                  "%s missing, absolute, zero, or not saying it is a default", defaults[i]);
    }
}

static void test_malformed(void)
{
    const char *good = "[a]\natol = 1e-3\nrtol = 0\nsource = here\n";
    char path[256];
    eq_tolerance_table table;
    EQ_EXPECT_OK(eq_tolerance_load(write_temp("good.ini", good, path, sizeof path), &table));
    EQ_EXPECT(table.count == 1 && table.entries[0].atol == 1e-3, "good file read as %d entries", table.count);
    unlink(path);

    /* scale = ref_rms makes atol relative to the reference's RMS; absolute is the default. */
    const char *scaled = "[g]\natol = 0.01\nrtol = 0\nsource = s\nscale = ref_rms\n[h]\natol = 1\nrtol = 0\nsource = s\n";
    EQ_EXPECT_OK(eq_tolerance_load(write_temp("scaled.ini", scaled, path, sizeof path), &table));
    EQ_EXPECT(table.count == 2 && table.entries[0].atol_scale == EQ_ATOL_REF_RMS &&
                  table.entries[1].atol_scale == EQ_ATOL_ABSOLUTE,
              "scale keys read as %d, %d", (int)table.entries[0].atol_scale, (int)table.entries[1].atol_scale);
    unlink(path);
    expect_refused("bad_scale.ini", "[a]\natol = 1\nrtol = 0\nsource = s\nscale = relative\n", 5, "ref_rms");

    expect_refused("missing_atol.ini", "# no atol\n[a]\nrtol = 0\nsource = s\n", 2, "no atol");
    expect_refused("missing_source.ini", "[a]\natol = 1\nrtol = 0\n\n[b]\natol = 1\nrtol = 1\nsource = s\n",
                   1, "no source");
    expect_refused("atol_abc.ini", "[a]\natol = abc\nrtol = 0\nsource = s\n", 2, "abc");
    expect_refused("atol_trailing.ini", "[a]\natol = 1e-3x\nrtol = 0\nsource = s\n", 2, "1e-3x");
    expect_refused("atol_empty.ini", "[a]\natol =\nrtol = 0\nsource = s\n", 2, "not a finite number");
    expect_refused("rtol_negative.ini", "[a]\natol = 0\nrtol = -1e-3\nsource = s\n", 3, "-1e-3");
    expect_refused("rtol_nan.ini", "[a]\natol = 0\nrtol = nan\nsource = s\n", 3, "nan");
    expect_refused("atol_inf.ini", "[a]\natol = inf\nrtol = 0\nsource = s\n", 2, "inf");
    expect_refused("unknown_key.ini", "[a]\natol = 0\nrtol = 0\nsource = s\nulps = 2\n", 5, "unknown key 'ulps'");
    expect_refused("syntax.ini", "[a]\natol = 0\nrtol 0\nsource = s\n", 3, "syntax error");
    expect_refused("bad_heading.ini", "[a\natol = 0\nrtol = 0\nsource = s\n", 1, "syntax error");
    expect_refused("duplicate_section.ini",
                   "[a]\natol = 0\nrtol = 0\nsource = s\n[a]\natol = 1\nrtol = 1\nsource = t\n", 5,
                   "appears twice (first at line 1)");
    expect_refused("duplicate_key.ini", "[a]\natol = 0\natol = 1\nrtol = 0\nsource = s\n", 3, "twice");
    expect_refused("outside.ini", "atol = 0\n[a]\natol = 0\nrtol = 0\nsource = s\n", 1, "outside");
    expect_refused("empty_section.ini", "[a]\n\n[b]\natol = 0\nrtol = 0\nsource = s\n", 1, "no atol");
    expect_refused("empty_last.ini", "[b]\natol = 0\nrtol = 0\nsource = s\n[c]\n", 5, "no atol");

    /* What inih would do silently is refused: names it would cut (so that two long names would
     * meet as one), a line it would split, a value continued on an indented line. */
    const char *long49 = "an_entry_name_of_exactly_forty_nine_characters_xy";
    char text[600], heading[600];
    snprintf(text, sizeof text, "[%s]\natol = 0\nrtol = 0\nsource = s\n", long49);
    EQ_EXPECT_OK(eq_tolerance_load(write_temp("name49.ini", text, path, sizeof path), &table));
    EQ_EXPECT(table.count == 1 && strcmp(table.entries[0].name, long49) == 0, "a 49-character name read as '%s'",
              table.entries[0].name);
    unlink(path);
    snprintf(heading, sizeof heading, "%s_one", long49);
    snprintf(text, sizeof text, "[%s_one]\natol = 0\nrtol = 0\nsource = s\n[%s_two]\natol = 0\nrtol = 0\nsource = s\n",
             long49, long49);
    expect_refused("long_names.ini", text, 1, heading);
    expect_refused("long_names.ini", text, 1, "longer than 49 characters");
    snprintf(text, sizeof text, "[a]\natol = 0\nrtol = 0\nsource = s\n%s_key = 1\n", long49);
    expect_refused("long_key.ini", text, 5, "longer than 49 characters");
    char long_line[400];
    memset(long_line, 'x', 300);
    long_line[300] = '\0';
    snprintf(text, sizeof text, "[a]\natol = 0\nrtol = 0\nsource = %s\n", long_line);
    expect_refused("long_line.ini", text, 4, "line longer than");
    expect_refused("continued.ini", "[a]\natol = 0\n  1\nrtol = 0\nsource = s\n", 3, "twice");
    expect_refused("colon.ini", "[a]\natol: 0\natol = 1\nrtol = 0\nsource = s\n", 3, "twice");
    expect_refused("no_name.ini", "[a]\n= 0\nrtol = 0\nsource = s\n", 2, "no name");

    /* A binary file, a NUL byte in text. */
    snprintf(path, sizeof path, "%s/nul.ini", temp_dir);
    FILE *f = fopen(path, "wb");
    if (f != NULL) {
        static const char with_nul[] = "[a]\natol = 0\0\nrtol = 0\nsource = s\n";
        fwrite(with_nul, 1, sizeof with_nul - 1, f);
        fclose(f);
    }
    EQ_EXPECT(eq_tolerance_load(path, &table) == EQ_ERR_INPUT && strstr(eq_error_message(), ":2: a NUL byte"),
              "a NUL byte: %s", eq_error_message());
    eq_error_clear();
    unlink(path);

    /* Not a regular file: refused at once, never read (/dev/zero would be read forever). */
    const char *not_files[] = {"/dev/zero", "/dev/null", temp_dir};
    const char *why[] = {"not a regular file", "not a regular file", "is a directory"};
    for (int i = 0; i < 3; i++) {
        EQ_EXPECT(eq_tolerance_load(not_files[i], &table) == EQ_ERR_INPUT && strstr(eq_error_message(), why[i]) &&
                      strstr(eq_error_message(), not_files[i]),
                  "%s: %s", not_files[i], eq_error_message());
        eq_error_clear();
    }

    char empty_path[256];
    write_temp("empty.ini", "# nothing here\n", empty_path, sizeof empty_path);
    EQ_EXPECT(eq_tolerance_load(empty_path, &table) == EQ_ERR_INPUT, "a file with no entries was accepted");
    EQ_EXPECT(strstr(eq_error_message(), "no entries") != NULL, "message '%s'", eq_error_message());
    eq_error_clear();
    unlink(empty_path);

    char missing[256];
    snprintf(missing, sizeof missing, "%s/no_such.ini", temp_dir);
    EQ_EXPECT(eq_tolerance_load(missing, &table) == EQ_ERR_INPUT, "a missing file was accepted");
    EQ_EXPECT(strstr(eq_error_message(), missing) != NULL, "message '%s' lacks the path", eq_error_message());
    EQ_EXPECT(strstr(eq_error_message(), "tolerance file") != NULL, "message '%s'", eq_error_message());
    eq_error_clear();
}

static void test_expectations(void)
{
    /* Rows: bit_exact, within, differs, must_fail. Columns: bit-exact, within, OUTSIDE, NON-FINITE. */
    static const int met[EQ_EXPECT_COUNT][4] = {
        {1, 0, 0, 0}, /* bit_exact: identical bits only */
        {1, 1, 0, 0}, /* within: bit-exact also qualifies */
        {0, 1, 1, 0}, /* differs: must show a difference, but a finite one */
        {0, 0, 1, 1}, /* must_fail: the injected bug must fall outside (or blow up) */
    };
    for (int e = 0; e < EQ_EXPECT_COUNT; e++) {
        for (int o = 0; o < 4; o++) {
            EQ_EXPECT(eq_expectation_met((eq_expect)e, (eq_observed)o) == met[e][o], "%s with %s",
                      eq_expect_name((eq_expect)e), eq_observed_name((eq_observed)o));
        }
        eq_expect parsed;
        EQ_EXPECT_OK(eq_expect_parse(eq_expect_name((eq_expect)e), &parsed));
        EQ_EXPECT(parsed == (eq_expect)e, "%s parsed as %d", eq_expect_name((eq_expect)e), (int)parsed);
    }
    eq_expect parsed;
    EQ_EXPECT(eq_expect_parse("close", &parsed) == EQ_ERR_INPUT, "unknown expectation accepted");
    EQ_EXPECT(strstr(eq_error_message(), "close") != NULL, "message '%s'", eq_error_message());
    eq_error_clear();
    EQ_EXPECT(strcmp(eq_expect_name(EQ_EXPECT_MUST_FAIL), "must_fail") == 0, "must_fail name");
    EQ_EXPECT(strcmp(eq_observed_name(EQ_OBS_OUTSIDE), "OUTSIDE") == 0, "OUTSIDE name");
    EQ_EXPECT(strcmp(eq_observed_name(EQ_OBS_NONFINITE), "NON-FINITE") == 0, "NON-FINITE name");
    EQ_EXPECT(strcmp(eq_observed_name(EQ_OBS_BIT_EXACT), "bit-exact") == 0, "bit-exact name");
}

/* argv[1], else golden/tolerances.ini relative to where __FILE__ says this source is: meson
 * compiles it as "../harness/tolerance_test.c" from the build directory the test runs in. */
static const char *golden_path(int argc, char **argv, char *buf, size_t len)
{
    if (argc > 1) return argv[1];
    const char *self = __FILE__, *tail = strstr(self, "harness/tolerance_test.c");
    int prefix_len = tail != NULL ? (int)(tail - self) : 0;
    snprintf(buf, len, "%.*sgolden/tolerances.ini", prefix_len, self);
    return buf;
}

int main(int argc, char **argv)
{
    char default_golden[4096];
    const char *golden = golden_path(argc, argv, default_golden, sizeof default_golden);
    if (mkdtemp(temp_dir) == NULL) {
        perror("mkdtemp");
        return 1;
    }
    test_golden(golden);
    test_malformed();
    test_expectations();
    rmdir(temp_dir);
    return eq_test_finish("tolerance_test");
}
