#include "harness/run_steps.h"

#include <dirent.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* One rank's light record as read. */
typedef struct {
    char path[4800];
    json_t *doc;
    int rank, dp_rank, tp_rank;
    double *loss, *lr, *grad_sq, *param_sq; /* [n], [n], [n * n_params] (NaN: no gradient), [n * n_params] */
} rank_record;

int eq_run_steps_present(const char *run)
{
    char dir[4400];
    struct stat sb;
    snprintf(dir, sizeof dir, "%s/steps", run);
    return stat(dir, &sb) == 0 && S_ISDIR(sb.st_mode);
}

void eq_run_steps_dir(const eq_run_steps *s, const char *kind, int step, char *buf, size_t len)
{
    snprintf(buf, len, "%s/%s_%06d", s->dir, kind, step);
}

void eq_run_steps_free(eq_run_steps *s)
{
    if (s == NULL) return;
    free(s->loss);
    free(s->lr);
    free(s->grad_sq);
    free(s->names);
    free(s->param_sq);
    free(s->full_steps);
    free(s->findings);
    memset(s, 0, sizeof *s);
}

static void add_finding(eq_run_steps *s, const char *fmt, ...)
{
    if (s->n_findings == EQ_RUN_STEPS_FINDINGS) {
        s->n_findings_dropped++;
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->findings[s->n_findings++], EQ_FINDING_MAX, fmt, ap);
    va_end(ap);
}

/* A JSON number, or the strings "NaN", "Infinity", "-Infinity" a non-finite one is written as. */
static int number_of(const json_t *v, double *out)
{
    if (json_is_number(v)) {
        *out = json_number_value(v);
        return 1;
    }
    const char *s = json_string_value(v);
    if (s == NULL) return 0;
    if (strcmp(s, "NaN") == 0) *out = NAN;
    else if (strcmp(s, "Infinity") == 0) *out = INFINITY;
    else if (strcmp(s, "-Infinity") == 0) *out = -INFINITY;
    else return 0;
    return 1;
}

static eq_status get_int(const rank_record *r, const char *key, int lo, int hi, int *out)
{
    const json_t *v = json_object_get(r->doc, key);
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
        return EQ_FAIL(EQ_ERR_INPUT, "%s: \"%s\" must be an integer in %d..%d", r->path, key, lo, hi);
    *out = (int)json_integer_value(v);
    return EQ_OK;
}

/* The optimizer object (null: none) into s (from the first rank's record). */
static eq_status read_optimizer(const rank_record *r, eq_run_steps *s)
{
    const json_t *o = json_object_get(r->doc, "optimizer");
    if (o == NULL || json_is_null(o)) return EQ_OK;
    const char *name = json_string_value(json_object_get(o, "name"));
    double lr = 0.0;
    if (!json_is_object(o) || name == NULL || !number_of(json_object_get(o, "lr"), &lr) || !(lr >= 0.0))
        return EQ_FAIL(EQ_ERR_INPUT, "%s: \"optimizer\" must be null or an object with a \"name\" and an \"lr\" >= 0", r->path);
    s->has_optimizer = 1;
    snprintf(s->optimizer_name, sizeof s->optimizer_name, "%s", name);
    /* Adam and AdamW: adam; anything else is shown as sgd with its learning rate (the heading only) */
    const int adam = strncmp(name, "adam", 4) == 0;
    eq_optimizer_defaults(adam ? EQ_OPT_ADAM : EQ_OPT_SGD, &s->opt);
    s->opt.lr = lr;
    const json_t *betas = json_object_get(o, "betas");
    if (adam && json_array_size(betas) == 2) {
        number_of(json_array_get(betas, 0), &s->opt.beta1);
        number_of(json_array_get(betas, 1), &s->opt.beta2);
    }
    if (adam) number_of(json_object_get(o, "eps"), &s->opt.eps);
    return EQ_OK;
}

