/* SPDX-License-Identifier: MIT */
/* tilewave: a loop of independent calls on an OpenMP team (the per-tile steps ops/ runs
 * outside kernels, such as reconstruction's border propagation). */
#include <stdatomic.h>

#include "omp_kernels.h"

tw_status
twi_omp_for_each(int64_t n, int nthreads, tw_status (*fn)(void *arg, int64_t i), void *arg)
{
    atomic_int first = TW_OK;
    int k = nthreads < n ? nthreads : (int)(n > 0 ? n : 0);

    if (k <= 1) {
        for (int64_t i = 0; i < n; i++) {
            tw_status st = fn(arg, i);

            if (st != TW_OK)
                return st;
        }
        return TW_OK;
    }
    /* Calls vary a lot in cost (a block of tile pairs that raises whole sides, one that
     * raises nothing): chunks handed out as threads come free, some 8 a thread, so that
     * neighbouring calls (neighbouring tiles, sharing cache lines) mostly stay on one thread.
     * After a failure the calls not started are skipped. */
    int64_t chunk = n / (8 * (int64_t)k) > 1 ? n / (8 * (int64_t)k) : 1;

#pragma omp parallel for num_threads(k) schedule(dynamic, chunk) default(none)                   \
    shared(n, fn, arg, first, chunk)
    for (int64_t i = 0; i < n; i++) {
        tw_status st;
        int none = TW_OK;

        if (atomic_load_explicit(&first, memory_order_relaxed) != TW_OK)
            continue;
        if ((st = fn(arg, i)) != TW_OK)
            atomic_compare_exchange_strong(&first, &none, (int)st);
    }
    return (tw_status)atomic_load(&first);
}
