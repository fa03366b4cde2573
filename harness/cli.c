#include "harness/cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "equiv_config.h"
#include "models/model.h"

void eq_cli_print_help(void)
{
    printf("equiv %s: does a parallel layout compute the same step as one process, layer by layer?\n"
           "\n"
           "usage:\n"
           "  equiv --case NAME [--tp N] [--dp N] [options]   run, compare against dp1-tp1, report\n"
           "  equiv compare REF TEST [options]                 compare two runs: dumps, or directories of\n"
           "                                                   per-rank files (equiv_capture, harness/SCHEMA.md)\n"
           "  equiv diff BASE.json HEAD.json [--growth F]      what a change did to divergence (PR comment)\n"
           "  equiv matrix [--case NAME] [--dtype D] [--out DIR]   every case x layout x dtype, one summary\n"
           "  equiv golden [--update] [--case NAME]            check (or rewrite) golden/envelopes\n"
           "  equiv --list                                     cases, layouts, dtypes, algorithms\n"
           "  equiv --help | --version\n"
           "\n"
           "run options:\n"
           "  --case NAME        a case file in cases/ (see --list)\n"
           "  --tp N, --dp N     the layout to check; without either, every layout the case lists\n"
           "  --dtype D          bf16, fp32 (default: every dtype the case lists)\n"
           "  --algo A           all-reduce order and rounding: ring (NCCL, default), tree, fp32acc, seq;\n"
           "                     mpi: MPI's own MPI_Allreduce (with --comm mpi)\n"
           "  --size S           ci (default, seconds) or docs (the source documents' shapes)\n"
           "  --seed N           seed of the counter-based RNG (default 1234)\n"
           "  --grads C          data-parallel gradient convention: avg (DDP, default) or sum\n"
           "  --inject BUG       plant a bug in the layout's run (not the reference), to see it caught:\n"
           "                     skip_allreduce, shard_offset, grad_avg_twice (gpt, linears);\n"
           "                     ci_grad_avg, faith_every_rank, local_count, imp_min_no_world_size\n"
           "                     (spd, with --grads sum); repeatable\n"
           "  --forward-only     the forward pass alone (no backward, no gradients captured)\n"
           "  --truth            also run the step in fp64 and say whether the layout is less accurate\n"
           "                     than the reference or only rounded differently\n"
           "  --backend B        cpu (default) or cuda (cuBLAS GEMMs; needs a build with CUDA and a GPU)\n"
           "  --comm C           sim (default: every rank in this process, collectives emulated);\n"
           "                     mpi: one rank per process under mpirun/srun (-np = dp x tp), rank 0\n"
           "                     computes the reference, compares and writes; nccl: one rank per GPU\n"
           "compare options:\n"
           "  --expect E         bit_exact, within (default), differs, must_fail\n"
           "  --tolerance NAME   entry of the tolerance file (default: the case's entry for the dtype;\n"
           "                     a run of no case: default_<dtype>, which the report names)\n"
           "  --atol A, --rtol R |d| <= A + R |ref| for every tensor, instead of an entry\n"
           "common options:\n"
           "  --out DIR          write the dumps (.h5), report.md, report.json and report.html there\n"
           "  --format F         md (default), json or html on standard output (also --report F)\n"
           "  --cases-dir DIR    where case files live (default: the source tree's cases/)\n"
           "  --tolerances FILE  tolerance table (default: golden/tolerances.ini)\n"
           "  -v, --verbose      progress on standard error\n"
           "\n"
           "exit status: 0 every comparison as expected, 1 some comparison not as expected,\n"
           "             2 usage or input error (one line on standard error, no output files)\n",
           EQUIV_VERSION);
}

static eq_status parse_int(const char *opt, const char *text, long long lo, long long hi, long long *out)
{
    char *end = NULL;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || v < lo || v > hi)
        return EQ_FAIL(EQ_ERR_USAGE, "%s wants an integer in %lld..%lld, got '%s'", opt, lo, hi, text);
    *out = v;
    return EQ_OK;
}