/* The header of rank file r, checked against the first's (r0; NULL: r is the first, into s). */
static eq_status read_header(rank_record *r, const rank_record *r0, eq_run_steps *s)
{
    eq_status st = EQ_OK;
    int format = 0, dp = 0, tp = 0, world = 0;
    EQ_TRY(get_int(r, "equiv_steps", 1, 1000000, &format));
    if (format > EQ_RUN_STEPS_FORMAT) {
        st = EQ_FAIL(EQ_ERR_INPUT, "%s: light-record format %d is newer than this equiv reads (%d)", r->path, format,
                     EQ_RUN_STEPS_FORMAT);
        goto cleanup;
    }
    EQ_TRY(get_int(r, "dp", 1, 1 << 20, &dp));
    EQ_TRY(get_int(r, "tp", 1, 1 << 20, &tp));
    EQ_TRY(get_int(r, "world_size", 1, 1 << 20, &world));
    EQ_TRY(get_int(r, "rank", 0, world - 1, &r->rank));
    EQ_TRY(get_int(r, "dp_rank", 0, dp - 1, &r->dp_rank));
    EQ_TRY(get_int(r, "tp_rank", 0, tp - 1, &r->tp_rank));
    if (dp * tp != world) {
        st = EQ_FAIL(EQ_ERR_INPUT, "%s: world_size %d is not dp %d x tp %d", r->path, world, dp, tp);
        goto cleanup;
    }
    if (r0 == NULL) {
        s->dp = dp, s->tp = tp, s->world_size = world;
        const char *dtype = json_string_value(json_object_get(r->doc, "dtype"));
        if (dtype == NULL || eq_dtype_parse(dtype, &s->dtype) != EQ_OK) {
            eq_error_clear();
            st = EQ_FAIL(EQ_ERR_INPUT, "%s: \"dtype\" must be \"bf16\", \"fp32\" or \"fp64\"", r->path);
            goto cleanup;
        }
        const char *name = json_string_value(json_object_get(r->doc, "case"));
        if (name != NULL && name[0] != '\0') snprintf(s->case_name, sizeof s->case_name, "%s", name);
        EQ_TRY(get_int(r, "params_every", 0, EQ_RUN_STEPS_MAX, &s->params_every));
        EQ_TRY(read_optimizer(r, s));
    } else if (dp != s->dp || tp != s->tp || world != s->world_size) {
        st = EQ_FAIL(EQ_ERR_INPUT, "%s: dp %d, tp %d, world_size %d, but %s says dp %d, tp %d, world_size %d", r->path, dp,
                     tp, world, r0->path, s->dp, s->tp, s->world_size);
    }
cleanup:
    return st;
}

/* The parameter list (names and shards) of r: the first's into s, the others checked against it. */
static eq_status read_params(const rank_record *r, const rank_record *r0, eq_run_steps *s)
{
    const json_t *params = json_object_get(r->doc, "params");
    if (!json_is_array(params) || json_array_size(params) == 0 || json_array_size(params) > 1000000)
        return EQ_FAIL(EQ_ERR_INPUT, "%s: \"params\" must be a non-empty array of {\"name\", \"shard\"}", r->path);
    if (r0 == NULL) {
        s->n_params = (int)json_array_size(params);
        s->names = calloc((size_t)s->n_params, sizeof *s->names);
        if (s->names == NULL) return EQ_FAIL(EQ_ERR_NOMEM, "no memory for %d parameters", s->n_params);
    } else if ((int)json_array_size(params) != s->n_params) {
        return EQ_FAIL(EQ_ERR_INPUT, "%s: %zu parameters, %s %d", r->path, json_array_size(params), r0->path, s->n_params);
    }
    const json_t *params0 = r0 != NULL ? json_object_get(r0->doc, "params") : NULL;
    for (int k = 0; k < s->n_params; k++) {
        const json_t *p = json_array_get(params, (size_t)k);
        const char *name = json_string_value(json_object_get(p, "name"));
        const char *shard = json_string_value(json_object_get(p, "shard"));
        if (name == NULL || shard == NULL || name[0] == '\0' || strlen(name) >= EQ_NAME_MAX)
            return EQ_FAIL(EQ_ERR_INPUT, "%s: parameter %d needs a \"name\" (1 to %d characters) and a \"shard\"", r->path, k,
                           EQ_NAME_MAX - 1);
        if (r0 == NULL) {
            snprintf(s->names[k], EQ_NAME_MAX, "%s", name);
            continue;
        }
        const json_t *p0 = json_array_get(params0, (size_t)k);
        if (strcmp(name, s->names[k]) != 0 || strcmp(shard, json_string_value(json_object_get(p0, "shard"))) != 0)
            return EQ_FAIL(EQ_ERR_INPUT, "%s: parameter %d is %s (%s), %s's %s (%s)", r->path, k, name, shard, r0->path,
                           s->names[k], json_string_value(json_object_get(p0, "shard")));
    }
    return EQ_OK;
}

