/* The device fold against the host's, bit for bit (needs a GPU: exits 77, meson's skip, with
 * "no CUDA device" where there is none). reductions/fold_test.c checks the host fold against
 * hand-computed values and a per-element reference; this checks that the device folds in the same
 * order with the same roundings: every algorithm, dtype and op, member counts 1..16 (and 64),
 * buffer lengths that do and do not divide into ring chunks, NaN (its position, not its payload),
 * Inf and signed zeros among the inputs. Then the sim-cuda transport against the sim one
 * (all_reduce, reduce_scatter), and that the comparison is not blind: the seq order on the device
 * differs from the ring order on the host. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/base/rng.h"
#include "harness/base/testing.h"
#include "reductions/cuda_device.h"
#include "reductions/fold.h"
#include "reductions/fold_cuda.h"

#define MAX_N 64

/* Member inputs of mixed scales (so adds round and orders matter), a few specials. */
static void make_inputs(eq_dtype dt, int n, size_t count, eq_tensor *t, void *in[])
{
    for (int k = 0; k < n; k++) {
        char name[32];
        snprintf(name, sizeof name, "member%d", k);
        eq_tensor_init_2d(&t[k], dt, 1, (int64_t)count);
        eq_rng_fill_normal(&t[k], 5, name, k % 3 == 0 ? 100.0 : k % 3 == 1 ? 1.0 : 0.01);
        in[k] = t[k].data;
    }
    if (count > 16 && n > 2) {
        eq_tensor_set(&t[1], 3, NAN);
        eq_tensor_set(&t[2], 5, INFINITY);
        eq_tensor_set(&t[0], 7, -0.0);
        eq_tensor_set(&t[1], 7, -0.0);
    }
}

/* Is the element at p a NaN (any payload)? */
static int is_nan(eq_dtype dt, const void *p)
{
    if (dt == EQ_BF16) {
        uint16_t bits;
        memcpy(&bits, p, sizeof bits);
        return (bits & 0x7FFF) > 0x7F80;
    }
    if (dt == EQ_FP32) {
        float f;
        memcpy(&f, p, sizeof f);
        return isnan(f);
    }
    double d;
    memcpy(&d, p, sizeof d);
    return isnan(d);
}

/* Elements whose bits differ. Two NaNs are equal whatever their payloads: the PTX ISA leaves the
 * NaN an fp32 add returns unspecified (GPUs return 0x7FFFFFFF, the host passes the input's
 * through), and no collective promises a payload. A NaN against a number still differs. */
static size_t bits_differ(eq_dtype dt, const void *a, const void *b, size_t count)
{
    const size_t elem = eq_dtype_size(dt);
    size_t differ = 0;
    for (size_t i = 0; i < count; i++) {
        const char *x = (const char *)a + i * elem, *y = (const char *)b + i * elem;
        if (is_nan(dt, x) && is_nan(dt, y)) continue;
        differ += memcmp(x, y, elem) != 0;
    }
    return differ;
}

static void check_fold(eq_algo algo, eq_dtype dt, eq_redop op, int n, size_t count)
{
    eq_tensor t[MAX_N], host, device;
    void *in[MAX_N];
    make_inputs(dt, n, count, t, in);
    eq_tensor_init_2d(&host, dt, 1, (int64_t)count);
    eq_tensor_init_2d(&device, dt, 1, (int64_t)count);
    EQ_EXPECT_OK(eq_fold(algo, dt, op, n, (const void *const *)in, host.data, count));
    EQ_EXPECT_OK(eq_fold_cuda(algo, dt, op, n, (const void *const *)in, device.data, count));
    size_t differ = bits_differ(dt, host.data, device.data, count);
    EQ_EXPECT(differ == 0, "%s %s %s n=%d count=%zu: %zu of %zu elements differ from the host fold", eq_algo_name(algo),
              eq_dtype_name(dt), eq_redop_name(op), n, count, differ, count);
    if (algo == EQ_ALGO_RING) { /* another placement (reductions/nccl_layout.h): the same on both */
        const eq_nccl_config ll = {3, EQ_NCCL_LL};
        EQ_EXPECT_OK(eq_fold_nccl(ll, algo, dt, op, n, (const void *const *)in, host.data, count));
        EQ_EXPECT_OK(eq_fold_cuda_nccl(ll, algo, dt, op, n, (const void *const *)in, device.data, count));
        differ = bits_differ(dt, host.data, device.data, count);
        EQ_EXPECT(differ == 0, "ring, 3 channels, LL, %s %s n=%d count=%zu: %zu elements differ from the host fold",
                  eq_dtype_name(dt), eq_redop_name(op), n, count, differ);
    }
    for (int k = 0; k < n; k++) eq_tensor_free(&t[k]);
    eq_tensor_free(&host), eq_tensor_free(&device);
}

