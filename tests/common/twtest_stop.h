/* SPDX-License-Identifier: MIT */
/* tilewave tests: a twi_stop hook (omp_kernels.h) that counts its questions and says stop from
 * a chosen one on. */
#ifndef TWTEST_STOP_H
#define TWTEST_STOP_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct stop_after {
    atomic_int asked;
    int after; /* answers "stop" from this call on (0: never) */
} stop_after;

/* twi_stop.stop with user a stop_after. */
static inline bool
stop_after_n(const void *user)
{
    stop_after *c = (stop_after *)(uintptr_t)user;
    int n = atomic_fetch_add(&c->asked, 1) + 1;

    return c->after > 0 && n >= c->after;
}

#endif
