/* The equivalence matrix's result (harness/matrix_result.h). */
#include "harness/matrix_result.h"

#include <stdlib.h>
#include <string.h>

int eq_matrix_unexpected_cells(const eq_matrix *m)
{
    int n = 0;
    for (int i = 0; i < m->count; i++) n += !m->rows[i].as_expected;
    return n;
}

void eq_matrix_free(eq_matrix *m)
{
    for (int i = 0; i < m->count; i++) eq_comparison_free(&m->comparisons[i]);
    free(m->comparisons);
    free(m->rows);
    memset(m, 0, sizeof *m);
}
