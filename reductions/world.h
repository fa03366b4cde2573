/* The rank world of a multi-process run (--comm mpi, and the bootstrap --comm nccl builds on):
 * who this process is, found from the launcher's environment (seed 003) and checked against MPI,
 * its dp and tp communicators, and the rule that only rank 0 writes.
 *
 * Ranks: world rank r = dp_rank * tp + tp_rank (Megatron's order: the tp ranks of one replica are
 * neighbours, so on a node they share its fast links). The tp group of r is the tp ranks of its
 * replica; its dp group the replicas' ranks with its tp_rank.
 *
 * Launch (README): `mpirun -np 4 ./build/equiv --case row_parallel --tp 4 --comm mpi`, or under
 * SLURM `srun -n 4 ./build/equiv ...`. The world size must equal dp * tp. */
#ifndef EQUIV_REDUCTIONS_WORLD_H
#define EQUIV_REDUCTIONS_WORLD_H

#include <stddef.h>
#include <stdint.h>

#include "harness/base/status.h"
#include "reductions/collectives.h"
#include "reductions/layout.h"

/* Where the launcher says this process is. */
typedef struct {
    int found;          /* 0: no launcher variable set (a plain single process: rank 0 of 1) */
    int rank, size;     /* world rank and size */
    int local_rank;     /* rank on this node (which GPU to use); -1 if the launcher does not say */
    const char *source; /* "OMPI_COMM_WORLD", "PMI", "MV2_COMM_WORLD", "SLURM" or "none" */
} eq_rank_env;

/* Reads, the first family that is set winning: OMPI_COMM_WORLD_RANK/_SIZE/_LOCAL_RANK (Open MPI's
 * mpirun), PMI_RANK/PMI_SIZE with MPI_LOCALRANKID (MPICH, Intel MPI), MV2_COMM_WORLD_RANK/_SIZE/
 * _LOCAL_RANK (MVAPICH2), SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID (srun). `get` is getenv or a
 * stand-in for tests. EQ_ERR_USAGE naming the variable if one is malformed, one of a family's pair
 * is missing, or rank >= size. */
eq_status eq_rank_env_read(const char *(*get)(const char *name), eq_rank_env *out);
/* getenv: eq_rank_env_read's `get` for this process's own environment. */
const char *eq_env_get(const char *name);

typedef struct {
    int rank, size, local_rank; /* world */
    int dp_rank, tp_rank;
    eq_layout layout;
    const eq_transport *transport;
    void *world_comm, *tp_comm, *dp_comm; /* the transport's handles (mpi: MPI_Comm *) */
    int initialized_mpi;                  /* this process called MPI_Init (and will finalize) */
    int watching;                         /* under the watch of reductions/mpi_watch.h (to stop) */
    int error_out;                        /* the job's error line is printed (the settings check) */
    /* --comm nccl: the collectives run on NCCL communicators over this MPI world (world_nccl.c);
     * the groups below replace the MPI ones, and `release_collectives` frees them first. */
    int has_collective_groups;
    eq_group collective_tp, collective_dp;
    void *collectives;                    /* the eq_nccl_world */
    void (*release_collectives)(void *collectives);
} eq_world;

/* Rank r of a dp x tp layout -> (dp_rank, tp_rank), and back. */
static inline int eq_world_dp_rank(eq_layout l, int rank) { return rank / l.tp; }
static inline int eq_world_tp_rank(eq_layout l, int rank) { return rank % l.tp; }

/* What every rank of a multi-process run must run alike: the run's identity (case, size, dtype,
 * layout, algorithm, bugs, seed, numerics, ...), the build, and the content of the files every
 * rank reads (the case file). Each setting as the error line shows it ("--seed 7") and a digest of
 * its whole value, which is what is compared (a file's content, not its path); the run fills it
 * from its command line (harness/driver/run_settings.h). Fixed size: one broadcast carries rank
 * 0's to every rank. */
enum { EQ_WORLD_SETTINGS_MAX = 32, EQ_WORLD_SETTING_KEY = 24, EQ_WORLD_SETTING_SHOWN = 200 };
typedef struct {
    char key[EQ_WORLD_SETTING_KEY];     /* what it is ("seed"): ranks match settings by it */
    char shown[EQ_WORLD_SETTING_SHOWN]; /* as the error line shows it ("--seed 7"), one line, cut to fit */
    uint64_t digest;                    /* of the whole value */
} eq_world_setting;
typedef struct {
    uint64_t digest; /* of every setting's key and digest: equal on every rank that runs alike */
    int n;
    eq_world_setting setting[EQ_WORLD_SETTINGS_MAX];
} eq_world_settings;

/* FNV-1a, 64 bits, of n bytes, continuing from h (EQ_DIGEST_START for a new digest). */
#define EQ_DIGEST_START 0xcbf29ce484222325ULL
uint64_t eq_digest(uint64_t h, const void *bytes, size_t n);
/* Adds a setting: key, and what the line shows (printf-style; control characters become '?').
 * digest 0: the digest of the whole shown text (before it is cut to fit). */
