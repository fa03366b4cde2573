/* Element-wise reduction of n members in the order and rounding of one algorithm (see fold.h).
 *
 * How it runs: elements go in blocks of up to FOLD_BLOCK. A block is loaded from every member into
 * rows of doubles (row k = member k; bf16, fp32 and fp64 values are all exact as doubles), AVG
 * pre-multiplies every row, then fold_block() adds rows into one another in the algorithm's order,
 * rounding to a dtype after every add, and the result row is stored. Every loop over elements sits
 * inside one dtype's case, so no per-element dispatch. Where NCCL does each step is cited inline. */
#include "reductions/fold.h"

#include <stdlib.h>
#include <string.h>

#include "harness/base/bf16.h"
#include "reductions/nccl_layout.h"

#define FOLD_BLOCK 512 /* elements per block: n rows of this many doubles stay in cache */

void eq_fold_chunk_bounds(size_t count, int n, int chunk, size_t *begin, size_t *len)
{
    size_t base = count / (size_t)n, longer = count % (size_t)n, c = (size_t)chunk;
    *begin = c * base + (c < longer ? c : longer);
    *len = base + (c < longer ? 1 : 0);
}

static double *row(double *rows, int member) { return rows + (size_t)member * FOLD_BLOCK; }

/* acc[e] = round_to(acc[e] + x[e]): one add in dtype `round_to`, the way NCCL's FuncSum adds
 * (src/device/reduce_kernel.h): bf16 as __hadd on sm80+ (exact fp32 add of the widened values,
 * one rounding to bf16: eq_bf16_add), fp32 as a float add, fp64 as a double add. */
static void add_rows(eq_dtype round_to, double *acc, const double *x, size_t len)
{
    switch (round_to) {
    case EQ_BF16:
        for (size_t e = 0; e < len; e++) acc[e] = eq_round_bf16((float)acc[e] + (float)x[e]);
        break;
    case EQ_FP32:
        for (size_t e = 0; e < len; e++) {
            float sum = (float)acc[e] + (float)x[e];
            acc[e] = sum;
        }
        break;
    case EQ_FP64:
        for (size_t e = 0; e < len; e++) acc[e] += x[e];
        break;
    }
}

/* x[e] = dt(x[e] * scale): FuncPreMulSum's pre-multiply (src/device/reduce_kernel.h), one
 * rounding per product in the wire dtype: bf16 as __hmul (eq_bf16_mul), fp32/fp64 a plain mul. */
static void scale_row(eq_dtype dt, double *x, double scale, size_t len)
{
    switch (dt) {
    case EQ_BF16:
        for (size_t e = 0; e < len; e++) x[e] = eq_round_bf16((float)x[e] * (float)scale);
        break;
    case EQ_FP32:
        for (size_t e = 0; e < len; e++) {
            float product = (float)x[e] * (float)scale;
            x[e] = product;
        }
        break;
    case EQ_FP64:
        for (size_t e = 0; e < len; e++) x[e] *= scale;
        break;
    }
}

/* dt(1/n) as NCCL builds ncclAvg's scalar (src/enqueue.cc, hostToDevRedOp): bf16
 * __float2bfloat16(float(1.0/n)), fp32 float(1.0/n), fp64 1.0/n. For every n < 555767 the bf16
 * value equals 1/n rounded once to bf16. */
static double avg_scale(eq_dtype dt, int n)
{
    double inverse = 1.0 / n;
    switch (dt) {
    case EQ_BF16: return eq_round_bf16((float)inverse);
    case EQ_FP32: return (float)inverse;
    case EQ_FP64: return inverse;
    }
    return inverse;
}

/* Reduce rows 0..n-1 (a block of `len` elements, all in ring chunk `chunk`) in the algorithm's
 * order; returns the row that holds the result. Rows are overwritten. */
