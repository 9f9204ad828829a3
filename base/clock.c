/* SPDX-License-Identifier: MIT */
/* tilewave: the one clock of the library's durations, deadlines and timestamps. */
#include <time.h>

#include "tw_base.h"

int64_t
twi_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + (int64_t)ts.tv_nsec;
}

double
twi_now_s(void)
{
    return (double)twi_now_ns() * 1e-9;
}