/* A numeric array of n entries at key of step object `step` (null entries NaN where nullable). */
static eq_status read_numbers(const rank_record *r, const json_t *step, int t, const char *key, int nullable, double *out,
                              int n)
{
    const json_t *a = json_object_get(step, key);
    if (!json_is_array(a) || (int)json_array_size(a) != n)
        return EQ_FAIL(EQ_ERR_INPUT, "%s: step %d: \"%s\" must be an array of %d numbers", r->path, t, key, n);
    for (int k = 0; k < n; k++) {
        const json_t *v = json_array_get(a, (size_t)k);
        if (nullable && json_is_null(v)) out[k] = NAN;
        else if (!number_of(v, &out[k]) || out[k] < 0.0)
            return EQ_FAIL(EQ_ERR_INPUT, "%s: step %d: \"%s\"[%d] must be a number >= 0%s", r->path, t, key, k,
                           nullable ? " or null" : "");
    }
    return EQ_OK;
}

/* The steps of r: 1, 2, ..., n, the same n as the first's (s->n_steps, set from r0 == NULL). */
static eq_status read_steps(rank_record *r, const rank_record *r0, eq_run_steps *s)
{
    const json_t *steps = json_object_get(r->doc, "steps");
    if (!json_is_array(steps) || json_array_size(steps) > EQ_RUN_STEPS_MAX)
        return EQ_FAIL(EQ_ERR_INPUT, "%s: \"steps\" must be an array of at most %d steps", r->path, EQ_RUN_STEPS_MAX);
    const int n = (int)json_array_size(steps), np = s->n_params;
    if (r0 == NULL) s->n_steps = n;
    else if (n != s->n_steps) return EQ_FAIL(EQ_ERR_INPUT, "%s: %d steps, %s %d", r->path, n, r0->path, s->n_steps);
    const size_t m = (size_t)(n > 0 ? n : 1);
    r->loss = calloc(m, sizeof *r->loss);
    r->lr = calloc(m, sizeof *r->lr);
    r->grad_sq = calloc(m * (size_t)np, sizeof *r->grad_sq);
    r->param_sq = calloc(m * (size_t)np, sizeof *r->param_sq);
    if (r->loss == NULL || r->lr == NULL || r->grad_sq == NULL || r->param_sq == NULL)
        return EQ_FAIL(EQ_ERR_NOMEM, "no memory for %s", r->path);
    for (int t = 1; t <= n; t++) {
        const json_t *step = json_array_get(steps, (size_t)(t - 1));
        const json_t *number = json_object_get(step, "step"), *lr = json_object_get(step, "lr");
        if (!json_is_integer(number) || json_integer_value(number) != t)
            return EQ_FAIL(EQ_ERR_INPUT, "%s: steps[%d] must be step %d (the steps are 1, 2, ..., n)", r->path, t - 1, t);
        if (!number_of(json_object_get(step, "loss"), &r->loss[t - 1]))
            return EQ_FAIL(EQ_ERR_INPUT, "%s: step %d: \"loss\" must be a number", r->path, t);
        if (lr == NULL || json_is_null(lr)) r->lr[t - 1] = NAN;
        else if (!number_of(lr, &r->lr[t - 1])) return EQ_FAIL(EQ_ERR_INPUT, "%s: step %d: \"lr\" must be a number or null", r->path, t);
        eq_status st = read_numbers(r, step, t, "grad_sq", 1, &r->grad_sq[(size_t)(t - 1) * np], np);
        if (st == EQ_OK) st = read_numbers(r, step, t, "param_sq", 0, &r->param_sq[(size_t)(t - 1) * np], np);
        if (st != EQ_OK) return st;
    }
    return EQ_OK;
}

