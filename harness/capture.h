/* What one run produced: its identity (case, dtype, layout, ...) and the named tensors it exposed,
 * each gathered to its full (unsharded) shape. A capture is what gets dumped to HDF5, read back,
 * and compared.
 *
 * Tensor paths follow the dump layout: "layers/NN/<name>", e.g. "layers/07/fc2_out". */
#ifndef EQUIV_HARNESS_CAPTURE_H
#define EQUIV_HARNESS_CAPTURE_H

#include <stdint.h>

#include "harness/base/tensor.h"

/* What a captured tensor is; the report treats them differently (parameters are summarised in
 * one line, activations and gradients get the per-layer table). */
typedef enum {
    EQ_ROLE_INPUT = 0,      /* data fed to the step, identical across layouts by construction */
    EQ_ROLE_PARAM = 1,      /* a parameter (weight), gathered from its shards */
    EQ_ROLE_ACTIVATION = 2, /* a forward activation */
    EQ_ROLE_GRAD = 3,       /* a gradient of an activation or a parameter */
    EQ_ROLE_LOSS = 4,       /* a scalar loss */
} eq_role;
#define EQ_ROLE_COUNT 5
const char *eq_role_name(eq_role r);          /* "input", "param", "activation", "grad", "loss" */
eq_status eq_role_parse(const char *name, eq_role *out);

/* Names, paths and meta strings: a module path of a user's model ("model.layers.11.mlp.fc1/out")
 * fits. */
#define EQ_NAME_MAX 160
/* The environment a run recorded (framework, backend, NCCL variables, device), "key=value; ...". */
#define EQ_ENV_MAX 1024

/* Identity of a run; written as root attributes of its dump. */
typedef struct {
    char case_name[EQ_NAME_MAX]; /* "row_parallel" */
    char model[EQ_NAME_MAX];     /* "row_parallel" (the model the case runs) */
    char size[EQ_NAME_MAX];      /* "ci" or "docs" */
    eq_dtype dtype;
    int dp, tp;
    char transport[EQ_NAME_MAX]; /* "sim" */
    char algorithm[EQ_NAME_MAX]; /* "ring", "tree", "fp32acc", "seq" */
    int nccl_channels;           /* --nccl-channels, --nccl-proto where the run set either (ring): */
    char nccl_proto[EQ_NAME_MAX]; /* 0 and "" when not set (the default: 1 channel, "simple") */
    char backend[EQ_NAME_MAX];   /* "cpu" */
    uint64_t seed;
    char version[EQ_NAME_MAX];   /* equiv's version */
    char grads[EQ_NAME_MAX];     /* data-parallel gradient convention: "avg", "sum" */
    char injected[EQ_NAME_MAX];  /* bugs planted on purpose ("none", "skip_allreduce", ...) */
    /* A run equiv did not compute (harness/SCHEMA.md): what wrote it ("torch"; "" for equiv's own
     * dumps, which never write these), its world and step, and its environment. */
    char source[EQ_NAME_MAX];
    int world_size;              /* ranks whose files were assembled (0: not recorded) */
    int has_rank;                /* a rank's file of a run of world_size ranks: tensors are its shards */
    int rank, dp_rank, tp_rank;
    /* The other groups of a user's run (harness/run_layout.h): pipeline stages, context parallel
     * (the sequence split), expert parallel (carved from dp). 0: not recorded, a size of 1. */
    int pp, cp, ep;
    int pp_rank, cp_rank, ep_rank;
    int64_t step;                /* the training step the capture was taken at (with a source) */
    char env[EQ_ENV_MAX];
    /* Where equiv's own run computed, since fp32 bits depend on it: the backend's GEMM kernels as
     * it chose them ("OpenBLAS core SkylakeX; fp32 GEMM: OpenBLAS; ..."; "" when not recorded) and
     * the CPU model. */
    char kernel[256];
    char cpu[EQ_NAME_MAX];
    /* The GPU a run computed or communicated on, with the driver and library versions its bits
     * depend on ("NVIDIA H100 80GB HBM3 (sm_90, 132 SMs, 79 GiB), driver 580.159.04 (CUDA 13.0),
     * runtime 13.0, cuBLAS 13.0.2, NCCL 2.27.7"); "" for a run that used none. */
    char gpu[320];
    /* A model's numerics when not equiv's own ("megatron", "megatron_tf32"; models/model.h);
     * "" for the default, which dumps leave out. */
    char numerics[EQ_NAME_MAX];
    /* A many-step run's training (--steps N > 1, harness/driver/train.h), set on its comparison's runs:
     * the steps, the optimizer ("adam", "sgd") and its learning rate; 0, "" and 0 otherwise (not
     * recorded). Not in dumps: they hold step 1, the same as without --steps. */
    int steps;
    char optimizer[16];
    double lr;
} eq_run_meta;

/* How a rank holds a tensor: replicated over a group (-1) or split along a dimension over it
 * (dp, tp, cp; ep: an expert-parallel stack of experts). Pipeline stages hold a tensor whole or not
 * at all. */
typedef struct {
    int dp_dim, tp_dim, cp_dim, ep_dim;
} eq_shard;
#define EQ_SHARD_REPLICATED ((eq_shard){-1, -1, -1, -1})

/* The operands of a GEMM a capture recorded with its output (out = a b^T, a [.., K], b [N, K]), so
 * the rounding-error bound can be computed (harness/rounding_bound.h). a[0] == '\0': none. */
