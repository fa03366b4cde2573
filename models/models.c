#include "models/models.h"

#include <stdio.h>
#include <string.h>

const eq_model *const eq_models[] = {
    &eq_model_column_parallel,
    &eq_model_row_parallel,
    &eq_model_mlp_stack,
    &eq_model_gpt,
    &eq_model_spd,
    &eq_model_probe,

    NULL,
};

const char *eq_model_names(int (*has)(const eq_model *model), char *buf, size_t len)
{
    if (len == 0) return buf;
    buf[0] = '\0';
    for (int i = 0; eq_models[i] != NULL; i++)
        if (has == NULL || has(eq_models[i]))
            snprintf(buf + strlen(buf), len - strlen(buf), "%s%s", buf[0] ? ", " : "", eq_models[i]->name);
    return buf;
}

eq_status eq_model_find(const char *name, const eq_model **out)
{
    for (int i = 0; eq_models[i] != NULL; i++) {
        if (strcmp(eq_models[i]->name, name) == 0) {
            *out = eq_models[i];
            return EQ_OK;
        }
    }
    char known[256];
    return EQ_FAIL(EQ_ERR_INPUT, "unknown model '%s' (known: %s)", name, eq_model_names(NULL, known, sizeof known));
}

/* The fold a group's collectives follow. tp_invariant is no fold: the tp reductions it governs carry
 * an fp32 accumulator instead (models/parallel_linear.c), and whatever else reduces (the
 * data-parallel gradients) accumulates in fp32 in rank order and rounds once, its element-wise
 * form. */
static eq_algo group_algo(const eq_step *step)
{
    return step->algo == EQ_ALGO_TP_INVARIANT ? EQ_ALGO_FP32ACC : step->algo;
}

eq_group eq_step_tp_group(const eq_step *step)
{
    if (step->world != NULL) return eq_world_tp_group(step->world, group_algo(step));
    eq_group g = {step->transport, group_algo(step), step->layout.tp, 0, step->layout.tp, NULL, step->nccl};
    return g;
}

eq_group eq_step_dp_group(const eq_step *step)
{
    if (step->world != NULL) return eq_world_dp_group(step->world, group_algo(step));
    eq_group g = {step->transport, group_algo(step), step->layout.dp, 0, step->layout.dp, NULL, step->nccl};
    return g;
}

static int item_ndim(const eq_footprint_item *item)
{
    int ndim = 0;
    while (ndim < EQ_MAX_DIMS && item->shape[ndim] != 0) ndim++;
    return ndim;
}

/* "<name> [a, b, c]" into buf. */
static const char *describe_item(const eq_footprint_item *item, char *buf, size_t len)
{
    int used = snprintf(buf, len, "%s [", item->name);
    for (int d = 0; d < item_ndim(item) && used > 0 && (size_t)used < len; d++)
        used += snprintf(buf + used, len - (size_t)used, "%s%lld", d ? ", " : "", (long long)item->shape[d]);
    if (used > 0 && (size_t)used < len) snprintf(buf + used, len - (size_t)used, "]");
    return buf;
}

eq_status eq_check_footprint(const eq_step *step, const eq_footprint_item *items, int n)
{
    int64_t total = 0;
    char text[200], layout[32];
    const char *path = step->size->case_path ? step->size->case_path : "?";
    for (int i = 0; i < n; i++) {
        const eq_footprint_item *item = &items[i];
        int64_t bytes = eq_shape_bytes(item_ndim(item), item->shape, item->elem_bytes), all;
        if (bytes < 0 || item_ndim(item) == 0)
            return EQ_FAIL(EQ_ERR_INPUT, "case file %s: [size.%s] makes %s, more than 2^40 bytes", path,
                           step->size->name, describe_item(item, text, sizeof text));
        if (item->copies < 0 || __builtin_mul_overflow(bytes, item->copies, &all) ||
            __builtin_add_overflow(total, all, &total) || total > EQ_TENSOR_MAX_BYTES)
            return EQ_FAIL(EQ_ERR_INPUT, "case file %s: [size.%s] at %s makes the run hold more than 2^40 bytes of "
                           "tensors (%s x %lld among them)", path, step->size->name,
                           eq_layout_name(step->layout, layout, sizeof layout), describe_item(item, text, sizeof text),
                           (long long)item->copies);
    }
    return EQ_OK;
}

