/* The median of |d| for eq_stats_compute (harness/compare_median.h): the histogram's bin, its
 * extremes, and gathering and selection within it. */
#include "harness/compare_median.h"

#include <inttypes.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "harness/base/parallel.h"
#include "harness/compare_blocks.h"

void eq_median_histograms_combine(int64_t *histograms, int workers, int64_t n_zero)
{
    for (int64_t c = 1; c < (int64_t)workers * HISTOGRAM_COPIES; c++)
        for (int64_t b = 0; b < N_BINS; b++) histograms[b] += histograms[c * N_BINS + b];
    histograms[0] -= n_zero;
}

typedef struct {
    const eq_tensor *ref, *test;
} median_source;

double eq_median_select(double *a, int64_t n, int64_t k)
{
    int64_t lo = 0, hi = n - 1;
    while (lo < hi) {
        double x = a[lo], y = a[lo + (hi - lo) / 2], z = a[hi];
        double pivot = x < y ? (y < z ? y : (x < z ? z : x)) : (x < z ? x : (y < z ? z : y));
        int64_t i = lo, j = hi;
        while (i <= j) {
            while (a[i] < pivot) i++;
            while (a[j] > pivot) j--;
            if (i <= j) {
                double swap = a[i];
                a[i] = a[j];
                a[j] = swap;
                i++;
                j--;
            }
        }
        if (k <= j) hi = j;
        else if (k >= i) lo = i;
        else break; /* a[j+1..i-1] all equal the pivot */
    }
    return a[k];
}

/* The fp64 bits of the |d| in a histogram bin: [lo, hi) (bin -1: every finite |d|). */
static void bin_bits(int64_t bin, uint64_t *lo, uint64_t *hi)
{
    *lo = bin < 0 ? 0 : bin == 0 ? 1 : (uint64_t)bin << BIN_SHIFT; /* bin 0 without |d| = 0 */
    *hi = bin < 0 ? FP64_INF_BITS : (uint64_t)(bin + 1) << BIN_SHIFT;
}

/* Gathering the |d| of the finite pairs whose fp64 bits lie in [lo, hi) into out (at most `room`),
 * each block's in index order at a place it reserves: the blocks land in any order, which changes
 * no k-th smallest value (the one thing taken from them). */
typedef struct {
    const eq_tensor *ref, *test;
    uint64_t lo, hi;
    double *out;
    int64_t room;
    _Atomic int64_t count; /* found so far */
} gather_job;

STATS_WIDE static void gather_range(void *ctx, int64_t begin, int64_t end)
{
    gather_job *j = ctx;
    const int64_t n = eq_tensor_numel(j->ref);
    double r[BLOCK], t[BLOCK], found[BLOCK];
    for (int64_t b = begin; b < end; b++) {
        const int64_t len = block_len(n, b);
        eq_tensor_widen(j->ref, b * BLOCK, len, r);
        eq_tensor_widen(j->test, b * BLOCK, len, t);
        int64_t m = 0;
        for (int64_t i = 0; i < len; i++) {
            const double d = fabs(t[i] - r[i]);
            const uint64_t bits = double_bits(d);
            found[m] = d;
            m += (fabs(r[i]) <= DBL_MAX) & (fabs(t[i]) <= DBL_MAX) & (bits >= j->lo) & (bits < j->hi);
        }
        if (m == 0) continue;
        const int64_t at = atomic_fetch_add(&j->count, m);
        if (at < j->room) memcpy(j->out + at, found, (size_t)(m < j->room - at ? m : j->room - at) * sizeof *found);
    }
}

static int64_t gather_differences(const eq_tensor *ref, const eq_tensor *test, uint64_t lo, uint64_t hi, double *out,
                                  int64_t room)
{
    gather_job job = {ref, test, lo, hi, out, room, 0};
    eq_parallel_for(block_count(eq_tensor_numel(ref)), EQ_STATS_BLOCKS_PER_RANGE, gather_range, &job);
    return atomic_load(&job.count);
}

