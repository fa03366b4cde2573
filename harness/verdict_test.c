/* The verdict is a function of the evidence alone (harness/verdict.h).
 *
 * 1. Hand-built evidence for nine tensors and two findings arrives in capture order, in reverse and
 *    in 20 shuffled orders, judged once at the end and, separately, after every arrival as well: the
 *    verdict is the same each time and is the one derived by hand from verdict.h's rules. Every tensor
 *    not as expected counts once: over the tolerance and over the rounding bound; over the bound alone
 *    (raised from within); over the tolerance, under the bound; a case's differs that overrides the
 *    comparison's within, met or not; a differs size missed after the bound raised it. A finding counts
 *    once, and the truth run never changes a verdict.
 * 2. The real gatherers (the case's lines, the rounding bound, the truth run) run on one pair of
 *    captures in each of their six orders and give the same verdict, and the verdict derived by hand.
 * 3. A user's run: a flagged factor and a judged truth 5x less accurate raise within to outside with
 *    their reasons; a tensor a replica finding names is not as expected and counted once. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/rounding_bound.h"
#include "harness/structure.h"
#include "harness/base/testing.h"
#include "harness/truth.h"
#include "harness/verdict.h"

#define EXPECT_HAS(text, part) EQ_EXPECT(strstr((text), (part)) != NULL, "'%s' lacks '%s'", (text), (part))

/* ---- 1. hand-built evidence ---- */

/* |d| <= 1e-3 |ref|: test = ref (1 + delta) is within for delta 5e-4, outside for 5e-3 and 3e-2. */
static const eq_tolerance tol = {"rtol_1e-3", 0.0, 1e-3, "test", EQ_ATOL_ABSOLUTE};
static const eq_expect_size rel_1e3_1e2 = {EQ_SIZE_REL, 1e-3, 1e-2};

typedef struct {
    const char *name;
    eq_role role;
    double delta;           /* test = ref (1 + delta), ref = {1, 2, 3, 4}: worst_rel = delta */
    int case_line;          /* the case says "differs rel 1e-3..1e-2" for it (else the comparison's expectation) */
    double det_ratio;       /* 0: no rounding bound applies */
    int truth;              /* the truth run has it (test run 1e8 x less accurate than the reference) */
    /* the verdict by hand */
    int want_ok;
    eq_observed want_observed;
    const char *want_diagnosis; /* a part of it */
} tensor_case;

static const tensor_case tensors[] = {
    {"x", EQ_ROLE_INPUT, 0.0, 0, 0.0, 0, 1, EQ_OBS_BIT_EXACT, "bit-exact"},
    /* within the tolerance, 3x the deterministic bound: raised to outside */
    {"bound_only", EQ_ROLE_ACTIVATION, 5e-4, 0, 3.0, 0, 0, EQ_OBS_OUTSIDE,
     "above the rounding-error bound (x3 of it): no summation order explains it"},
    /* outside the tolerance and 5x the bound: outside once, the metrics' diagnosis kept */
    {"both", EQ_ROLE_ACTIVATION, 3e-2, 0, 5.0, 0, 0, EQ_OBS_OUTSIDE, "uniform scale x1.03"},
    /* outside the tolerance, under the bound */
    {"tolerance_only", EQ_ROLE_ACTIVATION, 5e-3, 0, 0.5, 0, 0, EQ_OBS_OUTSIDE, "not rounding"},
    /* outside the tolerance, but the case's differs of that size overrides the comparison's within */
    {"case_met", EQ_ROLE_GRAD, 5e-3, 1, 0.0, 0, 1, EQ_OBS_OUTSIDE, "not rounding"},
    /* the case's differs, ten times the size it states */
    {"case_size", EQ_ROLE_GRAD, 3e-2, 1, 0.0, 0, 0, EQ_OBS_OUTSIDE, "; rel 0.03, expected differs rel 0.001..0.01"},
    /* the case's differs, bit-exact */
    {"case_exact", EQ_ROLE_ACTIVATION, 0.0, 1, 0.0, 0, 0, EQ_OBS_BIT_EXACT, "bit-exact"},
    /* raised by the bound (differs met), then below the stated size: both sentences, counted once */
    {"bound_size", EQ_ROLE_ACTIVATION, 5e-4, 1, 4.0, 0, 0, EQ_OBS_OUTSIDE,
     "above the rounding-error bound (x4 of it): no summation order explains it; rel 0.0005, expected differs "
     "rel 0.001..0.01"},
    /* within; the truth run says the test run is far less accurate: the verdict does not change */
    {"loss", EQ_ROLE_LOSS, 5e-4, 0, 0.0, 1, 1, EQ_OBS_WITHIN, "not rounding"},
};
#define N_TENSORS ((int)(sizeof tensors / sizeof tensors[0]))
#define N_FINDINGS 2
#define WANT_UNEXPECTED (6 + N_FINDINGS) /* bound_only, both, tolerance_only, case_size, case_exact, bound_size */

