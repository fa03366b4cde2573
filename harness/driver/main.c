/* equiv: the command line. Only this file picks exit codes: 0 as expected, 1 a comparison not as
 * expected, 2 a usage or input error (one line on standard error). */
#include <errno.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "equiv_config.h"
#include "harness/driver/cli.h"
#include "harness/driver/commands.h"
#include "harness/dump.h"
#include "harness/base/env.h"
#include "harness/base/phase_time.h"
#include "reductions/world.h"

/* Under a multi-process --comm, once the ranks run together an error is printed by the rank it
 * happened on (reductions/world.h: eq_world_finish, eq_world_abort). Before that (a bad command line)
 * every rank meets the same error: rank 0 alone prints it, and the others wait a moment before
 * exiting, since the first rank to exit with an error makes the launcher end the rest. */
static int prints_errors(const eq_cli *cli)
{
    eq_rank_env env;
    if (eq_world_error_printed()) return 0;
    if (cli->comm != NULL && !cli->comm->multi_process) return 1; /* NULL: --comm unknown, maybe under a launcher */
    if (eq_rank_env_read(eq_env_get, &env) != EQ_OK || env.rank == 0) return 1;
    const struct timespec moment = {1, 0};
    nanosleep(&moment, NULL);
    return 0;
}

/* glibc maps a block above its mmap threshold (at most 32 MiB, raised as such blocks are freed)
 * afresh on every malloc and gives the top of the heap back above its trim threshold, so that
 * each GEMM's tp partials, each attention's [S, S] scores and each block's activations at the
 * docs sizes were page-faulted in anew on every call (4.2 million faults in gpt docs
 * forward-only, 13 s of system time). Blocks up to 64 MiB come from the heap, and up to 256 MiB
 * of freed heap is kept for the next call. */
static void keep_freed_blocks(void)
{
    mallopt(M_MMAP_THRESHOLD, 64 << 20);
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
}

/* Standard output written out: what was printed but never reached its file (a full disk,
 * `> /dev/full`, a closed pipe's EPIPE) is an error, not exit 0 with the report lost. */
static eq_status finish_stdout(void)
{
    if (fflush(stdout) != 0) return EQ_FAIL(EQ_ERR_IO, "cannot write to standard output: %s", strerror(errno));
    if (ferror(stdout)) return EQ_FAIL(EQ_ERR_IO, "cannot write to standard output (a write to it failed)");
    return EQ_OK;
}

int main(int argc, char **argv)
{
    keep_freed_blocks();
    /* A write past the file-size limit (ulimit -f) fails with EFBIG, reported in one line as any
     * failed write is and cleaned up after, instead of SIGXFSZ ending equiv mid-file. */
    signal(SIGXFSZ, SIG_IGN);
    eq_dump_set_command(argc, argv); /* recorded in every dump's root */
    eq_phase_times_start();          /* with EQUIV_PHASE_TIMES=PATH (harness/base/phase_time.h) */
    eq_cli cli;
    int n_unexpected = 0;
    eq_status st = eq_cli_parse(argc, argv, &cli);
    /* the settings equiv reads from its environment, each well formed (--help and --version read none) */
    if (st == EQ_OK && cli.command != EQ_CMD_HELP && cli.command != EQ_CMD_VERSION) st = eq_env_check();
    if (st == EQ_OK) {
        switch (cli.command) {
        case EQ_CMD_HELP: eq_cli_print_help(); break;
        case EQ_CMD_VERSION: printf("equiv %s\n", EQUIV_VERSION); break;
        case EQ_CMD_LIST: st = eq_cmd_list(&cli); break;
        case EQ_CMD_RUN: st = eq_cmd_run(&cli, &n_unexpected); break;
        case EQ_CMD_COMPARE: st = eq_cmd_compare(&cli, &n_unexpected); break;
        case EQ_CMD_DIFF: st = eq_cmd_diff(&cli, &n_unexpected); break;
        case EQ_CMD_MATRIX: st = eq_cmd_matrix(&cli, &n_unexpected); break;
        case EQ_CMD_GOLDEN: st = eq_cmd_golden(&cli, &n_unexpected); break;
        case EQ_CMD_BENCH: st = eq_cmd_bench(&cli); break;
        }
    }
    if (st == EQ_OK) st = finish_stdout();
    if (st == EQ_OK) st = eq_phase_times_finish();
    if (st != EQ_OK) {
        if (!prints_errors(&cli)) return eq_status_exit_code(st);
        fprintf(stderr, "equiv: error: %s [%s]\n", eq_error_message(), eq_error_where());
        return eq_status_exit_code(st);
    }
    return n_unexpected > 0 ? 1 : 0;
}
