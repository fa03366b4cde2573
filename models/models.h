/* The table of models, and helpers every model uses. */
#ifndef EQUIV_MODELS_MODELS_H
#define EQUIV_MODELS_MODELS_H

#include "models/model.h"

extern const eq_model eq_model_column_parallel;
extern const eq_model eq_model_row_parallel;
extern const eq_model eq_model_mlp_stack;
extern const eq_model eq_model_gpt;
extern const eq_model eq_model_spd;
extern const eq_model eq_model_probe;

/* A model's [size.NAME] keys are one table, X(member of its sizes struct, "key"), from which it
 * reads them (EQ_SIZE_READ, in a function with `st`, `step`, a sizes pointer `z` and a cleanup
 * label) and names them for eq_model.size_keys (EQ_SIZE_NAME), so that the keys a case file may
 * hold are the ones the model reads. */
#define EQ_SIZE_READ(member, key) EQ_TRY(eq_size_get(step->size, key, &z->member));
#define EQ_SIZE_NAME(member, key) key,

/* EQ_ERR_USAGE "<layout_name>=<parts> does not divide <size_name>=<value>" unless it does. */
eq_status eq_check_divides(const char *size_name, int64_t value, const char *layout_name, int parts);

/* A kind of tensor a run holds: `copies` of `shape` (up to EQ_MAX_DIMS extents, 0 after the
 * last) in elements of elem_bytes. */
typedef struct {
    const char *name;
    int64_t copies;
    int64_t shape[EQ_MAX_DIMS];
    size_t elem_bytes;
} eq_footprint_item;

/* Whether the tensors a model holds at the step's sizes fit: each shape, and all of them together
 * (copies counted), at most EQ_TENSOR_MAX_BYTES, with no product overflowing on the way. Else
 * EQ_ERR_INPUT naming the case file, the size and the tensor. Every model's check calls it with
 * its largest tensors once its sizes are read, so that a case file's sizes (each up to
 * EQ_CASE_SIZE_MAX) can neither overflow a product nor start an allocation that cannot end well. */
eq_status eq_check_footprint(const eq_step *step, const eq_footprint_item *items, int n);

#endif