/* One piece of evidence: what one gatherer writes of one result (or one finding). */
typedef enum { EV_METRICS, EV_EXPECT, EV_THEORY, EV_TRUTH, EV_KINDS } evidence_kind;
typedef struct {
    int result; /* -1: a finding */
    evidence_kind kind;
} evidence;

static eq_metrics metrics_of[N_TENSORS]; /* eq_compare_tensors of each tensor's pair, computed once */

static void compute_metrics(void)
{
    const double ref_values[4] = {1.0, 2.0, 3.0, 4.0};
    for (int i = 0; i < N_TENSORS; i++) {
        eq_tensor ref, test;
        const int64_t shape[1] = {4};
        EQ_EXPECT_OK(eq_tensor_init(&ref, EQ_FP64, 1, shape));
        EQ_EXPECT_OK(eq_tensor_init(&test, EQ_FP64, 1, shape));
        for (int64_t e = 0; e < 4; e++) {
            eq_tensor_set(&ref, e, ref_values[e]);
            eq_tensor_set(&test, e, ref_values[e] * (1.0 + tensors[i].delta));
        }
        EQ_EXPECT_OK(eq_compare_tensors(&ref, &test, &tol, &metrics_of[i]));
        eq_tensor_free(&ref);
        eq_tensor_free(&test);
    }
}

static void arrive(eq_comparison *c, evidence ev)
{
    static const char *findings[N_FINDINGS] = {"test run: layers/00/w differs between dp ranks",
                                               "reference: the ranks' partials disagree"};
    if (ev.result < 0) {
        snprintf(c->findings[c->n_findings], EQ_FINDING_MAX, "%s", findings[c->n_findings]);
        c->n_findings++;
        return;
    }
    const tensor_case *t = &tensors[ev.result];
    eq_tensor_result *r = &c->results[ev.result];
    switch (ev.kind) {
    case EV_METRICS: r->m = metrics_of[ev.result]; break;
    case EV_EXPECT: /* the comparison's (inputs bit_exact, the rest within), or the case's line */
        r->expect = t->case_line ? EQ_EXPECT_DIFFERS : t->role == EQ_ROLE_INPUT ? EQ_EXPECT_BIT_EXACT : EQ_EXPECT_WITHIN;
        if (t->case_line) r->expect_size = rel_1e3_1e2;
        break;
    case EV_THEORY:
        if (t->det_ratio > 0.0) {
            r->theory.applies = 1;
            r->theory.terms = 64;
            r->theory.ref_partitions = 1;
            r->theory.test_partitions = 4;
            r->theory.det_ratio = t->det_ratio;
            r->theory.prob_ratio = 10.0 * t->det_ratio;
        }
        break;
    case EV_TRUTH:
        if (t->truth) r->truth = (eq_truth){.applies = 1, .ref_max = 1e-9, .test_max = 0.1, .ref_rel = 1e-9, .test_rel = 0.5, .unit_roundoff = 0x1p-53};
        break;
    case EV_KINDS: break;
    }
}

/* The comparison before any evidence: its tensors by name and role, no findings. */
static void start(eq_comparison *c)
{
    memset(c, 0, sizeof *c);
    c->tol = c->grad_tol = tol;
    c->expect = EQ_EXPECT_WITHIN;
    c->count = N_TENSORS;
    c->results = calloc(N_TENSORS, sizeof *c->results);
    c->findings = calloc(N_FINDINGS, sizeof *c->findings);
    EQ_EXPECT(c->results != NULL && c->findings != NULL, "no memory");
    for (int i = 0; i < N_TENSORS; i++) {
        eq_tensor_result *r = &c->results[i];
        snprintf(r->path, sizeof r->path, "layers/00/%s", tensors[i].name);
        snprintf(r->name, sizeof r->name, "%s", tensors[i].name);
        r->role = tensors[i].role;
        r->ndim = 1;
        r->shape[0] = 4;
    }
}

