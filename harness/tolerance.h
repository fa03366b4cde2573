/* Tolerance tables (golden/tolerances.ini) and expectations.
 *
 * A table entry is a named allclose tolerance |d| <= atol + rtol*|ref| with the place its
 * numbers come from:
 *
 *   [bf16_28_layers]
 *   atol = 0.15
 *   rtol = 0
 *   source = seed 002 section 7: test_tp_vs_dp_equivalence, bf16, 28 layers
 *
 * An optional `scale = ref_rms` makes atol relative to the reference tensor's root mean square,
 * for tensors whose scale depends on the step (gradients shrink with the loss's 1/count):
 * |d| <= atol * rms(ref) + rtol*|ref|. The default is `scale = absolute`.
 *
 * A case names which entry each dtype (and each dtype's gradients) uses, and what it expects of
 * each comparison. */
#ifndef EQUIV_HARNESS_TOLERANCE_H
#define EQUIV_HARNESS_TOLERANCE_H

#include "harness/base/status.h"

#define EQ_TOL_NAME_MAX 64
#define EQ_TOL_SOURCE_MAX 256
#define EQ_TOL_MAX_ENTRIES 64

typedef enum { EQ_ATOL_ABSOLUTE = 0, EQ_ATOL_REF_RMS = 1 } eq_atol_scale;

typedef struct {
    char name[EQ_TOL_NAME_MAX];
    double atol, rtol;
    char source[EQ_TOL_SOURCE_MAX];
    eq_atol_scale atol_scale; /* EQ_ATOL_ABSOLUTE unless the entry says scale = ref_rms */
} eq_tolerance;

typedef struct {
    eq_tolerance entries[EQ_TOL_MAX_ENTRIES];
    int count;
} eq_tolerance_table;

/* Loads an INI file. Every section must have atol and rtol (finite, >= 0) and source; unknown
 * keys, a missing file, or a syntax error are EQ_ERR_INPUT naming the file and line. */
eq_status eq_tolerance_load(const char *path, eq_tolerance_table *out);
/* The entry with this name, or NULL. */
const eq_tolerance *eq_tolerance_find(const eq_tolerance_table *table, const char *name);

/* What a case says a comparison must show. */
typedef enum {
    EQ_EXPECT_BIT_EXACT = 0, /* every element identical (bits) */
    EQ_EXPECT_WITHIN = 1,    /* allclose under the tolerance entry (bit-exact also qualifies) */
    EQ_EXPECT_DIFFERS = 2,   /* a known non-invariance that must show up: not bit-exact */
    EQ_EXPECT_MUST_FAIL = 3, /* an injected bug: must fall outside the tolerance */
} eq_expect;
#define EQ_EXPECT_COUNT 4
const char *eq_expect_name(eq_expect e); /* "bit_exact", "within", "differs", "must_fail" */
eq_status eq_expect_parse(const char *name, eq_expect *out); /* EQ_ERR_INPUT if unknown */

/* What a comparison showed. */
typedef enum {
    EQ_OBS_BIT_EXACT = 0, /* identical */
    EQ_OBS_WITHIN = 1,    /* differs, every element inside the tolerance */
    EQ_OBS_OUTSIDE = 2,   /* some element outside the tolerance */
    EQ_OBS_NONFINITE = 3, /* NaN or Inf where the reference has none (or vice versa), or another;
                             NaN in both runs; nothing finite in either (eq_observe) */
} eq_observed;
const char *eq_observed_name(eq_observed o); /* "bit-exact", "within", "OUTSIDE", "NON-FINITE" */

/* Does the observation meet the expectation? */
int eq_expectation_met(eq_expect e, eq_observed o);

/* The size a `differs` states, so that a non-invariance of the wrong size (rounding noise, or a
 * stand-in off by a factor) is not as expected:
 *   differs rel LO..HI      the worst relative error max |d| / max |ref| is in [LO, HI]
 *   differs factor LO..HI   the least-squares scale <test,ref> / <ref,ref> is in [LO, HI]
 * Bare `differs` is EQ_SIZE_ANY: anything not bit-exact. */
typedef enum { EQ_SIZE_ANY = 0, EQ_SIZE_REL = 1, EQ_SIZE_FACTOR = 2 } eq_size_metric;
typedef struct {
    eq_size_metric metric;
    double lo, hi; /* finite, lo <= hi (rel: lo >= 0) */
} eq_expect_size;

/* An expectation with an optional size ("within", "differs", "differs rel 1e-3..3e-2"): a size
 * only after differs. EQ_ERR_INPUT saying what is wrong otherwise. */
eq_status eq_expect_parse_sized(const char *text, eq_expect *out, eq_expect_size *size);
/* "rel", "factor" ("" for EQ_SIZE_ANY). */
const char *eq_size_metric_name(eq_size_metric m);
/* Is a worst relative error / least-squares scale inside the stated size? (EQ_SIZE_ANY: yes.) */
int eq_expect_size_met(const eq_expect_size *size, double worst_rel, double ls_scale);

#endif
