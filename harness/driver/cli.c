#include "harness/driver/cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "equiv_config.h"
#include "harness/optimizer.h"
#include "harness/driver/runner.h"
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
           "  equiv matrix [--case NAME] [--dtype D] [--size S] [--algo A] [--seed N] [--out DIR]\n"
           "                                                   every case x layout x dtype, one summary\n"
           "  equiv golden [--update] [--case NAME]            check (or rewrite) golden/envelopes\n"
           "  equiv bench [--only NAME[,NAME]] [--quick] [--out DIR]\n"
           "                                                   time, memory, GEMM rate and time per phase\n"
           "                                                   of set runs (README: `equiv bench`)\n"
           "  equiv --list                                     cases, layouts, dtypes; algorithms,\n"
           "                                                   backends and comms (what this build lacks too)\n"
           "  equiv --help | --version\n"
           "\n"
           "run options:\n"
           "  --case NAME        a case file in cases/ (see --list)\n"
           "  --tp N, --dp N     the layout to check; without either, every layout the case lists\n"
           "  --dtype D          bf16, fp32 (default: every dtype the case lists)\n"
           "  --algo A           all-reduce order and rounding: ring (NCCL, default), tree, fp32acc, seq;\n"
           "                     mpi: MPI's own MPI_Allreduce (with --comm mpi); tp_invariant: no\n"
           "                     all-reduce over tp, each tp rank continues the previous one's fp32\n"
           "                     sum over K (tp = 1, 2, 4 bit-identical; --comm sim, --backend cpu)\n"
           "  --nccl-channels N  ring: the channels NCCL's all-reduce runs on, 1..64 (default 1), and\n"
           "  --nccl-proto P     its protocol: simple (default), ll, ll128; they place each element in\n"
           "                     its chunk as NCCL does (--comm sim; recorded in the dump)\n"
           "  --size S           ci (default, seconds) or docs (the source documents' shapes)\n"
           "  --seed N           seed of the counter-based RNG (default " EQ_SEED_DEFAULT_TEXT ")\n"
           "  --grads C          data-parallel gradient convention: avg (DDP, default) or sum\n"
           "  --numerics N       gpt only: equiv (its own init), megatron (Megatron-Core's init: N(0, 0.02),\n"
           "                     output layers / sqrt(2 layers)), megatron_tf32 (and fp32 GEMMs in TF32);\n"
           "                     default: the size's megatron_init and tf32 keys\n"
           "  --inject BUG       plant a bug in the layout's run (not the reference), to see it caught; a\n"
           "                     case takes its model's bugs only: skip_allreduce (row_parallel, mlp_stack,\n"
           "                     gpt), shard_offset (column_parallel, mlp_stack, gpt), grad_avg_twice (gpt);\n"
           "                     ci_grad_avg, faith_every_rank, local_count, imp_min_no_world_size\n"
           "                     (spd, with --grads sum); local_count, ddp_sync, rank_sampling,\n"
           "                     var_fp32, bars_dot_one_rank (probe); repeatable\n"
           "  --forward-only     the forward pass alone (no backward, no gradients captured)\n"
           "  --truth            also run the step in fp64 and say whether the layout is less accurate\n"
           "                     than the reference or only rounded differently\n"
           "  --steps N          train N optimizer steps, the layout beside the reference, and report the\n"
           "                     divergence curve: rounding (bounded) or a bug (a factor, growth); the\n"
           "                     first step is the run's dumps and tables (default 1; gpt; --comm sim)\n"
           "  --optimizer O      with --steps: adam (default, torch's defaults) or sgd, on fp32 master\n"
           "                     weights\n"
           "  --lr X             with --steps: the learning rate (default: the optimizer's, README)\n"
           "  --backend B        cpu (default) or cuda (cuBLAS GEMMs; needs a build with CUDA and a GPU)\n"
           "  --comm C           sim (default: every rank in this process, collectives emulated);\n"
           "                     mpi: one rank per process under mpirun/srun (-np = dp x tp), rank 0\n"
           "                     computes the reference, compares and writes; nccl: one rank per GPU\n"
           "compare options:\n"
           "  --truth DIR        (after compare) the reference's step one precision up (fp32 for a bf16\n"
           "                     run, fp64 for fp32): a layout less accurate than the reference by more\n"
           "                     than rounding allows is not as expected\n"
           "  --expect E         bit_exact, within (default), differs, must_fail\n"
           "  --tolerance NAME   entry of the tolerance file (default: the case's entry for the dtype;\n"
           "                     a run of no case: default_<dtype>, which the report names)\n"
           "  --atol A, --rtol R |d| <= A + R |ref| for every tensor, instead of an entry\n"
           "  --comm mpi         under mpirun -np P / srun -n P: the tensors split over the P processes,\n"
           "                     each reading its own from the runs' files, rank 0 writing the report\n"
           "                     (the same as one process's)\n"
           "bench options:\n"
           "  --only NAMES       the workloads to run, comma-separated (default: all; names in the table\n"
           "                     equiv bench prints, e.g. row_parallel_bf16)\n"
           "  --quick            every workload at a tiny size (seconds: a smoke test of the command)\n"
           "common options (the commands that take each):\n"
           "  --out DIR          write the dumps (.h5), report.md, report.json and report.html there\n"
           "                     (run, compare, diff, matrix; bench: bench.json)\n"
           "  --format F         md (default), json or html on standard output (also --report F)\n"
           "                     (run, compare, matrix)\n"
           "  --cases-dir DIR    where case files live (default: $EQUIV_HOME/cases, else the installed or source tree's cases/) (all but diff)\n"
           "  --tolerances FILE  tolerance table (default: golden/tolerances.ini) (all but diff, list)\n"
           "  -v, --verbose      progress lines on standard error when it is not a terminal (on a\n"
           "                     terminal one progress line is redrawn in place without -v)\n"
           "An option given to a command that does not take it, or given twice (but --inject), is an\n"
           "error, and so is --numerics or --inject that the case's model does not apply. matrix also\n"
           "takes --size, --algo, --seed, --dtype; golden --update and --case.\n"
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

