/* SPDX-License-Identifier: MIT */
/* tilewave: the worker threads: start (bound, device initialised), the loop that pops and runs
 * tasks, admits window units and sleeps when idle, and stop. The scheduler they pop from is
 * runtime/sched.c. */
#include <stdio.h>

#include "rt_core.h"

/* Run (or drop, variant 0) t on w, outside the scheduler lock. Written tiles' versions are
 * bumped as the variant starts: twi_task_host_begin (CPU), twi_cuda_run (CUDA). */
static void
run_task(tw_worker *w, tw_task *t, unsigned variant)
{
    twi_task_execute(w, t, variant);
}

/* A GPU manager's task popped during its previous task (w->pf_task, staged or not): run it,
 * or drop it when its job stopped, then give back what staging took if it was not used. */
static void
run_prefetched(tw_worker *w)
{
    tw_task *t = w->pf_task;
    unsigned variant = twi_job_stopping(t->job) ? 0u : w->pf_variant;

    if (variant != TW_DEVICE_CUDA)
        twi_cuda_unstage(w);
    run_task(w, t, variant);
    /* twi_cuda_run took it over (and may have popped the next) unless it did not run. */
    if (w->pf_task == t) {
        twi_cuda_unstage(w);
        w->pf_task = NULL;
    }
    twi_task_release(t); /* the reference prefetch took */
}

static void
worker_loop(tw_worker *w)
{
    tw_runtime *rt = w->rt;

    twi_sched_lock(rt);
    while (!rt->stopping || w->pf_task) {
        twi_window_claim claim;
        tw_task *t;
        int i;

        if (w->on_loan) {
            /* Lent to a worker running a team task (runtime/worker_cpu.c): sleep until it
             * gives this one back. */
            while (w->on_loan && !rt->stopping)
                pthread_cond_wait(&w->cond, &rt->lock);
            continue;
        }
        if (w->pf_task) {
            /* Popped while the previous task ran; run it even when the runtime stops. */
            twi_sched_unlock(rt);
            run_prefetched(w);
            twi_sched_lock(rt);
            continue;
        }
        if ((t = twi_sched_pop_locked(w))) {
            /* can_run() hooks are promised the lock, so the variant is chosen here. */
            unsigned variant = twi_sched_dispatch_locked(w, t);

            if (variant == TW_DEVICE_CPU && w->type == TW_DEVICE_CPU)
                twi_cpu_borrow(w, t);
            w->running = true;
            /* Never hold the scheduler lock while a variant runs. */
            twi_sched_unlock(rt);
            run_task(w, t, variant);
            twi_sched_lock(rt);
            w->running = false;
            if (w->n_lent)
                twi_cpu_return(w);
            continue;
        }
        if (atomic_exchange(&rt->wake_pending, false)) {
            /* memory was freed while this worker held the lock: look again, and wake the
             * others so that they look too */
            twi_sched_wake_all_locked(rt);
            continue;
        }
        if (rt->windows && twi_window_take(rt, w, &claim)) {
            /* Nothing to run: admit the next unit of a job's stream (runtime/window.c). */
            w->running = true;
            twi_sched_unlock(rt);
            twi_window_admit(&claim);
            twi_sched_lock(rt);
            w->running = false;
            continue;
        }
        w->idle = true;
        rt->idle[rt->n_idle++] = w;
        while (w->idle && !rt->stopping)
            pthread_cond_wait(&w->cond, &rt->lock);
        if (w->idle) { /* stopping: leave the idle list tidy */
            for (i = 0; i < rt->n_idle; i++) {
                if (rt->idle[i] == w) {
                    rt->idle[i] = rt->idle[--rt->n_idle];
                    break;
                }
            }
            w->idle = false;
        }
    }
    twi_sched_unlock(rt);
}

/* The worker the calling thread is, NULL on other threads. */
static _Thread_local tw_worker *self_worker;

tw_worker *
twi_worker_self(void)
{
    return self_worker;
}

static void *
worker_main(void *arg)
{
    tw_worker *w = arg;
    tw_runtime *rt = w->rt;
    tw_status st = TW_OK;
    tw_error err = {0};
    char who[64];

    self_worker = w;
    if (w->type == TW_DEVICE_CUDA)
        snprintf(who, sizeof who, "GPU %d manager (worker %d)", w->gpu, w->index);
    else
        snprintf(who, sizeof who, "CPU worker %d", w->index);
    twi_topo_bind_self(&rt->topo, w->cpuset, who, w->bound_str, sizeof w->bound_str);
    /* GPU managers too: they run CPU variants when the runtime has no CPU worker. */
    twi_cpu_worker_start(w);
    if (w->type == TW_DEVICE_CUDA)
        st = twi_cuda_worker_start(w, &err);

    twi_sched_lock(rt);
    w->ready = true;
    w->start_status = st;
    w->start_err = err;
    pthread_cond_broadcast(&rt->ctl);
    twi_sched_unlock(rt);

    if (st == TW_OK) {
        worker_loop(w);
        if (w->type == TW_DEVICE_CUDA)
            twi_cuda_worker_stop(w);
    }
    twi_cpu_worker_stop(w);
    return NULL;
}

tw_status
twi_workers_start(tw_runtime *rt, tw_error *err)
{
    tw_status st = TW_OK;
    int i, n_started = 0;

    for (i = 0; i < rt->n_workers; i++) {
        tw_worker *w = &rt->workers[i];
        int rc;

        if (pthread_cond_init(&w->cond, NULL) != 0)
            return twi_error_set(err, TW_E_NOMEM, "runtime: out of memory");
        w->cond_init = true;
        rc = pthread_create(&w->thread, NULL, worker_main, w);
        if (rc != 0) {
            st = twi_error_set(err, TW_E_NOMEM, "runtime: cannot start worker thread %d (error %d)",
                               i, rc);
            break;
        }
        w->thread_started = true;
        n_started++;
    }
    /* Wait for every started worker to report (bound, device initialised). */
    twi_sched_lock(rt);
    for (i = 0; i < n_started; i++) {
        tw_worker *w = &rt->workers[i];

        while (!w->ready)
            pthread_cond_wait(&rt->ctl, &rt->lock);
        if (st == TW_OK && w->start_status != TW_OK) {
            st = w->start_status;
            if (err)
                *err = w->start_err;
        }
    }
    twi_sched_unlock(rt);
    return st;
}

/* Stop the workers and wait for them (once). */
void
twi_workers_stop(tw_runtime *rt)
{
    int i;

    if (rt->finished)
        return;
    rt->finished = true;
    if (rt->lock_init) {
        twi_sched_lock(rt);
        rt->stopping = true;
        for (i = 0; i < rt->n_workers; i++)
            if (rt->workers[i].cond_init)
                pthread_cond_signal(&rt->workers[i].cond);
        twi_sched_unlock(rt);
    }
    for (i = 0; i < rt->n_workers; i++)
        if (rt->workers[i].thread_started)
            pthread_join(rt->workers[i].thread, NULL);
}