eq_status eq_check_divides(const char *size_name, int64_t value, const char *layout_name, int parts)
{
    if (parts < 1 || value % parts != 0)
        return EQ_FAIL(EQ_ERR_USAGE, "%s=%d does not divide %s=%lld", layout_name, parts, size_name, (long long)value);
    return EQ_OK;
}

const char *eq_grad_convention_name(eq_grad_convention c) { return c == EQ_GRAD_SUM ? "sum" : "avg"; }

eq_status eq_grad_convention_parse(const char *name, eq_grad_convention *out)
{
    if (strcmp(name, "avg") == 0) *out = EQ_GRAD_AVG;
    else if (strcmp(name, "sum") == 0) *out = EQ_GRAD_SUM;
    else return EQ_FAIL(EQ_ERR_USAGE, "unknown gradient convention '%s' (known: avg, sum)", name);
    return EQ_OK;
}

static const char *const numerics_names[] = {"equiv", "megatron", "megatron_tf32"}; /* by eq_numerics */
#define N_NUMERICS (int)(sizeof numerics_names / sizeof numerics_names[0])

eq_status eq_numerics_parse(const char *name, eq_numerics *out)
{
    for (int i = 0; i < N_NUMERICS; i++)
        if (strcmp(name, numerics_names[i]) == 0) {
            *out = (eq_numerics)i;
            return EQ_OK;
        }
    return EQ_FAIL(EQ_ERR_USAGE, "unknown numerics '%s' (known: equiv, megatron, megatron_tf32)", name);
}

eq_status eq_numerics_of(const eq_case_size *size, int given, eq_numerics *out)
{
    if (given >= 0) {
        *out = (eq_numerics)given;
        return EQ_OK;
    }
    const int64_t megatron = eq_size_get_or(size, "megatron_init", 0), tf32 = eq_size_get_or(size, "tf32", 0);
    if (megatron < 0 || megatron > 1 || tf32 < 0 || tf32 > 1 || (tf32 && !megatron))
        return EQ_FAIL(EQ_ERR_INPUT, "case file %s: megatron_init and tf32 are 0 or 1, and tf32 = 1 needs megatron_init = 1",
                       size->case_path);
    *out = !megatron ? EQ_NUMERICS_EQUIV : tf32 ? EQ_NUMERICS_MEGATRON_TF32 : EQ_NUMERICS_MEGATRON;
    return EQ_OK;
}

const char *eq_numerics_name(eq_numerics n) { return (int)n >= 0 && (int)n < N_NUMERICS ? numerics_names[n] : "equiv"; }

static const struct {
    eq_bug bug;
    const char *name;
} bug_names[] = {
    {EQ_BUG_SKIP_ALLREDUCE, "skip_allreduce"},
    {EQ_BUG_SHARD_OFFSET, "shard_offset"},
    {EQ_BUG_GRAD_AVG_TWICE, "grad_avg_twice"},
    {EQ_BUG_CI_GRAD_AVG, "ci_grad_avg"},
    {EQ_BUG_FAITH_EVERY_RANK, "faith_every_rank"},
    {EQ_BUG_LOCAL_COUNT, "local_count"},
    {EQ_BUG_IMP_MIN_NO_WS, "imp_min_no_world_size"},
    {EQ_BUG_DDP_SYNC, "ddp_sync"},
    {EQ_BUG_RANK_SAMPLING, "rank_sampling"},
    {EQ_BUG_VAR_FP32, "var_fp32"},
    {EQ_BUG_BARS_DOT_ONE_RANK, "bars_dot_one_rank"},
};

eq_status eq_bug_parse(const char *name, eq_bug *out)
{
    for (size_t i = 0; i < sizeof bug_names / sizeof bug_names[0]; i++) {
        if (strcmp(bug_names[i].name, name) == 0) {
            *out = bug_names[i].bug;
            return EQ_OK;
        }
    }
    char known[256] = "";
    for (size_t i = 0; i < sizeof bug_names / sizeof bug_names[0]; i++)
        snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", i ? ", " : "", bug_names[i].name);
    return EQ_FAIL(EQ_ERR_USAGE, "unknown bug '%s' to inject (known: %s)", name, known);
}

const char *eq_bug_name(eq_bug bug)
{
    for (size_t i = 0; i < sizeof bug_names / sizeof bug_names[0]; i++)
        if (bug_names[i].bug == bug) return bug_names[i].name;
    return "none";
}
