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
#include "models/backend.h"
#include "reductions/collectives.h"

/* Everything one run of one step needs. Borrowed, not owned. */
typedef struct {
    const eq_case_size *size; /* the case's size section */
    eq_dtype dtype;
    eq_layout layout;
    eq_algo algo;             /* how the simulated collectives order and round */
    uint64_t seed;
    const eq_backend *backend;
    const eq_transport *transport;
} eq_step;

typedef struct {
    const char *name;
    const char *summary;
    /* Reads the sizes it needs (EQ_ERR_INPUT if one is missing) and checks that the layout divides
     * them (EQ_ERR_USAGE naming the size and the layout). Cheap: called before anything runs. */
    eq_status (*check)(const eq_step *step);
    /* Runs the step under step->layout, appending captured tensors to cap. */
    eq_status (*run)(const eq_step *step, eq_capture *cap);
} eq_model;

/* The model named `name`, or EQ_ERR_INPUT listing the known ones. */
eq_status eq_model_find(const char *name, const eq_model **out);

/* Every model, NULL-terminated. */
extern const eq_model *const eq_models[];

#endif
