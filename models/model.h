/* What a step computes. A model reads its sizes from the case, checks that the layout divides
 * them, then runs one step on every simulated rank and captures its named tensors, gathered to
 * their full shape.
 *
 * Models plug in through eq_model (a small struct of function pointers); models/models.c holds
 * the table of them. */
#ifndef EQUIV_MODELS_MODEL_H
#define EQUIV_MODELS_MODEL_H

#include <stdint.h>

#include "harness/capture.h"
#include "harness/case_file.h"
#include "harness/progress.h"
#include "harness/rounding_bound.h"
#include "reductions/world.h"
#include "models/backend.h"
#include "reductions/collectives.h"

/* Everything one run of one step needs. Borrowed, not owned. */
/* Gradient conventions across data-parallel ranks. */
typedef enum {
    EQ_GRAD_AVG = 0, /* DDP's default: each rank's loss is its local mean; gradients AVG all-reduced */
    EQ_GRAD_SUM = 1, /* each rank's partial normalised by the global count; gradients SUM all-reduced */
} eq_grad_convention;
const char *eq_grad_convention_name(eq_grad_convention c); /* "avg", "sum" */
eq_status eq_grad_convention_parse(const char *name, eq_grad_convention *out);

/* Bugs a run can carry on purpose (--inject), to show the comparison catches and names them. A
 * model applies each where it says; the reference run never carries any. */
typedef enum {
    EQ_BUG_NONE = 0,
    EQ_BUG_SKIP_ALLREDUCE = 1 << 0,  /* a row-parallel layer keeps rank 0's partial: no all-reduce */
    EQ_BUG_SHARD_OFFSET = 1 << 1,    /* a column-parallel layer's rank r uses rank r+1's weight rows */
    EQ_BUG_GRAD_AVG_TWICE = 1 << 2,  /* data-parallel gradients divided by dp a second time */
    /* The spd case's scaling bugs (seed 001's bug class; models/spd.c), under --grads sum: */
    EQ_BUG_CI_GRAD_AVG = 1 << 3,       /* the CI functions' gradients AVG all-reduced where SUM is expected */
    EQ_BUG_FAITH_EVERY_RANK = 1 << 4,  /* faithfulness (replicated) contributed on every dp rank, not once */
    EQ_BUG_LOCAL_COUNT = 1 << 5,       /* the stochastic reconstruction normalised by the local count */
    EQ_BUG_IMP_MIN_NO_WS = 1 << 6,     /* importance minimality from the local sums, no world_size factor */
    /* The probe case's (seed 004; models/probe.c), besides EQ_BUG_LOCAL_COUNT (the buffers
     * normalised by each rank's local count before the SUM): */
    EQ_BUG_DDP_SYNC = 1 << 7,          /* DDP's gradient AVG left on during the per-unit probe passes */
    EQ_BUG_RANK_SAMPLING = 1 << 8,     /* each rank samples its own indices: overlapping shards */
    EQ_BUG_VAR_FP32 = 1 << 9,          /* the variance sums reduced in fp32, not fp64 */
    EQ_BUG_BARS_DOT_ONE_RANK = 1 << 10, /* bars_dot from dp rank 0's local buffers */
} eq_bug;
/* A bug's name ("skip_allreduce", "ci_grad_avg", ...; models/models.c) <-> flag; EQ_ERR_USAGE for
 * an unknown name, listing the known ones. */
eq_status eq_bug_parse(const char *name, eq_bug *out);
const char *eq_bug_name(eq_bug bug);

/* Whose numerics a model follows where the choice is a convention, not the layout's
 * (models/gpt.c): equiv's own (the default; every shipped dump), or Megatron-Core's defaults
 * (weights N(0, 0.02), the output projections N(0, 0.02 / sqrt(2 layers))), optionally with
 * fp32 GEMMs in TF32 (inputs rounded to 10 mantissa bits, fp32 accumulation), as Megatron and
 * TransformerEngine run them on NVIDIA GPUs where TF32 is allowed. */
typedef enum { EQ_NUMERICS_EQUIV = 0, EQ_NUMERICS_MEGATRON = 1, EQ_NUMERICS_MEGATRON_TF32 = 2 } eq_numerics;
/* "equiv", "megatron", "megatron_tf32" <-> value; EQ_ERR_USAGE names the known ones. */
eq_status eq_numerics_parse(const char *name, eq_numerics *out);
const char *eq_numerics_name(eq_numerics n);
/* The run's numerics: `given` (an eq_numerics, from --numerics) when >= 0, else the size's keys
 * `megatron_init = 1` and `tf32 = 1` (a case-file setting; both absent: equiv's own). A tf32 without
 * megatron_init is EQ_ERR_INPUT naming the case file. */
eq_status eq_numerics_of(const eq_case_size *size, int given, eq_numerics *out);

