/* The MPI transport against the sim transport, under `mpirun -np N` (reductions/meson.build).
 *
 *   check    every collective of reductions/collectives.h on the MPI transport, one member per
 *            process, for fp32 and bf16, SUM and AVG, every emulated algorithm and several counts.
 *            Each rank builds every member's input deterministically; rank 0 gathers every rank's
 *            result and recomputes the collective with the sim transport over all N inputs;
 *            the number of elements whose bits differ is broadcast and must be 0 on every rank.
 *            Then --algo mpi (MPI_Allreduce): in bf16 on 4 ranks it must equal the recursive-
 *            doubling bracketing ((x0 + x1) + (x2 + x3)) bit for bit and differ from every
 *            emulated algorithm (reductions/mpi_transport.h says why). The check is shown to bite:
 *            a ring with the members in reverse order, and one flipped bit, are counted as
 *            differences. On 4 ranks the tp and dp groups of a dp2 x tp2 world are checked too.
 *   hang R   every rank but R enters an all_reduce; R sleeps. The others must end with exit status
 *            2 and a message naming their rank within EQUIV_COLLECTIVE_TIMEOUT_S.
 *   fail R   rank R fails on its own while the others wait in an all_reduce: exit status 2 and a
 *            message naming rank R (eq_world_abort).
 *   alone S  rank 0 goes on alone (eq_world_root_alone) for S seconds, longer than
 *            EQUIV_COLLECTIVE_TIMEOUT_S, while the others wait in eq_world_share_int: they must get
 *            its value, and no rank times out (its signs of life restart their clock).
 *   stop R   rank R stops itself (SIGSTOP): before the all_reduce the others then wait in, or, for
 *            rank 0, once alone. One line must name rank R as stopped (reductions/mpi_watch.h). */
#include "equiv_config.h"

#include <stdio.h>

#if !EQUIV_HAVE_MPI
int main(void)
{
    printf("mpi_transport_test: this build has no MPI: skipped\n");
    return 77;
}
#else

#include <math.h>
#include <mpi.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness/base/testing.h"
#include "reductions/world.h"
#include "reductions/fold.h"

#define MAX_N 16

/* Values in [-1, 1) whose sums depend on the order (as collectives_test.c). */
static double mixed_value(int member, size_t i)
{
    uint64_t h = (i * 0x9e3779b97f4a7c15u) ^ ((uint64_t)(member + 1) * 0xbf58476d1ce4e5b9u);
    h ^= h >> 29;
    h *= 0x94d049bb133111ebu;
    h ^= h >> 32;
    return ldexp((double)(h >> 11), -52) - 1.0;
}

/* Small integers: every order gives the exact sum (nccl-tests' trick). */
static double exact_value(int member, size_t i) { return (double)((i * 7 + (size_t)member * 13) % 17) - 8.0; }

typedef double (*value_fn)(int member, size_t i);

static void *fill(eq_dtype dt, size_t count, int member, value_fn value)
{
    void *buf = calloc(count + 1, eq_dtype_size(dt));
    for (size_t i = 0; buf != NULL && i < count; i++) eq_buffer_set(dt, buf, (int64_t)i, value(member, i));
    return buf;
}

/* Position of a value on the number line in units of its dtype's spacing (ULPs). */
static int64_t ordered(eq_dtype dt, const void *buf, size_t i)
{
    switch (dt) {
    case EQ_BF16: {
        int16_t v;
        memcpy(&v, (const char *)buf + 2 * i, 2);
        return v < 0 ? (int64_t)INT16_MIN - v : v;
    }
    case EQ_FP32: {
        int32_t v;
        memcpy(&v, (const char *)buf + 4 * i, 4);
        return v < 0 ? (int64_t)INT32_MIN - v : v;
    }
    case EQ_FP64: {
        int64_t v;
        memcpy(&v, (const char *)buf + 8 * i, 8);
        return v < 0 ? INT64_MIN - v : v;
    }
    }
    return 0;
}

