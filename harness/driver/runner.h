/* Running one case under one layout: the step, its identity, its capture. */
#ifndef EQUIV_HARNESS_DRIVER_RUNNER_H
#define EQUIV_HARNESS_DRIVER_RUNNER_H

#include "harness/capture.h"
#include "harness/case_file.h"
#include "harness/compare.h"
#include "models/model.h"

/* The counter-based RNG's seed unless --seed says otherwise; golden's envelopes are recorded with
 * it (golden/README.md). A plain number: the help text prints it with EQ_SEED_DEFAULT_TEXT. */
#define EQ_SEED_DEFAULT 1234
#define EQ_SEED_TEXT_(n) #n
#define EQ_SEED_TEXT(n) EQ_SEED_TEXT_(n)
#define EQ_SEED_DEFAULT_TEXT EQ_SEED_TEXT(EQ_SEED_DEFAULT)

typedef struct {
    const eq_case *kase;
    const eq_case_size *size;
    const eq_model *model;
    eq_step step; /* dtype, layout, algorithm, seed, backend, transport */
} eq_run_spec;

/* Builds a spec for kase at size `size_name`; EQ_ERR_USAGE/EQ_ERR_INPUT for an unknown size or
 * model, or a size key the model does not read. The step's dtype and layout are set by the caller
 * before eq_run_check/eq_run. */
eq_status eq_run_spec_init(eq_run_spec *spec, const eq_case *kase, const char *size_name);

/* Checks, before anything runs, that the case's model takes the injected bugs and that the layout
 * divides the sizes. */
eq_status eq_run_check(const eq_run_spec *spec);

/* Runs the step and fills out (initialised here) with its meta and tensors; a new run for
 * spec->step.progress ("gpt bf16 dp1-tp4"), whose model reports its phases there. */
eq_status eq_run(const eq_run_spec *spec, eq_capture *out);

/* The one comparison path of every run, built-in or a user's: gathers the evidence, then judges
 * it once (eq_judge, harness/verdict.h). The evidence: test against ref (gradients by grad_tol),
 * each expected `expect` or, where kase is not NULL, as its [expect.<grads>] lines say; what
 * assembling either run found (replicas that disagree: not as expected); what rounding-error theory
 * says of the GEMM outputs the reference's model names or its capture recorded operands for
 * (harness/rounding_bound.h); and, where truth is not NULL (--truth), both runs against that fp64
 * run (harness/truth.h). */
eq_status eq_compare_runs(const eq_capture *ref, const eq_capture *test, const eq_capture *truth,
                          const eq_tolerance *tol, const eq_tolerance *grad_tol, eq_expect expect,
                          const eq_case *kase, eq_comparison *out);

/* Its evidence, without the case's lines or the verdict: ref and test the tensors to compare,
 * ref_all and test_all captures that hold them and the GEMM operands of theirs that have any (the
 * same captures, or a batch's with its operands: harness/driver/compare_stream.c). */
eq_status eq_compare_evidence(const eq_capture *ref, const eq_capture *test, const eq_capture *ref_all,
                              const eq_capture *test_all, const eq_capture *truth, const eq_tolerance *tol,
                              const eq_tolerance *grad_tol, eq_expect expect, eq_comparison *out);
/* The model whose GEMM sites name the reference's operands (harness/rounding_bound.h): its meta's
 * model where this build has it, else NULL (a user's run: the operands its capture recorded). */
const eq_model *eq_compare_model(const eq_run_meta *ref);

#endif
