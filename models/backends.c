/* The table of backends (models/backend.h: eq_backend_choice). */
#include <stdio.h>
#include <string.h>

#include "equiv_config.h"
#include "models/backend.h"
#if EQUIV_HAVE_CUDA
#include "reductions/fold_cuda.h"
#endif

const eq_backend_choice eq_backend_choices[] = {
    {.name = "cpu",
     .summary = "GEMMs on the host: OpenBLAS where its shape-invariance probe passes, else a fixed-order C "
                "GEMM (default)",
     .backend = &eq_backend_cpu,
     .open = eq_backend_cpu_open,
     .in_process = &eq_transport_sim,
     .host = 1,
     .lacking = "",
     .remedy = ""},
    {.name = "cuda",
     .summary = "cuBLAS GEMMs on one GPU, the emulated collectives folded there",
#if EQUIV_HAVE_CUDA
     .backend = &eq_backend_cuda,
     .open = eq_backend_cuda_open,
     .in_process = &eq_transport_sim_cuda,
#else
     .backend = NULL,
     .open = NULL,
     .in_process = NULL,
#endif
     .host = 0,
     .lacking = "CUDA",
     .remedy = "no nvcc when meson set up the build; see README, GPU"},
};
const int eq_backend_choice_count = (int)(sizeof eq_backend_choices / sizeof eq_backend_choices[0]);

eq_status eq_backend_choice_find(const char *name, const eq_backend_choice **out)
{
    char known[128] = "";
    for (int i = 0; i < eq_backend_choice_count; i++) {
        if (strcmp(name, eq_backend_choices[i].name) == 0) {
            *out = &eq_backend_choices[i];
            return EQ_OK;
        }
        snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", i ? ", " : "", eq_backend_choices[i].name);
    }
    return EQ_FAIL(EQ_ERR_USAGE, "unknown backend '%s' (known: %s)", name, known);
}

eq_status eq_backend_find(const char *name, const eq_backend **out)
{
    const eq_backend_choice *choice = NULL;
    eq_status st = eq_backend_choice_find(name, &choice);
    if (st != EQ_OK) return st;
    if (choice->backend == NULL)
        return EQ_FAIL(EQ_ERR_USAGE, "--backend %s: equiv was built without %s (%s)", name, choice->lacking,
                       choice->remedy);
    if (choice->open != NULL) st = choice->open();
    if (st == EQ_OK) *out = choice->backend;
    return st;
}
