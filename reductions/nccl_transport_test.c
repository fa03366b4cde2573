/* The NCCL transport (needs a GPU: exits 77, meson's skip, with "no CUDA device" where there is
 * none). Run alone it is NCCL with one rank; under `mpirun -np N` (one GPU per rank) it checks the
 * collectives across N ranks.
 *
 * Every rank can build every rank's input (they are keyed by member, not by process), so each
 * checks its result against reductions/fold.c's emulation of the ring:
 *   one rank      the result must equal the input bit for bit (SUM and AVG alike);
 *   N ranks       fp64 and fp32 within the ring's rounding bound ((N-1) u sum |x|); bf16 likewise
 *                 with its u; the count of elements bit-identical to the ring emulation is printed
 *                 (NCCL splits large buffers over channels, so its chunk of an element can differ).
 * Then the failure path: a broadcast from a root outside the group must come back as an error
 * naming this rank, not a hang or a crash. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "harness/base/rng.h"
#include "harness/base/testing.h"
#include "reductions/cuda_device.h"
#include "reductions/fold.h"
#include "reductions/nccl_transport.h"

#define COUNT 4096

static void member_input(eq_dtype dt, int member, eq_tensor *t)
{
    char name[32];
    snprintf(name, sizeof name, "member%d", member);
    eq_tensor_init_2d(t, dt, 1, COUNT);
    eq_rng_fill_normal(t, 9, name, member % 2 ? 1.0 : 30.0);
}

static void check_all_reduce(const eq_group *g, eq_dtype dt, eq_redop op, int rank)
{
    const int n = g->size;
    eq_tensor in[64], mine, expect;
    const void *ins[64];
    for (int k = 0; k < n; k++) {
        member_input(dt, k, &in[k]);
        ins[k] = in[k].data;
    }
    member_input(dt, g->first_local, &mine);
    eq_tensor_init_2d(&expect, dt, 1, COUNT);
    EQ_EXPECT_OK(eq_fold(EQ_ALGO_RING, dt, op, n, ins, expect.data, COUNT));
    void *bufs[1] = {mine.data};
    EQ_EXPECT_OK(eq_all_reduce(g, bufs, COUNT, dt, op));
    int64_t same = 0, over = 0;
    const double u = eq_dtype_unit_roundoff(dt);
    for (int64_t i = 0; i < COUNT; i++) {
        double got = eq_tensor_get(&mine, i), want = eq_tensor_get(&expect, i), mag = 0;
        for (int k = 0; k < n; k++) mag += fabs(eq_tensor_get(&in[k], i));
        same += got == want || (isnan(got) && isnan(want));
        over += fabs(got - want) > 2 * (n + 1) * u * mag;
    }
    printf("rank %d: all_reduce %s %s over %d ranks: %lld of %d elements bit-identical to the ring emulation\n",
           rank, eq_dtype_name(dt), eq_redop_name(op), n, (long long)same, COUNT);
    if (n == 1) EQ_EXPECT(same == COUNT, "one rank: the input must come back unchanged");
    EQ_EXPECT(over == 0, "%lld elements beyond the ring's rounding bound", (long long)over);
    for (int k = 0; k < n; k++) eq_tensor_free(&in[k]);
    eq_tensor_free(&mine), eq_tensor_free(&expect);
}

static void check_gather_scatter(const eq_group *g, int rank)
{
    const int n = g->size, me = g->first_local;
    float mine[8], gathered[8 * 64], full[8 * 64], part[8];
    for (int i = 0; i < 8; i++) mine[i] = (float)(me * 100 + i);
    const void *in[1] = {mine};
    void *out[1] = {gathered};
    EQ_EXPECT_OK(eq_all_gather(g, in, out, 8, EQ_FP32));
    int wrong = 0;
    for (int k = 0; k < n; k++)
        for (int i = 0; i < 8; i++) wrong += gathered[k * 8 + i] != (float)(k * 100 + i);
    EQ_EXPECT(wrong == 0, "rank %d: all_gather put %d elements in the wrong place", rank, wrong);
    /* reduce_scatter of integers (exact in any order): chunk me of sum_k (k + i). */
    for (int i = 0; i < 8 * n; i++) full[i] = (float)(me + i);
    const void *fin[1] = {full};
    void *pout[1] = {part};
    EQ_EXPECT_OK(eq_reduce_scatter(g, fin, pout, 8, EQ_FP32, EQ_REDOP_SUM));
    wrong = 0;
    for (int i = 0; i < 8; i++) wrong += part[i] != (float)(n * (n - 1) / 2 + n * (me * 8 + i));
    EQ_EXPECT(wrong == 0, "rank %d: reduce_scatter got %d elements wrong", rank, wrong);
    double value = me == 0 ? 3.25 : -1;
    void *bbuf[1] = {&value};
    EQ_EXPECT_OK(eq_broadcast(g, bbuf, 1, EQ_FP64, 0));
    EQ_EXPECT(value == 3.25, "rank %d: broadcast from 0 gave %g", rank, value);
}

int main(int argc, char **argv)
{
    const char *why = "";
    if (!eq_cuda_available(&why)) {
        printf("nccl_transport_test: no CUDA device (%s): skipped\n", why);
        return 77;
    }
    MPI_Init(&argc, &argv);
    eq_nccl_bootstrap boot;
    eq_nccl_world *world = NULL;
    EQ_EXPECT_OK(eq_nccl_bootstrap_from_mpi(MPI_COMM_WORLD, &boot));
    /* dp x tp = size x 1 when odd, else (size/2) x 2: the dp and tp splits both get exercised. */
    const int tp = boot.world_size % 2 == 0 ? 2 : 1, dp = boot.world_size / tp;
    eq_status st = eq_nccl_world_init(&boot, dp, tp, EQ_ALGO_RING, &world);
    EQ_EXPECT(st == EQ_OK, "rank %d: NCCL world: %s", boot.world_rank, eq_error_message());
    if (st == EQ_OK) {
        const eq_nccl_axis axes[3] = {EQ_NCCL_WORLD, EQ_NCCL_DP, EQ_NCCL_TP};
        const eq_dtype dtypes[3] = {EQ_FP32, EQ_BF16, EQ_FP64};
        for (int a = 0; a < 3; a++) {
            eq_group g = eq_nccl_group(world, axes[a]);
            for (int d = 0; d < 3; d++) {
                check_all_reduce(&g, dtypes[d], EQ_REDOP_SUM, boot.world_rank);
                check_all_reduce(&g, dtypes[d], EQ_REDOP_AVG, boot.world_rank);
            }
            check_gather_scatter(&g, boot.world_rank);
        }
        /* The failure path, last (it aborts the communicators). */
        eq_group g = eq_nccl_group(world, EQ_NCCL_WORLD);
        double x = 1;
        void *bufs[1] = {&x};
        char want[64];
        snprintf(want, sizeof want, "rank %d/%d", boot.world_rank, boot.world_size);
        st = eq_broadcast(&g, bufs, 1, EQ_FP64, boot.world_size + 5);
        EQ_EXPECT(st == EQ_ERR_BACKEND, "a broadcast from root %d gave status %d", boot.world_size + 5, (int)st);
        EQ_EXPECT(strstr(eq_error_message(), want) != NULL, "the error does not name the rank: %s", eq_error_message());
        printf("rank %d: bad root reported as: %s\n", boot.world_rank, eq_error_message());
        eq_error_clear();
    }
    eq_nccl_world_free(&world);
    eq_cuda_close();
    MPI_Finalize();
    return eq_test_finish("nccl_transport_test");
}