/* The full steps of the first record into s. */
static eq_status read_full_steps(const rank_record *r, eq_run_steps *s)
{
    const json_t *full = json_object_get(r->doc, "full_steps");
    if (!json_is_array(full) || json_array_size(full) > EQ_RUN_STEPS_MAX)
        return EQ_FAIL(EQ_ERR_INPUT, "%s: \"full_steps\" must be an array of step numbers", r->path);
    s->n_full = (int)json_array_size(full);
    s->full_steps = calloc((size_t)(s->n_full > 0 ? s->n_full : 1), sizeof *s->full_steps);
    if (s->full_steps == NULL) return EQ_FAIL(EQ_ERR_NOMEM, "no memory for %s", r->path);
    for (int i = 0; i < s->n_full; i++) {
        const json_t *v = json_array_get(full, (size_t)i);
        if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > EQ_RUN_STEPS_MAX)
            return EQ_FAIL(EQ_ERR_INPUT, "%s: full_steps[%d] must be a step number >= 1", r->path, i);
        s->full_steps[i] = (int)json_integer_value(v);
    }
    return EQ_OK;
}

static int same_bits(double a, double b) { return a == b || (isnan(a) && isnan(b)); }

/* Whether shard string `shard` splits over "dp" or "tp". */
static int splits(const char *shard, const char *group)
{
    char key[8];
    snprintf(key, sizeof key, "%s:", group);
    return strstr(shard, key) != NULL;
}

static const char *shard_of(const rank_record *r, int k)
{
    return json_string_value(json_object_get(json_array_get(json_object_get(r->doc, "params"), (size_t)k), "shard"));
}

/* The first step (1-based; 0: none) at which a and b differ among n values of stride `stride`. */
static int first_difference(const double *a, const double *b, int n, int stride)
{
    for (int t = 0; t < n; t++)
        if (!same_bits(a[(size_t)t * stride], b[(size_t)t * stride])) return t + 1;
    return 0;
}

