/* SPDX-License-Identifier: MIT */
/* tilewave: CPU workers: OpenMP team setup and execution of CPU variants on host tiles. */
#include <stdlib.h>

#include <omp.h>

#include "runtime_internal.h"

void
twi_cpu_worker_start(tw_worker *w)
{
    /* The worker is already bound to its `team` cores; threads libgomp creates for its
     * parallel regions inherit that binding, so a variant's team stays confined to them.
     * The ICV set here is per thread: `#pragma omp parallel` without num_threads on this
     * worker opens a team of the right size too. */
    omp_set_num_threads(w->team);
}

tw_status
twi_cpu_run(tw_worker *w, tw_task_ctx *ctx)
{
    tw_task *t = ctx->task;
    tw_status st;
    int i;

    (void)w;
    for (i = 0; i < t->n_tiles; i++)
        ctx->views[i] = twi_tile_host_view(t->tiles[i]);
    st = t->kind->cpu(ctx, t->arg);
    for (i = 0; i < ctx->n_scratch; i++)
        free(ctx->scratch[i]);
    ctx->n_scratch = 0;
    return st;
}
