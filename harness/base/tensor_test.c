/* Tensor storage: eq_tensor_init zeroes whatever was freed before; while freed storage is kept,
 * eq_tensor_init_whole takes that of a freed tensor of the same bytes (8 MiB or more), not of other
 * sizes, and the store keeps at most 8 of them; and nothing is kept when it is off. */
#include <stdint.h>
#include <string.h>

#include "harness/base/tensor.h"
#include "harness/base/testing.h"

#define ROWS 2048
#define COLS 1024 /* fp32: 8 MiB */

static void test_reuse(void)
{
    eq_tensor a, b;
    EQ_EXPECT_OK(eq_tensor_init_2d(&a, EQ_FP32, ROWS, COLS));
    memset(a.data, 0x5a, eq_tensor_bytes(&a));
    void *storage = a.data;
    eq_tensor_free(&a);
    EQ_EXPECT(a.data == NULL && a.ndim == 0, "a freed tensor is empty");
    /* another size: fresh storage */
    EQ_EXPECT_OK(eq_tensor_init_whole(&b, EQ_FP32, 2, (const int64_t[]){ROWS, COLS + 1}));
    EQ_EXPECT(b.data != storage && b.shape[1] == COLS + 1, "a tensor of other bytes gets other storage");
    eq_tensor_free(&b);
    /* the same bytes in another dtype and shape: the kept storage, as it was */
    EQ_EXPECT_OK(eq_tensor_init_whole(&b, EQ_BF16, 2, (const int64_t[]){ROWS, 2 * COLS}));
    EQ_EXPECT(b.data == storage, "the same bytes reuse the kept storage");
    EQ_EXPECT(b.dtype == EQ_BF16 && b.ndim == 2 && b.shape[0] == ROWS && b.shape[1] == 2 * COLS,
              "the reused tensor has its own dtype and shape");
    EQ_EXPECT(((const unsigned char *)b.data)[12345] == 0x5a, "whole: not zeroed");
    eq_tensor_free(&b);
    /* eq_tensor_init: zeroed, whatever is kept */
    EQ_EXPECT_OK(eq_tensor_init_2d(&a, EQ_FP32, ROWS, COLS));
    const unsigned char *bytes = a.data;
    size_t nonzero = 0;
    for (size_t i = 0; i < eq_tensor_bytes(&a); i++) nonzero += bytes[i] != 0;
    EQ_EXPECT(nonzero == 0, "eq_tensor_init: %zu bytes not zero", nonzero);
    eq_tensor_free(&a);
    /* small tensors are not kept */
    EQ_EXPECT_OK(eq_tensor_init_2d(&a, EQ_FP32, 4, 4));
    eq_tensor_free(&a);
}

/* Ten tensors freed: eight kept, so eight of ten new ones hold what the freed ones held (fresh
 * storage is zeroed; an address alone would not tell, the kernel hands freed pages out again). */
static void test_bound(void)
{
    eq_tensor t[10];
    for (int i = 0; i < 10; i++) {
        EQ_EXPECT_OK(eq_tensor_init_whole(&t[i], EQ_FP32, 2, (const int64_t[]){ROWS, COLS}));
        memset(t[i].data, 0x5a, eq_tensor_bytes(&t[i]));
    }
    for (int i = 0; i < 10; i++) eq_tensor_free(&t[i]);
    int reused = 0;
    for (int i = 0; i < 10; i++) {
        EQ_EXPECT_OK(eq_tensor_init_whole(&t[i], EQ_FP32, 2, (const int64_t[]){ROWS, COLS}));
        reused += ((const unsigned char *)t[i].data)[4321] == 0x5a;
    }
    EQ_EXPECT(reused == 8, "%d of 10 reuse kept storage, want 8", reused);
    for (int i = 0; i < 10; i++) eq_tensor_free(&t[i]);
}

/* Off (as outside a streaming compare): nothing kept. */
static void test_off(void)
{
    eq_tensor t;
    EQ_EXPECT_OK(eq_tensor_init_whole(&t, EQ_FP32, 2, (const int64_t[]){ROWS, COLS}));
    memset(t.data, 0x5a, eq_tensor_bytes(&t));
    eq_tensor_free(&t);
    EQ_EXPECT_OK(eq_tensor_init_whole(&t, EQ_FP32, 2, (const int64_t[]){ROWS, COLS}));
    EQ_EXPECT(((const unsigned char *)t.data)[4321] == 0, "off: fresh, zeroed storage");
    eq_tensor_free(&t);
}

int main(void)
{
    test_off();
    eq_tensor_keep_freed(1);
    test_reuse();
    eq_tensor_keep_freed(0);
    eq_tensor_keep_freed(1);
    test_bound();
    eq_tensor_keep_freed(0);
    test_off();
    return eq_test_finish("tensor_test");
}