static eq_status parse_format(const char *text, eq_format *out)
{
    if (strcmp(text, "md") == 0 || strcmp(text, "markdown") == 0) *out = EQ_FORMAT_MARKDOWN;
    else if (strcmp(text, "json") == 0) *out = EQ_FORMAT_JSON;
    else if (strcmp(text, "html") == 0) *out = EQ_FORMAT_HTML;
    else return EQ_FAIL(EQ_ERR_USAGE, "unknown format '%s' (known: md, json, html)", text);
    return EQ_OK;
}

/* Options that take a value. */
static eq_status parse_option(eq_cli *cli, const char *opt, const char *val)
{
    long long v = 0;
    eq_status st = EQ_OK;
    if (strcmp(opt, "--case") == 0) cli->case_name = val;
    else if (strcmp(opt, "--size") == 0) cli->size = val;
    else if (strcmp(opt, "--tp") == 0) {
        st = parse_int(opt, val, 1, 1024, &v);
        cli->tp = (int)v;
    } else if (strcmp(opt, "--dp") == 0) {
        st = parse_int(opt, val, 1, 1024, &v);
        cli->dp = (int)v;
    } else if (strcmp(opt, "--dtype") == 0) {
        cli->all_dtypes = strcmp(val, "all") == 0;
        if (!cli->all_dtypes) st = eq_dtype_parse(val, &cli->dtype);
    } else if (strcmp(opt, "--algo") == 0) st = eq_algo_parse(val, &cli->algo);
    else if (strcmp(opt, "--seed") == 0) {
        st = parse_int(opt, val, 0, INT64_MAX, &v);
        cli->seed = (uint64_t)v;
    } else if (strcmp(opt, "--grads") == 0) {
        eq_grad_convention c = EQ_GRAD_AVG;
        st = eq_grad_convention_parse(val, &c);
        cli->grads = (int)c;
    } else if (strcmp(opt, "--inject") == 0) {
        eq_bug bug = EQ_BUG_NONE;
        st = eq_bug_parse(val, &bug);
        cli->bugs |= (unsigned)bug;
    } else if (strcmp(opt, "--backend") == 0) cli->backend = val;
    else if (strcmp(opt, "--comm") == 0 || strcmp(opt, "--transport") == 0) {
        if (strcmp(val, "sim") != 0 && strcmp(val, "mpi") != 0 && strcmp(val, "nccl") != 0)
            st = EQ_FAIL(EQ_ERR_USAGE, "unknown --comm '%s' (known: sim, mpi, nccl)", val);
        cli->transport = val;
    }
    else if (strcmp(opt, "--expect") == 0) {
        cli->has_expect = 1;
        st = eq_expect_parse(val, &cli->expect);
        if (st != EQ_OK) {
            eq_error_clear();
            st = EQ_FAIL(EQ_ERR_USAGE, "unknown expectation '%s' (known: bit_exact, within, differs, must_fail)", val);
        }
    } else if (strcmp(opt, "--tolerance") == 0) cli->tolerance_name = val;
    else if (strcmp(opt, "--out") == 0) cli->out_dir = val;
    else if (strcmp(opt, "--atol") == 0 || strcmp(opt, "--rtol") == 0) {
        char *end = NULL;
        double bound = strtod(val, &end);
        if (end == val || *end != '\0' || !(bound >= 0.0 && bound < 1e300))
            st = EQ_FAIL(EQ_ERR_USAGE, "%s wants a finite number >= 0, got '%s'", opt, val);
        if (opt[2] == 'a') cli->atol = bound;
        else cli->rtol = bound;
        cli->has_atol_rtol = 1;
    } else if (strcmp(opt, "--growth") == 0) {
        char *end = NULL;
        cli->growth = strtod(val, &end);
        if (end == val || *end != '\0' || !(cli->growth >= 1.0 && cli->growth < 1e6))
            st = EQ_FAIL(EQ_ERR_USAGE, "--growth wants a factor >= 1, got '%s'", val);
    }
    else if (strcmp(opt, "--format") == 0 || strcmp(opt, "--report") == 0) st = parse_format(val, &cli->format);
    else if (strcmp(opt, "--cases-dir") == 0) cli->cases_dir = val;
    else if (strcmp(opt, "--tolerances") == 0) cli->tolerances_path = val;
    else st = EQ_FAIL(EQ_ERR_USAGE, "unknown option '%s' (see equiv --help)", opt);
    return st;
}