/* Elements of a and b whose bits differ; the largest distance in ULPs into *max_ulp. */
static long count_diffs(eq_dtype dt, const void *a, const void *b, size_t count, int64_t *max_ulp)
{
    long n = 0;
    for (size_t i = 0; i < count; i++) {
        int64_t d = ordered(dt, a, i) - ordered(dt, b, i);
        if (d != 0) n++;
        if (d < 0) d = -d;
        if (d > *max_ulp) *max_ulp = d;
    }
    return n;
}

typedef enum { COLL_ALL_REDUCE, COLL_REDUCE_SCATTER, COLL_ALL_GATHER, COLL_BROADCAST } collective;
static const char *const coll_names[] = {"all_reduce", "reduce_scatter", "all_gather", "broadcast"};

typedef struct {
    const eq_world *w;
    MPI_Comm comm; /* the group's communicator */
    eq_group group;
    int n, me;
} setup;

/* Runs collective c on this rank's input (member me of the group), gathers every rank's result on
 * group rank 0 into all (n * out_count). Returns out_count. */
static size_t run_mpi(const setup *s, collective c, eq_algo algo, eq_dtype dt, eq_redop op, size_t count,
                      value_fn value, void *all)
{
    eq_group g = s->group;
    g.algo = algo;
    const size_t in_count = c == COLL_REDUCE_SCATTER ? (size_t)s->n * count : count;
    const size_t out_count = c == COLL_ALL_GATHER ? (size_t)s->n * count : c == COLL_REDUCE_SCATTER ? count : count;
    void *in = fill(dt, in_count, s->me, value), *out = calloc(out_count + 1, eq_dtype_size(dt));
    void *bufs[1] = {in};
    const void *ins[1] = {in};
    void *outs[1] = {out};
    switch (c) {
    case COLL_ALL_REDUCE: EQ_EXPECT_OK(eq_all_reduce(&g, bufs, count, dt, op)); memcpy(out, in, count * eq_dtype_size(dt)); break;
    case COLL_REDUCE_SCATTER: EQ_EXPECT_OK(eq_reduce_scatter(&g, ins, outs, count, dt, op)); break;
    case COLL_ALL_GATHER: EQ_EXPECT_OK(eq_all_gather(&g, ins, outs, count, dt)); break;
    case COLL_BROADCAST: EQ_EXPECT_OK(eq_broadcast(&g, bufs, count, dt, s->n - 1)); memcpy(out, in, count * eq_dtype_size(dt)); break;
    }
    const int bytes = (int)(out_count * eq_dtype_size(dt));
    MPI_Gather(out, bytes, MPI_BYTE, all, bytes, MPI_BYTE, 0, s->comm);
    free(in);
    free(out);
    return out_count;
}

/* The same collective with the sim transport over all n members' inputs (member k's input built as
 * member perm[k]'s), every member's result into all. */
static void run_sim(const setup *s, collective c, eq_algo algo, eq_dtype dt, eq_redop op, size_t count,
                    value_fn value, const int *perm, void *all)
{
    const int n = s->n;
    eq_group g = eq_group_sim(n, algo);
    const size_t in_count = c == COLL_REDUCE_SCATTER ? (size_t)n * count : count;
    const size_t out_count = c == COLL_ALL_GATHER ? (size_t)n * count : count;
    const size_t out_bytes = out_count * eq_dtype_size(dt);
    void *in[MAX_N], *out[MAX_N];
    for (int k = 0; k < n; k++) {
        in[k] = fill(dt, in_count, perm[k], value);
        out[k] = (char *)all + (size_t)k * out_bytes;
    }
    switch (c) {
    case COLL_ALL_REDUCE: EQ_EXPECT_OK(eq_all_reduce(&g, in, count, dt, op)); break;
    case COLL_REDUCE_SCATTER: EQ_EXPECT_OK(eq_reduce_scatter(&g, (const void *const *)in, out, count, dt, op)); break;
    case COLL_ALL_GATHER: EQ_EXPECT_OK(eq_all_gather(&g, (const void *const *)in, out, count, dt)); break;
    case COLL_BROADCAST: EQ_EXPECT_OK(eq_broadcast(&g, in, count, dt, n - 1)); break;
    }
    if (c == COLL_ALL_REDUCE || c == COLL_BROADCAST)
        for (int k = 0; k < n; k++) memcpy(out[k], in[k], out_bytes);
    for (int k = 0; k < n; k++) free(in[k]);
}

