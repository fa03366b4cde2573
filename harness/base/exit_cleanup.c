#include "harness/base/exit_cleanup.h"

#include <stdatomic.h>
#include <stddef.h>

static _Atomic(eq_exit_cleanup_fn) registered;

void eq_exit_cleanup_set(eq_exit_cleanup_fn fn) { atomic_store(&registered, fn); }

void eq_exit_cleanup_run(void)
{
    const eq_exit_cleanup_fn fn = atomic_load(&registered);
    if (fn != NULL) fn();
}