static const double *fold_block(eq_algo algo, eq_dtype dt, int n, int chunk, double *rows, size_t len)
{
    switch (algo) {
    case EQ_ALGO_RING: {
        /* src/device/all_reduce.h runRing: at step 0 the rank at ring index r sends chunk r-1; each
         * next rank adds its own part and passes it on; at the last reduce step rank r finishes
         * chunk r. So chunk c starts at member c+1 and member c adds last. Ring = ranks 0..n-1. */
        int first = (chunk + 1) % n;
        for (int step = 2; step <= n; step++) add_rows(dt, row(rows, first), row(rows, (chunk + step) % n), len);
        return row(rows, first);
    }
    case EQ_ALGO_TREE:
        /* value(i) = dt(dt(x[i] + value(2i+1)) + value(2i+2)), rooted at rank 0. Children have
         * larger indices, so going from n-1 down finishes them first. Real NCCL trees are per-node
         * chains joined by inter-node double binary trees (src/device/all_reduce.h runTreeSplit):
         * this models the reassociation a tree brings, not NCCL's topology. */
        for (int node = n - 1; node >= 0; node--) {
            if (2 * node + 1 < n) add_rows(dt, row(rows, node), row(rows, 2 * node + 1), len);
            if (2 * node + 2 < n) add_rows(dt, row(rows, node), row(rows, 2 * node + 2), len);
        }
        return row(rows, 0);
    case EQ_ALGO_FP32ACC: {
        /* NVLS / symmetric-memory reduce: the switch or kernel accumulates in fp32 (fp64 stays
         * fp64) in rank order and rounds to the wire dtype once. With fp32 on the wire this is
         * exactly seq. */
        eq_dtype acc_dt = dt == EQ_FP64 ? EQ_FP64 : EQ_FP32;
        for (int k = 1; k < n; k++) add_rows(acc_dt, row(rows, 0), row(rows, k), len);
        if (dt == EQ_BF16) {
            double *acc = row(rows, 0);
            for (size_t e = 0; e < len; e++) acc[e] = eq_round_bf16((float)acc[e]);
        }
        return row(rows, 0);
    }
    case EQ_ALGO_SEQ:
        /* rank 0 + rank 1 + ... + rank n-1, rounding after every add. */
        for (int k = 1; k < n; k++) add_rows(dt, row(rows, 0), row(rows, k), len);
        return row(rows, 0);
    case EQ_ALGO_MPI: /* not emulated: check_args refuses it before any block is folded */
    case EQ_ALGO_TP_INVARIANT: /* not a fold (collectives.h); refused the same way */
        break;
    }
    return row(rows, 0);
}

static void load_row(eq_dtype dt, const void *src, size_t first, size_t len, double *dst)
{
    switch (dt) {
    case EQ_BF16: {
        const uint16_t *s = (const uint16_t *)src + first;
        for (size_t e = 0; e < len; e++) dst[e] = eq_bf16_to_f32(s[e]);
        break;
    }
    case EQ_FP32: {
        const float *s = (const float *)src + first;
        for (size_t e = 0; e < len; e++) dst[e] = s[e];
        break;
    }
    case EQ_FP64:
        memcpy(dst, (const double *)src + first, len * sizeof(double));
        break;
    }
}

/* Values are already dt-exact here; the conversions below only narrow the storage. */
static void store_row(eq_dtype dt, const double *src, void *dst, size_t first, size_t len)
{
    switch (dt) {
    case EQ_BF16: {
        uint16_t *d = (uint16_t *)dst + first;
        for (size_t e = 0; e < len; e++) d[e] = eq_f32_to_bf16((float)src[e]);
        break;
    }
    case EQ_FP32: {
        float *d = (float *)dst + first;
        for (size_t e = 0; e < len; e++) d[e] = (float)src[e];
        break;
    }
    case EQ_FP64:
        memcpy((double *)dst + first, src, len * sizeof(double));
        break;
    }
}

/* Fold elements [begin, begin + len) of in[], all in ring chunk `chunk`, into out[0, len). */
static void fold_range(eq_algo algo, eq_dtype dt, eq_redop op, int n, const void *const in[], void *out,
                       size_t begin, size_t len, int chunk, double *rows)
{
    double scale = avg_scale(dt, n);
    for (size_t done = 0; done < len; done += FOLD_BLOCK) {
        size_t block_len = len - done < FOLD_BLOCK ? len - done : FOLD_BLOCK;
        for (int k = 0; k < n; k++) {
            load_row(dt, in[k], begin + done, block_len, row(rows, k));
            if (op == EQ_REDOP_AVG) scale_row(dt, row(rows, k), scale, block_len);
        }
        store_row(dt, fold_block(algo, dt, n, chunk, rows, block_len), out, done, block_len);
    }
}

static eq_status check_args(eq_algo algo, eq_dtype dt, eq_redop op, int n)
{
    if (n < 1) return EQ_FAIL(EQ_ERR_INTERNAL, "fold over %d members", n);
    if ((int)algo < 0 || (int)algo >= EQ_ALGO_COUNT) return EQ_FAIL(EQ_ERR_INTERNAL, "fold: algorithm %d", (int)algo);
    if ((int)dt < 0 || (int)dt >= EQ_DTYPE_COUNT) return EQ_FAIL(EQ_ERR_INTERNAL, "fold: dtype %d", (int)dt);
    if (op != EQ_REDOP_SUM && op != EQ_REDOP_AVG) return EQ_FAIL(EQ_ERR_INTERNAL, "fold: reduction op %d", (int)op);
    return EQ_OK;
}

