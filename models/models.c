#include "models/models.h"

#include <stdio.h>
#include <string.h>

const eq_model *const eq_models[] = {
    &eq_model_column_parallel,
    &eq_model_row_parallel,
    &eq_model_mlp_stack,
    NULL,
};

eq_status eq_model_find(const char *name, const eq_model **out)
{
    char known[256] = "";
    for (int i = 0; eq_models[i] != NULL; i++) {
        if (strcmp(eq_models[i]->name, name) == 0) {
            *out = eq_models[i];
            return EQ_OK;
        }
        snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", i ? ", " : "", eq_models[i]->name);
    }
    return EQ_FAIL(EQ_ERR_INPUT, "unknown model '%s' (known: %s)", name, known);
}

eq_status eq_check_divides(const char *size_name, int64_t value, const char *layout_name, int parts)
{
    if (parts < 1 || value % parts != 0)
        return EQ_FAIL(EQ_ERR_USAGE, "%s=%d does not divide %s=%lld", layout_name, parts, size_name, (long long)value);
    return EQ_OK;
}