/* The verdict fields of a against b: 1 when every one is equal. */
static int same_verdict(const eq_comparison *a, const eq_comparison *b, const char *what)
{
    int same = a->n_unexpected == b->n_unexpected && a->count == b->count;
    for (int i = 0; same && i < a->count; i++) {
        const eq_tensor_result *x = &a->results[i], *y = &b->results[i];
        if (x->observed != y->observed || x->as_expected != y->as_expected || strcmp(x->diagnosis, y->diagnosis) != 0) {
            fprintf(stderr, "%s: %s: %s %d '%s' vs %s %d '%s'\n", what, x->path, eq_observed_name(x->observed),
                    x->as_expected, x->diagnosis, eq_observed_name(y->observed), y->as_expected, y->diagnosis);
            same = 0;
        }
    }
    EQ_EXPECT(same, "%s: a different verdict (%d vs %d not as expected)", what, a->n_unexpected, b->n_unexpected);
    return same;
}

static void check_by_hand(const eq_comparison *c, const char *what)
{
    EQ_EXPECT(c->n_unexpected == WANT_UNEXPECTED, "%s: %d not as expected, want %d", what, c->n_unexpected,
              WANT_UNEXPECTED);
    for (int i = 0; i < N_TENSORS && i < c->count; i++) {
        const eq_tensor_result *r = &c->results[i];
        EQ_EXPECT(r->as_expected == tensors[i].want_ok && r->observed == tensors[i].want_observed,
                  "%s: %s: %s, %s as expected", what, r->name, eq_observed_name(r->observed),
                  r->as_expected ? "" : "not");
        EXPECT_HAS(r->diagnosis, tensors[i].want_diagnosis);
    }
}

/* A permutation of n items by Fisher-Yates on a fixed LCG (the same orders on every run). */
static void shuffle(evidence *order, int n, uint64_t *state)
{
    for (int i = n - 1; i > 0; i--) {
        *state = *state * 6364136223846793005u + 1442695040888963407u;
        int j = (int)((*state >> 33) % (uint64_t)(i + 1));
        evidence swap = order[i];
        order[i] = order[j];
        order[j] = swap;
    }
}

static void test_any_arrival_order(void)
{
    enum { N_EVIDENCE = N_TENSORS * EV_KINDS + N_FINDINGS };
    evidence order[N_EVIDENCE];
    int n = 0;
    for (int i = 0; i < N_TENSORS; i++)
        for (int k = 0; k < EV_KINDS; k++) order[n++] = (evidence){i, (evidence_kind)k};
    for (int f = 0; f < N_FINDINGS; f++) order[n++] = (evidence){-1, EV_METRICS};
    compute_metrics();

    eq_comparison first;
    start(&first);
    for (int e = 0; e < N_EVIDENCE; e++) arrive(&first, order[e]);
    eq_judge(&first);
    check_by_hand(&first, "capture order");

    uint64_t state = 2024;
    for (int trial = 0; trial < 22; trial++) {
        char what[64];
        if (trial == 0) { /* the reverse */
            for (int e = 0; e < N_EVIDENCE / 2; e++) {
                evidence swap = order[e];
                order[e] = order[N_EVIDENCE - 1 - e];
                order[N_EVIDENCE - 1 - e] = swap;
            }
        } else {
            shuffle(order, N_EVIDENCE, &state);
        }
        /* judged once, at the end */
        eq_comparison once, every;
        start(&once);
        for (int e = 0; e < N_EVIDENCE; e++) arrive(&once, order[e]);
        eq_judge(&once);
        snprintf(what, sizeof what, "order %d, judged once", trial);
        same_verdict(&once, &first, what);
        /* judged after every arrival too, as the old patches did: the last judgement is the same */
        start(&every);
        for (int e = 0; e < N_EVIDENCE; e++) {
            arrive(&every, order[e]);
            eq_judge(&every);
        }
        snprintf(what, sizeof what, "order %d, judged after every arrival", trial);
        same_verdict(&every, &first, what);
        eq_judge(&every);
        snprintf(what, sizeof what, "order %d, judged again", trial);
        same_verdict(&every, &first, what);
        eq_comparison_free(&once);
        eq_comparison_free(&every);
    }
    eq_comparison_free(&first);
}

/* ---- 2. the real gatherers in every order ---- */