eq_status eq_cli_parse(int argc, char **argv, eq_cli *cli)
{
    memset(cli, 0, sizeof *cli);
    cli->command = EQ_CMD_RUN;
    cli->size = "ci";
    cli->all_dtypes = 1;
    cli->algo = EQ_ALGO_RING;
    cli->seed = 1234;
    cli->backend = "cpu";
    cli->transport = "sim";
    cli->format = EQ_FORMAT_MARKDOWN;
    cli->growth = 1.5;
    int n_positional = 0;
    const char *positional[3] = {0};
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) cli->command = EQ_CMD_HELP;
        else if (strcmp(arg, "--version") == 0) cli->command = EQ_CMD_VERSION;
        else if (strcmp(arg, "--list") == 0) cli->command = EQ_CMD_LIST;
        else if (strcmp(arg, "--verbose") == 0 || strcmp(arg, "-v") == 0) cli->verbose = 1;
        else if (strcmp(arg, "--forward-only") == 0) cli->forward_only = 1;
        else if (strcmp(arg, "--truth") == 0) cli->truth = 1;
        else if (strcmp(arg, "--update") == 0) cli->update = 1;
        else if (strncmp(arg, "--", 2) == 0) {
            const char *eq = strchr(arg, '=');
            char opt[64];
            const char *val;
            if (eq != NULL) {
                snprintf(opt, sizeof opt, "%.*s", (int)(eq - arg), arg);
                val = eq + 1;
            } else {
                snprintf(opt, sizeof opt, "%s", arg);
                if (i + 1 >= argc) return EQ_FAIL(EQ_ERR_USAGE, "%s needs a value (see equiv --help)", arg);
                val = argv[++i];
            }
            eq_status st = parse_option(cli, opt, val);
            if (st != EQ_OK) return st;
        } else {
            if (n_positional == 3) return EQ_FAIL(EQ_ERR_USAGE, "unexpected argument '%s'", arg);
            positional[n_positional++] = arg;
        }
    }
    if (cli->command == EQ_CMD_HELP || cli->command == EQ_CMD_VERSION || cli->command == EQ_CMD_LIST) return EQ_OK;
    if (n_positional > 0 && strcmp(positional[0], "run") != 0 && strcmp(cli->transport, "sim") != 0)
        return EQ_FAIL(EQ_ERR_USAGE, "--comm %s runs one case (equiv --case NAME --comm %s); '%s' runs on sim only",
                       cli->transport, cli->transport, positional[0]);
    if (n_positional > 0 && strcmp(positional[0], "compare") == 0) {
        if (n_positional != 3) return EQ_FAIL(EQ_ERR_USAGE, "compare needs two dumps: equiv compare REF.h5 TEST.h5");
        cli->command = EQ_CMD_COMPARE;
        cli->compare_paths[0] = positional[1];
        cli->compare_paths[1] = positional[2];
        return EQ_OK;
    }
    if (n_positional > 0 && strcmp(positional[0], "diff") == 0) {
        if (n_positional != 3) return EQ_FAIL(EQ_ERR_USAGE, "diff needs two reports: equiv diff BASE.json HEAD.json");
        cli->command = EQ_CMD_DIFF;
        cli->compare_paths[0] = positional[1];
        cli->compare_paths[1] = positional[2];
        return EQ_OK;
    }
    static const struct {
        const char *name;
        eq_command command;
    } single_word[] = {{"list", EQ_CMD_LIST}, {"matrix", EQ_CMD_MATRIX}, {"golden", EQ_CMD_GOLDEN}};
    for (size_t i = 0; n_positional == 1 && i < sizeof single_word / sizeof single_word[0]; i++) {
        if (strcmp(positional[0], single_word[i].name) == 0) {
            cli->command = single_word[i].command;
            return EQ_OK;
        }
    }
    if (n_positional > 0 && !(strcmp(positional[0], "run") == 0 && n_positional == 1))
        return EQ_FAIL(EQ_ERR_USAGE, "unknown command '%s' (known: run, compare, diff, matrix, golden, list)",
                       positional[0]);
    if (cli->case_name == NULL) return EQ_FAIL(EQ_ERR_USAGE, "no --case given (see equiv --list)");
    return EQ_OK;
}
