/* SPDX-License-Identifier: MIT */
/* tilewave: the scheduler: its lock, the variant a worker runs a task with, pushes, pops and
 * wake-ups. The worker threads that pop are runtime/worker.c. */
#include "rt_core.h"

/*
 * Worker threads are demand-driven ([Teodoro13] section 4): an idle worker asks the policy for the
 * next task it has a variant for and sleeps on its own condition variable when there is none.
 * A push wakes one idle worker able to run the pushed task, so a CUDA-only task never wakes a
 * CPU worker that would find nothing and go back to sleep. The policy and the idle list share
 * one lock; variants run outside it.
 */

/* The variant w would run t with, budgets of host memory aside. */
static unsigned
worker_device(const tw_worker *w, const tw_task *t)
{
    const tw_task_kind *k = t->kind;

    if (w->type == TW_DEVICE_CUDA && (t->variants & TW_DEVICE_CUDA) &&
        (!k->can_run || k->can_run(t->arg, TW_DEVICE_CUDA))) {
        /* The GPU takes a task only when its whole working set (its tiles) fits beside the
         * tasks it has in flight: no eviction ping-pong. With nothing in flight everything
         * fits that fits the budget, so a refusal lasts only while the GPU is busy. */
        int fit = twi_gpu_fit(w, t);

        if (fit > 0)
            return TW_DEVICE_CUDA;
        if (fit == 0)
            return 0;
        /* Larger than the whole budget: a CPU worker's, when one can run it; else the GPU
         * takes it and fails it with a message naming the budget. */
        if (!(w->rt->runs & t->variants & TW_DEVICE_CPU) ||
            (k->can_run && !k->can_run(t->arg, TW_DEVICE_CPU)))
            return TW_DEVICE_CUDA;
    }
    /* A GPU manager runs CPU variants only when the runtime has no CPU worker (w->runs).
     * A task retried after a CUDA failure runs on the CPU whatever can_run prefers. */
    if ((w->runs & TW_DEVICE_CPU) && (t->variants & TW_DEVICE_CPU) &&
        (t->cpu_retry || !k->can_run || k->can_run(t->arg, TW_DEVICE_CPU)))
        return TW_DEVICE_CPU;
    return 0;
}

/* Could an idle worker start t now? Under rt->lock. */
static bool
idle_could_run(const tw_runtime *rt, const tw_task *t)
{
    for (int i = 0; i < rt->n_idle; i++)
        if (worker_device(rt->idle[i], t))
            return true;
    return false;
}

unsigned
twi_worker_variant(const tw_worker *w, const tw_task *t)
{
    unsigned v = worker_device(w, t);

    /* Host budget (runtime/budget.c): a task whose working set does not fit stays queued and
     * the tasks behind it pass it. */
    if (v && w->rt->budget && !twi_budget_fits(w, t))
        return 0;
    /* A GPU manager's prefetch takes a task that would wait behind its current one: leave
     * those an idle worker can start now to it (the end of a round of tasks, a second GPU). */
    if (v && w->prefetching && idle_could_run(w->rt, t))
        return 0;
    return v;
}

/* After a pop, under the scheduler lock: the variant to run t with (0: drop it, its job is
 * stopping), its host memory reserved. Not twi_worker_variant() again: the pop applied the
 * budget, and a second look could refuse a task that is no longer in any queue. */
unsigned
twi_sched_dispatch_locked(tw_worker *w, tw_task *t)
{
    unsigned v = twi_job_stopping(t->job) ? 0u : worker_device(w, t);

    if (v && w->rt->budget)
        twi_budget_dispatch(w, t);
    return v;
}

/* Wake every idle worker. Under rt->lock. */
static void
wake_all_idle(tw_runtime *rt)
{
    while (rt->n_idle > 0) {
        tw_worker *w = rt->idle[--rt->n_idle];

        w->idle = false;
        pthread_cond_signal(&w->cond);
    }
}

