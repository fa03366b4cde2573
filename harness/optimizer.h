/* The optimizers of a many-step run (--steps N): torch.optim.SGD and torch.optim.Adam, elementwise,
 * on fp32 master weights (fp64 for an fp64 run), as mixed-precision trainers keep them: the model
 * reads the master rounded to the run's dtype (bf16: round to nearest even), the gradient it
 * returns in the run's dtype is widened to the master's precision before the update.
 *
 * The update is elementwise and the same code for the reference and the layout, so a sharded
 * optimizer (DDP replicas, ZeRO or Megatron's distributed optimizer shards) computes the same bits
 * per element: the driver updates full-shape (gathered) tensors. */
#ifndef EQUIV_HARNESS_OPTIMIZER_H
#define EQUIV_HARNESS_OPTIMIZER_H

#include <stdint.h>

#include "harness/base/status.h"
#include "harness/base/tensor.h"

typedef enum { EQ_OPT_SGD = 0, EQ_OPT_ADAM = 1 } eq_optimizer_kind;
#define EQ_OPT_COUNT 2
const char *eq_optimizer_name(eq_optimizer_kind k);                 /* "sgd", "adam" */
eq_status eq_optimizer_parse(const char *name, eq_optimizer_kind *out); /* EQ_ERR_USAGE naming the known ones */

/* How Adam decays its first moment: torch has two forms, equal while the moment is 0 (step 1),
 * an ulp apart after it. */
typedef enum {
    EQ_ADAM_LERP = 0,    /* exp_avg.lerp_(grad, 1 - beta1): torch.optim.Adam since torch 2.0 */
    EQ_ADAM_MUL_ADD = 1, /* exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1): torch 1.x, libtorch's C++ Adam */
} eq_adam_moment_form;

typedef struct {
    eq_optimizer_kind kind;
    double lr;
    double beta1, beta2, eps; /* adam */
    eq_adam_moment_form moment_form; /* adam; 0 (a zeroed config) is torch 2's lerp */
} eq_optimizer_config;
/* torch's defaults for each (adam: lr 1e-3, betas (0.9, 0.999), eps 1e-8); sgd's lr is equiv's
 * (torch has none): say which in the .c. */
void eq_optimizer_defaults(eq_optimizer_kind k, eq_optimizer_config *out);
/* torch's own checks on a config (lr >= 0; adam: betas in [0, 1), eps >= 0; all finite): EQ_ERR_USAGE
 * naming the bad value. eq_optimizer_step makes them too. */
eq_status eq_optimizer_check(const eq_optimizer_config *c);

/* One parameter's optimizer state: its master copy and Adam's two moments, in `master` dtype
 * (EQ_FP32, or EQ_FP64 for an fp64 parameter). */
typedef struct {
    eq_tensor master, exp_avg, exp_avg_sq; /* same shape as the parameter; the moments empty for sgd */
} eq_param_state;

/* The state of a parameter starting at `param` (any dtype): master = param widened, moments 0. */
eq_status eq_param_state_init(const eq_optimizer_config *c, const eq_tensor *param, eq_param_state *s);
/* Step t (1-based, Adam's bias correction) with gradient `grad` (the parameter's shape, any dtype):
 * updates the master and moments in place and writes the master rounded to param_out's dtype
 * into param_out (same shape). A shape mismatch is EQ_ERR_INPUT naming both shapes. */
eq_status eq_optimizer_step(const eq_optimizer_config *c, int64_t t, eq_param_state *s, const eq_tensor *grad,
                            eq_tensor *param_out);
void eq_param_state_free(eq_param_state *s);

#endif
