/* eq_fold against hand-computed bf16 examples and against a plain per-element reference of every
 * algorithm's order and rounding (reductions/fold.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness/base/bf16.h"
#include "harness/base/status.h"
#include "harness/base/testing.h"
#include "reductions/fold.h"

#define MAX_N 16

static double get(eq_dtype dt, const void *buf, size_t i) { return eq_buffer_get(dt, buf, (int64_t)i); }

static void set(eq_dtype dt, void *buf, size_t i, double v) { eq_buffer_set(dt, buf, (int64_t)i, v); }

/* ---- The reference: each rule written out one element at a time. ---- */

static double wire_add(eq_dtype dt, double a, double b)
{
    if (dt == EQ_BF16) return eq_bf16_to_f32(eq_bf16_add(eq_f32_to_bf16((float)a), eq_f32_to_bf16((float)b)));
    if (dt == EQ_FP32) return (float)((float)a + (float)b);
    return a + b;
}

static double wire_mul(eq_dtype dt, double a, double b)
{
    if (dt == EQ_BF16) return eq_bf16_to_f32(eq_bf16_mul(eq_f32_to_bf16((float)a), eq_f32_to_bf16((float)b)));
    if (dt == EQ_FP32) return (float)((float)a * (float)b);
    return a * b;
}

static double tree_value(eq_dtype dt, const double *x, int n, int node)
{
    double v = x[node];
    if (2 * node + 1 < n) v = wire_add(dt, v, tree_value(dt, x, n, 2 * node + 1));
    if (2 * node + 2 < n) v = wire_add(dt, v, tree_value(dt, x, n, 2 * node + 2));
    return v;
}

/* x[r] = member r's element, which lies in ring chunk `chunk`. */
static double reference(eq_algo algo, eq_dtype dt, eq_redop op, const double *in, int n, int chunk)
{
    double x[MAX_N] = {0};
    double s = dt == EQ_BF16 ? eq_bf16_to_f32(eq_f64_to_bf16(1.0 / n)) : dt == EQ_FP32 ? (float)(1.0 / n) : 1.0 / n;
    for (int r = 0; r < n; r++) x[r] = op == EQ_REDOP_AVG && n > 1 ? wire_mul(dt, in[r], s) : in[r];
    double acc = x[0];
    switch (algo) {
    case EQ_ALGO_SEQ:
        for (int r = 1; r < n; r++) acc = wire_add(dt, acc, x[r]);
        return acc;
    case EQ_ALGO_RING:
        acc = x[(chunk + 1) % n];
        for (int step = 2; step <= n; step++) acc = wire_add(dt, acc, x[(chunk + step) % n]);
        return acc;
    case EQ_ALGO_TREE:
        return tree_value(dt, x, n, 0);
    case EQ_ALGO_FP32ACC:
        for (int r = 1; r < n; r++) acc = dt == EQ_FP64 ? acc + x[r] : (float)((float)acc + (float)x[r]);
        return dt == EQ_BF16 ? eq_bf16_to_f32(eq_f32_to_bf16((float)acc)) : acc;
    case EQ_ALGO_MPI: /* not emulated */
    case EQ_ALGO_TP_INVARIANT:
        break;
    }
    return NAN;
}

/* ---- Tests ---- */

static void test_chunk_bounds(void)
{
    /* 10 into 4: the first 10 % 4 = 2 chunks are one longer. */
    size_t want_begin[4] = {0, 3, 6, 8}, want_len[4] = {3, 3, 2, 2}, begin, len;
    for (int c = 0; c < 4; c++) {
        eq_fold_chunk_bounds(10, 4, c, &begin, &len);
        EQ_EXPECT(begin == want_begin[c] && len == want_len[c], "chunk %d: [%zu, +%zu)", c, begin, len);
    }
    eq_fold_chunk_bounds(2, 4, 3, &begin, &len); /* count < n: the last chunks are empty */
    EQ_EXPECT(begin == 2 && len == 0, "chunk 3 of 2 elements: [%zu, +%zu)", begin, len);
}

