/* The command line: what the user asked for, parsed and checked, before anything runs. */
#ifndef EQUIV_HARNESS_DRIVER_CLI_H
#define EQUIV_HARNESS_DRIVER_CLI_H

#include <stdint.h>

#include "harness/case_file.h"
#include "harness/comms.h"
#include "reductions/collectives.h"

typedef enum {
    EQ_CMD_RUN,
    EQ_CMD_COMPARE,
    EQ_CMD_DIFF,
    EQ_CMD_MATRIX,
    EQ_CMD_GOLDEN,
    EQ_CMD_LIST,
    EQ_CMD_BENCH,
    EQ_CMD_HELP,
    EQ_CMD_VERSION,
} eq_command;
typedef enum { EQ_FORMAT_MARKDOWN, EQ_FORMAT_JSON, EQ_FORMAT_HTML } eq_format;

/* The most --steps a run takes (each step runs the reference and the layout again). */
#define EQ_STEPS_MAX 10000

typedef struct {
    eq_command command;
    /* run */
    const char *case_name;             /* run: the case; matrix, golden: a filter (NULL: every case) */
    const char *size;                  /* "ci" unless --size */
    int dp, tp;                        /* 0 = not given */
    int all_dtypes;                    /* no --dtype: every dtype the case lists */
    eq_dtype dtype;
    eq_algo algo;
    eq_nccl_config nccl;               /* --nccl-channels, --nccl-proto; zero: not given (the default) */
    uint64_t seed;
    const char *backend;
    const eq_comm *comm;               /* --comm: sim (default), mpi, nccl (harness/comms.h); NULL after
                                        * an unknown name */
    int grads;                         /* eq_grad_convention (models/model.h) */
    int numerics;                      /* eq_numerics; -1: not given (the size's keys decide) */
    unsigned bugs;                     /* eq_bug flags to inject into the layout's run, never the reference */
    int forward_only;                  /* --forward-only: no backward, no gradients */
    int truth;                         /* --truth: both runs also against the fp64 run (harness/truth.h) */
    const char *truth_path;            /* compare --truth DIR: the user's truth run (one precision up) */
    int steps;                         /* --steps N: optimizer steps of both runs (1: the one step; harness/driver/train.h) */
    int optimizer;                     /* --optimizer: an eq_optimizer_kind (harness/optimizer.h), adam unless given */
    int has_optimizer, has_lr;         /* given on the command line */
    double lr;                         /* --lr (has_lr), else the optimizer's default */
    /* compare (two dumps), diff (two report.json) */
    const char *compare_paths[2];
    double growth;                     /* diff: a layer regressed when its divergence grew past this factor */
    int update;                        /* golden --update */
    const char *only;                  /* bench --only NAME[,NAME]: those workloads (NULL: all) */
    int quick;                         /* bench --quick: every workload at a tiny size */
    int has_expect;
    eq_expect expect;
    const char *tolerance_name;        /* --tolerance ENTRY, else from the case or the dtype */
    int has_atol_rtol;                 /* --atol / --rtol given (the other is 0 unless given too) */
    double atol, rtol;
    /* both */
    const char *out_dir;               /* NULL: nothing written (bench: bench.json there) */
    eq_format format;
    const char *cases_dir;
    const char *tolerances_path;
    int verbose;
    /* compare, set by eq_cmd_compare_steps only (harness/driver/commands.h): where not NULL,
     * eq_cmd_compare moves its comparison here instead of writing reports */
    struct eq_comparison_sink *collect;
} eq_cli;

/* Parses argv into cli (defaults filled in). Unknown options and bad values are EQ_ERR_USAGE. */
eq_status eq_cli_parse(int argc, char **argv, eq_cli *cli);

void eq_cli_print_help(void);

#endif