/* The |d| gathered from one histogram bin (bin -1: every |d|). */
typedef struct {
    int64_t bin;
    double *values;
    int64_t count;
} gathered_bin;

static eq_status gather_bin(const median_source *j, int64_t bin, int64_t count, gathered_bin *g)
{
    if (g->values != NULL && g->bin == bin) return EQ_OK;
    free(g->values);
    g->values = malloc((size_t)(count > 0 ? count : 1) * sizeof *g->values);
    g->bin = bin;
    g->count = count;
    if (g->values == NULL) return EQ_FAIL(EQ_ERR_NOMEM, "cannot allocate %" PRId64 " doubles for the median", count);
    uint64_t lo, hi;
    bin_bits(bin, &lo, &hi);
    const int64_t found = gather_differences(j->ref, j->test, lo, hi, g->values, count);
    if (found != count)
        return EQ_FAIL(EQ_ERR_INTERNAL, "the median's bin %" PRId64 " holds %" PRId64 " values, counted %" PRId64, bin,
                       found, count);
    return EQ_OK;
}

/* The least and largest |d| of one bin and how many equal each. A rank among them needs no
 * gathering: bf16 differences are few multiples of a power of two, so most of the bin that holds
 * the median is often one value. */
typedef struct {
    int64_t bin;
    double least, largest;
    int64_t n_least, n_largest;
} bin_extremes;

typedef struct {
    const eq_tensor *ref, *test;
    uint64_t lo, hi;
    bin_extremes *per_slot; /* [workers] */
} extremes_job;

STATS_WIDE static void extremes_range(void *ctx, int slot, int64_t begin, int64_t end)
{
    const extremes_job *j = ctx;
    const int64_t n = eq_tensor_numel(j->ref);
    const lanes_i lo = (lanes_i){0} + (int64_t)j->lo, hi = (lanes_i){0} + (int64_t)j->hi; /* bits < 2^63 */
    lanes_d least = (lanes_d){0} + INFINITY, largest = (lanes_d){0} - 1.0;
    lanes_i n_least = {0}, n_largest = {0}; /* counted down: each true comparison is -1 */
    double r[BLOCK], t[BLOCK];
    for (int64_t b = begin; b < end; b++) {
        const int64_t len = block_len(n, b);
        eq_tensor_widen(j->ref, b * BLOCK, len, r);
        eq_tensor_widen(j->test, b * BLOCK, len, t);
        int64_t i = 0;
        for (; i + LANES <= len; i += LANES) {
            const lanes_d x = load_lanes(r + i), y = load_lanes(t + i), d = lanes_abs(y - x);
            const lanes_i bits = (lanes_i)d;
            const lanes_i in = (lanes_abs(x) <= DBL_MAX) & (lanes_abs(y) <= DBL_MAX) & (bits >= lo) & (bits < hi);
            const lanes_i below = in & (d < least), above = in & (d > largest);
            least = lanes_select(below, d, least);
            largest = lanes_select(above, d, largest);
            n_least = (n_least & ~below) + (in & (d == least));
            n_largest = (n_largest & ~above) + (in & (d == largest));
        }
        for (int k = 0; i < len; i++, k++) { /* the tail, lane by lane */
            const double d = fabs(t[i] - r[i]);
            const uint64_t bits = double_bits(d);
            if (!isfinite(r[i]) || !isfinite(t[i]) || bits < j->lo || bits >= j->hi) continue;
            if (d < least[k]) least[k] = d, n_least[k] = 0;
            if (d > largest[k]) largest[k] = d, n_largest[k] = 0;
            n_least[k] -= d == least[k];
            n_largest[k] -= d == largest[k];
        }
    }
    bin_extremes *out = &j->per_slot[slot];
    *out = (bin_extremes){0, INFINITY, -1.0, 0, 0};
    for (int k = 0; k < LANES; k++) {
        out->least = least[k] < out->least ? least[k] : out->least;
        out->largest = largest[k] > out->largest ? largest[k] : out->largest;
    }
    for (int k = 0; k < LANES; k++) {
        out->n_least -= least[k] == out->least ? n_least[k] : 0;
        out->n_largest -= largest[k] == out->largest ? n_largest[k] : 0;
    }
}