typedef struct {
    char a[EQ_NAME_MAX], b[EQ_NAME_MAX]; /* paths in the same capture */
    int k_split_by_tp;                   /* row-parallel: a layout's tp splits K */
    eq_dtype accumulate;                 /* the accumulation's precision (fp32 for equiv's backends) */
} eq_gemm_operands;

typedef struct {
    char path[EQ_NAME_MAX]; /* "layers/07/fc2_out" */
    int layer;              /* 7 */
    char name[EQ_NAME_MAX]; /* "fc2_out" */
    eq_role role;
    eq_tensor tensor;       /* owned: full shape, or one rank's shard before assembly */
    int borrowed;           /* 1: tensor's storage is another capture's, which outlives this one, and
                             * eq_capture_free leaves it (eq_capture_add_borrowed); read only */
    eq_shard shard;         /* how a rank's file holds it (EQ_SHARD_REPLICATED once assembled) */
    int assembled_tp_dim;   /* assembled from tp shards along this dim (-1: not; a file of full tensors) */
    double grad_scale;      /* stored = grad_scale x the gradient of the global loss (1 unless said) */
    eq_gemm_operands gemm;  /* recorded with the capture, or none */
    char dims[EQ_NAME_MAX]; /* its dimensions' names, "seq,batch,hidden" ("": not named) */
} eq_capture_entry;

/* A hyperparameter the step read (a size, an eps, a coefficient), written to the dump's /config
 * group so the step can be rebuilt from the file alone: a number (an integer where is_integer), or
 * text where is_text. */
#define EQ_CONFIG_NAME_MAX 64
typedef struct {
    char name[EQ_CONFIG_NAME_MAX];
    int is_text, is_integer;
    double number;  /* an integer's value too (exact below 2^53) */
    char text[512];
} eq_config_item;

/* Names for the dimensions of the entries whose name matches `pattern` (fnmatch glob):
 * eq_capture_name_dims takes a table ended by {NULL, NULL}. */
typedef struct {
    const char *pattern;
    const char *dims;
} eq_dims_rule;

/* What assembling a run found that is wrong with the run itself, not with its files: a tensor
 * that should be replicated over a group and is not (a parameter that differs between dp ranks). */
#define EQ_FINDING_MAX 320

typedef struct {
    eq_run_meta meta;
    eq_capture_entry *entries; /* in the order the model produced them */
    int count, capacity;
    /* entries by path, so eq_capture_find is O(1): an open-addressing table of entry index + 1
     * (0: empty) over entries[0 .. indexed), kept up to date by the eq_capture_add family and
     * eq_capture_reindex; a capture whose entries were written otherwise is searched in order */
    int *index;
    int index_size, indexed;
    char (*findings)[EQ_FINDING_MAX];
    int n_findings;
    eq_config_item *config; /* the step's hyperparameters, in the order set */
    int n_config;
} eq_capture;

void eq_capture_init(eq_capture *cap);
void eq_capture_free(eq_capture *cap);
/* Takes ownership of *t (left empty on return, also on failure, where it is freed). */
eq_status eq_capture_add(eq_capture *cap, int layer, const char *name, eq_role role, eq_tensor *t);
/* Same, but the entry borrows t's storage (another capture's, which must outlive cap and is not
 * written while cap holds it): a layout's parameters bit-equal to the reference's are kept once.
 * *t is left empty; its storage is never freed here. */
eq_status eq_capture_add_borrowed(eq_capture *cap, int layer, const char *name, eq_role role, eq_tensor *t);
/* Same as eq_capture_add, but copies t. */
eq_status eq_capture_add_copy(eq_capture *cap, int layer, const char *name, eq_role role,
                              const eq_tensor *t);
/* Adds an entry under an arbitrary path (a user's run: "blocks.0.mlp.fc1/out") in layer `layer`
 * (-1: none), named by its path. Takes ownership of *t as eq_capture_add does. */
eq_status eq_capture_add_path(eq_capture *cap, const char *path, int layer, eq_role role, eq_tensor *t);
/* Appends a copy of entry *e, its tensor owned (taken from *e, left empty) or borrowed as
 * e->borrowed says; its path, name and layer as they are. */
eq_status eq_capture_add_entry(eq_capture *cap, eq_capture_entry *e);
/* The number of entries from `first` on that make a batch: at most max_count, and at most max_bytes
 * of their tensors' shapes (a larger first one alone); 0 at the end. Readers that take a capture a
 * batch at a time (harness/run_stream.h) batch by it. */
int eq_capture_batch(const eq_capture *cap, int first, double max_bytes, int max_count);
/* Appends one finding (printf-style). */
eq_status eq_capture_add_finding(eq_capture *cap, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Sets a hyperparameter (replacing one of the same name). */
eq_status eq_capture_config_number(eq_capture *cap, const char *name, double value);
eq_status eq_capture_config_int(eq_capture *cap, const char *name, int64_t value);
eq_status eq_capture_config_text(eq_capture *cap, const char *name, const char *text);
/* Gives every entry not yet named the dims of the first rule whose pattern matches its name; a
 * rule whose dims count differs from the tensor's dimensions is EQ_ERR_INTERNAL (a wrong table). */
eq_status eq_capture_name_dims(eq_capture *cap, const eq_dims_rule *rules);
/* The entry with this path (the first, if two share it), or NULL. */
const eq_capture_entry *eq_capture_find(const eq_capture *cap, const char *path);
/* Brings the path index up to date after entries were appended other than through the
 * eq_capture_add family (entries copied in whole, as an index read from a reader process:
 * harness/dump_read_isolated.c). Without memory for it,
 * eq_capture_find searches in order: slower, the same answers. */
void eq_capture_reindex(eq_capture *cap);

#endif