/* out [4, 3] = a [4, 8] b [3, 8]^T, rounded once from fp64 to fp32 */
static void gemm_capture(eq_capture *cap, eq_dtype dt, double out_bump)
{
    eq_tensor a, b, out, loss;
    eq_capture_init(cap);
    snprintf(cap->meta.case_name, sizeof cap->meta.case_name, "verdict");
    snprintf(cap->meta.algorithm, sizeof cap->meta.algorithm, "ring");
    snprintf(cap->meta.grads, sizeof cap->meta.grads, "avg");
    cap->meta.dtype = dt;
    cap->meta.dp = cap->meta.tp = 1;
    EQ_EXPECT_OK(eq_tensor_init_2d(&a, dt, 4, 8));
    EQ_EXPECT_OK(eq_tensor_init_2d(&b, dt, 3, 8));
    EQ_EXPECT_OK(eq_tensor_init_2d(&out, dt, 4, 3));
    EQ_EXPECT_OK(eq_tensor_init_2d(&loss, EQ_FP64, 1, 1));
    for (int64_t i = 0; i < 32; i++) eq_tensor_set(&a, i, 0.125 * (double)(i % 9) - 0.5);
    for (int64_t i = 0; i < 24; i++) eq_tensor_set(&b, i, 0.0625 * (double)(i % 5) + 0.25);
    for (int64_t m = 0; m < 4; m++)
        for (int64_t n = 0; n < 3; n++) {
            double y = 0.0;
            for (int64_t k = 0; k < 8; k++) y += eq_tensor_get(&a, m * 8 + k) * eq_tensor_get(&b, n * 8 + k);
            eq_tensor_set(&out, m * 3 + n, y);
        }
    eq_tensor_set(&out, 5, eq_tensor_get(&out, 5) + out_bump);
    eq_tensor_set(&loss, 0, 2.5);
    EQ_EXPECT_OK(eq_capture_add(cap, 0, "a", EQ_ROLE_ACTIVATION, &a));
    EQ_EXPECT_OK(eq_capture_add(cap, 0, "b", EQ_ROLE_PARAM, &b));
    EQ_EXPECT_OK(eq_capture_add(cap, 0, "out", EQ_ROLE_ACTIVATION, &out));
    EQ_EXPECT_OK(eq_capture_add(cap, 0, "loss", EQ_ROLE_LOSS, &loss));
}

typedef struct {
    const eq_capture *ref, *test, *truth;
    const eq_case *kase;
} gatherers;

static const eq_gemm_site site[] = {{"out", "a", "b", 0}, {0}};

static void gather(eq_comparison *c, const gatherers *g, int which)
{
    switch (which) {
    case 0: eq_comparison_apply_case(c, g->kase); break;
    case 1: EQ_EXPECT_OK(eq_rounding_bounds_apply(c, g->ref, g->test, site)); break;
    case 2: EQ_EXPECT_OK(eq_truth_apply(c, g->ref, g->test, g->truth)); break;
    }
}

