/* What one run produced: its identity (case, dtype, layout, ...) and the named tensors it exposed,
 * each gathered to its full (unsharded) shape. A capture is what gets dumped to HDF5, read back,
 * and compared.
 *
 * Tensor paths follow the dump layout: "layers/NN/<name>", e.g. "layers/07/fc2_out". */
#ifndef EQUIV_HARNESS_CAPTURE_H
#define EQUIV_HARNESS_CAPTURE_H

#include <stdint.h>

#include "harness/tensor.h"

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

#define EQ_NAME_MAX 64

/* Identity of a run; written as root attributes of its dump. */
typedef struct {
    char case_name[EQ_NAME_MAX]; /* "row_parallel" */
    char model[EQ_NAME_MAX];     /* "row_parallel" (the model the case runs) */
    char size[EQ_NAME_MAX];      /* "ci" or "docs" */
    eq_dtype dtype;
    int dp, tp;
    char transport[EQ_NAME_MAX]; /* "sim" */
    char algorithm[EQ_NAME_MAX]; /* "ring", "tree", "fp32acc", "seq" */
    char backend[EQ_NAME_MAX];   /* "cpu" */
    uint64_t seed;
    char version[EQ_NAME_MAX];   /* equiv's version */
    char grads[EQ_NAME_MAX];     /* data-parallel gradient convention: "avg", "sum" */
    char injected[EQ_NAME_MAX];  /* bugs planted on purpose ("none", "skip_allreduce", ...) */
} eq_run_meta;

typedef struct {
    char path[EQ_NAME_MAX]; /* "layers/07/fc2_out" */
    int layer;              /* 7 */
    char name[EQ_NAME_MAX]; /* "fc2_out" */
    eq_role role;
    eq_tensor tensor;       /* owned, full shape */
} eq_capture_entry;

typedef struct {
    eq_run_meta meta;
    eq_capture_entry *entries; /* in the order the model produced them */
    int count, capacity;
} eq_capture;

void eq_capture_init(eq_capture *cap);
void eq_capture_free(eq_capture *cap);
/* Takes ownership of *t (left empty on return, also on failure, where it is freed). */
eq_status eq_capture_add(eq_capture *cap, int layer, const char *name, eq_role role, eq_tensor *t);
/* Same, but copies t. */
eq_status eq_capture_add_copy(eq_capture *cap, int layer, const char *name, eq_role role,
                              const eq_tensor *t);
/* The entry with this path, or NULL. */
const eq_capture_entry *eq_capture_find(const eq_capture *cap, const char *path);

#endif
