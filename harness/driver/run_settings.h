/* What every rank of a multi-process run (--comm mpi, nccl) must run alike, from its command line:
 * checked by one exchange when the ranks start (reductions/world.h: eq_world_settings), so that an
 * MPMD launch with another --seed, --case or --inject on some ranks is one line and exit 2 at the
 * start, not a collective timeout or a "numerical bug".
 *
 * The settings are the run's identity as harness/run_cell.c's field table has it (each shared row
 * under its key: case, size, dtype, dp, tp, algorithm, grads, numerics, nccl_channels, nccl_proto,
 * injected, seed, transport, backend, version, steps, optimizer, lr), and what the table does not
 * hold but a rank computes by: --forward-only, --truth, the build's git revision and the content
 * of the case file (not its path: a folder may be elsewhere on another node). Left out, as no
 * other rank's work depends on them: rank 0's outputs (--out, --format, -v), the tolerance table
 * (rank 0 alone judges) and the rows that describe a host (gemm_kernel, cpu, gpu) or a run equiv
 * did not compute (source, world_size, step, environment). run_settings_test holds every row of
 * the table to one of the two lists. */
#ifndef EQUIV_HARNESS_DRIVER_RUN_SETTINGS_H
#define EQUIV_HARNESS_DRIVER_RUN_SETTINGS_H

#include "harness/driver/cli.h"
#include "reductions/world.h"

/* The run's settings into *out (cases_dir: where its case file is read). */
void eq_run_settings(const eq_cli *cli, const char *cases_dir, eq_world_settings *out);

/* `equiv compare --comm mpi`: what every process must compare alike, since each computes the
 * evidence of some of the tensors: the build, the runs' paths, --truth, --expect, the tolerance
 * options and the content of the tolerance file (tolerances: its path). Left out: rank 0's outputs
 * (--out, --format, -v). */
void eq_compare_settings(const eq_cli *cli, const char *tolerances, eq_world_settings *out);

/* The keys of harness/run_cell.c's rows the ranks need not share (a NULL-terminated list). */
extern const char *const eq_run_settings_not_shared[];

#endif
