/* The environment variables equiv reads as settings, each parsed in one place (harness/base/env.c,
 * one table: name, what it holds, its range), so that a malformed one is refused in one line
 * (eq_env_check, before a command runs) rather than ignored without a word. Unset or empty: the
 * default. Each setting is read afresh at every call (tests set them while they run).
 *
 *   EQUIV_THREADS           workers of equiv's own threads, an integer in 1..1024 (harness/base/parallel.h)
 *   EQUIV_READ_TIMEOUT_S    seconds > 0 per file read (harness/dump_read_isolated.h)
 *   EQUIV_READ_MEMORY_MB    megabytes > 0 the isolated reader may map (harness/dump_read_isolated.h)
 *   EQUIV_READ_MAP_MB       megabytes >= 0 from which a tensor stored as it is, is mapped from its
 *                           file rather than read (default 1; harness/dump_read_isolated.h)
 *   EQUIV_PROGRESS_AFTER_S  seconds >= 0 before progress shows (harness/progress.h)
 *   EQUIV_CPU_GEMM          ordered, blas or padded: the CPU GEMM kernel forced (models/backend_cpu.c)
 *   SOURCE_DATE_EPOCH       the time dumps record, seconds since 1970 in 0..253402300799 (up to
 *                           9999-12-31T23:59:59Z; reproducible-builds.org's variable; harness/dump.c)
 *
 * Variables read elsewhere check themselves where they are read, in one line too:
 * EQUIV_COLLECTIVE_TIMEOUT_S (reductions/mpi_watch.c, nccl_transport.c), EQUIV_CUDA_DEVICE
 * (reductions/cuda_device.c), EQUIV_OPENBLAS_LIBRARY (harness/base/openblas.h); EQUIV_HOME,
 * EQUIV_PHASE_TIMES and EQUIV_OPENBLAS_CORETYPE name a folder, a file and a core, used as given. */
#ifndef EQUIV_HARNESS_BASE_ENV_H
#define EQUIV_HARNESS_BASE_ENV_H

#include "harness/base/status.h"

typedef enum {
    EQ_ENV_THREADS,
    EQ_ENV_READ_TIMEOUT_S,
    EQ_ENV_READ_MEMORY_MB,
    EQ_ENV_READ_MAP_MB,
    EQ_ENV_PROGRESS_AFTER_S,
    EQ_ENV_CPU_GEMM,
    EQ_ENV_SOURCE_DATE_EPOCH,
    EQ_ENV_COUNT
} eq_env_setting;

/* EQ_ERR_USAGE naming the first malformed setting, its value and what it wants
 * ("EQUIV_THREADS='abc' is not an integer in 1..1024; ..."); EQ_OK when every one set is well formed. */
eq_status eq_env_check(void);

/* A number setting's value: 1 with *out when it is set and well formed, else 0 (unset, empty or
 * malformed: the caller's default; eq_env_check has refused a malformed one before a command ran). */
int eq_env_number(eq_env_setting s, double *out);

/* A word setting's value (EQ_ENV_CPU_GEMM): the word when set to one it takes, else NULL. */
const char *eq_env_word(eq_env_setting s);

#endif
