/* Rank discovery from the launcher's environment (reductions/world.h), without MPI: each launcher's
 * variables, the order of precedence, and malformed values. */
#include <stdio.h>
#include <string.h>

#include "harness/base/testing.h"
#include "reductions/world.h"

/* A stand-in environment: NULL-terminated name, value pairs. */
static const char *const *fake_env;

static const char *fake_get(const char *name)
{
    for (int i = 0; fake_env[i] != NULL; i += 2)
        if (strcmp(fake_env[i], name) == 0) return fake_env[i + 1];
    return NULL;
}

static eq_status read_env(const char *const *env, eq_rank_env *out)
{
    fake_env = env;
    return eq_rank_env_read(fake_get, out);
}

static void test_launchers(void)
{
    eq_rank_env e;
    const char *none[] = {"HOME", "/root", NULL};
    EQ_EXPECT_OK(read_env(none, &e));
    EQ_EXPECT(!e.found && e.rank == 0 && e.size == 1 && e.local_rank == -1 && strcmp(e.source, "none") == 0,
              "no launcher: found %d rank %d of %d (%s)", e.found, e.rank, e.size, e.source);

    const char *ompi[] = {"OMPI_COMM_WORLD_RANK", "3", "OMPI_COMM_WORLD_SIZE", "8", "OMPI_COMM_WORLD_LOCAL_RANK", "1",
                          NULL};
    EQ_EXPECT_OK(read_env(ompi, &e));
    EQ_EXPECT(e.found && e.rank == 3 && e.size == 8 && e.local_rank == 1 && strcmp(e.source, "OMPI_COMM_WORLD") == 0,
              "mpirun: rank %d of %d local %d (%s)", e.rank, e.size, e.local_rank, e.source);

    const char *pmi[] = {"PMI_RANK", "5", "PMI_SIZE", "6", NULL};
    EQ_EXPECT_OK(read_env(pmi, &e));
    EQ_EXPECT(e.rank == 5 && e.size == 6 && e.local_rank == -1 && strcmp(e.source, "PMI") == 0, "PMI: %d of %d (%s)",
              e.rank, e.size, e.source);

    const char *slurm[] = {"SLURM_PROCID", "12", "SLURM_NTASKS", "16", "SLURM_LOCALID", "4", NULL};
    EQ_EXPECT_OK(read_env(slurm, &e));
    EQ_EXPECT(e.rank == 12 && e.size == 16 && e.local_rank == 4 && strcmp(e.source, "SLURM") == 0,
              "srun: %d of %d local %d (%s)", e.rank, e.size, e.local_rank, e.source);

    /* mpirun inside a SLURM allocation: SLURM_PROCID is that of the batch step, mpirun's own
     * variables win. */
    const char *both[] = {"SLURM_PROCID", "0", "SLURM_NTASKS", "1", "OMPI_COMM_WORLD_RANK", "2",
                          "OMPI_COMM_WORLD_SIZE", "4", NULL};
    EQ_EXPECT_OK(read_env(both, &e));
    EQ_EXPECT(e.rank == 2 && e.size == 4 && strcmp(e.source, "OMPI_COMM_WORLD") == 0, "mpirun under slurm: %d of %d (%s)",
              e.rank, e.size, e.source);
}

static void expect_usage(const char *const *env, const char *needle)
{
    eq_rank_env e;
    EQ_EXPECT(read_env(env, &e) == EQ_ERR_USAGE, "accepted (want an error naming %s)", needle);
    EQ_EXPECT(strstr(eq_error_message(), needle) != NULL, "message '%s' does not name %s", eq_error_message(), needle);
    eq_error_clear();
}

static void test_malformed(void)
{
    const char *not_int[] = {"OMPI_COMM_WORLD_RANK", "two", "OMPI_COMM_WORLD_SIZE", "4", NULL};
    expect_usage(not_int, "OMPI_COMM_WORLD_RANK='two'");
    const char *past_end[] = {"SLURM_PROCID", "4", "SLURM_NTASKS", "4", NULL};
    expect_usage(past_end, "rank 4 of 4");
    const char *half[] = {"PMI_RANK", "1", NULL};
    expect_usage(half, "PMI_SIZE");
    const char *zero_size[] = {"PMI_RANK", "0", "PMI_SIZE", "0", NULL};
    expect_usage(zero_size, "PMI_SIZE='0'");
    const char *negative_local[] = {"SLURM_PROCID", "0", "SLURM_NTASKS", "2", "SLURM_LOCALID", "-1", NULL};
    expect_usage(negative_local, "SLURM_LOCALID");
}

static void test_rank_grid(void)
{
    /* r = dp_rank * tp + tp_rank: the tp ranks of one replica are neighbours. */
    eq_layout l = {2, 4};
    int seen[2][4] = {{0}};
    for (int r = 0; r < 8; r++) {
        int d = eq_world_dp_rank(l, r), t = eq_world_tp_rank(l, r);
        EQ_EXPECT(d >= 0 && d < 2 && t >= 0 && t < 4 && d * 4 + t == r, "rank %d -> dp %d tp %d", r, d, t);
        if (d >= 0 && d < 2 && t >= 0 && t < 4) seen[d][t]++;
    }
    for (int d = 0; d < 2; d++)
        for (int t = 0; t < 4; t++) EQ_EXPECT(seen[d][t] == 1, "dp %d tp %d held by %d ranks", d, t, seen[d][t]);
    EQ_EXPECT(eq_world_is_root(NULL), "a single process writes");
    eq_world w = {0};
    w.rank = 1;
    EQ_EXPECT(!eq_world_is_root(&w), "rank 1 writes");
}

int main(void)
{
    test_launchers();
    test_malformed();
    test_rank_grid();
    return eq_test_finish("world_test");
}