/* MPI against sim for one configuration: the differing elements over all ranks' results, the same
 * number on every rank of the group (broadcast from rank 0). perm: the sim's member order. */
static long diffs_against_sim(const setup *s, collective c, eq_algo mpi_algo, eq_algo sim_algo, eq_dtype dt,
                              eq_redop op, size_t count, value_fn value, const int *perm, int64_t *max_ulp)
{
    const size_t total = (size_t)s->n * (size_t)s->n * count + 1;
    void *got = calloc(total, eq_dtype_size(dt)), *want = calloc(total, eq_dtype_size(dt));
    long diffs = 0;
    *max_ulp = 0;
    size_t out_count = run_mpi(s, c, mpi_algo, dt, op, count, value, got);
    if (s->me == 0) {
        run_sim(s, c, sim_algo, dt, op, count, value, perm, want);
        diffs = count_diffs(dt, got, want, (size_t)s->n * out_count, max_ulp);
    }
    MPI_Bcast(&diffs, 1, MPI_LONG, 0, s->comm);
    MPI_Bcast(max_ulp, 1, MPI_INT64_T, 0, s->comm);
    free(got);
    free(want);
    return diffs;
}

static const int identity[MAX_N] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};

static void check_emulated(const setup *s, const char *where)
{
    const eq_dtype dtypes[] = {EQ_FP32, EQ_BF16};
    const size_t counts[] = {1, 3, 37, 1000}; /* one element, fewer than n, unequal chunks, two fold blocks */
    const value_fn values[] = {mixed_value, exact_value};
    int configs = 0;
    for (int c = COLL_ALL_REDUCE; c <= COLL_BROADCAST; c++)
        for (int a = 0; a < (c <= COLL_REDUCE_SCATTER ? EQ_ALGO_COUNT : 1); a++) /* copies: no order */
            for (size_t d = 0; d < 2; d++)
                for (int op = EQ_REDOP_SUM; op <= (c <= COLL_REDUCE_SCATTER ? EQ_REDOP_AVG : EQ_REDOP_SUM); op++)
                    for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++)
                        for (size_t v = 0; v < 2; v++) {
                            int64_t max_ulp = 0;
                            long diffs = diffs_against_sim(s, (collective)c, (eq_algo)a, (eq_algo)a, dtypes[d],
                                                           (eq_redop)op, counts[k], values[v], identity, &max_ulp);
                            EQ_EXPECT(diffs == 0, "%s: %s %s %s %s count %zu (%s values): %ld elements differ from "
                                      "sim, max %lld ULP", where, coll_names[c], eq_algo_name((eq_algo)a),
                                      eq_dtype_name(dtypes[d]), eq_redop_name((eq_redop)op), counts[k],
                                      v ? "exact" : "mixed", diffs, (long long)max_ulp);
                            configs++;
                        }
    if (s->w->rank == 0) printf("%s: %d configurations of mpi vs sim compared bit for bit\n", where, configs);
}

/* ((x0 + x1) + (x2 + x3)) in bf16, every add rounded: OpenMPI's recursive doubling on 4 ranks. */
static void *recursive_doubling_4(eq_dtype dt, eq_redop op, size_t count, value_fn value)
{
    void *x[4];
    for (int k = 0; k < 4; k++) {
        x[k] = fill(dt, count, k, value);
        if (op == EQ_REDOP_AVG) eq_fold_premultiply(dt, 4, x[k], count);
    }
    eq_fold_add(dt, x[0], x[1], count);
    eq_fold_add(dt, x[2], x[3], count);
    eq_fold_add(dt, x[0], x[2], count);
    for (int k = 1; k < 4; k++) free(x[k]);
    return x[0];
}