static void test_gatherers_in_any_order(void)
{
    /* within a tolerance of 1, but no rounding of an 8-term fp32 dot product moves out[5] by 1/64;
     * the case expects out to differ by 10% to 50% of its scale, which 1/64 is not */
    const eq_tolerance loose = {"loose", 1.0, 0.0, "test", EQ_ATOL_ABSOLUTE};
    eq_capture ref, test, truth;
    gemm_capture(&ref, EQ_FP32, 0.0);
    gemm_capture(&test, EQ_FP32, 1.0 / 64.0);
    gemm_capture(&truth, EQ_FP64, 0.0);
    test.meta.dp = 2;
    EQ_EXPECT_OK(eq_capture_add_finding(&test, "layers/00/b differs between dp ranks"));
    static eq_case kase;
    kase.tensor_expects[0] = (eq_case_tensor_expect){"avg", "out", EQ_EXPECT_DIFFERS, {EQ_SIZE_REL, 0.1, 0.5}};
    kase.n_tensor_expects = 1;
    const gatherers g = {&ref, &test, &truth, &kase};
    static const int orders[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
    eq_comparison first = {0};
    for (int o = 0; o < 6; o++) {
        eq_comparison c;
        char what[64];
        EQ_EXPECT_OK(eq_compare_captures(&ref, &test, &loose, EQ_EXPECT_WITHIN, &c));
        for (int s = 0; s < 3; s++) gather(&c, &g, orders[o][s]);
        eq_judge(&c);
        snprintf(what, sizeof what, "gatherers in order %d%d%d", orders[o][0], orders[o][1], orders[o][2]);
        if (o == 0) {
            first = c;
            /* by hand: out is raised to outside by the bound, meets differs, misses its size: one
             * tensor not as expected, and the finding */
            EQ_EXPECT(c.count == 4 && c.n_unexpected == 2, "%s: %d not as expected, want 2", what, c.n_unexpected);
            const eq_tensor_result *out = c.count == 4 ? &c.results[2] : NULL;
            if (out != NULL) {
                EQ_EXPECT(out->theory.applies && out->theory.det_ratio > 1.0 && out->truth.applies &&
                              out->expect == EQ_EXPECT_DIFFERS && out->observed == EQ_OBS_OUTSIDE && !out->as_expected,
                          "%s: out: bound %d (x%g), truth %d, expect %s, observed %s", what, out->theory.applies,
                          out->theory.det_ratio, out->truth.applies, eq_expect_name(out->expect),
                          eq_observed_name(out->observed));
                EXPECT_HAS(out->diagnosis, "above the rounding-error bound");
                EXPECT_HAS(out->diagnosis, "expected differs rel 0.1..0.5");
            }
            continue;
        }
        same_verdict(&c, &first, what);
        eq_comparison_free(&c);
    }
    eq_comparison_free(&first);
    eq_capture_free(&ref);
    eq_capture_free(&test);
    eq_capture_free(&truth);
}

/* ---- 3. a user's run: structure, a judged truth, a replica finding ---- */

/* Four activations within the tolerance: "factor" with a flagged factor test, "truth" 5x less
 * accurate than the reference against a judged truth, "copy" named by a finding that its ranks
 * differ, "plain" with neither; and a finding of the same kind naming a tensor no result has. */
static void test_users_run_evidence(void)
{
    eq_comparison c;
    memset(&c, 0, sizeof c);
    c.tol = c.grad_tol = tol;
    c.expect = EQ_EXPECT_WITHIN;
    c.count = 4;
    c.results = calloc(4, sizeof *c.results);
    c.findings = calloc(2, sizeof *c.findings);
    EQ_EXPECT(c.results != NULL && c.findings != NULL, "no memory");
    if (c.results == NULL || c.findings == NULL) return;
    static const char *names[4] = {"factor", "truth", "copy", "plain"};
    for (int i = 0; i < 4; i++) {
        eq_tensor_result *r = &c.results[i];
        snprintf(r->path, sizeof r->path, "blocks.0.%s.out", names[i]);
        r->role = EQ_ROLE_ACTIVATION;
        r->expect = EQ_EXPECT_WITHIN;
        r->m = metrics_of[1]; /* bound_only's pair: 5e-4, within the tolerance */
    }
    c.results[0].structure = (eq_structure){.applies = 1, .factor_tested = 1, .factor = 1.0025, .factor_spread = 4e-5,
                                            .factor_t = 62.5, .factor_limit = 7.9, .factor_flagged = 1};
    c.results[1].truth = (eq_truth){.applies = 1, .judged = 1, .ref_rel = 1e-3, .test_rel = 5e-3,
                                    .unit_roundoff = 0x1p-8, .truth_dtype = EQ_FP32, .elements = 4096};
    c.results[3].truth = (eq_truth){.applies = 1, .judged = 1, .ref_rel = 1e-3, .test_rel = 2e-3,
                                    .unit_roundoff = 0x1p-8, .truth_dtype = EQ_FP32, .elements = 4096};
    snprintf(c.findings[0], EQ_FINDING_MAX, "test run: blocks.0.copy.out (activation) should be replicated over tp "
             "but differs: rank 1 (dp 0, tp 1) vs rank 0 (dp 0, tp 0) at 3 of 4 elements, max |d| 0.5");
    snprintf(c.findings[1], EQ_FINDING_MAX, "test run: blocks.0.gone.out (activation) should be replicated over tp "
             "but differs: rank 1 (dp 0, tp 1) vs rank 0 (dp 0, tp 0) at 1 of 4 elements, max |d| 0.5");
    c.n_findings = 2;
    eq_judge(&c);
    EQ_EXPECT(!c.results[0].as_expected && c.results[0].observed == EQ_OBS_OUTSIDE, "a flagged factor is outside");
    EXPECT_HAS(c.results[0].diagnosis, "systematic factor 1.0025, rounding allows 1 +- 0.00032");
    EQ_EXPECT(!c.results[1].as_expected && c.results[1].observed == EQ_OBS_OUTSIDE, "5x less accurate is outside");
    EXPECT_HAS(c.results[1].diagnosis, "x5 less accurate than the reference against the fp32 truth (rounding allows x3)");
    EQ_EXPECT(!c.results[2].as_expected && c.results[2].observed == EQ_OBS_WITHIN, "the finding's tensor");
    EXPECT_HAS(c.results[2].diagnosis, "its ranks differ where they should hold one copy");
    EQ_EXPECT(c.results[3].as_expected, "2x the reference's error against the truth is rounding");
    EQ_EXPECT(c.n_unexpected == 4, "factor, truth and the two findings: %d", c.n_unexpected);
    eq_comparison_free(&c);
}

int main(void)
{
    test_any_arrival_order();
    test_gatherers_in_any_order();
    test_users_run_evidence();
    return eq_test_finish("verdict_test");
}
