/* A run, as `equiv compare` takes it: one HDF5 file holding full tensors (equiv's own dump, or any
 * writer's file of the schema, harness/SCHEMA.md), or a directory of per-rank files (what
 * equiv_capture writes: one file per rank, each tensor as that rank holds it).
 *
 * Assembly, for a directory (harness/run_layout.h: pipeline stages, context and expert parallel too):
 *   - the ranks must be complete (0 .. world_size-1, each once) and agree on the layout (dp, tp,
 *     pp, cp, ep, world_size), peers (one stage, one ep rank) on the tensors they hold (paths,
 *     roles, dtypes, shardings), and a tensor's holders on its shapes;
 *   - a tensor split along dim d over a group is concatenated in group-rank order along d (shards
 *     may differ in size: uneven batches);
 *   - a tensor replicated over a group must be bit-identical on every rank of that group: where it
 *     is not (a parameter or gradient that differs between dp ranks), the group's rank 0 copy is
 *     kept and a finding is recorded, which the comparison reports as not as expected;
 *   - a tensor stored with grad_scale s (the gradient of s x the global loss, e.g. DDP's local
 *     mean) is divided by s, rounded once to its dtype.
 * After this a run is a capture of full tensors, compared by the one path every run takes
 * (eq_compare_runs). */
#ifndef EQUIV_HARNESS_RUN_LOAD_H
#define EQUIV_HARNESS_RUN_LOAD_H

#include "harness/capture.h"

/* Loads the run at path (file or directory) into out (initialised here). EQ_ERR_INPUT, one line
 * naming the file, the dataset and what is wrong, when the run cannot be assembled. Each file is
 * read in a child process (harness/dump_read_isolated.h): a file that crashes or hangs the HDF5
 * library is an error here too. */
eq_status eq_run_load(const char *path, eq_capture *out);

/* The same with the files read by `read` (eq_dump_read: in this process, for tests and fuzzing). */
typedef eq_status (*eq_dump_reader)(const char *path, eq_capture *out);
eq_status eq_run_load_with(const char *path, eq_dump_reader read, eq_capture *out);

/* A declared dtype must agree with the stored data: the run's dtype (its root attribute, else the
 * dtype of its first activation, else of its first gradient) picks the tolerance of a run of no
 * case, so a dtype coarser than what the run holds would loosen every verdict (fp32 data said to
 * be bf16: 2500x). The tensors that decide are the activations (the gradients where it has none);
 * at least one of them that holds elements must hold only values of the dtype: stored in it, or
 * wider with every value one the dtype represents (bf16 widened to fp32 exactly, fp16 to fp32).
 * One is enough, not all, since a mixed-precision step (autocast) keeps some activations wider
 * than its dtype. EQ_ERR_INPUT naming `path`, a tensor and an element that the dtype cannot hold
 * otherwise. Losses never decide (equiv's runs keep theirs in fp64), nor do inputs and parameters
 * (judged bit-exact whatever the dtype). */
eq_status eq_run_check_dtype(const eq_capture *run, const char *path);

/* The same check over a run read a batch at a time (harness/run_stream.h): begin with the run's
 * index (which role decides), add each batch of its tensors, end: the same error, naming the first
 * tensor that the dtype cannot hold, when none passed. */
typedef struct {
    eq_dtype dtype;
    eq_role decides;
    int passed, witnessed;
    char path[EQ_NAME_MAX]; /* the first that did not pass */
    eq_dtype stored;
    int64_t at;
    double value;
} eq_dtype_check;
void eq_dtype_check_begin(eq_dtype_check *c, const eq_capture *run);
void eq_dtype_check_add(eq_dtype_check *c, const eq_capture *tensors);
eq_status eq_dtype_check_end(const eq_dtype_check *c, const char *path);
/* c as if later's tensors had been added to it after its own (later: begun on the same run, then
 * given tensors that come after c's): how the checks of batches compared apart are joined. */
void eq_dtype_check_merge(eq_dtype_check *c, const eq_dtype_check *later);

/* The files of the run at path: the file itself, or every *.h5 of the directory but hidden ones,
 * sorted by name (*files: n malloc'd strings in a malloc'd array, the caller's). */
eq_status eq_run_files(const char *path, char ***files, int *n);
/* Whether the files' captures (their indexes will do) make a run to assemble (rank files) or one
 * file of full tensors; EQ_ERR_INPUT for one rank's file of a larger world, or a directory of
 * files that are not all ranks'. */
eq_status eq_run_kind(const char *path, const char *const *files, int n, const eq_capture *caps, int *assemble);

/* Assembles per-rank captures (each as eq_dump_read gives it: meta.has_rank set) into out;
 * `names[i]` names rank file i in messages: eq_run_check_layout, then eq_run_assemble_path for
 * every path in the order of its first holder, stage by stage (harness/run_layout.c). */
eq_status eq_run_assemble(const eq_capture *ranks, const char *const *names, int n, eq_capture *out);

#endif