static void check_mpi_algorithm(const setup *s)
{
    const size_t count = 1000;
    for (int op = EQ_REDOP_SUM; op <= EQ_REDOP_AVG; op++) {
        for (int d = 0; d < 2; d++) {
            const eq_dtype dt = d ? EQ_BF16 : EQ_FP32;
            /* exact inputs: any order gives the exact sum (for AVG only when dt(1/n) is a power of two:
             * on 3 ranks the pre-multiplied values are rounded, and order shows) */
            int64_t max_ulp = 0;
            const int exact = op == EQ_REDOP_SUM || (s->n & (s->n - 1)) == 0;
            long diffs = 0;
            if (exact)
                diffs = diffs_against_sim(s, COLL_ALL_REDUCE, EQ_ALGO_MPI, EQ_ALGO_SEQ, dt, (eq_redop)op, count,
                                          exact_value, identity, &max_ulp);
            EQ_EXPECT(diffs == 0, "mpi all_reduce %s %s of exact values: %ld elements differ", eq_dtype_name(dt),
                      eq_redop_name((eq_redop)op), diffs);
            if (exact)
                diffs = diffs_against_sim(s, COLL_REDUCE_SCATTER, EQ_ALGO_MPI, EQ_ALGO_SEQ, dt, (eq_redop)op, 37,
                                          exact_value, identity, &max_ulp);
            EQ_EXPECT(diffs == 0, "mpi reduce_scatter %s %s of exact values: %ld elements differ", eq_dtype_name(dt),
                      eq_redop_name((eq_redop)op), diffs);
            /* mixed inputs: which emulated order, if any, is MPI's? */
            char line[512];
            int len = snprintf(line, sizeof line, "algo mpi, all_reduce %s %s, %d ranks x %zu elements, those differing from sim:",
                               eq_dtype_name(dt), eq_redop_name((eq_redop)op), s->n, count);
            for (int a = 0; a < EQ_ALGO_COUNT; a++) {
                diffs = diffs_against_sim(s, COLL_ALL_REDUCE, EQ_ALGO_MPI, (eq_algo)a, dt, (eq_redop)op, count,
                                          mixed_value, identity, &max_ulp);
                len += snprintf(line + len, sizeof line - (size_t)len, " %s %ld (max %lld ULP)",
                                eq_algo_name((eq_algo)a), diffs, (long long)max_ulp);
                if (dt == EQ_BF16 && s->n == 4)
                    EQ_EXPECT(diffs > 0, "bf16 mpi equals sim %s on 4 ranks: the bracketing claim is wrong",
                              eq_algo_name((eq_algo)a));
            }
            if (s->me == 0) printf("%s\n", line);
        }
        if (s->n != 4) continue;
        /* bf16 on 4 ranks: the recursive-doubling bracketing, bit for bit (on every rank's result) */
        void *got = calloc(4 * count + 1, 2), *want = NULL;
        run_mpi(s, COLL_ALL_REDUCE, EQ_ALGO_MPI, EQ_BF16, (eq_redop)op, count, mixed_value, got);
        long diffs = 0;
        int64_t max_ulp = 0;
        if (s->me == 0) {
            want = recursive_doubling_4(EQ_BF16, (eq_redop)op, count, mixed_value);
            for (int r = 0; r < 4; r++) diffs += count_diffs(EQ_BF16, (char *)got + (size_t)r * count * 2, want, count, &max_ulp);
            printf("algo mpi, all_reduce bf16 %s, 4 ranks x %zu elements: %ld differ from ((x0 + x1) + (x2 + x3))\n",
                   eq_redop_name((eq_redop)op), count, diffs);
        }
        MPI_Bcast(&diffs, 1, MPI_LONG, 0, s->comm);
        EQ_EXPECT(diffs == 0, "bf16 %s: MPI_Allreduce is not ((x0 + x1) + (x2 + x3)): %ld elements differ",
                  eq_redop_name((eq_redop)op), diffs);
        free(got);
        free(want);
    }
}

