/* The sim transport through reductions/collectives.h: names, exact sums (the nccl-tests trick),
 * AVG, reduce_scatter against all_reduce, copies, and bad arguments. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness/base/bf16.h"
#include "harness/base/status.h"
#include "harness/base/testing.h"
#include "reductions/collectives.h"

#define MAX_N 16
#define COUNT 37 /* all_reduce elements: chunks of unequal length for most n */
#define SHORT 5  /* fewer elements than most n: some chunks are empty */
#define PER 3    /* reduce_scatter / all_gather elements per member */

static double get(eq_dtype dt, const void *buf, size_t i) { return eq_buffer_get(dt, buf, (int64_t)i); }

static void set(eq_dtype dt, void *buf, size_t i, double v) { eq_buffer_set(dt, buf, (int64_t)i, v); }

/* Small integers in [-8, 8]: with n <= 16 every partial sum is an integer below 256 in magnitude,
 * exact in bf16 and wider, so every order gives the exact sum; divided by a power of two n they
 * stay exact too. The ones from nccl-tests' exact-sum trick. */
static double exact_value(int member, size_t i) { return (double)((i * 7 + (size_t)member * 13) % 17) - 8.0; }

/* Mixed values in [-1, 1) whose sums depend on the order. */
static double mixed_value(int member, size_t i)
{
    uint64_t h = (i * 0x9e3779b97f4a7c15u) ^ ((uint64_t)member * 0xbf58476d1ce4e5b9u);
    h ^= h >> 29;
    h *= 0x94d049bb133111ebu;
    return ldexp((double)(h >> 11), -52) - 1.0;
}

/* One buffer of `count` elements for each of n members, in one block. */
typedef struct {
    char *data;
    void *bufs[MAX_N];
} members;

static int members_init(members *m, int n, size_t count, eq_dtype dt, double (*value)(int, size_t))
{
    size_t bytes = count * eq_dtype_size(dt);
    m->data = malloc(n * bytes + 1);
    if (m->data == NULL) return 0;
    for (int r = 0; r < n; r++) {
        m->bufs[r] = m->data + r * bytes;
        for (size_t i = 0; value != NULL && i < count; i++) set(dt, m->bufs[r], i, value(r, i));
    }
    return 1;
}

static void test_names(void)
{
    for (int a = 0; a < EQ_ALGO_NAMED; a++) { /* mpi and tp_invariant too: --algo takes them */
        eq_algo parsed = (eq_algo)-1;
        EQ_EXPECT_OK(eq_algo_parse(eq_algo_name((eq_algo)a), &parsed));
        EQ_EXPECT(parsed == (eq_algo)a, "'%s' parsed as %d", eq_algo_name((eq_algo)a), (int)parsed);
        EQ_EXPECT(strcmp(eq_algo_summary((eq_algo)a), "?") != 0, "algorithm %d has no summary", a);
    }
    EQ_EXPECT(strcmp(eq_algo_name(EQ_ALGO_FP32ACC), "fp32acc") == 0, "%s", eq_algo_name(EQ_ALGO_FP32ACC));
    eq_algo unused;
    EQ_EXPECT(eq_algo_parse("nvls", &unused) == EQ_ERR_USAGE, "'nvls' accepted");
    EQ_EXPECT(strcmp(eq_error_message(), "unknown algorithm 'nvls' (known: ring, tree, fp32acc, seq, mpi, tp_invariant; "
                                                 "equiv --list says which --comm runs each)") == 0, "%s",
              eq_error_message());
    eq_error_clear();
    EQ_EXPECT(strcmp(eq_redop_name(EQ_REDOP_SUM), "sum") == 0 && strcmp(eq_redop_name(EQ_REDOP_AVG), "avg") == 0,
              "%s %s", eq_redop_name(EQ_REDOP_SUM), eq_redop_name(EQ_REDOP_AVG));
    eq_group g = eq_group_sim(6, EQ_ALGO_TREE);
    EQ_EXPECT(g.transport == &eq_transport_sim && g.algo == EQ_ALGO_TREE && g.size == 6 && g.first_local == 0 &&
                  g.n_local == 6,
              "eq_group_sim(6, tree) = {%d, %d, %d, %d}", (int)g.algo, g.size, g.first_local, g.n_local);
}