/* The longest path an option or argument may name (the commands build paths under it). */
#define CLI_PATH_MAX 1000

/* Every option, once: its names, whether it takes a value, whether it may be given more than once,
 * and the commands that take it (what each command really reads: harness/driver/commands.c,
 * cmd_matrix.c). Any other option, twice, or given to a command that does not take it, is one
 * error line before anything runs. */
typedef enum {
    OPT_CASE, OPT_SIZE, OPT_TP, OPT_DP, OPT_DTYPE, OPT_ALGO, OPT_NCCL_CHANNELS, OPT_NCCL_PROTO, OPT_SEED, OPT_GRADS,
    OPT_NUMERICS, OPT_INJECT, OPT_FORWARD_ONLY,
    OPT_TRUTH, OPT_STEPS, OPT_OPTIMIZER, OPT_LR, OPT_BACKEND, OPT_COMM, OPT_EXPECT, OPT_TOLERANCE, OPT_ATOL, OPT_RTOL, OPT_GROWTH, OPT_UPDATE,
    OPT_ONLY, OPT_QUICK, OPT_OUT, OPT_FORMAT, OPT_CASES_DIR, OPT_TOLERANCES, OPT_VERBOSE, OPT_LIST, OPT_HELP,
    OPT_VERSION, OPT_COUNT
} option_id;

#define RUN (1u << EQ_CMD_RUN)
#define COMPARE (1u << EQ_CMD_COMPARE)
#define DIFF (1u << EQ_CMD_DIFF)
#define MATRIX (1u << EQ_CMD_MATRIX)
#define GOLDEN (1u << EQ_CMD_GOLDEN)
#define LIST (1u << EQ_CMD_LIST)
#define BENCH (1u << EQ_CMD_BENCH)
#define ANY (RUN | COMPARE | DIFF | MATRIX | GOLDEN | LIST | BENCH)

typedef struct {
    const char *name, *alias;
    int takes_value, repeatable;
    unsigned commands;
} option_spec;

