/* SPDX-License-Identifier: MIT */
/* tilewave: the streaming window: which units of a job's stream are admitted, and when. */
#include <stdlib.h>

#include "rt_core.h"
#include "rt_job.h"

/*
 * A job that streams an image (tiles of a slide, bands of rows, the cells of a pass) opens a
 * window over its n units and the runtime decides how many exist at once, the same way for
 * every operation: libvips' threadpool and [Teodoro13]'s demand-driven scheduler. A unit is
 * admitted (its tiles made and its tasks submitted by the op's admit callback) when a worker
 * is about to go idle, finding no task it can run; so decode and encode spread over every CPU
 * worker while the GPUs compute, and nothing is read that no worker is free to take.
 *
 * The bound. Units admitted and not yet retired (twi_window_retire) never exceed the window's
 * cap: twice the workers plus two, and no more than a share of the host memory (half the
 * budget with runtime.host_mem, else 1/16 of the machine's memory) can hold at the unit's size.
 * A load still waits for room under a host budget (runtime/budget.c); the cap only keeps idle
 * workers from admitting units that wait behind a slower stage (the GPU, the writer) forever.
 *
 * Waiting units. A unit whose first task cannot start yet (the EDT's bands wait for the
 * column scan of the whole image) would let every idle worker admit another one, up to the
 * cap, allocating tiles nobody can use yet. So at most WAITING_MAX admitted units may have no
 * task started; the runtime tags the tasks an admission creates with their unit, and the start
 * of a unit's first task (twi_task_execute) lets the next unit in.
 *
 * Who admits. CPU workers, and GPU managers only when the runtime has no CPU worker: a GPU
 * manager cannot run the reads it would admit, so it would admit up to the cap every time it
 * looked. Units are admitted in order (0, 1, ...); two workers may run admit callbacks of
 * consecutive units at once.
 *
 * The job. While units remain to be admitted the window holds its job (twi_job_hold), so the
 * job cannot end between the end of one unit and the admission of the next; the hold goes when
 * the last unit is admitted, or when the job stops (canceled or failed: no more units). Each
 * claimed unit holds the job too until its tasks are submitted: two workers admit units k and
 * k + 1 at once, and k + 1, the last, may finish first.
 * Windows live until the job is freed (retire may be called on a closed window).
 */

/* Units admitted whose tasks have not started yet (waiting on a dependency, or queued) that
 * a window may have at once. */
#define WAITING_MAX 2

struct twi_window {
    tw_job *job;
    twi_window_admit_fn admit;
    void *arg;
    int64_t n;              /* units */
    int64_t cap;            /* most units admitted and not retired */
    atomic_uchar *started;  /* per unit: one of its tasks started */
    /* under the scheduler lock */
    int64_t next;           /* the next unit to admit */
    int64_t retired;
    int64_t waiting;        /* admitted units none of whose tasks started yet */
    bool open;              /* in rt->windows, holding the job */
    twi_window *rt_next;    /* rt->windows */
    twi_window *job_next;   /* job->windows: freed with the job */
};

int64_t
twi_window_cap(const tw_runtime *rt, int64_t unit_bytes)
{
    int64_t cap = 2 * (int64_t)rt->n_workers + 2, room = 0, budget = 0;

    if (tw_config_get_int(rt->cfg, "runtime.host_mem", &budget) == TW_OK && budget > 0)
        room = budget / 2;
    else
        room = twi_phys_bytes() / 16;
    if (unit_bytes > 0 && room > 0 && room / unit_bytes < cap)
        cap = room / unit_bytes;
    return cap < 2 ? 2 : cap;
}

tw_status
twi_window_open(tw_job *job, int64_t n_units, int64_t unit_bytes, twi_window_admit_fn admit,
                void *arg, twi_window **out)
{
    tw_runtime *rt = twi_job_runtime(job);
    twi_window *w;
    tw_status st;

    if (out)
        *out = NULL;
    if (!rt || !admit || n_units < 0)
        return TW_E_INVALID;
    if (!(w = calloc(1, sizeof *w)))
        return TW_E_NOMEM;
    if (!(w->started = calloc((size_t)(n_units > 0 ? n_units : 1), sizeof *w->started))) {
        free(w);
        return TW_E_NOMEM;
    }
    w->job = job;
    w->admit = admit;
    w->arg = arg;
    w->n = n_units;
    w->cap = twi_window_cap(rt, unit_bytes);
    /* Held before it is visible: an admission by another worker may unhold at once. */
    if (n_units > 0 && (st = twi_job_hold(job)) != TW_OK) {
        free(w->started);
        free(w);
        return st;
    }
    atomic_store(&job->streaming, true);
    /* The caller's handle first: its units may run (and retire) before this returns. */
    if (out)
        *out = w;
    twi_sched_lock(rt);
    w->job_next = job->windows;
    job->windows = w;
    if (n_units > 0) {
        w->open = true;
        w->rt_next = rt->windows;
        rt->windows = w;
    }
    /* The idle workers admit the first units. */
    twi_sched_wake_all_locked(rt);
    twi_sched_unlock(rt);
    return TW_OK;
}

