/* The median's guess (harness/compare_median_guess.h): the sample, the window's gathering during
 * pass 2, and the selection within it. */
#include "harness/compare_median_guess.h"

#include <inttypes.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "harness/compare_blocks.h"
#include "harness/compare_median.h"

#define HALF_WIDTH 0.02 /* the window: the sample's quantiles 0.5 -+ this */

/* The |d| of the sampled pairs where both sides are finite, into s ([RUNS * RUN]); how many. */
static int64_t sample_differences(const eq_tensor *ref, const eq_tensor *test, int64_t n, double *s)
{
    double r[EQ_MEDIAN_SAMPLE_RUN], t[EQ_MEDIAN_SAMPLE_RUN];
    int64_t m = 0;
    for (int64_t run = 0; run < EQ_MEDIAN_SAMPLE_RUNS; run++) {
        const int64_t at = run * (n - EQ_MEDIAN_SAMPLE_RUN) / (EQ_MEDIAN_SAMPLE_RUNS - 1);
        eq_tensor_widen(ref, at, EQ_MEDIAN_SAMPLE_RUN, r);
        eq_tensor_widen(test, at, EQ_MEDIAN_SAMPLE_RUN, t);
        for (int i = 0; i < EQ_MEDIAN_SAMPLE_RUN; i++)
            if (isfinite(r[i]) && isfinite(t[i])) s[m++] = fabs(t[i] - r[i]);
    }
    return m;
}

eq_status eq_median_guess_begin(const eq_tensor *ref, const eq_tensor *test, eq_median_guess *g)
{
    g->kind = EQ_GUESS_NONE, g->lo = g->hi = 0, g->values = NULL, g->room = 0, g->n_below = 0;
    g->fine = NULL, g->shift = 0, g->front = -1, g->selected = -1;
    atomic_init(&g->count, 0);
    const int64_t n = eq_tensor_numel(ref);
    if (n < 4 * EQ_MEDIAN_DIRECT) return EQ_OK;
    double *s = malloc((size_t)EQ_MEDIAN_SAMPLE_RUNS * EQ_MEDIAN_SAMPLE_RUN * sizeof *s);
    if (s == NULL) return EQ_FAIL(EQ_ERR_NOMEM, "cannot allocate the median's sample");
    const int64_t m = sample_differences(ref, test, n, s);
    if (m < EQ_MEDIAN_SAMPLE_RUNS) { /* mostly NaN or Inf: no guess */
        free(s);
        return EQ_OK;
    }
    const double low = eq_median_select(s, m, (int64_t)((0.5 - HALF_WIDTH) * (double)(m - 1))),
                 high = eq_median_select(s, m, (int64_t)ceil((0.5 + HALF_WIDTH) * (double)(m - 1)));
    const uint64_t first = double_bits(low) >> BIN_SHIFT, last = double_bits(high) >> BIN_SHIFT;
    const uint64_t lo = first == 0 ? 1 : first << BIN_SHIFT, hi = (last + 1) << BIN_SHIFT;
    int64_t in_window = 0;
    for (int64_t i = 0; i < m; i++) in_window += double_bits(s[i]) - lo < hi - lo;
    free(s);
    if (high == 0.0) {
        g->kind = EQ_GUESS_ZERO;
        return EQ_OK;
    }
    if (in_window > m / 8) return EQ_OK; /* bins of few values: the histogram's extremes find them */
    g->room = n / 8;
    g->values = malloc((size_t)g->room * sizeof *g->values);
    if (g->values == NULL) return EQ_FAIL(EQ_ERR_NOMEM, "cannot allocate %" PRId64 " doubles for the median", g->room);
    g->kind = EQ_GUESS_WINDOW, g->lo = lo, g->hi = hi;
    for (g->shift = 0; ((hi - lo - 1) >> g->shift) >= (uint64_t)EQ_MEDIAN_FINE_BINS; g->shift++) continue;
    return EQ_OK;
}

void eq_median_guess_offer(eq_median_guess *g, const double *d, int64_t len)
{
    double found[BLOCK];
    const uint64_t lo = g->lo, width = g->hi - g->lo;
    int64_t m = 0;
    for (int64_t i = 0; i < len; i++) { /* unsigned: below lo wraps above width; NaN and Inf lie above hi */
        found[m] = d[i];
        m += double_bits(d[i]) - lo < width;
    }
    if (m == 0) return;
    const int64_t at = atomic_fetch_add(&g->count, m);
    if (at + m <= g->room) memcpy(g->values + at, found, (size_t)m * sizeof *found);
}

/* The values of sub-bin `sub` moved to the front of values (count of them: fine[sub]). */
static void to_front(eq_median_guess *g, int64_t count, int64_t sub)
{
    double *v = g->values;
    int64_t front = 0;
    for (int64_t i = 0; i < count; i++)
        if ((int64_t)((double_bits(v[i]) - g->lo) >> g->shift) == sub) {
            const double swap = v[front];
            v[front++] = v[i];
            v[i] = swap;
        }
    g->front = sub;
    g->selected = -1;
}

eq_status eq_median_guess_value(eq_median_guess *g, int64_t n_zero, int64_t rank, int *found, double *value)
{
    *found = 0;
    const int64_t count = atomic_load(&g->count), start = n_zero + g->n_below;
    if (g->kind != EQ_GUESS_WINDOW || count > g->room || rank < start || rank >= start + count) return EQ_OK;
    if (g->fine == NULL) { /* the window's finer histogram, once */
        if ((g->fine = calloc((size_t)EQ_MEDIAN_FINE_BINS, sizeof *g->fine)) == NULL)
            return EQ_FAIL(EQ_ERR_NOMEM, "cannot allocate the median's finer histogram");
        for (int64_t i = 0; i < count; i++) g->fine[(double_bits(g->values[i]) - g->lo) >> g->shift]++;
    }
    int64_t sub = 0, below = start;
    while (below + g->fine[sub] <= rank) below += g->fine[sub++];
    if (g->front != sub) to_front(g, count, sub);
    const int64_t k = rank - below, in_sub = g->fine[sub];
    if (g->selected >= 0 && k == g->selected + 1) { /* the next after one selected: the least above it */
        double least = INFINITY;
        for (int64_t i = k; i < in_sub; i++) least = g->values[i] < least ? g->values[i] : least;
        *value = least;
    } else {
        *value = eq_median_select(g->values, in_sub, k);
    }
    g->selected = k;
    *found = 1;
    return EQ_OK;
}

void eq_median_guess_end(eq_median_guess *g)
{
    free(g->values);
    free(g->fine);
    g->values = NULL;
    g->fine = NULL;
}
