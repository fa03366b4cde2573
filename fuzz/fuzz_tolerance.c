/* libFuzzer harness: tolerance tables (harness/tolerance.h). The input is a tolerance file; when it
 * parses, every entry is looked up by name again and checked to be what the loader promises
 * (finite atol and rtol >= 0, a source). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "fuzz/fuzz_file.h"
#include "harness/tolerance.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static eq_tolerance_table table; /* about 24 KB: static rather than on the stack */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = eq_fuzz_file(0, "input.ini", data, size);
    if (eq_tolerance_load(path, &table) == EQ_OK) {
        if (table.count < 1 || table.count > EQ_TOL_MAX_ENTRIES) __builtin_trap();
        for (int i = 0; i < table.count; i++) {
            const eq_tolerance *t = &table.entries[i];
            if (eq_tolerance_find(&table, t->name) != t) __builtin_trap(); /* names are unique */
            if (!isfinite(t->atol) || t->atol < 0 || !isfinite(t->rtol) || t->rtol < 0 || t->source[0] == '\0')
                __builtin_trap();
        }
        (void)eq_tolerance_find(&table, "no such entry");
    }
    eq_error_clear(); /* the first error is kept until cleared: each input starts clean */
    return 0;
}
