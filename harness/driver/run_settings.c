#include "harness/driver/run_settings.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "equiv_config.h"
#include "harness/equiv_revision.h"
#include "harness/optimizer.h"
#include "models/model.h"
#include "reductions/nccl_layout.h"

const char *const eq_run_settings_not_shared[] = {"model", /* the case file's content holds it */
                                                   "gemm_kernel", "cpu", "gpu", "source", "world_size", "step",
                                                   "environment", "pp", "cp", "ep", /* a user's run's */ NULL};

/* A file's content under key, shown as "the WHAT PATH (content digest ...)"; f NULL: none. */
static void add_file(eq_world_settings *s, const char *key, const char *what, const char *path, FILE *f)
{
    if (f == NULL) {
        /* every rank alike fails with the reason; a rank alone without it differs here */
        eq_world_settings_add(s, key, 1, "no %s %s", what, path);
        return;
    }
    uint64_t h = EQ_DIGEST_START;
    char buf[8192];
    for (size_t n; (n = fread(buf, 1, sizeof buf, f)) > 0;) h = eq_digest(h, buf, n);
    fclose(f);
    eq_world_settings_add(s, key, h, "the %s %s (content digest %016" PRIx64 ")", what, path, h);
}

/* The case file's content, as eq_case_load_named finds it (cases_dir/NAME.ini). */
static void add_case_file(eq_world_settings *s, const char *cases_dir, const char *name)
{
    char path[1100];
    snprintf(path, sizeof path, "%s/%s.ini", cases_dir, name);
    FILE *f = name[0] != '\0' && name[0] != '.' && strchr(name, '/') == NULL ? fopen(path, "rb") : NULL;
    add_file(s, "case_file", "case file", path, f);
}

void eq_compare_settings(const eq_cli *cli, const char *tolerances, eq_world_settings *out)
{
    memset(out, 0, sizeof *out);
    eq_world_settings_add(out, "version", 0, "equiv %s (git %s)", EQUIV_VERSION, EQUIV_GIT_REVISION);
    eq_world_settings_add(out, "transport", 0, "--comm %s", cli->comm != NULL ? cli->comm->name : "?");
    eq_world_settings_add(out, "reference", 0, "the reference %s", cli->compare_paths[0]);
    eq_world_settings_add(out, "test", 0, "the test run %s", cli->compare_paths[1]);
    if (cli->truth_path != NULL) eq_world_settings_add(out, "truth", 0, "--truth %s", cli->truth_path);
    else eq_world_settings_add(out, "truth", 0, "no --truth");
    if (cli->has_expect) eq_world_settings_add(out, "expect", 0, "--expect %s", eq_expect_name(cli->expect));
    else eq_world_settings_add(out, "expect", 0, "no --expect");
    if (cli->has_atol_rtol) eq_world_settings_add(out, "tolerance", 0, "--atol %.17g --rtol %.17g", cli->atol, cli->rtol);
    else if (cli->tolerance_name != NULL) eq_world_settings_add(out, "tolerance", 0, "--tolerance %s", cli->tolerance_name);
    else eq_world_settings_add(out, "tolerance", 0, "no --tolerance");
    add_file(out, "tolerance_file", "tolerance file", tolerances, fopen(tolerances, "rb"));
}

void eq_run_settings(const eq_cli *cli, const char *cases_dir, eq_world_settings *out)
{
    memset(out, 0, sizeof *out);
    eq_world_settings_add(out, "version", 0, "equiv %s (git %s)", EQUIV_VERSION, EQUIV_GIT_REVISION);
    eq_world_settings_add(out, "transport", 0, "--comm %s", cli->comm != NULL ? cli->comm->name : "?");
    eq_world_settings_add(out, "backend", 0, "--backend %s", cli->backend);
    eq_world_settings_add(out, "case", 0, "--case %s", cli->case_name != NULL ? cli->case_name : "");
    add_case_file(out, cases_dir, cli->case_name != NULL ? cli->case_name : "");
    eq_world_settings_add(out, "size", 0, "--size %s", cli->size);
    if (cli->all_dtypes) eq_world_settings_add(out, "dtype", 0, "every dtype of the case (no --dtype)");
    else eq_world_settings_add(out, "dtype", 0, "--dtype %s", eq_dtype_name(cli->dtype));
    /* 0: not given (start_world takes 1) */
    eq_world_settings_add(out, "dp", 0, "--dp %d", cli->dp ? cli->dp : 1);
    eq_world_settings_add(out, "tp", 0, "--tp %d", cli->tp ? cli->tp : 1);
    eq_world_settings_add(out, "algorithm", 0, "--algo %s", eq_algo_name(cli->algo));
    eq_world_settings_add(out, "nccl_channels", 0, "--nccl-channels %d", cli->nccl.channels ? cli->nccl.channels : 1);
    eq_world_settings_add(out, "nccl_proto", 0, "--nccl-proto %s", eq_nccl_proto_name(cli->nccl.proto));
    eq_world_settings_add(out, "seed", 0, "--seed %" PRIu64, cli->seed);
    eq_world_settings_add(out, "grads", 0, "--grads %s", eq_grad_convention_name((eq_grad_convention)cli->grads));
    if (cli->numerics < 0) eq_world_settings_add(out, "numerics", 0, "the size's numerics (no --numerics)");
    else eq_world_settings_add(out, "numerics", 0, "--numerics %s", eq_numerics_name((eq_numerics)cli->numerics));
    char bugs[512] = "";
    for (unsigned bit = 1; bit != 0 && bit <= cli->bugs; bit <<= 1)
        if (cli->bugs & bit)
            snprintf(bugs + strlen(bugs), sizeof bugs - strlen(bugs), "%s--inject %s", bugs[0] ? " " : "",
                     eq_bug_name((eq_bug)bit));
    eq_world_settings_add(out, "injected", 0, "%s", bugs[0] ? bugs : "no --inject");
    eq_world_settings_add(out, "forward_only", 0, "%s", cli->forward_only ? "--forward-only" : "no --forward-only");
    eq_world_settings_add(out, "truth", 0, "%s", cli->truth ? "--truth" : "no --truth");
    eq_world_settings_add(out, "steps", 0, "--steps %d", cli->steps);
    eq_world_settings_add(out, "optimizer", 0, "--optimizer %s", eq_optimizer_name((eq_optimizer_kind)cli->optimizer));
    if (cli->has_lr) eq_world_settings_add(out, "lr", 0, "--lr %.17g", cli->lr);
    else eq_world_settings_add(out, "lr", 0, "the optimizer's learning rate (no --lr)");
}
