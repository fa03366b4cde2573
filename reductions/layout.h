/* A run's layout: how many data-parallel replicas (dp) of how many tensor-parallel ranks (tp) its
 * ranks form ("dp2-tp4": 8 ranks). Case files list the layouts a case runs (harness/case_file.h);
 * the rank world splits its communicators by it (reductions/world.h). */
#ifndef EQUIV_REDUCTIONS_LAYOUT_H
#define EQUIV_REDUCTIONS_LAYOUT_H

#include <stddef.h>

#include "harness/base/status.h"

typedef struct {
    int dp, tp;
} eq_layout;

/* "dp2-tp4" into a layout; EQ_ERR_USAGE unless both are integers in 1..1024. */
eq_status eq_layout_parse(const char *text, eq_layout *out);
const char *eq_layout_name(eq_layout l, char *buf, size_t len); /* "dp2-tp4" */

#endif