/* Bits of buf[i] equal to dt(want)? (The wanted values here are all exact in dt.) */
static int same_bits(eq_dtype dt, const void *buf, size_t i, double want)
{
    char w[8];
    set(dt, w, 0, want);
    return memcmp((const char *)buf + i * eq_dtype_size(dt), w, eq_dtype_size(dt)) == 0;
}

/* all_reduce and reduce_scatter of the exact values: SUM bit-identical to the exact sum for
 * every n; AVG bit-identical to the exact mean for n a power of two (1/n is exact). */
static void test_exact(eq_algo algo, eq_dtype dt, int n, size_t count, eq_redop op)
{
    members ar = {0}, rs_in = {0}, rs_out = {0};
    if (!members_init(&ar, n, count, dt, exact_value) || !members_init(&rs_in, n, (size_t)n * PER, dt, exact_value) ||
        !members_init(&rs_out, n, PER, dt, NULL)) {
        EQ_EXPECT(0, "no memory");
        goto done;
    }
    eq_group g = eq_group_sim(n, algo);
    int bad = 0;
    EQ_EXPECT_OK(eq_all_reduce(&g, ar.bufs, count, dt, op));
    EQ_EXPECT_OK(eq_reduce_scatter(&g, (const void *const *)rs_in.bufs, rs_out.bufs, PER, dt, op));
    for (size_t i = 0; i < count || i < (size_t)n * PER; i++) {
        double sum = 0.0;
        for (int r = 0; r < n; r++) sum += exact_value(r, i);
        double want = op == EQ_REDOP_AVG ? sum / n : sum;
        for (int r = 0; r < n && i < count; r++) bad += !same_bits(dt, ar.bufs[r], i, want);
        if (i < (size_t)n * PER) bad += !same_bits(dt, rs_out.bufs[i / PER], i % PER, want);
    }
    EQ_EXPECT(bad == 0, "%s %s %s n=%d count=%zu: %d elements not exact", eq_algo_name(algo), eq_dtype_name(dt),
              eq_redop_name(op), n, count, bad);
done:
    free(ar.data);
    free(rs_in.data);
    free(rs_out.data);
}

/* all_gather and broadcast are copies, bit for bit. */
static void test_copies(eq_dtype dt, int n)
{
    members in = {0}, out = {0}, bc = {0};
    size_t size = eq_dtype_size(dt);
    if (!members_init(&in, n, PER, dt, mixed_value) || !members_init(&out, n, (size_t)n * PER, dt, NULL) ||
        !members_init(&bc, n, COUNT, dt, mixed_value)) {
        EQ_EXPECT(0, "no memory");
        goto done;
    }
    eq_group g = eq_group_sim(n, EQ_ALGO_RING);
    EQ_EXPECT_OK(eq_all_gather(&g, (const void *const *)in.bufs, out.bufs, PER, dt));
    for (int dst = 0; dst < n; dst++)
        for (int src = 0; src < n; src++)
            EQ_EXPECT(memcmp((char *)out.bufs[dst] + (size_t)src * PER * size, in.bufs[src], PER * size) == 0,
                      "%s n=%d: all_gather chunk %d of member %d", eq_dtype_name(dt), n, src, dst);
    int root = n / 2;
    char *want = malloc(COUNT * size);
    EQ_EXPECT(want != NULL, "no memory");
    if (want == NULL) goto done;
    memcpy(want, bc.bufs[root], COUNT * size);
    EQ_EXPECT_OK(eq_broadcast(&g, bc.bufs, COUNT, dt, root));
    for (int r = 0; r < n; r++)
        EQ_EXPECT(memcmp(bc.bufs[r], want, COUNT * size) == 0, "%s n=%d: broadcast to %d", eq_dtype_name(dt), n, r);
    free(want);
done:
    free(in.data);
    free(out.data);
    free(bc.data);
}

/* The ring chunk of element i of `count` elements of `dt` over n members: where NCCL's all-reduce
 * puts it at the default channels and protocol (reductions/nccl_layout.h; nccl_layout_test checks
 * that placement by hand). */