typedef struct {
    const eq_case_size *size; /* the case's size section */
    eq_dtype dtype;
    eq_layout layout;
    eq_algo algo;             /* how the simulated collectives order and round */
    eq_nccl_config nccl;      /* ring: NCCL's channels and protocol (zero: the default) */
    uint64_t seed;
    const eq_backend *backend;
    const eq_transport *transport;
    eq_grad_convention grads;   /* how data-parallel gradients are normalised and reduced */
    unsigned bugs;              /* eq_bug flags injected into this run */
    int forward_only;           /* skip the backward (models without one ignore it) */
    eq_numerics numerics;       /* --numerics, else the size's keys (models with eq_model.numerics) */
    const eq_world *world;      /* NULL: every rank in this process (sim); else this process's ranks */
    eq_progress *progress;      /* where the step reports its phases (harness/progress.h); NULL: nobody */
    /* A many-step run (--steps N, harness/driver/train.h), for a model that trains (eq_model.trains):
     * params NULL: the parameters initialised from the seed (every single-step run); else the
     * step starts from these, full shape, looked up by path ("layers/03/fc1_weight"), each of the
     * parameter's dtype and shape (EQ_ERR_INPUT naming the path otherwise). step_index 0: the
     * batch of every single-step run; t > 0: a fresh batch for step t, drawn from the seed under
     * names that include t. Models that do not train ignore both. */
    const eq_capture *params;
    int step_index;
    /* A capture whose parameters this run may keep instead of its own where they are bit-equal
     * (harness/capture.h: eq_capture_add_borrowed): the reference's, for a layout's run, so that the
     * weights both hold are in memory once. It must outlive the run's capture. NULL: none. Models
     * whose parameters are small ignore it. */
    const eq_capture *same_params;
} eq_step;

/* The groups a model reduces over. Without a world (sim): every member of the layout's tp (dp)
 * group in this process, {transport, algo, size, 0, size}. With one (--comm mpi): this process's
 * one member at its tp_rank (dp_rank). A model computes members first_local .. first_local +
 * n_local - 1 of its groups only. */
eq_group eq_step_tp_group(const eq_step *step);
eq_group eq_step_dp_group(const eq_step *step);

typedef struct {
    const char *name;
    const char *summary;
    /* Reads the sizes it needs (EQ_ERR_INPUT if one is missing) and checks that the layout divides
     * them (EQ_ERR_USAGE naming the size and the layout). Cheap: called before anything runs. */
    eq_status (*check)(const eq_step *step);
    /* Runs the step under step->layout, appending captured tensors to cap. */
    eq_status (*run)(const eq_step *step, eq_capture *cap);
    /* The GEMMs it captures with both operands, for the rounding-error bounds; NULL: none. */
    const eq_gemm_site *gemm_sites;
    /* 1: run computes only this process's members when step->world is set (--comm mpi), and every
     * process ends with the full captured tensors. 0: every rank in one process only. */
    int multi_process;
    /* 1: computes on the host whatever step->backend is (no GEMM or op goes through it), so
     * --backend cuda is refused rather than run on the CPU under a GPU's name. */
    int host_only;
    /* 1: honours step->params and step->step_index, and captures every parameter P it trains
     * with its gradient "P_grad" at the same layer (of the global loss); a parameter without one
     * is frozen. 0: --steps N > 1 is refused for its cases. */
    int trains;
    /* 1: a run keeps tensors wider than its dtype (probe: a bf16 run's fp32 buffers and fp64
     * scalars), so its dumps hold no data of the dtype they declare. `compare` then takes an equiv
     * dump of such a model's case at its word: the case's tolerance entries for the dtype are at the
     * precision stored. 0: the declared dtype must agree with the data (harness/run_load.h). */
    int stores_wider;
    /* Every key of a [size.NAME] section it reads, NULL-terminated: the names of the table it reads
     * them by (models/models.h: EQ_SIZE_READ, EQ_SIZE_NAME), and the optional keys it reads with
     * eq_size_get_or. A case file's other keys are refused (eq_model_check_case). */
    const char *const *size_keys;
    /* 1: follows step->numerics (--numerics, and the size keys megatron_init and tf32); 0: its
     * cases refuse --numerics and those keys. */
    int numerics;
} eq_model;

/* EQ_ERR_USAGE unless model is one that every bug in `bugs` (eq_bug flags) is planted in: the bug
 * table (models/models.c) names each bug's models. */
eq_status eq_model_check_bugs(const eq_model *model, unsigned bugs);

/* EQ_ERR_INPUT naming the case file, the line and the key for a key of one of kase's [size.NAME]
 * sections that model does not read (a typo such as megatron_int would otherwise be dropped
 * without a word, and land in the dump's /config as if it had been applied). */
eq_status eq_model_check_case(const eq_model *model, const eq_case *kase);

/* The model named `name`, or EQ_ERR_INPUT listing the known ones. */
eq_status eq_model_find(const char *name, const eq_model **out);

/* Every model, NULL-terminated. */
extern const eq_model *const eq_models[];

/* The names of the models for which has(model) is nonzero (has NULL: every model), ", "-separated,
 * in the table's order, into buf (truncated to len); returns buf. For the "(known: ...)" and
 * "(models that do: ...)" of error lines. */
const char *eq_model_names(int (*has)(const eq_model *model), char *buf, size_t len);

#endif