/* The runtime whose scheduler lock this thread holds, if any. Memory freed by code under the
 * lock (a task dropped from a queue) must not take it again, and cannot wake workers then;
 * it leaves the wake-up pending for sched_unlock() or the idle check in worker_loop(). */
static _Thread_local tw_runtime *lock_held;

static void
sched_lock(tw_runtime *rt)
{
    pthread_mutex_lock(&rt->lock);
    lock_held = rt;
}

/* Release the scheduler lock, first doing a wake-up left pending while it was held. */
static void
sched_unlock(tw_runtime *rt)
{
    if (atomic_exchange(&rt->wake_pending, false))
        wake_all_idle(rt);
    lock_held = NULL;
    pthread_mutex_unlock(&rt->lock);
}

void
twi_sched_lock(tw_runtime *rt)
{
    sched_lock(rt);
}

void
twi_sched_unlock(tw_runtime *rt)
{
    sched_unlock(rt);
}

void
twi_sched_wake_all_locked(tw_runtime *rt)
{
    wake_all_idle(rt);
}

void
twi_sched_wake_one_locked(tw_runtime *rt)
{
    if (rt->n_idle > 0) {
        tw_worker *w = rt->idle[--rt->n_idle];

        w->idle = false;
        pthread_cond_signal(&w->cond);
    }
}

void
twi_sched_wake_idle(tw_runtime *rt)
{
    if (lock_held == rt) {
        atomic_store(&rt->wake_pending, true);
        return;
    }
    sched_lock(rt);
    wake_all_idle(rt);
    sched_unlock(rt);
}

/* Wake the most recently idle worker able to take t. Under rt->lock. */
static void
wake_for(tw_runtime *rt, const tw_task *t)
{
    int i, j;

    for (i = rt->n_idle - 1; i >= 0; i--) {
        tw_worker *w = rt->idle[i];
        bool ok = twi_job_stopping(t->job) ? (t->variants & w->runs) != 0
                                            : twi_worker_variant(w, t) != 0;

        if (!ok)
            continue;
        for (j = i; j < rt->n_idle - 1; j++)
            rt->idle[j] = rt->idle[j + 1];
        rt->n_idle--;
        w->idle = false;
        pthread_cond_signal(&w->cond);
        return;
    }
}

void
twi_sched_push_list(tw_runtime *rt, tw_task *head)
{
    sched_lock(rt);
    while (head) {
        tw_task *t = head;

        head = t->next;
        rt->sched.policy->push(&rt->sched, t);
        rt->n_ready++;
        if (rt->n_idle > 0)
            wake_for(rt, t);
    }
    /* Host budget: a task refused for memory while nothing runs waits for an event that will
     * not come; an idle worker takes it through the stall pop (twi_sched_pop_locked). */
    if (rt->budget && rt->n_idle > 0 && twi_budget_stalled(rt))
        wake_all_idle(rt);
    sched_unlock(rt);
}

tw_task *
twi_worker_prefetch(tw_worker *w, unsigned *variant)
{
    tw_runtime *rt = w->rt;
    tw_task *t = NULL;

    *variant = 0;
    sched_lock(rt);
    w->prefetching = true;
    if (!rt->stopping && (t = rt->sched.policy->pop(&rt->sched, w))) {
        rt->n_ready--;
        *variant = twi_sched_dispatch_locked(w, t);
    }
    w->prefetching = false;
    sched_unlock(rt);
    return t;
}

/* The policy's pop; under a host budget, when nothing runs and tasks wait for memory that
 * only spilling can give (or none: a task larger than the budget), the oldest goes anyway. */
tw_task *
twi_sched_pop_locked(tw_worker *w)
{
    tw_runtime *rt = w->rt;
    tw_task *t = rt->sched.policy->pop(&rt->sched, w);

    if (!t && rt->budget && twi_budget_stall(rt, true)) {
        t = rt->sched.policy->pop(&rt->sched, w);
        twi_budget_stall(rt, false);
    }
    if (t)
        rt->n_ready--;
    return t;
}