/* Unlink w from rt->windows. Under the scheduler lock. */
static void
unlink_window(tw_runtime *rt, twi_window *w)
{
    for (twi_window **p = &rt->windows; *p; p = &(*p)->rt_next)
        if (*p == w) {
            *p = w->rt_next;
            break;
        }
    w->rt_next = NULL;
    w->open = false;
}

void
twi_window_retire(twi_window *w)
{
    tw_runtime *rt;

    if (!w)
        return;
    rt = w->job->rt;
    twi_sched_lock(rt);
    w->retired++;
    /* Room again: an idle worker (asleep because the window was full) admits the next. */
    if (w->open && w->next - w->retired == w->cap - 1)
        twi_sched_wake_one_locked(rt);
    twi_sched_unlock(rt);
}

int64_t
twi_window_in_flight(twi_window *w)
{
    int64_t n;

    if (!w)
        return 0;
    twi_sched_lock(w->job->rt);
    n = w->next - w->retired;
    twi_sched_unlock(w->job->rt);
    return n;
}

bool
twi_window_take(tw_runtime *rt, const tw_worker *wk, twi_window_claim *c)
{
    c->w = NULL;
    c->unit = -1;
    c->unhold = false;
    if (wk->type == TW_DEVICE_CUDA && rt->n_cpu_workers > 0)
        return false;
    for (twi_window *w = rt->windows, *nx; w; w = nx) {
        nx = w->rt_next;
        if (twi_job_stopping(w->job)) {
            /* No more units: its hold goes (outside the lock, by the caller). */
            unlink_window(rt, w);
            c->w = w;
            c->unhold = true;
            return true;
        }
        if (w->next - w->retired >= w->cap || w->waiting >= WAITING_MAX)
            continue;
        c->w = w;
        c->unit = w->next++;
        w->waiting++;
        /* The job stays open until this unit's tasks are submitted (twi_window_admit), even
         * when a later unit, the last, is admitted first and releases the window's hold. */
        (void)twi_job_hold(w->job);
        if (w->next == w->n) {
            unlink_window(rt, w);
            c->unhold = true;
        } else if (w->rt_next) {
            /* Round robin between the jobs' windows: this one goes to the back. */
            twi_window **p = &rt->windows, *last;

            unlink_window(rt, w);
            w->open = true;
            for (last = rt->windows; last && last->rt_next; last = last->rt_next)
                ;
            p = last ? &last->rt_next : &rt->windows;
            *p = w;
        }
        return true;
    }
    return false;
}

/* The admission under way on this thread: its tasks belong to that unit (twi_window_tag). */
static _Thread_local twi_window *admitting;
static _Thread_local int64_t admitting_unit;

void
twi_window_tag(tw_task *t)
{
    t->win = admitting && admitting->job == t->job ? admitting : NULL;
    t->win_unit = admitting_unit;
}

/* Unit k no longer waits (under no lock); an idle worker may admit the next one. */
static void
unit_started(twi_window *w, int64_t k)
{
    tw_runtime *rt = w->job->rt;

    if (atomic_exchange_explicit(&w->started[k], 1, memory_order_relaxed))
        return;
    twi_sched_lock(rt);
    if (w->waiting-- == WAITING_MAX && w->open && w->next - w->retired < w->cap)
        twi_sched_wake_one_locked(rt);
    twi_sched_unlock(rt);
}

void
twi_window_task_starts(tw_task *t)
{
    unit_started(t->win, t->win_unit);
}

void
twi_window_admit(twi_window_claim *c)
{
    twi_window *w = c->w;
    tw_status st = TW_OK;
    tw_job *job = w->job;

    if (c->unit >= 0) {
        if (!twi_job_stopping(job)) {
            admitting = w;
            admitting_unit = c->unit;
            st = w->admit(w->arg, c->unit);
            admitting = NULL;
            if (st != TW_OK)
                (void)twi_job_fail(job, st, "%s: cannot submit the tasks of unit %lld (%s)",
                                   job->name, (long long)c->unit, tw_status_string(st));
        }
        if (st != TW_OK || twi_job_stopping(job))
            unit_started(w, c->unit); /* none of its tasks will start: it waits no more */
        twi_job_unhold(job); /* the claim's (twi_window_take) */
    }
    if (c->unhold)
        twi_job_unhold(job);
}

void
twi_window_free_all(tw_job *job)
{
    for (twi_window *w = job->windows, *nx; w; w = nx) {
        nx = w->job_next;
        free(w->started);
        free(w);
    }
    job->windows = NULL;
}