/* The comparison can fail: a ring over the members in reverse order, and one flipped bit. */
static void check_bites(const setup *s)
{
    int reversed[MAX_N];
    for (int k = 0; k < s->n; k++) reversed[k] = s->n - 1 - k;
    int64_t max_ulp = 0;
    long diffs = diffs_against_sim(s, COLL_ALL_REDUCE, EQ_ALGO_RING, EQ_ALGO_RING, EQ_BF16, EQ_REDOP_SUM, 1000,
                                   mixed_value, reversed, &max_ulp);
    if (s->me == 0) printf("planted: ring in reverse member order, bf16: %ld of %d elements differ, max %lld ULP\n",
                           diffs, 1000 * s->n, (long long)max_ulp);
    EQ_EXPECT(diffs > 0, "a ring in reverse order was not caught");
    uint16_t a[3] = {0x3f80, 0x4000, 0xbf00}, b[3] = {0x3f80, 0x4001, 0xbf00};
    max_ulp = 0;
    EQ_EXPECT(count_diffs(EQ_BF16, a, b, 3, &max_ulp) == 1 && max_ulp == 1, "one flipped bit: %lld ULP",
              (long long)max_ulp);
    uint16_t neg[2] = {0x8001, 0x0001}; /* -min subnormal vs +min subnormal: 2 ULPs apart */
    max_ulp = 0;
    EQ_EXPECT(count_diffs(EQ_BF16, neg, neg + 1, 1, &max_ulp) == 1 && max_ulp == 2, "sign crossing: %lld ULP",
              (long long)max_ulp);
}

/* dp2 x tp2: the tp group of rank r is {2 (r/2), 2 (r/2) + 1}, the dp group {r%2, r%2 + 2}. */
static void check_groups(void)
{
    eq_world w;
    eq_status st = eq_world_init_mpi(&w, (eq_layout){2, 2}, NULL);
    EQ_EXPECT(st == EQ_OK, "dp2 x tp2 world: %s", eq_error_message());
    if (st != EQ_OK) return;
    for (int which = 0; which < 2; which++) {
        setup s = {&w, *(MPI_Comm *)(which ? w.dp_comm : w.tp_comm), which ? eq_world_dp_group(&w, EQ_ALGO_RING)
                                                                           : eq_world_tp_group(&w, EQ_ALGO_RING), 2,
                   which ? w.dp_rank : w.tp_rank};
        int64_t max_ulp = 0;
        /* member k of the group is world rank: tp: dp_rank * 2 + k; dp: k * 2 + tp_rank. The group's
         * inputs are built from world ranks, so the sim must use the same. */
        int members[2];
        for (int k = 0; k < 2; k++) members[k] = which ? k * 2 + w.tp_rank : w.dp_rank * 2 + k;
        /* run_mpi fills this rank's input as member s.me: shift to the world rank via perm on both sides */
        setup shifted = s;
        shifted.me = w.rank;
        const size_t count = 37;
        void *got = calloc(2 * count + 1, 2), *want = calloc(2 * count + 1, 2);
        run_mpi(&shifted, COLL_ALL_REDUCE, EQ_ALGO_RING, EQ_BF16, EQ_REDOP_SUM, count, mixed_value, got);
        long diffs = 0;
        if (s.me == 0) {
            run_sim(&s, COLL_ALL_REDUCE, EQ_ALGO_RING, EQ_BF16, EQ_REDOP_SUM, count, mixed_value, members, want);
            diffs = count_diffs(EQ_BF16, got, want, 2 * count, &max_ulp);
        }
        MPI_Bcast(&diffs, 1, MPI_LONG, 0, s.comm);
        EQ_EXPECT(diffs == 0, "dp2 x tp2, rank %d: the %s group's all_reduce differs from sim over world ranks %d, %d "
                  "in %ld elements", w.rank, which ? "dp" : "tp", members[0], members[1], diffs);
        free(got);
        free(want);
    }
    eq_world_free(&w);
}

