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

/* The size keys of a model's numerics (eq_model.numerics), read by eq_numerics_of. */
static const char *const numerics_keys[] = {"megatron_init", "tf32", NULL};

eq_status eq_numerics_of(const eq_case_size *size, int given, eq_numerics *out)
{
    if (given >= 0) {
        *out = (eq_numerics)given;
        return EQ_OK;
    }
    const int64_t megatron = eq_size_get_or(size, numerics_keys[0], 0);
    const int64_t tf32 = eq_size_get_or(size, numerics_keys[1], 0);
    if (megatron < 0 || megatron > 1 || tf32 < 0 || tf32 > 1 || (tf32 && !megatron))
        return EQ_FAIL(EQ_ERR_INPUT, "case file %s: megatron_init and tf32 are 0 or 1, and tf32 = 1 needs megatron_init = 1",
                       size->case_path);
    *out = !megatron ? EQ_NUMERICS_EQUIV : tf32 ? EQ_NUMERICS_MEGATRON_TF32 : EQ_NUMERICS_MEGATRON;
    return EQ_OK;
}

const char *eq_numerics_name(eq_numerics n) { return (int)n >= 0 && (int)n < N_NUMERICS ? numerics_names[n] : "equiv"; }

/* Every bug --inject plants, with the models it is planted in (models/model.h says where): one
 * table, from which the names, the check that a case's model takes a bug and its error line follow. */
#define MAX_BUG_MODELS 3
static const struct {
    eq_bug bug;
    const char *name;
    const eq_model *models[MAX_BUG_MODELS + 1]; /* NULL-terminated */
} bug_names[] = {
    {EQ_BUG_SKIP_ALLREDUCE, "skip_allreduce", {&eq_model_row_parallel, &eq_model_mlp_stack, &eq_model_gpt}},
    {EQ_BUG_SHARD_OFFSET, "shard_offset", {&eq_model_column_parallel, &eq_model_mlp_stack, &eq_model_gpt}},
    {EQ_BUG_GRAD_AVG_TWICE, "grad_avg_twice", {&eq_model_gpt}},
    {EQ_BUG_CI_GRAD_AVG, "ci_grad_avg", {&eq_model_spd}},
    {EQ_BUG_FAITH_EVERY_RANK, "faith_every_rank", {&eq_model_spd}},
    {EQ_BUG_LOCAL_COUNT, "local_count", {&eq_model_spd, &eq_model_probe}},
    {EQ_BUG_IMP_MIN_NO_WS, "imp_min_no_world_size", {&eq_model_spd}},
    {EQ_BUG_DDP_SYNC, "ddp_sync", {&eq_model_probe}},
    {EQ_BUG_RANK_SAMPLING, "rank_sampling", {&eq_model_probe}},
    {EQ_BUG_VAR_FP32, "var_fp32", {&eq_model_probe}},
    {EQ_BUG_BARS_DOT_ONE_RANK, "bars_dot_one_rank", {&eq_model_probe}},
};
#define N_BUGS (sizeof bug_names / sizeof bug_names[0])

static int bug_planted_in(size_t i, const eq_model *model)
{
    for (int m = 0; bug_names[i].models[m] != NULL; m++)
        if (bug_names[i].models[m] == model) return 1;
    return 0;
}

eq_status eq_model_check_bugs(const eq_model *model, unsigned bugs)
{
    for (size_t i = 0; i < N_BUGS; i++) {
        if (!(bugs & (unsigned)bug_names[i].bug) || bug_planted_in(i, model)) continue;
        char in[128] = "", takes[256] = "";
        for (int m = 0; bug_names[i].models[m] != NULL; m++)
            snprintf(in + strlen(in), sizeof in - strlen(in), "%s%s", in[0] ? ", " : "", bug_names[i].models[m]->name);
        for (size_t k = 0; k < N_BUGS; k++)
            if (bug_planted_in(k, model))
                snprintf(takes + strlen(takes), sizeof takes - strlen(takes), "%s%s", takes[0] ? ", " : "",
                         bug_names[k].name);
        return EQ_FAIL(EQ_ERR_USAGE, "--inject %s does not apply to %s (it is planted in %s; %s takes --inject %s)",
                       bug_names[i].name, model->name, in, model->name, takes[0] ? takes : "none");
    }
    return EQ_OK;
}

static int listed(const char *const *keys, const char *key)
{
    for (int i = 0; keys != NULL && keys[i] != NULL; i++)
        if (strcmp(keys[i], key) == 0) return 1;
    return 0;
}

/* ", "-separated keys into buf (truncated to len); returns buf. */
static void append_keys(char *buf, size_t len, const char *const *keys)
{
    for (int i = 0; keys != NULL && keys[i] != NULL; i++)
        snprintf(buf + strlen(buf), len - strlen(buf), "%s%s", buf[0] ? ", " : "", keys[i]);
}

eq_status eq_model_check_case(const eq_model *model, const eq_case *kase)
{
    for (int i = 0; i < kase->n_sizes; i++) {
        const eq_case_size *size = &kase->sizes[i];
        for (int k = 0; k < size->count; k++) {
            const eq_size_param *p = &size->params[k];
            if (listed(model->size_keys, p->key) || (model->numerics && listed(numerics_keys, p->key))) continue;
            char reads[300] = "";
            append_keys(reads, sizeof reads, model->size_keys);
            if (model->numerics) append_keys(reads, sizeof reads, numerics_keys);
            return EQ_FAIL(EQ_ERR_INPUT, "case file %s:%d: unknown key '%s' in [size.%s] (model %s reads: %s)",
                           kase->path, p->line, p->key, size->name, model->name, reads);
        }
    }
    return EQ_OK;
}

eq_status eq_bug_parse(const char *name, eq_bug *out)
{
    for (size_t i = 0; i < N_BUGS; i++) {
        if (strcmp(bug_names[i].name, name) == 0) {
            *out = bug_names[i].bug;
            return EQ_OK;
        }
    }
    char known[256] = "";
    for (size_t i = 0; i < N_BUGS; i++)
        snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", i ? ", " : "", bug_names[i].name);
    return EQ_FAIL(EQ_ERR_USAGE, "unknown bug '%s' to inject (known: %s)", name, known);
}

const char *eq_bug_name(eq_bug bug)
{
    for (size_t i = 0; i < N_BUGS; i++)
        if (bug_names[i].bug == bug) return bug_names[i].name;
    return "none";
}