/* Members x = {1, 2^-8, 2^-8, -1} in every element, bf16, count 4, chunk c = element c (the rank
 * blocks of eq_fold_one_chunk; eq_fold's ring would put all four in chunk 0, 16 bytes). bf16
 * holds 8 significant bits, so above 1 the spacing is 2^-7 and 1 + 2^-8 is a tie.
 *   seq (0,1,2,3):        1 + 2^-8 -> 1 (tie, to even); 1 + 2^-8 -> 1; 1 - 1 = 0.
 *   ring chunk 0 (1,2,3,0): 2^-8 + 2^-8 = 2^-7; 2^-7 - 1 = -0.9921875 (exact); + 1 = 2^-7.
 *   ring chunk 1 (2,3,0,1): 2^-8 - 1 = -0.99609375 (exact, 8 bits); + 1 = 2^-8; + 2^-8 = 2^-7.
 *   ring chunk 2 (3,0,1,2): -1 + 1 = 0; + 2^-8; + 2^-8 = 2^-7.
 *   ring chunk 3 (0,1,2,3): the seq order: 0.
 *   tree: value(1) = x1 + x3 = -0.99609375 (exact); value(2) = x2 = 2^-8;
 *         value(0) = (1 + value(1)) + value(2) = 2^-8 + 2^-8 = 2^-7.
 *   fp32acc: 1 + 2^-8 + 2^-8 - 1 is exact in fp32: 2^-7, exact in bf16.
 * The exact sum is 2^-7 = 0.0078125. AVG scales every x by 0.25 exactly, so each result is
 * a quarter of the above (no result here sits near bf16's underflow). */
static void test_hand_example(void)
{
    const float members[4] = {1.0f, 0x1p-8f, 0x1p-8f, -1.0f};
    const float want_sum[EQ_ALGO_COUNT][4] = {
        [EQ_ALGO_RING] = {0x1p-7f, 0x1p-7f, 0x1p-7f, 0.0f},
        [EQ_ALGO_TREE] = {0x1p-7f, 0x1p-7f, 0x1p-7f, 0x1p-7f},
        [EQ_ALGO_FP32ACC] = {0x1p-7f, 0x1p-7f, 0x1p-7f, 0x1p-7f},
        [EQ_ALGO_SEQ] = {0.0f, 0.0f, 0.0f, 0.0f},
    };
    uint16_t bufs[4][4], out[4];
    for (int r = 0; r < 4; r++)
        for (int e = 0; e < 4; e++) bufs[r][e] = eq_f32_to_bf16(members[r]);
    const void *in[4] = {bufs[0], bufs[1], bufs[2], bufs[3]};
    for (int a = 0; a < EQ_ALGO_COUNT; a++) {
        for (int op = EQ_REDOP_SUM; op <= EQ_REDOP_AVG; op++) {
            float scale = op == EQ_REDOP_AVG ? 0.25f : 1.0f;
            for (int e = 0; e < 4; e++)
                EQ_EXPECT_OK(eq_fold_one_chunk((eq_algo)a, EQ_BF16, (eq_redop)op, 4, in, &out[e], 4, e));
            for (int e = 0; e < 4; e++)
                EQ_EXPECT(eq_bf16_to_f32(out[e]) == want_sum[a][e] * scale, "%s %s element %d: %g, want %g",
                          eq_algo_name((eq_algo)a), eq_redop_name((eq_redop)op), e,
                          (double)eq_bf16_to_f32(out[e]), (double)(want_sum[a][e] * scale));
        }
    }
}

/* Ring chunk c must start at member c+1 and end at member c. count = 8n: every chunk is 8
 * elements (runRing: alignUp(8, 16 / size) = 8 in every dtype), so element i is in chunk c = i / 8.
 * Member c+1 holds H = 2^60, member c-1 holds -H, every other member m holds 1 + m/16. Added in
 * ring order, H absorbs everything in between (1.9375 is under half an ulp of 2^60 in every
 * dtype), -H cancels it, and the last add leaves exactly member c's own value. */
static void test_ring_ends_at_member_c(void)
{
    enum { PER_CHUNK = 8 };
    for (int dt = 0; dt < EQ_DTYPE_COUNT; dt++) {
        for (int n = 3; n <= MAX_N; n++) {
            double bufs[MAX_N][MAX_N * PER_CHUNK], out[MAX_N * PER_CHUNK]; /* fp64 is the widest */
            const void *in[MAX_N];
            const size_t count = (size_t)n * PER_CHUNK;
            for (int m = 0; m < n; m++) {
                in[m] = bufs[m];
                for (size_t i = 0; i < count; i++) {
                    int c = (int)(i / PER_CHUNK);
                    double v = m == (c + 1) % n ? 0x1p60 : m == (c + n - 1) % n ? -0x1p60 : 1.0 + m / 16.0;
                    set((eq_dtype)dt, bufs[m], i, v);
                }
            }
            EQ_EXPECT_OK(eq_fold(EQ_ALGO_RING, (eq_dtype)dt, EQ_REDOP_SUM, n, in, out, count));
            for (size_t i = 0; i < count; i++)
                EQ_EXPECT(get((eq_dtype)dt, out, i) == 1.0 + (double)(i / PER_CHUNK) / 16.0,
                          "%s n=%d element %zu (chunk %zu) ended with %g", eq_dtype_name((eq_dtype)dt), n, i,
                          i / PER_CHUNK, get((eq_dtype)dt, out, i));
        }
    }
}