/* The run's numbers from the ranks (at[dp_rank * tp + tp_rank]), and the findings. */
static eq_status assemble(rank_record *recs, const int *at, eq_run_steps *s)
{
    const int n = s->n_steps, np = s->n_params, m = n > 0 ? n : 1;
    s->loss = calloc((size_t)m, sizeof *s->loss);
    s->lr = calloc((size_t)m, sizeof *s->lr);
    s->grad_sq = calloc((size_t)m, sizeof *s->grad_sq);
    s->param_sq = calloc((size_t)m * (size_t)np, sizeof *s->param_sq);
    s->findings = calloc(EQ_RUN_STEPS_FINDINGS, sizeof *s->findings);
    if (s->loss == NULL || s->lr == NULL || s->grad_sq == NULL || s->param_sq == NULL || s->findings == NULL)
        return EQ_FAIL(EQ_ERR_NOMEM, "no memory for the steps of %s", s->dir);
    const rank_record *first = &recs[at[0]];
    for (int i = 0; i < s->world_size; i++) { /* the loss over dp, held alike by a replica's tp ranks */
        const rank_record *r = &recs[at[i]], *r0 = &recs[at[r->dp_rank * s->tp]];
        int t = first_difference(r->loss, r0->loss, n, 1);
        if (r != r0 && t > 0)
            add_finding(s, "loss should be replicated over tp but differs from step %d: rank %d (dp %d, tp %d) %.17g vs rank %d's %.17g", t,
                        r->rank, r->dp_rank, r->tp_rank, r->loss[t - 1], r0->rank, r0->loss[t - 1]);
        t = first_difference(r->lr, first->lr, n, 1);
        if (r != first && t > 0)
            add_finding(s, "the learning rate differs between ranks from step %d: rank %d (dp %d, tp %d) %.9g vs rank %d's %.9g", t, r->rank,
                        r->dp_rank, r->tp_rank, r->lr[t - 1], first->rank, first->lr[t - 1]);
        if (r->tp_rank == 0)
            for (int t2 = 0; t2 < n; t2++) s->loss[t2] += r->loss[t2];
    }
    for (int t = 0; t < n; t++) s->lr[t] = first->lr[t];
    for (int k = 0; k < np; k++) {
        const char *shard = shard_of(first, k);
        const int by_dp = splits(shard, "dp"), by_tp = splits(shard, "tp");
        int has_grad = 0, reported = 0;
        for (int i = 0; i < s->world_size; i++) {
            const rank_record *r = &recs[at[i]];
            /* the holder of r's piece: the first rank of the same piece (dp rank 0 or tp rank 0 where not split) */
            const rank_record *h = &recs[at[(by_dp ? r->dp_rank : 0) * s->tp + (by_tp ? r->tp_rank : 0)]];
            const double *pr = &r->param_sq[k], *ph = &h->param_sq[k], *gr = &r->grad_sq[k], *gh = &h->grad_sq[k];
            if (r == h) {
                for (int t = 0; t < n; t++) {
                    s->param_sq[(size_t)t * np + k] += pr[(size_t)t * np];
                    if (!isnan(gr[(size_t)t * np])) s->grad_sq[t] += gr[(size_t)t * np], has_grad = 1;
                }
                continue;
            }
            const int tp_t = first_difference(pr, ph, n, np), tg = first_difference(gr, gh, n, np);
            const int t = tp_t == 0 ? tg : tg == 0 ? tp_t : (tp_t < tg ? tp_t : tg);
            if (t == 0 || reported) continue;
            reported = 1;
            const int param = t == tp_t;
            add_finding(s, "%s should be replicated over %s but differs from step %d: rank %d (dp %d, tp %d) ||%s||^2 %.17g vs rank %d's %.17g",
                        s->names[k], r->dp_rank != h->dp_rank ? "dp" : "tp", t, r->rank, r->dp_rank, r->tp_rank,
                        param ? "p" : "g", (param ? pr : gr)[(size_t)(t - 1) * np], h->rank, (param ? ph : gh)[(size_t)(t - 1) * np]);
        }
        s->n_frozen += !has_grad;
    }
    return EQ_OK;
}

static eq_status read_rank_file(rank_record *r)
{
    json_error_t err;
    r->doc = json_load_file(r->path, JSON_REJECT_DUPLICATES, &err);
    if (r->doc == NULL) return EQ_FAIL(EQ_ERR_INPUT, "%s: not a light record: line %d: %s", r->path, err.line, err.text);
    if (!json_is_object(r->doc)) return EQ_FAIL(EQ_ERR_INPUT, "%s: not a light record: not a JSON object", r->path);
    return EQ_OK;
}

