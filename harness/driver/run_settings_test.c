/* The settings every rank of a multi-process run must share (harness/driver/run_settings.h), and
 * the line that names a difference (reductions/world.h: eq_world_settings_differ), without MPI:
 * every row of harness/run_cell.c's field table is shared or listed as not; each setting a user
 * can set on one rank alone is told apart and named with both values; what may differ between
 * ranks (the output options, the case folder's path) is not. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "equiv_config.h"
#include "harness/base/testing.h"
#include "harness/driver/run_settings.h"
#include "harness/run_cell.h"

#define CASES_DIR EQUIV_SOURCE_ROOT "/cases"

/* The settings of `equiv ARGS` (a NULL-terminated list after the program's name). */
static void settings_of(const char *const *args, const char *cases_dir, eq_world_settings *out)
{
    char *argv[40];
    int argc = 0;
    argv[argc++] = (char *)"equiv";
    for (int i = 0; args[i] != NULL && argc < 39; i++) argv[argc++] = (char *)args[i];
    argv[argc] = NULL;
    eq_cli cli;
    memset(out, 0, sizeof *out);
    eq_status st = eq_cli_parse(argc, argv, &cli);
    EQ_EXPECT(st == EQ_OK, "%s: %s", args[0], eq_error_message());
    eq_error_clear();
    if (st == EQ_OK) eq_run_settings(&cli, cases_dir, out);
}

static int has_key(const eq_world_settings *s, const char *key)
{
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->setting[i].key, key) == 0) return 1;
    return 0;
}

/* Every row of the run cell's table: shared, or said not to be; the settings fit their cap. */
static void test_every_cell_field_placed(void)
{
    const char *args[] = {"--case", "gpt", "--tp", "4", "--comm", "mpi", NULL};
    eq_world_settings s;
    settings_of(args, CASES_DIR, &s);
    EQ_EXPECT(s.n > 0 && s.n < EQ_WORLD_SETTINGS_MAX, "%d settings (cap %d)", s.n, EQ_WORLD_SETTINGS_MAX);
    for (int i = 0; i < eq_cell_field_count; i++) {
        const char *key = eq_cell_fields[i].key;
        int not_shared = 0;
        for (int k = 0; eq_run_settings_not_shared[k] != NULL; k++)
            not_shared |= strcmp(key, eq_run_settings_not_shared[k]) == 0;
        EQ_EXPECT(has_key(&s, key) != not_shared, "run cell field '%s' is %s: put it in eq_run_settings or in "
                  "eq_run_settings_not_shared (harness/driver/run_settings.c)",
                  key, not_shared ? "both shared and not shared" : "in neither list");
    }
}

/* Rank 2 runs `base` plus `extra`, rank 0 `base`: want_n settings differ, the first named with both
 * values. */
static void check_differs(const char *const *base, const char *const *extra, int want_n, const char *want)
{
    const char *args[40];
    int n = 0;
    for (int i = 0; base[i] != NULL; i++) args[n++] = base[i];
    for (int i = 0; extra[i] != NULL; i++) args[n++] = extra[i];
    args[n] = NULL;
    eq_world_settings root, mine;
    char msg[700];
    settings_of(base, CASES_DIR, &root);
    settings_of(args, CASES_DIR, &mine);
    EQ_EXPECT(mine.digest != root.digest, "%s: the same digest", extra[0]);
    const int differs = eq_world_settings_differ(&mine, 2, &root, msg, sizeof msg);
    EQ_EXPECT(differs == want_n && strcmp(msg, want) == 0, "%s: %d differ: '%s', want %d: '%s'", extra[0], differs,
              differs ? msg : "(no difference)", want_n, want);
}

