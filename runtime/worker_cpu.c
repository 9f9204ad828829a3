/* SPDX-License-Identifier: MIT */
/* tilewave: CPU workers: OpenMP team setup and execution of CPU variants on host tiles. */
#include <stdlib.h>

#include <omp.h>

#include "rt_core.h"

void
twi_cpu_worker_start(tw_worker *w)
{
    /* The worker is already bound to its `team` cores; threads libgomp creates for its
     * parallel regions inherit that binding, so a variant's team stays confined to them.
     * The ICV set here is per thread: `#pragma omp parallel` without num_threads on this
     * worker opens a team of the right size too. */
    omp_set_num_threads(w->team);
}

/*
 * Scratch blocks. Tile kernels take megabytes of scratch per task (label's provisional labels
 * and union-find parents, the EDT's rows, ...); freed at the end of each task, the allocator
 * gives large blocks back to the system and the next task faults every page in again (a
 * quarter of label's CPU time on 2 cores, measured with perf). So a worker keeps the blocks of
 * its last tasks, up to TWI_WORKER_KEEP blocks and SCRATCH_KEEP bytes in all (a 1024² tile's
 * scratch several times over), and hands them out again (smallest that fits); larger ones go
 * back at once, and the kept ones when the worker's thread ends.
 */
#define SCRATCH_KEEP ((size_t)64 << 20)

void *
twi_cpu_scratch(tw_worker *w, size_t bytes, size_t *cap)
{
    int best = -1;
    void *p = NULL;

    for (int i = 0; i < w->n_keep; i++)
        if (w->keep_bytes[i] >= bytes && (best < 0 || w->keep_bytes[i] < w->keep_bytes[best]))
            best = i;
    if (best >= 0) {
        p = w->keep[best];
        *cap = w->keep_bytes[best];
        w->n_keep--;
        w->keep[best] = w->keep[w->n_keep];
        w->keep_bytes[best] = w->keep_bytes[w->n_keep];
        return p;
    }
    if (posix_memalign(&p, 64, bytes ? bytes : 1) != 0)
        return NULL;
    *cap = bytes;
    return p;
}

/* Give a task's scratch block back: kept when it may serve again, else freed (the smallest
 * kept block makes room for a larger one). */
static void
scratch_put(tw_worker *w, void *p, size_t cap)
{
    size_t total = cap;

    for (int i = 0; i < w->n_keep; i++)
        total += w->keep_bytes[i];
    /* make room: the smallest kept blocks go first, while they are smaller than p */
    while (w->n_keep > 0 && (w->n_keep == TWI_WORKER_KEEP || total > SCRATCH_KEEP)) {
        int small = 0;

        for (int i = 1; i < w->n_keep; i++)
            if (w->keep_bytes[i] < w->keep_bytes[small])
                small = i;
        if (w->keep_bytes[small] >= cap)
            break;
        total -= w->keep_bytes[small];
        free(w->keep[small]);
        w->n_keep--;
        w->keep[small] = w->keep[w->n_keep];
        w->keep_bytes[small] = w->keep_bytes[w->n_keep];
    }
    if (w->n_keep == TWI_WORKER_KEEP || total > SCRATCH_KEEP) {
        free(p);
        return;
    }
    w->keep[w->n_keep] = p;
    w->keep_bytes[w->n_keep++] = cap;
}

void
twi_cpu_worker_stop(tw_worker *w)
{
    for (int i = 0; i < w->n_keep; i++)
        free(w->keep[i]);
    w->n_keep = 0;
}

/*
 * Lending cores. A job of fewer tiles than workers (a 1024^2 image in memory is one tile)
 * would leave all but one worker idle while a kernel that can run a team works on one core.
 * So when a CPU worker starts a task whose kind runs a team (tw_task_kind.team) and no other
 * task is ready, the CPU workers that run nothing are lent to it for that run: idle ones leave
 * the idle list, ones just woken (by the push of this very task, usually) sleep again before
 * they look for work; the task's team grows by their teams (twi_ctx_team), and the worker's
 * OpenMP threads are bound to the lent cores for the run, one team thread per core, so nothing
 * is oversubscribed. They come back awake when the task ends and look for work. Work that
 * appears meanwhile waits for the run to end (or for workers that were busy).
 */