static void check_transport(eq_algo algo, eq_dtype dt, eq_redop op, int n, size_t per_member)
{
    const size_t count = (size_t)n * per_member;
    eq_tensor t[MAX_N], t2[MAX_N], host_out[MAX_N], dev_out[MAX_N];
    void *in[MAX_N], *in2[MAX_N], *ho[MAX_N], *dv[MAX_N];
    make_inputs(dt, n, count, t, in);
    make_inputs(dt, n, count, t2, in2);
    for (int k = 0; k < n; k++) {
        eq_tensor_init_2d(&host_out[k], dt, 1, (int64_t)per_member);
        eq_tensor_init_2d(&dev_out[k], dt, 1, (int64_t)per_member);
        ho[k] = host_out[k].data;
        dv[k] = dev_out[k].data;
    }
    eq_group sim = eq_group_sim(n, algo), dev = sim;
    dev.transport = &eq_transport_sim_cuda;
    EQ_EXPECT_OK(eq_reduce_scatter(&sim, (const void *const *)in, ho, per_member, dt, op));
    EQ_EXPECT_OK(eq_reduce_scatter(&dev, (const void *const *)in, dv, per_member, dt, op));
    size_t differ = 0;
    for (int k = 0; k < n; k++) differ += bits_differ(dt, ho[k], dv[k], per_member);
    EQ_EXPECT(differ == 0, "reduce_scatter %s %s n=%d: %zu elements differ", eq_algo_name(algo), eq_dtype_name(dt), n,
              differ);
    EQ_EXPECT_OK(eq_all_reduce(&sim, in, count, dt, op));
    EQ_EXPECT_OK(eq_all_reduce(&dev, in2, count, dt, op));
    differ = 0;
    for (int k = 0; k < n; k++) differ += bits_differ(dt, in[k], in2[k], count);
    EQ_EXPECT(differ == 0, "all_reduce %s %s n=%d: %zu elements differ", eq_algo_name(algo), eq_dtype_name(dt), n,
              differ);
    for (int k = 0; k < n; k++) {
        eq_tensor_free(&t[k]), eq_tensor_free(&t2[k]);
        eq_tensor_free(&host_out[k]), eq_tensor_free(&dev_out[k]);
    }
}

int main(void)
{
    const char *why = "";
    if (!eq_cuda_available(&why)) {
        printf("fold_cuda_test: no CUDA device (%s): skipped\n", why);
        return 77;
    }
    static const int members[] = {1, 2, 3, 4, 7, 8, 16, 64};
    static const size_t counts[] = {1, 5, 16, 1000, 4099, 1 << 18};
    const eq_dtype dtypes[] = {EQ_FP32, EQ_BF16, EQ_FP64};
    for (int a = 0; a < EQ_ALGO_COUNT; a++)
        for (int d = 0; d < 3; d++)
            for (int op = 0; op < 2; op++)
                for (size_t m = 0; m < sizeof members / sizeof members[0]; m++)
                    for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
                        if (members[m] == 64 && counts[c] > 4099) continue; /* 64 x 256k: covered by the smaller counts */
                        check_fold((eq_algo)a, dtypes[d], (eq_redop)op, members[m], counts[c]);
                    }
    for (int a = 0; a < EQ_ALGO_COUNT; a++)
        for (int d = 0; d < 3; d++) {
            check_transport((eq_algo)a, dtypes[d], EQ_REDOP_SUM, 4, 1023);
            check_transport((eq_algo)a, dtypes[d], EQ_REDOP_AVG, 8, 64);
        }

    /* Not blind: seq on the device against ring on the host, bf16, 8 members, must differ. */
    {
        eq_tensor t[MAX_N], host, device;
        void *in[MAX_N];
        make_inputs(EQ_BF16, 8, 4096, t, in);
        eq_tensor_init_2d(&host, EQ_BF16, 1, 4096);
        eq_tensor_init_2d(&device, EQ_BF16, 1, 4096);
        EQ_EXPECT_OK(eq_fold(EQ_ALGO_RING, EQ_BF16, EQ_REDOP_SUM, 8, (const void *const *)in, host.data, 4096));
        EQ_EXPECT_OK(eq_fold_cuda(EQ_ALGO_SEQ, EQ_BF16, EQ_REDOP_SUM, 8, (const void *const *)in, device.data, 4096));
        size_t differ = bits_differ(EQ_BF16, host.data, device.data, 4096);
        printf("bf16, 8 members: device seq order differs from host ring order in %zu of 4096 elements\n", differ);
        EQ_EXPECT(differ > 0, "another order gave the same bits everywhere: the comparison cannot see an order");
        for (int k = 0; k < 8; k++) eq_tensor_free(&t[k]);
        eq_tensor_free(&host), eq_tensor_free(&device);
    }
    eq_fold_cuda_release();
    eq_cuda_close();
    return eq_test_finish("fold_cuda_test");
}