static eq_status alloc_rows(int n, double **rows)
{
    *rows = malloc((size_t)n * FOLD_BLOCK * sizeof(double));
    if (*rows == NULL) return EQ_FAIL(EQ_ERR_NOMEM, "fold: no memory for %d rows of %d elements", n, FOLD_BLOCK);
    return EQ_OK;
}

eq_status eq_fold(eq_algo algo, eq_dtype dt, eq_redop op, int n, const void *const in[], void *out,
                  size_t count)
{
    return eq_fold_nccl(EQ_NCCL_CONFIG_DEFAULT, algo, dt, op, n, in, out, count);
}

eq_status eq_fold_nccl(eq_nccl_config nccl, eq_algo algo, eq_dtype dt, eq_redop op, int n, const void *const in[],
                       void *out, size_t count)
{
    eq_status st = EQ_OK;
    double *rows = NULL;
    EQ_TRY(check_args(algo, dt, op, n));
    if (nccl.channels < 0 || nccl.channels > EQ_NCCL_MAX_CHANNELS || (int)nccl.proto < 0 ||
        (int)nccl.proto >= EQ_NCCL_PROTO_COUNT)
        return EQ_FAIL(EQ_ERR_INTERNAL, "fold: %d NCCL channels, protocol %d", nccl.channels, (int)nccl.proto);
    if (n == 1) { /* one member: the input unchanged, for SUM and AVG alike */
        if (out != in[0]) memcpy(out, in[0], count * eq_dtype_size(dt));
        return EQ_OK;
    }
    EQ_TRY(alloc_rows(n, &rows));
    if (algo != EQ_ALGO_RING) { /* only ring's order depends on where an element travels */
        fold_range(algo, dt, op, n, in, out, 0, count, 0, rows);
        goto cleanup;
    }
    eq_nccl_piece piece = {0};
    for (size_t at = 0; at < count; at += piece.len) { /* NCCL's channels, loops and chunks */
        eq_nccl_ring_piece(nccl, eq_dtype_size(dt), n, count, at, &piece);
        fold_range(algo, dt, op, n, in, (char *)out + piece.begin * eq_dtype_size(dt), piece.begin, piece.len,
                   piece.chunk, rows);
    }
cleanup:
    free(rows);
    return st;
}

eq_status eq_fold_one_chunk(eq_algo algo, eq_dtype dt, eq_redop op, int n, const void *const in[],
                            void *out, size_t count, int chunk)
{
    eq_status st = EQ_OK;
    double *rows = NULL;
    size_t begin, len;
    EQ_TRY(check_args(algo, dt, op, n));
    if (chunk < 0 || chunk >= n) {
        st = EQ_FAIL(EQ_ERR_INTERNAL, "fold: chunk %d of %d", chunk, n);
        goto cleanup;
    }
    eq_fold_chunk_bounds(count, n, chunk, &begin, &len);
    if (n == 1) { /* the one chunk is the whole buffer, unchanged */
        if (out != in[0]) memcpy(out, in[0], len * eq_dtype_size(dt));
        return EQ_OK;
    }
    EQ_TRY(alloc_rows(n, &rows));
    fold_range(algo, dt, op, n, in, out, begin, len, chunk, rows);
cleanup:
    free(rows);
    return st;
}

void eq_fold_add(eq_dtype dt, void *acc, const void *x, size_t count)
{
    double a[FOLD_BLOCK], b[FOLD_BLOCK];
    for (size_t done = 0; done < count; done += FOLD_BLOCK) {
        size_t len = count - done < FOLD_BLOCK ? count - done : FOLD_BLOCK;
        load_row(dt, acc, done, len, a);
        load_row(dt, x, done, len, b);
        add_rows(dt, a, b, len);
        store_row(dt, a, acc, done, len);
    }
}

void eq_fold_premultiply(eq_dtype dt, int n, void *buf, size_t count)
{
    double a[FOLD_BLOCK], scale = avg_scale(dt, n);
    for (size_t done = 0; done < count; done += FOLD_BLOCK) {
        size_t len = count - done < FOLD_BLOCK ? count - done : FOLD_BLOCK;
        load_row(dt, buf, done, len, a);
        scale_row(dt, a, scale, len);
        store_row(dt, a, buf, done, len);
    }
}
