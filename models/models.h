/* The table of models, and helpers every model uses. */
#ifndef EQUIV_MODELS_MODELS_H
#define EQUIV_MODELS_MODELS_H

#include "models/model.h"

extern const eq_model eq_model_column_parallel;
extern const eq_model eq_model_row_parallel;
extern const eq_model eq_model_mlp_stack;
extern const eq_model eq_model_gpt;
extern const eq_model eq_model_spd;

/* EQ_ERR_USAGE "<layout_name>=<parts> does not divide <size_name>=<value>" unless it does. */
eq_status eq_check_divides(const char *size_name, int64_t value, const char *layout_name, int parts);

#endif