static const option_spec options[OPT_COUNT] = {
    [OPT_CASE] = {"--case", NULL, 1, 0, RUN | MATRIX | GOLDEN},
    [OPT_SIZE] = {"--size", NULL, 1, 0, RUN | MATRIX},
    [OPT_TP] = {"--tp", NULL, 1, 0, RUN},
    [OPT_DP] = {"--dp", NULL, 1, 0, RUN},
    [OPT_DTYPE] = {"--dtype", NULL, 1, 0, RUN | MATRIX},
    [OPT_ALGO] = {"--algo", NULL, 1, 0, RUN | MATRIX},
    [OPT_NCCL_CHANNELS] = {"--nccl-channels", NULL, 1, 0, RUN},
    [OPT_NCCL_PROTO] = {"--nccl-proto", NULL, 1, 0, RUN},
    [OPT_SEED] = {"--seed", NULL, 1, 0, RUN | MATRIX},
    [OPT_GRADS] = {"--grads", NULL, 1, 0, RUN},
    [OPT_NUMERICS] = {"--numerics", NULL, 1, 0, RUN},
    [OPT_INJECT] = {"--inject", NULL, 1, 1, RUN},
    [OPT_FORWARD_ONLY] = {"--forward-only", NULL, 0, 0, RUN},
    [OPT_TRUTH] = {"--truth", NULL, 0, 0, RUN | COMPARE}, /* compare: --truth DIR (read in eq_cli_parse) */
    [OPT_STEPS] = {"--steps", NULL, 1, 0, RUN},
    [OPT_OPTIMIZER] = {"--optimizer", NULL, 1, 0, RUN},
    [OPT_LR] = {"--lr", NULL, 1, 0, RUN},
    [OPT_BACKEND] = {"--backend", NULL, 1, 0, RUN},
    [OPT_COMM] = {"--comm", "--transport", 1, 0, RUN | COMPARE},
    [OPT_EXPECT] = {"--expect", NULL, 1, 0, COMPARE},
    [OPT_TOLERANCE] = {"--tolerance", NULL, 1, 0, COMPARE},
    [OPT_ATOL] = {"--atol", NULL, 1, 0, COMPARE},
    [OPT_RTOL] = {"--rtol", NULL, 1, 0, COMPARE},
    [OPT_GROWTH] = {"--growth", NULL, 1, 0, DIFF},
    [OPT_UPDATE] = {"--update", NULL, 0, 0, GOLDEN},
    [OPT_ONLY] = {"--only", NULL, 1, 0, BENCH},
    [OPT_QUICK] = {"--quick", NULL, 0, 0, BENCH},
    [OPT_OUT] = {"--out", NULL, 1, 0, RUN | COMPARE | DIFF | MATRIX | BENCH},
    [OPT_FORMAT] = {"--format", "--report", 1, 0, RUN | COMPARE | MATRIX},
    [OPT_CASES_DIR] = {"--cases-dir", NULL, 1, 0, RUN | COMPARE | MATRIX | GOLDEN | LIST},
    [OPT_TOLERANCES] = {"--tolerances", NULL, 1, 0, RUN | COMPARE | MATRIX | GOLDEN},
    [OPT_VERBOSE] = {"--verbose", "-v", 0, 0, RUN | COMPARE | MATRIX | GOLDEN | BENCH},
    [OPT_LIST] = {"--list", NULL, 0, 0, LIST},
    [OPT_HELP] = {"--help", "-h", 0, 1, ANY},
    [OPT_VERSION] = {"--version", NULL, 0, 1, ANY},
};

static const char *const command_names[] = {
    [EQ_CMD_RUN] = "run", [EQ_CMD_COMPARE] = "compare", [EQ_CMD_DIFF] = "diff", [EQ_CMD_MATRIX] = "matrix",
    [EQ_CMD_GOLDEN] = "golden", [EQ_CMD_LIST] = "list", [EQ_CMD_BENCH] = "bench",
};

/* The option named by arg up to '=' (or its end), or OPT_COUNT. */
static option_id find_option(const char *arg, size_t len)
{
    for (int i = 0; i < OPT_COUNT; i++) {
        const char *names[2] = {options[i].name, options[i].alias};
        for (int k = 0; k < 2; k++)
            if (names[k] != NULL && strlen(names[k]) == len && strncmp(arg, names[k], len) == 0) return (option_id)i;
    }
    return OPT_COUNT;
}

static eq_status check_path(const char *what, const char *path)
{
    if (strlen(path) > CLI_PATH_MAX)
        return EQ_FAIL(EQ_ERR_USAGE, "%s: a path of %zu characters (at most %d)", what, strlen(path), CLI_PATH_MAX);
    return EQ_OK;
}

static eq_status parse_real(const char *opt, const char *val, double lo, double hi, double *out)
{
    char *end = NULL;
    double v = strtod(val, &end);
    if (end == val || *end != '\0' || !(v >= lo && v < hi))
        return EQ_FAIL(EQ_ERR_USAGE, "%s wants a finite number in [%g, %g), got '%s'", opt, lo, hi, val);
    *out = v;
    return EQ_OK;
}