/* The extremes of one bin over every worker's (the same in any order). */
static eq_status find_extremes(const median_source *j, int64_t bin, bin_extremes *e)
{
    if (e->bin == bin) return EQ_OK;
    const int workers = eq_parallel_workers();
    extremes_job job = {j->ref, j->test, 0, 0, calloc((size_t)workers, sizeof(bin_extremes))};
    if (job.per_slot == NULL) return EQ_FAIL(EQ_ERR_NOMEM, "cannot allocate %d bin extremes", workers);
    for (int w = 0; w < workers; w++) job.per_slot[w] = (bin_extremes){0, INFINITY, -1.0, 0, 0};
    bin_bits(bin, &job.lo, &job.hi);
    eq_parallel_for_slots(block_count(eq_tensor_numel(j->ref)), EQ_STATS_BLOCKS_PER_RANGE, extremes_range, &job);
    *e = (bin_extremes){bin, INFINITY, -1.0, 0, 0};
    for (int w = 0; w < workers; w++) {
        e->least = job.per_slot[w].least < e->least ? job.per_slot[w].least : e->least;
        e->largest = job.per_slot[w].largest > e->largest ? job.per_slot[w].largest : e->largest;
    }
    for (int w = 0; w < workers; w++) {
        e->n_least += job.per_slot[w].least == e->least ? job.per_slot[w].n_least : 0;
        e->n_largest += job.per_slot[w].largest == e->largest ? job.per_slot[w].n_largest : 0;
    }
    free(job.per_slot);
    return EQ_OK;
}

/* The most |d| of one bin gathered with no look at its extremes first: a sixteenth of the pairs
 * (half the bytes of an fp32 tensor), and at least EQ_MEDIAN_DIRECT. A bin of continuous
 * differences holds a few percent of them, so the median costs one pass over the pair, not two. */
static int64_t gather_at_once(int64_t n_finite)
{
    return n_finite / 16 > EQ_MEDIAN_DIRECT ? n_finite / 16 : EQ_MEDIAN_DIRECT;
}

/* ---- the histogram, where pass 2 built none (its guess missed) ---- */

typedef struct {
    const eq_tensor *ref, *test;
    int64_t *histograms; /* [workers][HISTOGRAM_SIZE] */
} histogram_job;

STATS_WIDE static void histogram_range(void *ctx, int slot, int64_t begin, int64_t end)
{
    const histogram_job *j = ctx;
    const int64_t n = eq_tensor_numel(j->ref);
    int64_t *h = j->histograms + (size_t)slot * HISTOGRAM_SIZE;
    double r[BLOCK], t[BLOCK];
    for (int64_t b = begin; b < end; b++) {
        const int64_t len = block_len(n, b);
        eq_tensor_widen(j->ref, b * BLOCK, len, r);
        eq_tensor_widen(j->test, b * BLOCK, len, t);
        for (int64_t i = 0; i < len; i++) /* NaN and Inf pairs counted nowhere; |d| = 0 in bin 0, as pass 2 */
            if (isfinite(r[i]) && isfinite(t[i]))
                h[(i % HISTOGRAM_COPIES) * N_BINS + (int64_t)(double_bits(fabs(t[i] - r[i])) >> BIN_SHIFT)]++;
    }
}