/* Values of mixed sign and magnitude with all 53 bits set at random, so the order of the adds
 * shows in the last bits of every dtype. */
static double mixed_value(uint64_t *state)
{
    *state = *state * 6364136223846793005u + 1442695040888963407u;
    double mantissa = ldexp((double)(*state >> 11), -52) - 1.0;
    return ldexp(mantissa, (int)(*state % 13) - 6);
}

/* One fold of in[] (count elements each) against the reference on every element; for AVG also
 * within n*u*sum|x| of the exact mean; and the same fold in place (out = in[n-1]) gives the same
 * bits. `out` and `saved` hold count fp64 elements. */
static void check_fold(eq_algo algo, eq_dtype dt, eq_redop op, int n, const void *const in[], size_t count,
                       void *out, void *saved)
{
    size_t size = eq_dtype_size(dt);
    int bad = 0, outside_bound = 0;
    EQ_EXPECT_OK(eq_fold(algo, dt, op, n, in, out, count));
    for (size_t i = 0; i < count; i++) { /* ring: the chunk NCCL puts element i in (nccl_layout_test) */
        eq_nccl_piece piece;
        eq_nccl_ring_piece(EQ_NCCL_CONFIG_DEFAULT, size, n, count, i, &piece);
        double x[MAX_N], exact = 0.0, magnitude = 0.0, got = get(dt, out, i);
        for (int m = 0; m < n; m++) x[m] = get(dt, in[m], i);
        bad += got != reference(algo, dt, op, x, n, piece.chunk);
        for (int m = 0; m < n; m++) exact += x[m] / n, magnitude += fabs(x[m]);
        if (op == EQ_REDOP_AVG) outside_bound += fabs(got - exact) > n * eq_dtype_unit_roundoff(dt) * magnitude;
    }
    EQ_EXPECT(bad == 0, "%s %s %s n=%d: %d elements differ from the reference", eq_algo_name(algo),
              eq_dtype_name(dt), eq_redop_name(op), n, bad);
    EQ_EXPECT(outside_bound == 0, "%s %s avg n=%d: %d elements beyond n*u*sum|x| of the mean", eq_algo_name(algo),
              eq_dtype_name(dt), n, outside_bound);
    void *last = (void *)in[n - 1];
    memcpy(saved, last, count * size);
    EQ_EXPECT_OK(eq_fold(algo, dt, op, n, in, last, count));
    EQ_EXPECT(memcmp(last, out, count * size) == 0, "%s %s n=%d: in place differs", eq_algo_name(algo),
              eq_dtype_name(dt), n);
    memcpy(last, saved, count * size);
}

/* eq_fold against the reference for every algorithm, dtype, op and n = 1..16, with a count that
 * splits unevenly and gives chunks longer than one block. The data must tell the orders apart (ring
 * differs from seq somewhere), or the comparisons would prove little. */
static void test_against_reference(void)
{
    const size_t count = 5003;
    uint64_t state = 12345u;
    double *bufs = malloc(MAX_N * count * sizeof(double)), *out = malloc(count * sizeof(double));
    double *saved = malloc(count * sizeof(double));
    EQ_EXPECT(bufs != NULL && out != NULL && saved != NULL, "no memory");
    for (int d = 0; d < EQ_DTYPE_COUNT && bufs != NULL && out != NULL && saved != NULL; d++) {
        eq_dtype dt = (eq_dtype)d;
        for (int n = 1; n <= MAX_N; n++) {
            const void *in[MAX_N];
            for (int m = 0; m < n; m++) {
                in[m] = (char *)bufs + (size_t)m * count * eq_dtype_size(dt);
                for (size_t i = 0; i < count; i++) set(dt, (void *)in[m], i, mixed_value(&state));
            }
            for (int a = 0; a < EQ_ALGO_COUNT; a++) {
                check_fold((eq_algo)a, dt, EQ_REDOP_SUM, n, in, count, out, saved);
                check_fold((eq_algo)a, dt, EQ_REDOP_AVG, n, in, count, out, saved);
            }
            int ring_differs_from_seq = 0;
            for (size_t i = 0; i < count && n >= 3; i++) {
                double x[MAX_N];
                for (int m = 0; m < n; m++) x[m] = get(dt, in[m], i);
                ring_differs_from_seq += reference(EQ_ALGO_RING, dt, EQ_REDOP_SUM, x, n, 0) !=
                                         reference(EQ_ALGO_SEQ, dt, EQ_REDOP_SUM, x, n, 0);
            }
            if (n >= 3)
                EQ_EXPECT(ring_differs_from_seq > 0, "%s n=%d: ring never differs from seq", eq_dtype_name(dt), n);
        }
    }
    free(bufs);
    free(out);
    free(saved);
}