/* One option's value into cli. */
static eq_status parse_value(eq_cli *cli, option_id id, const char *val)
{
    const char *opt = options[id].name;
    long long v = 0;
    eq_status st = EQ_OK;
    switch (id) {
    case OPT_CASE:
        /* a file name in the cases folder (harness/case_file.h): said here, before it is taken for a path */
        if (strlen(val) >= EQ_CASE_KEY_MAX)
            st = EQ_FAIL(EQ_ERR_USAGE, "--case: a case name of %zu characters is longer than %d characters "
                         "('%.20s...')", strlen(val), EQ_CASE_KEY_MAX - 1, val);
        cli->case_name = val;
        break;
    case OPT_SIZE: cli->size = val; break;
    case OPT_TP:
    case OPT_DP:
        st = parse_int(opt, val, 1, 1024, &v);
        *(id == OPT_TP ? &cli->tp : &cli->dp) = (int)v;
        break;
    case OPT_DTYPE:
        cli->all_dtypes = strcmp(val, "all") == 0;
        if (!cli->all_dtypes) st = eq_dtype_parse(val, &cli->dtype);
        break;
    case OPT_ALGO: st = eq_algo_parse(val, &cli->algo); break;
    case OPT_NCCL_CHANNELS:
        st = parse_int(opt, val, 1, EQ_NCCL_MAX_CHANNELS, &v);
        cli->nccl.channels = (int)v;
        break;
    case OPT_NCCL_PROTO: st = eq_nccl_proto_parse(val, &cli->nccl.proto); break;
    case OPT_SEED:
        st = parse_int(opt, val, 0, INT64_MAX, &v);
        cli->seed = (uint64_t)v;
        break;
    case OPT_GRADS: {
        eq_grad_convention c = EQ_GRAD_AVG;
        st = eq_grad_convention_parse(val, &c);
        cli->grads = (int)c;
        break;
    }
    case OPT_NUMERICS: {
        eq_numerics n = EQ_NUMERICS_EQUIV;
        st = eq_numerics_parse(val, &n);
        cli->numerics = (int)n;
        break;
    }
    case OPT_INJECT: {
        eq_bug bug = EQ_BUG_NONE;
        st = eq_bug_parse(val, &bug);
        if (st == EQ_OK && (cli->bugs & (unsigned)bug))
            st = EQ_FAIL(EQ_ERR_USAGE, "--inject %s given twice", val);
        cli->bugs |= (unsigned)bug;
        break;
    }
    case OPT_STEPS:
        st = parse_int(opt, val, 1, EQ_STEPS_MAX, &v);
        cli->steps = (int)v;
        break;
    case OPT_OPTIMIZER: {
        eq_optimizer_kind k = EQ_OPT_ADAM;
        st = eq_optimizer_parse(val, &k);
        cli->optimizer = (int)k;
        cli->has_optimizer = 1;
        break;
    }
    case OPT_LR:
        st = parse_real(opt, val, 0.0, 1e300, &cli->lr);
        if (st == EQ_OK && !(cli->lr > 0.0)) st = EQ_FAIL(EQ_ERR_USAGE, "--lr wants a learning rate > 0, got '%s'", val);
        cli->has_lr = 1;
        break;
    case OPT_BACKEND: cli->backend = val; break;
    case OPT_COMM:
        st = eq_comm_find(val, &cli->comm);
        if (st != EQ_OK) cli->comm = NULL; /* which ranks print the error: main.c */
        break;
    case OPT_EXPECT:
        cli->has_expect = 1;
        if (eq_expect_parse(val, &cli->expect) != EQ_OK) {
            eq_error_clear();
            st = EQ_FAIL(EQ_ERR_USAGE, "unknown expectation '%s' (known: bit_exact, within, differs, must_fail)", val);
        }
        break;
    case OPT_TOLERANCE:
        if (strlen(val) >= EQ_TOL_NAME_MAX)
            st = EQ_FAIL(EQ_ERR_USAGE, "--tolerance names an entry of at most %d characters, got '%s'",
                         EQ_TOL_NAME_MAX - 1, val);
        cli->tolerance_name = val;
        break;
    case OPT_ATOL:
    case OPT_RTOL:
        st = parse_real(opt, val, 0.0, 1e300, id == OPT_ATOL ? &cli->atol : &cli->rtol);
        cli->has_atol_rtol = 1;
        break;
    case OPT_GROWTH: st = parse_real(opt, val, 1.0, 1e6, &cli->growth); break;
    case OPT_ONLY: cli->only = val; break;
    case OPT_OUT:
        st = check_path(opt, val);
        cli->out_dir = val;
        break;
    case OPT_FORMAT: st = parse_format(val, &cli->format); break;
    case OPT_CASES_DIR:
        st = check_path(opt, val);
        cli->cases_dir = val;
        break;
    case OPT_TOLERANCES:
        st = check_path(opt, val);
        cli->tolerances_path = val;
        break;
    default: st = EQ_FAIL(EQ_ERR_INTERNAL, "option %s has no value to parse", opt);
    }
    return st;
}