static int ring_chunk_of(size_t i, size_t count, int n, eq_dtype dt)
{
    eq_nccl_piece piece;
    eq_nccl_ring_piece(EQ_NCCL_CONFIG_DEFAULT, eq_dtype_size(dt), n, count, i, &piece);
    return piece.chunk;
}

/* AVG of mixed_value(., i) over n members added in order[0], order[1], ..., written plainly in the
 * wire dtype's own arithmetic: s = dt(1/n), term = dt(x * s), acc = dt(acc + term). */
static double plain_avg(eq_dtype dt, int n, const int *order, size_t i)
{
    switch (dt) {
    case EQ_BF16: {
        uint16_t s = eq_f64_to_bf16(1.0 / n), acc = 0;
        for (int k = 0; k < n; k++) {
            uint16_t term = eq_bf16_mul(eq_f64_to_bf16(mixed_value(order[k], i)), s);
            acc = k == 0 ? term : eq_bf16_add(acc, term);
        }
        return eq_bf16_to_f32(acc);
    }
    case EQ_FP32: {
        float s = (float)(1.0 / n), acc = 0.0f;
        for (int k = 0; k < n; k++) {
            float term = (float)mixed_value(order[k], i) * s;
            acc = k == 0 ? term : acc + term;
        }
        return acc;
    }
    case EQ_FP64: {
        double s = 1.0 / n, acc = 0.0;
        for (int k = 0; k < n; k++) {
            double term = mixed_value(order[k], i) * s;
            acc = k == 0 ? term : acc + term;
        }
        return acc;
    }
    }
    return NAN;
}

/* AVG for n not a power of two, on order-sensitive values: seq (ranks 0..n-1) and ring (chunk c:
 * c+1, ..., n-1, 0, ..., c) equal the plain loop in their order; every algorithm stays within
 * n*u*sum|x| of the exact mean. (fold_test checks tree and fp32acc against their own orders.) */
static void test_avg_inexact(eq_algo algo, eq_dtype dt, int n)
{
    members ar = {0};
    if (!members_init(&ar, n, COUNT, dt, mixed_value)) {
        EQ_EXPECT(0, "no memory");
        return;
    }
    eq_group g = eq_group_sim(n, algo);
    EQ_EXPECT_OK(eq_all_reduce(&g, ar.bufs, COUNT, dt, EQ_REDOP_AVG));
    int bad_order = 0, bad_bound = 0;
    for (size_t i = 0; i < COUNT; i++) {
        double got = get(dt, ar.bufs[0], i), exact = 0.0, magnitude = 0.0;
        int order[MAX_N], chunk = ring_chunk_of(i, COUNT, n, dt);
        for (int k = 0; k < n; k++) order[k] = algo == EQ_ALGO_RING ? (chunk + 1 + k) % n : k;
        if (algo == EQ_ALGO_SEQ || algo == EQ_ALGO_RING) bad_order += got != plain_avg(dt, n, order, i);
        for (int r = 0; r < n; r++) {
            char held[8]; /* member r's input as it holds it, in dt */
            set(dt, held, 0, mixed_value(r, i));
            exact += get(dt, held, 0) / n;
            magnitude += fabs(get(dt, held, 0));
        }
        bad_bound += fabs(got - exact) > n * eq_dtype_unit_roundoff(dt) * magnitude;
    }
    EQ_EXPECT(bad_order == 0, "%s %s avg n=%d: %d elements differ from the plain loop", eq_algo_name(algo),
              eq_dtype_name(dt), n, bad_order);
    EQ_EXPECT(bad_bound == 0, "%s %s avg n=%d: %d elements outside n*u*sum|x|", eq_algo_name(algo), eq_dtype_name(dt),
              n, bad_bound);
    free(ar.data);
}

/* reduce_scatter's out[i] is chunk i of all_reduce over the same data, bit for bit, where NCCL's
 * all-reduce chunks are the reduce_scatter's blocks: SCATTER_PER elements per member are 16 bytes
 * or more in every dtype, so runRing's chunkCount = alignUp(SCATTER_PER, 16 / size) = SCATTER_PER. */
