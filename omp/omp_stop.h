/* SPDX-License-Identifier: MIT */
/* tilewave: the cancel check of the CPU kernels that take a twi_stop (kern/stop.h). C only
 * (C11 atomics), private to omp/. */
#ifndef TW_OMP_STOP_H
#define TW_OMP_STOP_H

#include <stdatomic.h>
#include <stdbool.h>

#include "stop.h"

/* True once the run is to stop: the hook `s` said so now, or to any thread of the team before
 * (`stopped`, shared by the team, false at the start). NULL s: never. */
static inline bool
twi_stop_now(const twi_stop *s, atomic_bool *stopped)
{
    if (!s)
        return false;
    if (atomic_load_explicit(stopped, memory_order_relaxed))
        return true;
    if (!s->stop(s->user))
        return false;
    atomic_store_explicit(stopped, true, memory_order_relaxed);
    return true;
}

#endif
