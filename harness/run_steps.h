/* A run of many optimizer steps that equiv did not compute (equiv_capture.StepRecorder): its light
 * records, one JSON file per rank under RUN/steps/ (harness/SCHEMA.md, "Runs of many steps"),
 * assembled into the run's numbers per step.
 *
 * Assembly: the rank files must be one world (dp x tp, every rank once), name the same parameters
 * with the same shards and hold the same steps, 1, 2, ..., n. Per step:
 *   - the loss: each rank holds its share (its loss / loss_scale); the run's is the sum over the
 *     dp ranks (of tp rank 0); the tp ranks of a replica must hold the same;
 *   - per parameter, ||p||^2 and ||g||^2: each rank holds its piece's; a piece split over a group
 *     (shard "tp:D", "dp:D") is added over it, and the ranks holding the same piece (replicas) must
 *     agree bit for bit;
 *   - the learning rate: every rank must hold the same.
 * A disagreement is a finding ("blocks.0.ln.weight should be replicated over dp but differs from
 * step 5: ..."), each not as expected, as in a run directory's assembly (harness/run_load.h).
 * A file that cannot be read or does not fit is one EQ_ERR_INPUT line naming it. */
#ifndef EQUIV_HARNESS_RUN_STEPS_H
#define EQUIV_HARNESS_RUN_STEPS_H

#include "harness/capture.h"
#include "harness/optimizer.h"

#define EQ_RUN_STEPS_FORMAT 1    /* the "equiv_steps" a light record carries */
#define EQ_RUN_STEPS_MAX 100000  /* steps a record may hold */
#define EQ_RUN_STEPS_FINDINGS 32 /* findings kept per run (the first ones) */

typedef struct {
    char dir[4096];              /* the run directory */
    char case_name[EQ_NAME_MAX]; /* its "case" (default: the directory's name) */
    int dp, tp, world_size;
    eq_dtype dtype;
    int has_optimizer;           /* the record names an optimizer (Adam/AdamW: adam, SGD: sgd) */
    char optimizer_name[32];     /* as recorded ("adamw"); "" when none */
    eq_optimizer_config opt;
    int params_every;            /* parameters stored every that many steps (0: never) */
    int n_steps;                 /* steps 1..n_steps */
    double *loss;                /* [n_steps] the run's loss */
    double *lr;                  /* [n_steps] the learning rate (NaN: not recorded) */
    double *grad_sq;             /* [n_steps] ||g||^2 over every parameter with a gradient */
    int n_params, n_frozen;      /* parameters; those without a gradient at every step */
    char (*names)[EQ_NAME_MAX];  /* [n_params] */
    double *param_sq;            /* [n_steps * n_params] ||p||^2 after step t's update at (t-1) * n_params + k */
    int *full_steps, n_full;     /* the steps captured in full (RUN/step_NNNNNN) */
    char (*findings)[EQ_FINDING_MAX];
    int n_findings, n_findings_dropped;
} eq_run_steps;

/* Whether `run` is a directory holding light records (a subdirectory steps/). */
int eq_run_steps_present(const char *run);

/* Reads and assembles run/steps/rank*.json into out (zeroed here; free with eq_run_steps_free). */
eq_status eq_run_steps_load(const char *run, eq_run_steps *out);

void eq_run_steps_free(eq_run_steps *s);

/* "RUN/step_000010" (captured in full) or "RUN/params_000010" (the parameters) of step t. */
void eq_run_steps_dir(const eq_run_steps *s, const char *kind, int step, char *buf, size_t len);

#endif
