/* Runs harness/optimizer.h for a few steps on raw files, for optimizer_torch_test.py to compare
 * with torch.optim bit for bit:
 *
 *   optimizer_steps sgd|adam lerp|mul_add fp32|fp64 N STEPS LR BETA1 BETA2 EPS PARAMS GRADS OUT
 *
 * PARAMS: N raw native-endian elements of the dtype (the parameter at step 0); GRADS: STEPS x N
 * (step t's gradient in row t-1); OUT: STEPS x N, the parameter after each step. The scalars are
 * read with strtod (python's repr of a double reads back exactly). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/optimizer.h"

static eq_status parse_double(const char *what, const char *s, double *out)
{
    char *end;
    errno = 0;
    *out = strtod(s, &end);
    if (errno != 0 || end == s || *end != '\0') return EQ_FAIL(EQ_ERR_USAGE, "%s: not a number: '%s'", what, s);
    return EQ_OK;
}

static eq_status parse_count(const char *what, const char *s, int64_t *out)
{
    char *end;
    errno = 0;
    const long long v = strtoll(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < 1) return EQ_FAIL(EQ_ERR_USAGE, "%s: not a count >= 1: '%s'", what, s);
    *out = v;
    return EQ_OK;
}

/* Reads exactly `bytes` into buf (whole file). */
static eq_status read_raw(const char *path, void *buf, size_t bytes)
{
    FILE *fp = fopen(path, "rb");
    if (fp == NULL) return EQ_FAIL(EQ_ERR_INPUT, "%s: %s", path, strerror(errno));
    const size_t got = fread(buf, 1, bytes, fp);
    const int extra = fgetc(fp) != EOF;
    fclose(fp);
    if (got != bytes || extra) return EQ_FAIL(EQ_ERR_INPUT, "%s: want exactly %zu bytes", path, bytes);
    return EQ_OK;
}

static eq_status run(char **argv)
{
    eq_status st = EQ_OK;
    eq_optimizer_config c;
    eq_optimizer_kind kind;
    eq_dtype dt;
    int64_t n, steps;
    eq_tensor param = {0}, grad = {0}, out = {0}, all_grads = {0};
    eq_param_state s = {0};
    FILE *fp = NULL;

    EQ_TRY(eq_optimizer_parse(argv[1], &kind));
    eq_optimizer_defaults(kind, &c);
    if (strcmp(argv[2], "lerp") == 0) c.moment_form = EQ_ADAM_LERP;
    else if (strcmp(argv[2], "mul_add") == 0) c.moment_form = EQ_ADAM_MUL_ADD;
    else EQ_TRY(EQ_FAIL(EQ_ERR_USAGE, "moment form '%s' (known: lerp, mul_add)", argv[2]));
    EQ_TRY(eq_dtype_parse(argv[3], &dt));
    EQ_TRY(parse_count("N", argv[4], &n));
    EQ_TRY(parse_count("STEPS", argv[5], &steps));
    EQ_TRY(parse_double("LR", argv[6], &c.lr));
    EQ_TRY(parse_double("BETA1", argv[7], &c.beta1));
    EQ_TRY(parse_double("BETA2", argv[8], &c.beta2));
    EQ_TRY(parse_double("EPS", argv[9], &c.eps));
    EQ_TRY(eq_optimizer_check(&c));

    const int64_t shape[1] = {n};
    EQ_TRY(eq_tensor_init(&param, dt, 1, shape)); /* [N] */
    EQ_TRY(eq_tensor_init(&grad, dt, 1, shape));  /* [N], one step's */
    EQ_TRY(eq_tensor_init(&out, dt, 1, shape));   /* [N], one step's */
    EQ_TRY(read_raw(argv[10], param.data, eq_tensor_bytes(&param)));
    EQ_TRY(eq_param_state_init(&c, &param, &s));

    const int64_t all_shape[2] = {steps, n};
    EQ_TRY(eq_tensor_init(&all_grads, dt, 2, all_shape)); /* [STEPS, N] */
    EQ_TRY(read_raw(argv[11], all_grads.data, eq_tensor_bytes(&all_grads)));
    fp = fopen(argv[12], "wb");
    if (fp == NULL) EQ_TRY(EQ_FAIL(EQ_ERR_IO, "%s: %s", argv[12], strerror(errno)));
    const size_t step_bytes = eq_tensor_bytes(&grad);
    for (int64_t t = 1; t <= steps; t++) {
        memcpy(grad.data, (const char *)all_grads.data + (size_t)(t - 1) * step_bytes, step_bytes);
        EQ_TRY(eq_optimizer_step(&c, t, &s, &grad, &out));
        if (fwrite(out.data, 1, step_bytes, fp) != step_bytes) EQ_TRY(EQ_FAIL(EQ_ERR_IO, "%s: short write", argv[12]));
    }
cleanup:
    if (fp != NULL && fclose(fp) != 0 && st == EQ_OK) st = EQ_FAIL(EQ_ERR_IO, "%s: %s", argv[12], strerror(errno));
    eq_param_state_free(&s);
    eq_tensor_free(&all_grads);
    eq_tensor_free(&param);
    eq_tensor_free(&grad);
    eq_tensor_free(&out);
    return st;
}

int main(int argc, char **argv)
{
    if (argc != 13) {
        fprintf(stderr, "usage: optimizer_steps sgd|adam lerp|mul_add fp32|fp64 N STEPS LR BETA1 BETA2 EPS PARAMS GRADS OUT\n");
        return 2;
    }
    const eq_status st = run(argv);
    if (st != EQ_OK) {
        fprintf(stderr, "optimizer_steps: error: %s\n", eq_error_message());
        return eq_status_exit_code(st);
    }
    return 0;
}
