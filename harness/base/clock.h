/* Seconds on the monotonic clock, for elapsed times (progress, rates, benchmarks). */
#ifndef EQUIV_HARNESS_BASE_CLOCK_H
#define EQUIV_HARNESS_BASE_CLOCK_H

#include <time.h>

static inline double eq_monotonic_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

#endif