/* The combined histogram of |d| that pass 2 builds where it has no guess, by a pass of its own. */
static eq_status histogram_pass(const eq_tensor *ref, const eq_tensor *test, int64_t n_zero, int64_t **bins)
{
    const int workers = eq_parallel_workers();
    histogram_job job = {ref, test, calloc((size_t)workers * HISTOGRAM_SIZE, sizeof(int64_t))};
    if (job.histograms == NULL) return EQ_FAIL(EQ_ERR_NOMEM, "cannot allocate the median's histograms");
    eq_parallel_for_slots(block_count(eq_tensor_numel(ref)), EQ_STATS_BLOCKS_PER_RANGE, histogram_range, &job);
    eq_median_histograms_combine(job.histograms, workers, n_zero);
    *bins = job.histograms;
    return EQ_OK;
}

/* ---- a rank's value ---- */

typedef struct {
    median_source source;
    const int64_t *bins;  /* the combined histogram: pass 2's, or built here (owned), or NULL */
    int64_t *owned_bins;
    eq_median_guess *guess; /* or NULL */
    bin_extremes extremes;
    gathered_bin gathered;
} median_state;

/* The rank-th smallest |d| (0-based) of the finite pairs: 0 among the n_zero zeros, else from the
 * guess's window where it holds the rank, else by the histogram (built here where pass 2 built
 * none): the bin's least or largest where the rank falls among the values equal to them (looked
 * at only in a bin too large to gather at once), else selected among the bin's values. A tensor
 * of at most EQ_MEDIAN_DIRECT elements: selected among every |d|. */
static eq_status value_at_rank(median_state *m, int64_t n_finite, int64_t n_zero, int64_t rank, double *value)
{
    eq_status st = EQ_OK;
    const median_source *j = &m->source;
    if (eq_tensor_numel(j->ref) <= EQ_MEDIAN_DIRECT) {
        EQ_TRY(gather_bin(j, -1, n_finite, &m->gathered));
        *value = eq_median_select(m->gathered.values, m->gathered.count, rank);
        return EQ_OK;
    }
    if (rank < n_zero) {
        *value = 0.0;
        return EQ_OK;
    }
    int found = 0;
    if (m->guess != NULL) EQ_TRY(eq_median_guess_value(m->guess, n_zero, rank, &found, value));
    if (found) return EQ_OK;
    if (m->bins == NULL) {
        EQ_TRY(histogram_pass(j->ref, j->test, n_zero, &m->owned_bins));
        m->bins = m->owned_bins;
    }
    const int64_t *bins = m->bins;
    int64_t below = n_zero, bin = 0;
    while (bin < N_BINS - 1 && below + bins[bin] <= rank) below += bins[bin++];
    if (bins[bin] > gather_at_once(n_finite)) { /* a large bin: one pass may name the value with no gathering */
        EQ_TRY(find_extremes(j, bin, &m->extremes));
        if (rank - below < m->extremes.n_least) {
            *value = m->extremes.least;
            return EQ_OK;
        }
        if (rank - below >= bins[bin] - m->extremes.n_largest) {
            *value = m->extremes.largest;
            return EQ_OK;
        }
    }
    EQ_TRY(gather_bin(j, bin, bins[bin], &m->gathered));
    *value = eq_median_select(m->gathered.values, m->gathered.count, rank - below);
cleanup:
    return st;
}

eq_status eq_median_abs(const eq_tensor *ref, const eq_tensor *test, const int64_t *bins, int64_t n_finite,
                        int64_t n_zero, eq_median_guess *guess, double *median)
{
    eq_status st = EQ_OK;
    median_state m = {{ref, test}, bins, NULL, guess, {-2, 0.0, 0.0, 0, 0}, {-2, NULL, 0}};
    double lower = 0.0, upper = 0.0;
    *median = 0.0;
    if (n_finite == 0) return EQ_OK;
    const int64_t k = (n_finite - 1) / 2;
    EQ_TRY(value_at_rank(&m, n_finite, n_zero, k, &lower));
    upper = lower;
    if (n_finite % 2 == 0) EQ_TRY(value_at_rank(&m, n_finite, n_zero, k + 1, &upper));
    *median = n_finite % 2 == 1 ? lower : 0.5 * (lower + upper);
cleanup:
    free(m.gathered.values);
    free(m.owned_bins);
    return st;
}