/* eq_fold_one_chunk gives exactly chunk c of eq_fold where the reduce_scatter's split is NCCL's
 * all-reduce split: at 1 channel, a count that divides by N * 4 (fp32: 16-byte aligned chunks). */
static void test_one_chunk(void)
{
    enum { N = 5, COUNT = 40 };
    float bufs[N][COUNT], whole[COUNT], part[COUNT];
    const void *in[N];
    uint64_t state = 7u;
    for (int m = 0; m < N; m++) {
        in[m] = bufs[m];
        for (int i = 0; i < COUNT; i++) bufs[m][i] = (float)mixed_value(&state);
    }
    for (int a = 0; a < EQ_ALGO_COUNT; a++) {
        EQ_EXPECT_OK(eq_fold((eq_algo)a, EQ_FP32, EQ_REDOP_AVG, N, in, whole, COUNT));
        for (int c = 0; c < N; c++) {
            size_t begin, len;
            eq_fold_chunk_bounds(COUNT, N, c, &begin, &len);
            EQ_EXPECT_OK(eq_fold_one_chunk((eq_algo)a, EQ_FP32, EQ_REDOP_AVG, N, in, part, COUNT, c));
            EQ_EXPECT(memcmp(part, whole + begin, len * sizeof(float)) == 0, "%s chunk %d differs",
                      eq_algo_name((eq_algo)a), c);
        }
    }
}

/* The exported steps (eq_fold_add, eq_fold_premultiply) against the reference's wire_add and
 * wire_mul, over more than one block of elements. */
static void test_steps(void)
{
    enum { COUNT = 1300 };
    const eq_dtype dtypes[] = {EQ_BF16, EQ_FP32, EQ_FP64};
    for (int d = 0; d < 3; d++) {
        const eq_dtype dt = dtypes[d];
        char acc[COUNT * 8], x[COUNT * 8];
        double a[COUNT], b[COUNT];
        for (int i = 0; i < COUNT; i++) {
            eq_buffer_set(dt, acc, i, sin(0.37 * i) * 3.0);
            eq_buffer_set(dt, x, i, cos(1.13 * i) / 7.0);
            a[i] = eq_buffer_get(dt, acc, i);
            b[i] = eq_buffer_get(dt, x, i);
        }
        eq_fold_add(dt, acc, x, COUNT);
        int bad_add = 0, bad_mul = 0;
        for (int i = 0; i < COUNT; i++) bad_add += eq_buffer_get(dt, acc, i) != wire_add(dt, a[i], b[i]);
        eq_fold_premultiply(dt, 3, x, COUNT);
        double third = dt == EQ_BF16 ? eq_bf16_to_f32(eq_f64_to_bf16(1.0 / 3)) : dt == EQ_FP32 ? (float)(1.0 / 3) : 1.0 / 3;
        for (int i = 0; i < COUNT; i++) bad_mul += eq_buffer_get(dt, x, i) != wire_mul(dt, b[i], third);
        EQ_EXPECT(bad_add == 0 && bad_mul == 0, "%s: %d adds and %d pre-multiplies differ from the reference",
                  eq_dtype_name(dt), bad_add, bad_mul);
    }
}

static void test_bad_arguments(void)
{
    float a[4] = {0}, out[4];
    const void *in[1] = {a};
    EQ_EXPECT(eq_fold(EQ_ALGO_RING, EQ_FP32, EQ_REDOP_SUM, 0, in, out, 4) == EQ_ERR_INTERNAL, "n = 0 accepted");
    eq_error_clear();
    EQ_EXPECT(eq_fold((eq_algo)9, EQ_FP32, EQ_REDOP_SUM, 1, in, out, 4) == EQ_ERR_INTERNAL, "algorithm 9 accepted");
    eq_error_clear();
    EQ_EXPECT(eq_fold(EQ_ALGO_SEQ, (eq_dtype)5, EQ_REDOP_SUM, 1, in, out, 4) == EQ_ERR_INTERNAL, "dtype 5 accepted");
    eq_error_clear();
    EQ_EXPECT(eq_fold_one_chunk(EQ_ALGO_RING, EQ_FP32, EQ_REDOP_SUM, 1, in, out, 4, 1) == EQ_ERR_INTERNAL,
              "chunk 1 of 1 accepted");
    EQ_EXPECT(strstr(eq_error_where(), "reductions/fold.c") != NULL, "error recorded at '%s'", eq_error_where());
    eq_error_clear();
}

int main(void)
{
    test_chunk_bounds();
    test_hand_example();
    test_ring_ends_at_member_c();
    test_against_reference();
    test_one_chunk();
    test_steps();
    test_bad_arguments();
    return eq_test_finish("fold_test");
}