void
twi_cpu_borrow(tw_worker *w, const tw_task *t)
{
    tw_runtime *rt = w->rt;

    w->team_now = w->team;
    if (!t->kind->team || rt->n_ready > 0)
        return;
    for (int i = 0; i < rt->n_cpu_workers; i++) {
        tw_worker *o = &rt->workers[i];

        if (o == w || o->running || o->on_loan)
            continue;
        if (o->idle) { /* out of the idle list; it sleeps on, as woken workers will */
            for (int k = 0; k < rt->n_idle; k++)
                if (rt->idle[k] == o) {
                    rt->idle[k] = rt->idle[--rt->n_idle];
                    break;
                }
            o->idle = false;
        }
        o->on_loan = true;
        w->lent[w->n_lent++] = o;
        w->team_now += o->team;
    }
}

void
twi_cpu_return(tw_worker *w)
{
    for (int i = 0; i < w->n_lent; i++) {
        tw_worker *o = w->lent[i];

        o->on_loan = false;
        pthread_cond_signal(&o->cond);
    }
    w->n_lent = 0;
    w->team_now = w->team;
}

/* The variant is done with its team (its last parallel step ran): the lent workers go back to
 * work now instead of when the task ends, so that tasks it submits afterwards start at once. */
void
twi_ctx_team_release(tw_task_ctx *ctx)
{
    tw_worker *w = ctx->w;

    if (w->type != TW_DEVICE_CPU || w->n_lent == 0)
        return;
    twi_sched_lock(w->rt);
    twi_cpu_return(w);
    twi_sched_unlock(w->rt);
}

/* The cores of team thread k of w: its own for k < w->team, then the lent workers' in turn. */
static hwloc_const_bitmap_t
thread_cores(const tw_worker *w, int k)
{
    if (k < w->team)
        return w->cpuset;
    k -= w->team;
    for (int i = 0; i < w->n_lent; i++) {
        if (k < w->lent[i]->team)
            return w->lent[i]->cpuset;
        k -= w->lent[i]->team;
    }
    return w->cpuset;
}

/* The calling worker's OpenMP threads are bound to lent cores (to bind them back). A thread
 * variable, not a field of tw_worker: other workers read that struct under the scheduler lock,
 * and a wider load of its neighbours would race with this unlocked write. */
static _Thread_local bool rebound;

/* Bind w's OpenMP team threads for a run of team_now threads: the lent cores, or back to its
 * own after a run that had lent ones. On w's thread. */
static void
bind_team(tw_worker *w)
{
    int n = w->n_lent ? w->team_now : w->team;
    hwloc_topology_t topo = w->rt->topo.topo;

    if (!w->n_lent && !rebound)
        return;
    /* libgomp's fork and join, told to ThreadSanitizer (tw_internal.h): the team reads w's
     * lent workers, which the runtime frees at its end. */
    TWI_OMP_TSAN_RELEASE(w);
#pragma omp parallel num_threads(n) default(none) shared(w, topo)
    {
        int k = omp_get_thread_num();

        TWI_OMP_TSAN_ACQUIRE(w);
        /* thread 0 is the worker's own thread, bound to its cores already */
        if (k > 0)
            (void)hwloc_set_cpubind(topo, thread_cores(w, k), HWLOC_CPUBIND_THREAD);
        TWI_OMP_TSAN_RELEASE(&w->lent);
    }
    TWI_OMP_TSAN_ACQUIRE(&w->lent);
    rebound = w->n_lent > 0;
}

tw_status
twi_cpu_run(tw_worker *w, tw_task_ctx *ctx)
{
    tw_task *t = ctx->task;
    tw_status st;
    int i;

    if (t->kind->team)
        bind_team(w);
    for (i = 0; i < t->n_tiles; i++)
        ctx->views[i] = twi_tile_host_view(t->tiles[i]);
    st = t->kind->cpu(ctx, t->arg);
    for (i = 0; i < ctx->n_scratch; i++)
        scratch_put(w, ctx->scratch[i], ctx->scratch_bytes[i]);
    ctx->n_scratch = 0;
    return st;
}