static int world_size_from_env(void)
{
    eq_rank_env env;
    if (eq_rank_env_read(eq_env_get, &env) != EQ_OK || !env.found) return 1;
    return env.size;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "check";
    const int special = argc > 2 ? atoi(argv[2]) : -1;
    const int n = world_size_from_env();
    char where[64];
    eq_world w;
    if (n > MAX_N) {
        fprintf(stderr, "mpi_transport_test: at most %d ranks\n", MAX_N);
        return 2;
    }
    if (eq_world_init_mpi(&w, (eq_layout){1, n}, NULL) != EQ_OK) {
        fprintf(stderr, "mpi_transport_test: %s [%s]\n", eq_error_message(), eq_error_where());
        eq_world_free(&w);
        return 2;
    }
    setup s = {&w, *(MPI_Comm *)w.tp_comm, eq_world_tp_group(&w, EQ_ALGO_RING), n, w.tp_rank};
    if (strcmp(mode, "alone") == 0) {
        int value = w.rank == 0 ? 4242 : -1;
        eq_world_root_alone(&w);
        if (w.rank == 0) sleep((unsigned)special);
        EQ_EXPECT_OK(eq_world_share_int(&w, &value));
        EQ_EXPECT(value == 4242, "rank %d: rank 0's value arrived as %d", w.rank, value);
        eq_world_free(&w);
        snprintf(where, sizeof where, "mpi_transport_test alone, rank %d", w.rank);
        return eq_test_finish(where);
    }
    if (strcmp(mode, "stop") == 0) {
        int value = 0;
        float x[4] = {1, 2, 3, 4};
        void *bufs[1] = {x};
        if (special == 0) eq_world_root_alone(&w);
        if (w.rank == special) raise(SIGSTOP); /* the others' watchdog must name this rank, once */
        eq_status st = special == 0 ? eq_world_share_int(&w, &value) : eq_all_reduce(&s.group, bufs, 4, EQ_FP32, EQ_REDOP_SUM);
        fprintf(stderr, "rank %d: the wait returned %d: the stopped rank was not noticed\n", w.rank, (int)st);
        return 0; /* the test wants 2 */
    }
    if (strcmp(mode, "hang") == 0 || strcmp(mode, "fail") == 0) {
        float x[4] = {1, 2, 3, 4};
        void *bufs[1] = {x};
        if (w.rank == special && mode[0] == 'h') sleep(120); /* never joins: the others time out */
        if (w.rank == special && mode[0] == 'f') {
            EQ_FAIL(EQ_ERR_BACKEND, "a planted failure before the all_reduce");
            eq_world_abort(&w);
        }
        eq_status st = eq_all_reduce(&s.group, bufs, 4, EQ_FP32, EQ_REDOP_SUM);
        fprintf(stderr, "rank %d: all_reduce returned %d: the failure was not noticed\n", w.rank, (int)st);
        eq_world_free(&w);
        return 0; /* the test wants 2 */
    }
    snprintf(where, sizeof where, "%d ranks", n);
    check_emulated(&s, where);
    check_mpi_algorithm(&s);
    check_bites(&s);
    /* the bootstrap a transport built over this world uses (NCCL: rank 0's 128-byte unique id) */
    unsigned char id[128];
    for (int i = 0; i < 128; i++) id[i] = w.rank == 0 ? (unsigned char)(i * 37 + 11) : 0;
    EQ_EXPECT_OK(eq_world_broadcast_bytes(&w, id, sizeof id, 0));
    int id_ok = 1;
    for (int i = 0; i < 128; i++) id_ok &= id[i] == (unsigned char)(i * 37 + 11);
    EQ_EXPECT(id_ok, "rank %d: the broadcast id differs from rank 0's", w.rank);
    if (n == 4) check_groups();
    eq_world_free(&w);
    char name[64];
    snprintf(name, sizeof name, "mpi_transport_test rank %d", s.me);
    return eq_test_finish(name);
}
#endif