/* A flag (an option without a value) into cli. */
static void set_flag(eq_cli *cli, option_id id)
{
    switch (id) {
    case OPT_FORWARD_ONLY: cli->forward_only = 1; break;
    case OPT_TRUTH: cli->truth = 1; break;
    case OPT_UPDATE: cli->update = 1; break;
    case OPT_QUICK: cli->quick = 1; break;
    case OPT_VERBOSE: cli->verbose = 1; break;
    default: break; /* --list, --help, --version: the command, picked after every argument is read */
    }
}

static int is_command_word(const char *word)
{
    for (int c = 0; c < (int)(sizeof command_names / sizeof command_names[0]); c++)
        if (command_names[c] != NULL && strcmp(word, command_names[c]) == 0) return 1;
    return 0;
}

/* The command the positional arguments name (and its operands), or an error. */
static eq_status pick_command(eq_cli *cli, const char *const *positional, int n_positional, int list_flag)
{
    if (n_positional == 0) {
        cli->command = list_flag ? EQ_CMD_LIST : EQ_CMD_RUN;
        return EQ_OK;
    }
    const char *word = positional[0];
    int cmd = -1;
    for (int c = 0; c < (int)(sizeof command_names / sizeof command_names[0]); c++)
        if (command_names[c] != NULL && strcmp(word, command_names[c]) == 0) cmd = c;
    if (cmd < 0)
        return EQ_FAIL(EQ_ERR_USAGE, "unknown command '%s' (known: run, compare, diff, matrix, golden, list, bench)", word);
    if (list_flag && cmd != EQ_CMD_LIST)
        return EQ_FAIL(EQ_ERR_USAGE, "--list is a command of its own (equiv list); not with '%s'", word);
    cli->command = (eq_command)cmd;
    if (cmd == EQ_CMD_COMPARE || cmd == EQ_CMD_DIFF) {
        if (n_positional != 3)
            return EQ_FAIL(EQ_ERR_USAGE, cmd == EQ_CMD_COMPARE ? "compare needs two dumps: equiv compare REF.h5 TEST.h5"
                                                               : "diff needs two reports: equiv diff BASE.json HEAD.json");
        for (int i = 0; i < 2; i++) {
            eq_status st = check_path(word, positional[1 + i]);
            if (st != EQ_OK) return st;
            cli->compare_paths[i] = positional[1 + i];
        }
        return EQ_OK;
    }
    if (n_positional > 1)
        return EQ_FAIL(EQ_ERR_USAGE, "unexpected argument '%s' (%s takes no argument)", positional[1], word);
    return EQ_OK;
}

/* --steps with the options it goes with: a many-step run keeps both runs in this process. */
static eq_status check_steps(const eq_cli *cli)
{
    if (cli->steps > 1 && cli->comm != NULL && cli->comm->multi_process)
        return EQ_FAIL(EQ_ERR_USAGE, "--steps %d runs under --comm sim only (both runs train in this process; "
                       "--comm %s is not supported yet)", cli->steps, cli->comm->name);
    if (cli->steps > 1 && cli->forward_only)
        return EQ_FAIL(EQ_ERR_USAGE, "--steps %d trains on the gradients: not with --forward-only", cli->steps);
    if (cli->steps <= 1 && (cli->has_optimizer || cli->has_lr))
        return EQ_FAIL(EQ_ERR_USAGE, "--%s sets the optimizer of a many-step run: give --steps N with N > 1",
                       cli->has_optimizer ? "optimizer" : "lr");
    return EQ_OK;
}

static const char opt_name_truth[] = "--truth";