void eq_world_settings_add(eq_world_settings *s, const char *key, uint64_t digest, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
/* How many of rank `rank`'s settings differ from rank 0's (0: none); where any does, msg says the
 * first (in rank 0's order; one a rank lacks shows as "no KEY"): "rank 2 runs --seed 7, rank 0
 * --seed 1". */
int eq_world_settings_differ(const eq_world_settings *mine, int rank, const eq_world_settings *root, char *msg,
                             size_t len);

/* Starts MPI (unless already started), reads the environment, starts the watch
 * (reductions/mpi_watch.h) and, with settings, checks that every rank runs the same ones: rank 0's
 * are broadcast, each rank compares its own, and where any differs the first such rank prints
 * "equiv: error: rank 2 runs --seed 7, rank 0 --seed 1: every rank must run the same settings" and
 * every rank returns EQ_ERR_USAGE, the line out (eq_world_finish prints nothing more). Then it
 * checks the environment against MPI_Comm_rank/size and size == dp * tp (EQ_ERR_USAGE
 * otherwise), sets MPI_ERRORS_RETURN on every communicator and splits the tp and dp communicators.
 * EQ_ERR_USAGE "not built with MPI" when the build has none. On failure w is safe to free. */
eq_status eq_world_init_mpi(eq_world *w, eq_layout layout, const eq_world_settings *settings);

/* --comm nccl, after eq_world_init_mpi: one GPU per process (its local rank's), the NCCL world,
 * dp and tp communicators bootstrapped over this MPI world (reductions/nccl_transport.h); from
 * then on the world's groups are NCCL's. EQ_ERR_USAGE "built without NCCL" where the build has
 * none; a device or NCCL failure names the rank. */
eq_status eq_world_start_nccl(eq_world *w, eq_algo algo);

/* Frees the communicators and finalizes MPI if this world started it. Safe on a zeroed world. */
void eq_world_free(eq_world *w);

/* Does this process write dumps and reports and print? Rank 0 only; a NULL world (one process)
 * always. */
int eq_world_is_root(const eq_world *w);

/* The tp and dp groups of this process, reducing with `algo`: one local member, at its rank. */
eq_group eq_world_tp_group(const eq_world *w, eq_algo algo);
eq_group eq_world_dp_group(const eq_world *w, eq_algo algo);

/* Every rank's status after a step every rank takes: the first failing rank's status, the same on
 * all ranks (*failed_rank = that rank, -1 if none). Waits under the collective watchdog. */
eq_status eq_world_agree(const eq_world *w, eq_status mine, int *failed_rank);

/* The end of a run every rank reached (the same point on all): agrees on the outcome
 * (eq_world_agree; where rank 0 failed alone after eq_world_root_alone, it first ends the others'
 * wait), prints the first failing rank's error there ("equiv: error: rank R: ..."), then frees the
 * world (MPI_Finalize). Returns the agreed status; eq_world_error_printed() says whether the error
 * line is out. */
eq_status eq_world_finish(eq_world *w, eq_status mine);
int eq_world_error_printed(void);

/* Every rank, once the steps they take together are done: rank 0 goes on alone (the dp1-tp1
 * references, the comparisons, the reports) while the others wait in eq_world_share_int. That wait
 * is no collective: rank 0 sends signs of life, and the others wait as long as it lives
 * (reductions/mpi_watch.h). Rank 0 calls no MPI function until eq_world_share_int or
 * eq_world_finish. */
void eq_world_root_alone(const eq_world *w);

/* Rank 0's *value on every rank; the others wait for it without using the CPU. */
eq_status eq_world_share_int(const eq_world *w, int *value);

/* `bytes` bytes of buf from world rank `root` to every rank: how a transport bootstrapped over
 * this world shares its handle (NCCL: rank 0's ncclUniqueId before ncclCommInitRank). Under the
 * collective watchdog; an MPI error names the rank. */
eq_status eq_world_broadcast_bytes(const eq_world *w, void *buf, size_t bytes, int root);

/* Every rank's `bytes` bytes at mine to rank 0, which gets rank r's in parts[r] (malloc'd, its own
 * copied; the caller frees them) and their lengths in sizes[r], both arrays of w->size, in rank
 * order; the other ranks get nothing (parts and sizes unused). Messages of at most 1 GiB, so any
 * length goes. Under the collective watchdog; an MPI error names the rank. */
eq_status eq_world_gather_bytes(const eq_world *w, const void *mine, size_t bytes, void **parts, size_t *sizes);

/* A failure on this rank that the others cannot know of (they may be waiting in a collective):
 * prints "equiv: error: rank R: message [where]" (unless the job's error line is out already) and
 * ends every rank with exit status 2 (MPI_Abort). Does not return. */
void eq_world_abort(const eq_world *w);

#endif
