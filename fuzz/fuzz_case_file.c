/* libFuzzer harness: case files (harness/case_file.h). The input is a case file; when it parses,
 * the lookups the runner makes on it run as well (sizes, parameters, expectations per dtype and
 * layout, tensor patterns), so what the parser stored is read back. */
#include <stdint.h>
#include <string.h>

#include "fuzz/fuzz_file.h"
#include "harness/case_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Static: an eq_case is several KB, and the parser clears it itself. */
static eq_case c;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = eq_fuzz_file(0, "input.ini", data, size);
    if (eq_case_load(path, &c) == EQ_OK) {
        const eq_case_size *s = NULL;
        int64_t v;
        (void)eq_case_find_size(&c, "ci", &s);
        for (int i = 0; i < c.n_sizes; i++) {
            if (eq_case_find_size(&c, c.sizes[i].name, &s) != EQ_OK) __builtin_trap(); /* it was parsed */
            for (int k = 0; k < s->count; k++)
                if (eq_size_get(s, s->params[k].key, &v) != EQ_OK) __builtin_trap();
            (void)eq_size_get(s, "seq", &v);
            (void)eq_size_get_or(s, "batch", 1);
        }
        static const char *const names[] = {"ci_fc1_grad", "out", "fc2_out.imp_min", ""};
        for (int d = 0; d < c.n_dtypes; d++)
            for (int l = 0; l < c.n_layouts; l++) {
                (void)eq_case_expectation(&c, "cuda", c.dtypes[d], c.layouts[l]);
                eq_expect e;
                for (size_t n = 0; n < sizeof names / sizeof names[0]; n++) {
                    (void)eq_case_tensor_expectation(&c, "avg", c.layouts[l], names[n], &e);
                    (void)eq_case_tensor_expectation(&c, "sum", c.layouts[l], names[n], &e);
                }
            }
    }
    eq_error_clear(); /* the first error is kept until cleared: each input starts clean */
    return 0;
}
