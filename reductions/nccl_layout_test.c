/* eq_nccl_ring_piece against placements worked out by hand from NCCL's source (the formulas cited in
 * nccl_layout.c), each written out below so it can be checked without running the code. */
#include <string.h>

#include "harness/base/status.h"
#include "harness/base/testing.h"
#include "reductions/fold.h"
#include "reductions/nccl_layout.h"

/* One element's expected place: channel, loop, chunk, and the piece [begin, begin + len). */
typedef struct {
    size_t at;
    int channel;
    size_t loop;
    int chunk;
    size_t begin, len;
} placed;

static void expect_places(const char *what, eq_nccl_config cfg, size_t elem_size, int n, size_t count,
                          const placed *want, int n_want)
{
    for (int i = 0; i < n_want; i++) {
        eq_nccl_piece p;
        eq_nccl_ring_piece(cfg, elem_size, n, count, want[i].at, &p);
        EQ_EXPECT(p.channel == want[i].channel && p.loop == want[i].loop && p.chunk == want[i].chunk &&
                      p.begin == want[i].begin && p.len == want[i].len,
                  "%s: element %zu in channel %d loop %zu chunk %d [%zu, +%zu), want channel %d loop %zu chunk %d "
                  "[%zu, +%zu)",
                  what, want[i].at, p.channel, p.loop, p.chunk, p.begin, p.len, want[i].channel, want[i].loop,
                  want[i].chunk, want[i].begin, want[i].len);
    }
}

/* Walking the pieces covers [0, count) once, in order, each piece inside one chunk. */
static void expect_cover(const char *what, eq_nccl_config cfg, size_t elem_size, int n, size_t count)
{
    size_t at = 0;
    int pieces = 0;
    while (at < count && pieces < 100000) {
        eq_nccl_piece p;
        eq_nccl_ring_piece(cfg, elem_size, n, count, at, &p);
        if (p.begin != at || p.len == 0 || p.chunk < 0 || p.chunk >= n) break;
        at += p.len;
        pieces++;
    }
    EQ_EXPECT(at == count, "%s: the pieces stop at %zu of %zu", what, at, count);
}

/* The held-out row_parallel: 37 x 3 rows x 77 outputs = 8547 bf16 elements, tp 4, one
 * channel, Simple. One loop holds 4 * 2 MiB / 2 B elements, so this is runRing's last (only) loop:
 * chunkCount = alignUp(divUp(8547, 4) = 2137, 16 / 2 = 8) = 2144, chunks [0, 2144), [2144, 4288),
 * [4288, 6432), [6432, 8547) (2115). The front-loaded split is 2137, 2137, 2137, 2136: its
 * boundaries 2137, 4274, 6411 against 2144, 4288, 6432 move 7 + 14 + 21 = 42 elements. */
static void test_one_channel_aligned_chunks(void)
{
    const placed want[] = {
        {0, 0, 0, 0, 0, 2144},       {2136, 0, 0, 0, 0, 2144},    {2137, 0, 0, 0, 0, 2144},
        {2143, 0, 0, 0, 0, 2144},    {2144, 0, 0, 1, 2144, 2144}, {4287, 0, 0, 1, 2144, 2144},
        {4288, 0, 0, 2, 4288, 2144}, {6432, 0, 0, 3, 6432, 2115}, {8546, 0, 0, 3, 6432, 2115},
    };
    expect_places("8547 bf16, 4 ranks", EQ_NCCL_CONFIG_DEFAULT, 2, 4, 8547, want, (int)(sizeof want / sizeof *want));
    int moved = 0;
    for (size_t e = 0; e < 8547; e++) {
        eq_nccl_piece p;
        eq_nccl_ring_piece(EQ_NCCL_CONFIG_DEFAULT, 2, 4, 8547, e, &p);
        size_t begin, len;
        eq_fold_chunk_bounds(8547, 4, p.chunk, &begin, &len);
        moved += e < begin || e >= begin + len;
    }
    EQ_EXPECT(moved == 42, "%d elements in another chunk than the front-loaded split's, want 42", moved);
    expect_cover("8547 bf16, 4 ranks", EQ_NCCL_CONFIG_DEFAULT, 2, 4, 8547);
}

/* Small counts. fp32, 3 ranks, 10 elements: alignUp(divUp(10, 3) = 4, 4) = 4: [0, 4), [4, 8),
 * [8, 10) (the front-loaded split: [0, 4), [4, 7), [7, 10)). bf16, 16 ranks, 64 elements (a
 * LayerNorm gradient over dp 16): alignUp(4, 8) = 8, so chunks 0..7 hold 8 elements and 8..15
 * none; element 63 is in chunk 7 and its fold starts at rank 8. fp64, 2 ranks, 6 elements:
 * alignUp(3, 2) = 4: [0, 4), [4, 6). */
static void test_small_counts(void)
{
    const placed fp32_3[] = {{0, 0, 0, 0, 0, 4}, {3, 0, 0, 0, 0, 4}, {4, 0, 0, 1, 4, 4}, {7, 0, 0, 1, 4, 4},
                             {8, 0, 0, 2, 8, 2}, {9, 0, 0, 2, 8, 2}};
    expect_places("10 fp32, 3 ranks", EQ_NCCL_CONFIG_DEFAULT, 4, 3, 10, fp32_3, 6);
    const placed bf16_16[] = {{0, 0, 0, 0, 0, 8}, {8, 0, 0, 1, 8, 8}, {63, 0, 0, 7, 56, 8}};
    expect_places("64 bf16, 16 ranks", EQ_NCCL_CONFIG_DEFAULT, 2, 16, 64, bf16_16, 3);
    EQ_EXPECT(eq_nccl_first_rank(7, 16) == 8 && eq_nccl_first_rank(3, 4) == 0, "first ranks %d, %d",
              eq_nccl_first_rank(7, 16), eq_nccl_first_rank(3, 4));
    const placed fp64_2[] = {{3, 0, 0, 0, 0, 4}, {4, 0, 0, 1, 4, 2}};
    expect_places("6 fp64, 2 ranks", EQ_NCCL_CONFIG_DEFAULT, 8, 2, 6, fp64_2, 2);
    expect_cover("64 bf16, 16 ranks", EQ_NCCL_CONFIG_DEFAULT, 2, 16, 64);
}