static void test_each_setting_named(void)
{
    const char *base[] = {"--case", "gpt", "--tp", "4", "--comm", "mpi", NULL};
    struct {
        const char *extra[6];
        int n;
        const char *want;
    } cases[] = {
        {{"--seed", "7", NULL}, 1, "rank 2 runs --seed 7, rank 0 --seed 1234"},
        {{"--algo", "tree", NULL}, 1, "rank 2 runs --algo tree, rank 0 --algo ring"},
        {{"--dtype", "fp32", NULL}, 1, "rank 2 runs --dtype fp32, rank 0 every dtype of the case (no --dtype)"},
        {{"--size", "docs", NULL}, 1, "rank 2 runs --size docs, rank 0 --size ci"},
        {{"--dp", "2", NULL}, 1, "rank 2 runs --dp 2, rank 0 --dp 1"},
        {{"--inject", "skip_allreduce", "--inject", "shard_offset", NULL}, 1,
         "rank 2 runs --inject skip_allreduce --inject shard_offset, rank 0 no --inject"},
        {{"--grads", "sum", NULL}, 1, "rank 2 runs --grads sum, rank 0 --grads avg"},
        {{"--numerics", "megatron", NULL}, 1,
         "rank 2 runs --numerics megatron, rank 0 the size's numerics (no --numerics)"},
        {{"--forward-only", NULL}, 1, "rank 2 runs --forward-only, rank 0 no --forward-only"},
        {{"--truth", NULL}, 1, "rank 2 runs --truth, rank 0 no --truth"},
        {{"--backend", "cuda", NULL}, 1, "rank 2 runs --backend cuda, rank 0 --backend cpu"},
        {{"--seed", "7", "--algo", "seq", NULL}, 2, "rank 2 runs --algo seq, rank 0 --algo ring"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_differs(base, cases[i].extra, cases[i].n, cases[i].want);
    /* another case, another comm: the first of the differences in the order of the list */
    const char *other_case[] = {"--case", "row_parallel", "--tp", "4", "--comm", "nccl", NULL};
    eq_world_settings root, mine;
    char msg[700];
    settings_of(base, CASES_DIR, &root);
    settings_of(other_case, CASES_DIR, &mine);
    EQ_EXPECT(eq_world_settings_differ(&mine, 3, &root, msg, sizeof msg) == 3 &&
                  strcmp(msg, "rank 3 runs --comm nccl, rank 0 --comm mpi") == 0,
              "another case and comm (and so its case file): '%s'", msg);
}

/* The output options and the case folder's path may differ; the case file's content may not, and a
 * rank whose case file is missing differs from one that has it. A name with a newline stays on the
 * line. */
static void test_what_may_differ(void)
{
    char dir[] = "/tmp/equiv-run-settings-XXXXXX", path[256], text[4096];
    EQ_EXPECT(mkdtemp(dir) != NULL, "mkdtemp failed");
    FILE *in = fopen(CASES_DIR "/row_parallel.ini", "rb");
    size_t n = in != NULL ? fread(text, 1, sizeof text - 1, in) : 0;
    if (in != NULL) fclose(in);
    text[n] = '\0';
    EQ_EXPECT(n > 0 && n < sizeof text - 1, "cannot read the row_parallel case (%zu bytes)", n);
    snprintf(path, sizeof path, "%s/row_parallel.ini", dir);
    eq_test_write_text(path, text);

    const char *base[] = {"--case", "row_parallel", "--tp", "4", "--comm", "mpi", NULL};
    const char *outputs[] = {"--case", "row_parallel", "--tp", "4", "--comm", "mpi", "--out", "elsewhere",
                             "--format", "json", "-v", "--tolerances", "/nonexistent.ini", NULL};
    eq_world_settings root, mine;
    char msg[700];
    settings_of(base, CASES_DIR, &root);
    settings_of(outputs, dir, &mine); /* the same case file in another folder */
    EQ_EXPECT(!eq_world_settings_differ(&mine, 1, &root, msg, sizeof msg) && mine.digest == root.digest,
              "outputs and the case folder's path: '%s'", msg);

    eq_test_write_text(path, strcat(text, "\n# one more line\n"));
    settings_of(base, dir, &mine);
    EQ_EXPECT(eq_world_settings_differ(&mine, 1, &root, msg, sizeof msg) &&
                  strncmp(msg, "rank 1 runs the case file ", 26) == 0 && strstr(msg, "content digest") != NULL,
              "another case file content: '%s'", msg);
    unlink(path);
    settings_of(base, dir, &mine);
    EQ_EXPECT(eq_world_settings_differ(&mine, 1, &root, msg, sizeof msg) &&
                  strncmp(msg, "rank 1 runs no case file ", 25) == 0,
              "no case file: '%s'", msg);
    rmdir(dir);

    const char *forged[] = {"--case", "gpt\nequiv: error: fake", "--tp", "4", "--comm", "mpi", NULL};
    settings_of(forged, CASES_DIR, &mine);
    EQ_EXPECT(eq_world_settings_differ(&mine, 1, &root, msg, sizeof msg) && strchr(msg, '\n') == NULL &&
                  strstr(msg, "--case gpt?equiv") != NULL,
              "a name with a newline: '%s'", msg);
}

/* A list one rank lacks a setting of (another build): named as missing on that side. */
static void test_missing_setting(void)
{
    eq_world_settings root = {0}, mine = {0};
    char msg[700];
    eq_world_settings_add(&root, "seed", 0, "--seed 1");
    eq_world_settings_add(&root, "case", 0, "--case gpt");
    eq_world_settings_add(&mine, "seed", 0, "--seed 1");
    EQ_EXPECT(eq_world_settings_differ(&mine, 5, &root, msg, sizeof msg) == 1 &&
                  strcmp(msg, "rank 5 runs no case, rank 0 --case gpt") == 0,
              "a setting missing: '%s'", msg);
    EQ_EXPECT(!eq_world_settings_differ(&root, 0, &root, msg, sizeof msg) && msg[0] == '\0', "the same: '%s'", msg);
}

int main(void)
{
    test_every_cell_field_placed();
    test_each_setting_named();
    test_what_may_differ();
    test_missing_setting();
    return eq_test_finish("run_settings_test");
}