/* The rank*.json files of dir, sorted: names into *out (count *n). */
static eq_status list_rank_files(const char *dir, char (**out)[256], int *n)
{
    eq_status st = EQ_OK;
    char (*names)[256] = NULL;
    int count = 0, cap = 0;
    DIR *d = opendir(dir);
    if (d == NULL) return EQ_FAIL(EQ_ERR_INPUT, "%s: cannot open the light records' directory", dir);
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        const size_t len = strlen(e->d_name);
        if (strncmp(e->d_name, "rank", 4) != 0 || len < 9 || len >= 256 || strcmp(e->d_name + len - 5, ".json") != 0) continue;
        if (count == cap) {
            cap = cap ? 2 * cap : 16;
            char(*grown)[256] = realloc(names, (size_t)cap * sizeof *names);
            if (grown == NULL) {
                st = EQ_FAIL(EQ_ERR_NOMEM, "no memory listing %s", dir);
                goto cleanup;
            }
            names = grown;
        }
        snprintf(names[count++], 256, "%s", e->d_name);
    }
    qsort(names, (size_t)count, sizeof *names, (int (*)(const void *, const void *))strcmp);
    if (count == 0) st = EQ_FAIL(EQ_ERR_INPUT, "%s: no light record (rankNNNNN.json) in it", dir);
cleanup:
    closedir(d);
    if (st != EQ_OK) free(names), names = NULL, count = 0;
    *out = names;
    *n = count;
    return st;
}

eq_status eq_run_steps_load(const char *run, eq_run_steps *out)
{
    eq_status st = EQ_OK;
    char dir[4400];
    char (*files)[256] = NULL;
    rank_record *recs = NULL;
    int n = 0, *at = NULL;
    memset(out, 0, sizeof *out);
    snprintf(out->dir, sizeof out->dir, "%s", run);
    const char *base = strrchr(run, '/');
    snprintf(out->case_name, sizeof out->case_name, "%s", base != NULL && base[1] != '\0' ? base + 1 : run);
    snprintf(dir, sizeof dir, "%s/steps", run);
    EQ_TRY(list_rank_files(dir, &files, &n));
    recs = calloc((size_t)n, sizeof *recs);
    if (recs == NULL) {
        st = EQ_FAIL(EQ_ERR_NOMEM, "no memory for %d light records", n);
        goto cleanup;
    }
    for (int i = 0; i < n; i++) {
        rank_record *r = &recs[i], *r0 = i > 0 ? &recs[0] : NULL;
        snprintf(r->path, sizeof r->path, "%s/%s", dir, files[i]);
        EQ_TRY(read_rank_file(r));
        EQ_TRY(read_header(r, r0, out));
        EQ_TRY(read_params(r, r0, out));
        EQ_TRY(read_steps(r, r0, out));
    }
    EQ_TRY(read_full_steps(&recs[0], out));
    if (n != out->world_size) {
        st = EQ_FAIL(EQ_ERR_INPUT, "%s: a run of %d ranks (dp %d x tp %d) but %d light records", dir, out->world_size, out->dp,
                     out->tp, n);
        goto cleanup;
    }
    at = malloc((size_t)n * sizeof *at);
    if (at == NULL) {
        st = EQ_FAIL(EQ_ERR_NOMEM, "no memory for %d ranks", n);
        goto cleanup;
    }
    for (int i = 0; i < n; i++) at[i] = -1;
    for (int i = 0; i < n; i++) {
        const int place = recs[i].dp_rank * out->tp + recs[i].tp_rank;
        if (at[place] >= 0) {
            st = EQ_FAIL(EQ_ERR_INPUT, "%s: dp rank %d, tp rank %d, as %s", recs[i].path, recs[i].dp_rank, recs[i].tp_rank,
                         recs[at[place]].path);
            goto cleanup;
        }
        at[place] = i;
    }
    EQ_TRY(assemble(recs, at, out));
cleanup:
    for (int i = 0; recs != NULL && i < n; i++) {
        json_decref(recs[i].doc);
        free(recs[i].loss);
        free(recs[i].lr);
        free(recs[i].grad_sq);
        free(recs[i].param_sq);
    }
    free(recs);
    free(files);
    free(at);
    if (st != EQ_OK) eq_run_steps_free(out);
    return st;
}
