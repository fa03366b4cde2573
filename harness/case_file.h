/* Case files (cases/<name>.ini): what a case runs, at which sizes, under which layouts and dtypes,
 * against which tolerance entry, and what each comparison must show.
 *
 *   [case]
 *   model   = row_parallel             ; an entry of the model table (models/models.h)
 *   summary = one line for --list
 *   dtypes  = bf16, fp32
 *   layouts = dp1-tp1, dp1-tp2, dp1-tp4 ; the reference dp1-tp1 is always run
 *
 *   [size.ci]                           ; every size the model reads, one section per size
 *   seq = 16
 *   ...
 *
 *   [tolerance]                         ; golden/tolerances.ini entry per dtype
 *   bf16 = bf16_28_layers
 *   fp32 = fp32_1_layer
 *   bf16.grad = ...                     ; optional: the entry for gradients (default: the dtype's)
 *
 *   [expect]                            ; most specific key wins: bf16.dp1-tp4, dp1-tp4, bf16, default
 *   default = within                    ; each also as BACKEND.KEY (cuda.default), which wins on it
 *
 * Values are bit_exact, within, differs, must_fail (harness/tolerance.h).
 *
 *   [expect.avg]                        ; per tensor, under one gradient convention (avg, sum),
 *   ci_*_grad.imp_min = differs rel 3e-4..0.1 ; in layouts with dp > 1 (where the conventions
 *                                       ; differ): a tensor name glob (fnmatch, the name after
 *                                       ; layers/NN/) = expectation; the first matching line wins.
 *                                       ; A differs here may state its size: "rel LO..HI" (worst
 *                                       ; relative error) or "factor LO..HI" (least-squares scale)
 *   [expect.any]                        ; the same, under either convention (a case whose
 *   B_E = bit_exact                     ; reductions do not depend on --grads: probe) */
#ifndef EQUIV_HARNESS_CASE_FILE_H
#define EQUIV_HARNESS_CASE_FILE_H

#include <stdint.h>

#include "harness/base/tensor.h"
#include "harness/tolerance.h"
#include "reductions/layout.h"

#define EQ_CASE_MAX_SIZES 8
#define EQ_CASE_MAX_PARAMS 16
#define EQ_CASE_MAX_LAYOUTS 16
#define EQ_CASE_MAX_EXPECT 16
#define EQ_CASE_KEY_MAX 48
/* The largest value a [size.NAME] key may have. Each model also checks that the tensors its sizes
 * make fit (models/models.h: eq_check_footprint) before anything is allocated. */
#define EQ_CASE_SIZE_MAX INT64_C(2147483647)

typedef struct {
    char key[EQ_CASE_KEY_MAX];
    int64_t value;
    int line; /* of the case file, for error messages */
} eq_size_param;

typedef struct {
    char name[EQ_CASE_KEY_MAX]; /* "ci", "docs" */
    eq_size_param params[EQ_CASE_MAX_PARAMS];
    int count;
    const char *case_path; /* for error messages; points into the owning eq_case */
} eq_case_size;

typedef struct {
    char key[EQ_CASE_KEY_MAX]; /* "default", "bf16", "dp1-tp4", "bf16.dp1-tp4" */
    eq_expect expect;
} eq_case_expect;

typedef struct {
    char grads[8];                  /* "avg", "sum" */
    char pattern[EQ_CASE_KEY_MAX];  /* fnmatch glob on the tensor name */
    eq_expect expect;
    eq_expect_size size;            /* of a differs: "differs rel 1e-3..3e-2" (harness/tolerance.h) */
} eq_case_tensor_expect;

typedef struct {
    char path[1024];
    char name[EQ_CASE_KEY_MAX]; /* file name without .ini */
    char model[EQ_CASE_KEY_MAX];
    char summary[256];
    eq_dtype dtypes[EQ_DTYPE_COUNT];
    int n_dtypes;
    eq_layout layouts[EQ_CASE_MAX_LAYOUTS];
    int n_layouts;
    eq_case_size sizes[EQ_CASE_MAX_SIZES];
    int n_sizes;
    char tolerance[EQ_DTYPE_COUNT][EQ_CASE_KEY_MAX];      /* by eq_dtype; "" if none */
    char grad_tolerance[EQ_DTYPE_COUNT][EQ_CASE_KEY_MAX]; /* by eq_dtype; "" = use tolerance[] */
    eq_case_expect expects[EQ_CASE_MAX_EXPECT];
    int n_expects;
    eq_case_tensor_expect tensor_expects[EQ_CASE_MAX_EXPECT];
    int n_tensor_expects;
} eq_case;

/* Parses a case file. Malformed files (syntax error, unknown section or key, a missing required
 * key, a bad number, dtype, layout or expectation) are EQ_ERR_INPUT naming the file and line, as
 * are what would otherwise pass silently: a key, section, dtype or layout given twice, an empty
 * value or list item, a name or value too long to keep whole, a size out of 1..EQ_CASE_SIZE_MAX.
 * The file must be a regular file of at most 1 MiB (harness/input_file.h). */
eq_status eq_case_load(const char *path, eq_case *out);

/* Loads <dir>/<name>.ini (name: a file name, no '/'); an unknown case is EQ_ERR_USAGE listing the
 * known ones. Any number of cases may be in dir. */
eq_status eq_case_load_named(const char *dir, const char *name, eq_case *out);

/* Names of the cases in dir (sorted): fills names[max][EQ_CASE_KEY_MAX], returns the count. More
 * than max cases, or a case file whose name is too long, is EQ_ERR_INPUT (none is left out). */
eq_status eq_case_list(const char *dir, char names[][EQ_CASE_KEY_MAX], int max, int *count);

/* The size section `name`; EQ_ERR_USAGE if the case has none of that name. */
eq_status eq_case_find_size(const eq_case *c, const char *name, const eq_case_size **out);

/* A size parameter; EQ_ERR_INPUT naming the case file if missing. */
eq_status eq_size_get(const eq_case_size *s, const char *key, int64_t *out);

/* A size parameter, or `fallback` when the size does not set it. */
int64_t eq_size_get_or(const eq_case_size *s, const char *key, int64_t fallback);

/* What the case expects for (dtype, layout) on `backend` ("cpu", "cuda"; NULL or "": any): keys
 * prefixed with the backend's name ("cuda.dp1-tp4", "cuda.default") come first. The reference layout compared with itself is a
 * determinism check and always bit_exact. */
eq_expect eq_case_expectation(const eq_case *c, const char *backend, eq_dtype dt, eq_layout l);

/* The [expect.<grads>] line for tensor `name` (the part after layers/NN/) in layout l: 1 and *out
 * when one matches (only where l.dp > 1), else 0. */
int eq_case_tensor_expectation(const eq_case *c, const char *grads, eq_layout l, const char *name, eq_expect *out);
/* The same, with the line's size (EQ_SIZE_ANY when it states none) in *size. */
int eq_case_tensor_expectation_sized(const eq_case *c, const char *grads, eq_layout l, const char *name,
                                     eq_expect *out, eq_expect_size *size);

#endif