eq_status eq_cli_parse(int argc, char **argv, eq_cli *cli)
{
    memset(cli, 0, sizeof *cli);
    cli->command = EQ_CMD_RUN;
    cli->size = "ci";
    cli->all_dtypes = 1;
    cli->algo = EQ_ALGO_RING;
    cli->seed = EQ_SEED_DEFAULT;
    cli->backend = "cpu";
    cli->comm = &eq_comms[0]; /* the default: sim (harness/comms.h) */
    cli->format = EQ_FORMAT_MARKDOWN;
    cli->growth = 1.5;
    cli->numerics = -1;
    cli->steps = 1;
    cli->optimizer = EQ_OPT_ADAM;
    int n_positional = 0, seen[OPT_COUNT] = {0};
    const char *positional[3] = {0};
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (arg[0] != '-' || arg[1] == '\0') { /* a command word or an operand ("-" too) */
            if (n_positional == 3) return EQ_FAIL(EQ_ERR_USAGE, "unexpected argument '%s'", arg);
            positional[n_positional++] = arg;
            continue;
        }
        const char *eq = strncmp(arg, "--", 2) == 0 ? strchr(arg, '=') : NULL;
        const size_t name_len = eq ? (size_t)(eq - arg) : strlen(arg);
        const option_id id = find_option(arg, name_len);
        if (id == OPT_COUNT)
            return EQ_FAIL(EQ_ERR_USAGE, "unknown option '%.*s' (see equiv --help)", (int)name_len, arg);
        const option_spec *spec = &options[id];
        if (++seen[id] > 1 && !spec->repeatable)
            return EQ_FAIL(EQ_ERR_USAGE, "option %s given twice (it takes one value; the last would win)", spec->name);
        /* `equiv compare REF TEST --truth DIR`: there --truth names the truth run; a run's is a flag */
        const int compare_truth = id == OPT_TRUTH && n_positional > 0 && strcmp(positional[0], "compare") == 0;
        if (!spec->takes_value && !compare_truth) {
            if (eq != NULL) return EQ_FAIL(EQ_ERR_USAGE, "option %s takes no value, got '%s'", spec->name, arg);
            set_flag(cli, id);
            continue;
        }
        const char *val = eq != NULL ? eq + 1 : i + 1 < argc ? argv[++i] : NULL;
        if (val == NULL) return EQ_FAIL(EQ_ERR_USAGE, "option %.*s needs a value (see equiv --help)", (int)name_len, arg);
        if (val[0] == '\0' || (eq == NULL && strncmp(val, "--", 2) == 0))
            return EQ_FAIL(EQ_ERR_USAGE, "option %.*s needs a value, got '%s' (see equiv --help)", (int)name_len, arg,
                           val);
        eq_status st = compare_truth ? check_path(opt_name_truth, val) : parse_value(cli, id, val);
        if (st != EQ_OK) return st;
        if (compare_truth) cli->truth_path = val;
    }
    /* --help and --version answer whatever options are given (once they parse) and a command word
     * (`equiv compare --help`), but no other argument: `equiv --version extra` is a mistake. */
    if (seen[OPT_HELP] || seen[OPT_VERSION]) {
        const char *flag = seen[OPT_HELP] ? "--help" : "--version";
        if (n_positional > 1 || (n_positional == 1 && !is_command_word(positional[0])))
            return EQ_FAIL(EQ_ERR_USAGE, "%s takes no argument, got '%s'", flag,
                           positional[is_command_word(positional[0]) ? 1 : 0]);
        cli->command = seen[OPT_HELP] ? EQ_CMD_HELP : EQ_CMD_VERSION;
        return EQ_OK;
    }
    eq_status st = pick_command(cli, positional, n_positional, seen[OPT_LIST]);
    if (st != EQ_OK) return st;
    for (int i = 0; i < OPT_COUNT; i++) {
        if (seen[i] && !(options[i].commands & (1u << cli->command))) {
            return EQ_FAIL(EQ_ERR_USAGE, "option %s does not apply to `equiv %s`%s", options[i].name,
                           command_names[cli->command],
                           cli->command == EQ_CMD_RUN ? " (equiv --case NAME)" : "");
        }
    }
    if (cli->command == EQ_CMD_COMPARE && cli->truth && cli->truth_path == NULL)
        return EQ_FAIL(EQ_ERR_USAGE, "compare takes --truth DIR after the word compare (the truth run: the "
                       "reference's step one precision up)");
    if (cli->command == EQ_CMD_COMPARE && cli->comm != NULL && !cli->comm->compares)
        return EQ_FAIL(EQ_ERR_USAGE, "compare takes --comm sim (one process) or --comm mpi (the tensors split over "
                       "the processes of mpirun or srun), not --comm %s", cli->comm->name);
    if (cli->command == EQ_CMD_RUN && cli->case_name == NULL)
        return EQ_FAIL(EQ_ERR_USAGE, "no --case given (see equiv --list)");
    return check_steps(cli);
}