/* Loops. LL, bf16, 2 ranks: chunk = 512 KiB / 8 steps / 2 = 32 KiB = 16384 elements, a loop 32768.
 * 40000 elements: loop 0 is [0, 16384) chunk 0 and [16384, 32768) chunk 1; loop 1 has 7232 left:
 * alignUp(3616, 8) = 3616, [32768, 36384) chunk 0, [36384, 40000) chunk 1. LL128, bf16, 2 ranks:
 * chunk = 4915200 / 8 / 16 * 15 = 576000 B = 288000 elements; 600000 elements: loop 1 has 24000
 * left, chunks of 12000 from 576000. */
static void test_loops(void)
{
    const eq_nccl_config ll = {1, EQ_NCCL_LL}, ll128 = {1, EQ_NCCL_LL128};
    const placed want_ll[] = {{16383, 0, 0, 0, 0, 16384},      {16384, 0, 0, 1, 16384, 16384},
                              {32768, 0, 1, 0, 32768, 3616},   {36383, 0, 1, 0, 32768, 3616},
                              {36384, 0, 1, 1, 36384, 3616}};
    expect_places("40000 bf16, LL, 2 ranks", ll, 2, 2, 40000, want_ll, 5);
    const placed want_ll128[] = {{287999, 0, 0, 0, 0, 288000}, {288000, 0, 0, 1, 288000, 288000},
                                 {587999, 0, 1, 0, 576000, 12000}, {588000, 0, 1, 1, 588000, 12000}};
    expect_places("600000 bf16, LL128, 2 ranks", ll128, 2, 2, 600000, want_ll128, 4);
    expect_cover("40000 bf16, LL, 2 ranks", ll, 2, 2, 40000);
}

/* Channels (scheduleCollTasksToPlan). fp32, 2 ranks, 2 channels, 10000 elements = 40000 B:
 * traffic 80000, 40000 per channel; cells of divUp(32768 / 2, 16) * 16 = 16384 B (4096 elements),
 * divUp(40000, 16384) = 3 cells of 32768 traffic; 2 per channel; lo = 2 cells, hi = 1 cell less the
 * 3 * 4096 - 10000 = 2288 padding: channel 0 [0, 8192), channel 1 [8192, 10000). Channel 0:
 * alignUp(4096, 4) = 4096 per chunk; channel 1 (1808): alignUp(904, 4) = 904, [8192, 9096) chunk 0,
 * [9096, 10000) chunk 1. 100 fp32 elements on 2 channels: 400 B is one cell, so one channel:
 * alignUp(50, 4) = 52, [0, 52), [52, 100). */
static void test_channels(void)
{
    const eq_nccl_config two = {2, EQ_NCCL_SIMPLE};
    const placed want[] = {{4095, 0, 0, 0, 0, 4096},    {4096, 0, 0, 1, 4096, 4096}, {8191, 0, 0, 1, 4096, 4096},
                           {8192, 1, 0, 0, 8192, 904},  {9000, 1, 0, 0, 8192, 904},  {9096, 1, 0, 1, 9096, 904},
                           {9999, 1, 0, 1, 9096, 904}};
    expect_places("10000 fp32, 2 channels, 2 ranks", two, 4, 2, 10000, want, 7);
    const placed small[] = {{51, 0, 0, 0, 0, 52}, {52, 0, 0, 1, 52, 48}};
    expect_places("100 fp32, 2 channels, 2 ranks", two, 4, 2, 100, small, 2);
    expect_cover("10000 fp32, 2 channels, 2 ranks", two, 4, 2, 10000);
}

/* The fold follows the placement: at 10 fp32 elements over 3 ranks, element 7 is in chunk 1 (NCCL)
 * rather than chunk 2 (front-loaded), so its fold starts at rank 2. With x0 = -1, x1 = 1,
 * x2 = 2^-30: chunk 1 (ranks 2, 0, 1): (2^-30 - 1) + 1 = 0 in fp32 (2^-30 - 1 rounds to -1, the
 * spacing below 1 being 2^-24); chunk 2 (ranks 0, 1, 2): (-1 + 1) + 2^-30 = 2^-30. */
static void test_fold_follows_placement(void)
{
    float x0[10], x1[10], x2[10], out[10];
    for (int i = 0; i < 10; i++) x0[i] = -1.0f, x1[i] = 1.0f, x2[i] = 0x1p-30f;
    const void *in[3] = {x0, x1, x2};
    EQ_EXPECT_OK(eq_fold(EQ_ALGO_RING, EQ_FP32, EQ_REDOP_SUM, 3, in, out, 10));
    EQ_EXPECT(out[7] == 0.0f, "element 7 = %a, want 0 (chunk 1: ranks 2, 0, 1)", (double)out[7]);
    EQ_EXPECT(out[8] == 0x1p-30f, "element 8 = %a, want 2^-30 (chunk 2: ranks 0, 1, 2)", (double)out[8]);
}

int main(void)
{
    test_one_channel_aligned_chunks();
    test_small_counts();
    test_loops();
    test_channels();
    test_fold_follows_placement();
    return eq_test_finish("nccl_layout_test");
}