#define SCATTER_PER 8
static void test_scatter_matches_all_reduce(eq_algo algo, eq_dtype dt, int n, eq_redop op)
{
    members ar = {0}, rs_in = {0}, rs_out = {0};
    size_t size = eq_dtype_size(dt), count = (size_t)n * SCATTER_PER;
    if (!members_init(&ar, n, count, dt, mixed_value) || !members_init(&rs_in, n, count, dt, mixed_value) ||
        !members_init(&rs_out, n, SCATTER_PER, dt, NULL)) {
        EQ_EXPECT(0, "no memory");
        goto done;
    }
    eq_group g = eq_group_sim(n, algo);
    EQ_EXPECT_OK(eq_all_reduce(&g, ar.bufs, count, dt, op));
    EQ_EXPECT_OK(eq_reduce_scatter(&g, (const void *const *)rs_in.bufs, rs_out.bufs, SCATTER_PER, dt, op));
    for (int r = 0; r < n; r++)
        EQ_EXPECT(memcmp(rs_out.bufs[r], (char *)ar.bufs[r] + (size_t)r * SCATTER_PER * size, SCATTER_PER * size) == 0,
                  "%s %s %s n=%d: member %d's chunk differs", eq_algo_name(algo), eq_dtype_name(dt), eq_redop_name(op),
                  n, r);
done:
    free(ar.data);
    free(rs_in.data);
    free(rs_out.data);
}

static void test_bad_arguments(void)
{
    float a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8};
    void *bufs[2] = {a, b};
    eq_group g = eq_group_sim(2, EQ_ALGO_RING);
    EQ_EXPECT(eq_broadcast(&g, bufs, 4, EQ_FP32, 2) == EQ_ERR_INTERNAL, "root 2 of 2 accepted");
    eq_error_clear();
    EQ_EXPECT(eq_broadcast(&g, bufs, 4, EQ_FP32, -1) == EQ_ERR_INTERNAL, "root -1 accepted");
    eq_error_clear();
    EQ_EXPECT(a[0] == 1 && b[0] == 5, "a refused broadcast wrote the buffers");
    eq_group partial = g;
    partial.n_local = 1;
    EQ_EXPECT(eq_all_reduce(&partial, bufs, 4, EQ_FP32, EQ_REDOP_SUM) == EQ_ERR_INTERNAL, "n_local 1 of 2 accepted");
    eq_error_clear();
    eq_group empty = eq_group_sim(0, EQ_ALGO_SEQ);
    EQ_EXPECT(eq_all_gather(&empty, (const void *const *)bufs, bufs, 1, EQ_FP32) == EQ_ERR_INTERNAL, "size 0 accepted");
    eq_error_clear();
    EQ_EXPECT(eq_reduce_scatter(&empty, (const void *const *)bufs, bufs, 1, EQ_FP32, EQ_REDOP_SUM) == EQ_ERR_INTERNAL,
              "reduce_scatter over size 0 accepted");
    eq_error_clear();
}

int main(void)
{
    test_names();
    for (int a = 0; a < EQ_ALGO_COUNT; a++) {
        for (int dt = 0; dt < EQ_DTYPE_COUNT; dt++) {
            for (int n = 1; n <= MAX_N; n++) {
                test_exact((eq_algo)a, (eq_dtype)dt, n, COUNT, EQ_REDOP_SUM);
                test_exact((eq_algo)a, (eq_dtype)dt, n, SHORT, EQ_REDOP_SUM);
                if ((n & (n - 1)) == 0) test_exact((eq_algo)a, (eq_dtype)dt, n, COUNT, EQ_REDOP_AVG);
                else test_avg_inexact((eq_algo)a, (eq_dtype)dt, n);
                test_scatter_matches_all_reduce((eq_algo)a, (eq_dtype)dt, n, EQ_REDOP_SUM);
                test_scatter_matches_all_reduce((eq_algo)a, (eq_dtype)dt, n, EQ_REDOP_AVG);
            }
        }
    }
    for (int dt = 0; dt < EQ_DTYPE_COUNT; dt++)
        for (int n = 1; n <= MAX_N; n++) test_copies((eq_dtype)dt, n);
    test_bad_arguments();
    return eq_test_finish("collectives_test");
}
