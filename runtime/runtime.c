/* SPDX-License-Identifier: MIT */
/* tilewave: the runtime: configuration, worker threads, idle waiting, public queries. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rt_core.h"

/*
 * Worker threads are demand-driven ([Teodoro13] section 4): an idle worker asks the policy for the
 * next task it has a variant for and sleeps on its own condition variable when there is none.
 * A push wakes one idle worker able to run the pushed task, so a CUDA-only task never wakes a
 * CPU worker that would find nothing and go back to sleep. The policy and the idle list share
 * one lock; variants run outside it.
 */

static const tw_sched_policy *const policies[] = {&twi_sched_fcfs, &twi_sched_fair,
                                                  &twi_sched_pats, &twi_sched_locality};

static tw_status
get_int(const tw_config *cfg, const char *key, int64_t *v, tw_error *err)
{
    if (tw_config_get_int(cfg, key, v) != TW_OK)
        return twi_error_set(err, TW_E_INTERNAL, "runtime: config key %s is missing", key);
    return TW_OK;
}

static tw_status
get_string(const tw_config *cfg, const char *key, const char **v, tw_error *err)
{
    if (tw_config_get_string(cfg, key, v) != TW_OK || !*v)
        return twi_error_set(err, TW_E_INTERNAL, "runtime: config key %s is missing", key);
    return TW_OK;
}

/* Parse runtime.gpus ("all", "none", "0,2") into CUDA ordinals. */
static tw_status
parse_gpus(const char *s, int n_present, int **out, int *n_out, tw_error *err)
{
    tw_status st = TW_OK;
    int *ord = NULL;
    int n = 0, i;
    const char *p;

    *out = NULL;
    *n_out = 0;
    if (strcmp(s, "none") == 0)
        return TW_OK;
    if (strcmp(s, "all") == 0) {
        if (n_present == 0)
            return TW_OK;
        if (!(ord = calloc((size_t)n_present, sizeof *ord)))
            return twi_error_set(err, TW_E_NOMEM, "runtime: out of memory");
        for (i = 0; i < n_present; i++)
            ord[i] = i;
        *out = ord;
        *n_out = n_present;
        return TW_OK;
    }
#ifndef TW_HAVE_CUDA
    return twi_error_set(err, TW_E_INVALID,
                         "runtime: runtime.gpus=%s but this build has no CUDA support", s);
#endif
    if (!*s)
        return twi_error_set(err, TW_E_INVALID,
                             "runtime: runtime.gpus is empty (use all, none or a list like 0,1)");
    if (!(ord = calloc(strlen(s) / 2 + 1, sizeof *ord)))
        return twi_error_set(err, TW_E_NOMEM, "runtime: out of memory");
    for (p = s;;) {
        char tok[32];
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        int64_t v;

        while (len > 0 && (*p == ' ' || *p == '\t')) {
            p++;
            len--;
        }
        while (len > 0 && (p[len - 1] == ' ' || p[len - 1] == '\t'))
            len--;
        if (len == 0 || len >= sizeof tok) {
            st = twi_error_set(err, TW_E_INVALID,
                               "runtime: bad GPU list runtime.gpus=%s (use all, none or 0,1)", s);
            goto out;
        }
        memcpy(tok, p, len);
        tok[len] = '\0';
        if (twi_parse_i64(tok, 0, 1 << 20, &v) != TW_OK) {
            st = twi_error_set(err, TW_E_INVALID,
                               "runtime: bad GPU ordinal '%s' in runtime.gpus=%s", tok, s);
            goto out;
        }
        if (v >= n_present) {
            st = twi_error_set(err, TW_E_INVALID,
                               "runtime: runtime.gpus names GPU %d but %d %s present", (int)v,
                               n_present, n_present == 1 ? "is" : "are");
            goto out;
        }
        for (i = 0; i < n; i++) {
            if (ord[i] == (int)v) {
                st = twi_error_set(err, TW_E_INVALID, "runtime: runtime.gpus names GPU %d twice",
                                   (int)v);
                goto out;
            }
        }
        ord[n++] = (int)v;
        if (!e)
            break;
        p = e + 1;
    }
    *out = ord;
    *n_out = n;
    ord = NULL;
out:
    free(ord);
    return st;
}

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
static unsigned
worker_dispatch(tw_worker *w, tw_task *t)
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
     * not come; an idle worker takes it through the stall pop (worker_pop). */
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
        *variant = worker_dispatch(w, t);
    }
    w->prefetching = false;
    sched_unlock(rt);
    return t;
}

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

/* The policy's pop; under a host budget, when nothing runs and tasks wait for memory that
 * only spilling can give (or none: a task larger than the budget), the oldest goes anyway. */
static tw_task *
worker_pop(tw_worker *w)
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

static void
worker_loop(tw_worker *w)
{
    tw_runtime *rt = w->rt;

    sched_lock(rt);
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
            sched_unlock(rt);
            run_prefetched(w);
            sched_lock(rt);
            continue;
        }
        if ((t = worker_pop(w))) {
            /* can_run() hooks are promised the lock, so the variant is chosen here. */
            unsigned variant = worker_dispatch(w, t);

            if (variant == TW_DEVICE_CPU && w->type == TW_DEVICE_CPU)
                twi_cpu_borrow(w, t);
            w->running = true;
            /* Never hold the scheduler lock while a variant runs. */
            sched_unlock(rt);
            run_task(w, t, variant);
            sched_lock(rt);
            w->running = false;
            if (w->n_lent)
                twi_cpu_return(w);
            continue;
        }
        if (atomic_exchange(&rt->wake_pending, false)) {
            /* memory was freed while this worker held the lock: look again, and wake the
             * others so that they look too */
            wake_all_idle(rt);
            continue;
        }
        if (rt->windows && twi_window_take(rt, w, &claim)) {
            /* Nothing to run: admit the next unit of a job's stream (runtime/window.c). */
            w->running = true;
            sched_unlock(rt);
            twi_window_admit(&claim);
            sched_lock(rt);
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
    sched_unlock(rt);
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

    sched_lock(rt);
    w->ready = true;
    w->start_status = st;
    w->start_err = err;
    pthread_cond_broadcast(&rt->ctl);
    sched_unlock(rt);

    if (st == TW_OK) {
        worker_loop(w);
        if (w->type == TW_DEVICE_CUDA)
            twi_cuda_worker_stop(w);
    }
    return NULL;
}

/* runtime.pinned_cache in bytes; 0 picks 1/16 of the host's memory, at least 1 GiB. Bands of
 * the EDT and other large tiles are freed and made again job after job (and within a job):
 * each new one would pin its pages again (cudaHostAlloc, about 0.4 s a GB) when the pool kept
 * too little. */
static size_t
pinned_cache_bytes(const tw_config *cfg)
{
    int64_t v = 0;
    size_t cap = (size_t)1 << 30;

    if (tw_config_get_int(cfg, "runtime.pinned_cache", &v) == TW_OK && v > 0)
        return (size_t)v;
    if ((size_t)(twi_phys_bytes() / 16) > cap)
        cap = (size_t)(twi_phys_bytes() / 16);
    return cap;
}

/* Fill the workers' device roles and core sets. */
static tw_status
plan_workers(tw_runtime *rt, int64_t cpu_workers, int team, tw_error *err)
{
    tw_status st = TW_OK;
    int *gpu_unit = NULL;
    hwloc_bitmap_t taken = NULL, *cpu_sets = NULL;
    int n_cpu, i, n_reserved;
    bool oversub = false;

    if (rt->n_gpus > 0 && (!(gpu_unit = calloc((size_t)rt->n_gpus, sizeof *gpu_unit)) ||
                           !(taken = hwloc_bitmap_alloc()))) {
        st = twi_error_set(err, TW_E_NOMEM, "runtime: out of memory");
        goto out;
    }
    for (i = 0; i < rt->n_gpus; i++) {
        gpu_unit[i] = twi_topo_pick_gpu_unit(&rt->topo, rt->gpus[i].near, taken);
        hwloc_bitmap_or(taken, taken, rt->topo.unit[gpu_unit[i]]);
    }
    /* Auto: one worker per `team` cores not reserved for a GPU manager, at least one. */
    if (cpu_workers < 0) {
        int64_t n = (rt->topo.n_units - rt->n_gpus) / team;
        n_cpu = n < 1 ? 1 : (int)n;
    } else {
        n_cpu = (int)cpu_workers;
    }
    if (n_cpu == 0 && rt->n_gpus == 0) {
        st = twi_error_set(err, TW_E_INVALID,
                           "runtime: no workers (runtime.cpu_workers=0 and no GPU is used)");
        goto out;
    }
    rt->n_cpu_workers = n_cpu;
    rt->n_workers = n_cpu + rt->n_gpus;
    if (!(rt->workers = calloc((size_t)rt->n_workers, sizeof *rt->workers)) ||
        !(rt->idle = calloc((size_t)rt->n_workers, sizeof *rt->idle)) ||
        (n_cpu > 0 && !(cpu_sets = calloc((size_t)n_cpu, sizeof *cpu_sets)))) {
        st = twi_error_set(err, TW_E_NOMEM, "runtime: out of memory");
        goto out;
    }
    /* GPU managers keep a core of their own only when the machine has cores to spare. */
    n_reserved = rt->topo.n_units > rt->n_gpus ? rt->n_gpus : 0;
    if (n_cpu > 0) {
        if (twi_topo_assign_cpu(&rt->topo, n_cpu, team, gpu_unit, n_reserved, cpu_sets,
                                &oversub) != TW_OK) {
            st = twi_error_set(err, TW_E_NOMEM, "runtime: out of memory");
            goto out;
        }
    }
    if (oversub)
        TW_WARN("runtime",
                "%d CPU workers with teams of %d need %d cores but %d are available; "
                "cores are shared", n_cpu, team, n_cpu * team, rt->topo.n_units);
    rt->runs = 0;
    for (i = 0; i < rt->n_workers; i++) {
        tw_worker *w = &rt->workers[i];

        w->rt = rt;
        w->index = i;
        atomic_init(&w->tasks_run, 0);
        atomic_init(&w->busy_ns, 0);
        atomic_init(&w->bytes_up, 0);
        atomic_init(&w->bytes_down, 0);
        atomic_init(&w->bytes_hit, 0);
        atomic_init(&w->tasks_retried, 0);
        w->start_ns = twi_trace_now();
        if (!(w->lent = calloc((size_t)rt->n_workers, sizeof *w->lent))) {
            st = twi_error_set(err, TW_E_NOMEM, "runtime: out of memory");
            goto out;
        }
        if (i < n_cpu) {
            w->type = TW_DEVICE_CPU;
            w->gpu = -1;
            w->team = w->team_now = team;
            w->runs = TW_DEVICE_CPU;
            w->cpuset = cpu_sets[i];
            cpu_sets[i] = NULL;
        } else {
            w->type = TW_DEVICE_CUDA;
            w->g = &rt->gpus[i - n_cpu];
            w->gpu = w->g->ordinal;
            w->team = w->team_now = 1;
            /* With no CPU worker, GPU managers also run CPU-only kinds (e.g. I/O tasks) on
             * their host thread, so such jobs still complete. */
            w->runs = TW_DEVICE_CUDA | (n_cpu == 0 ? TW_DEVICE_CPU : 0u);
            if (!(w->cpuset = hwloc_bitmap_dup(rt->topo.unit[gpu_unit[i - n_cpu]]))) {
                st = twi_error_set(err, TW_E_NOMEM, "runtime: out of memory");
                goto out;
            }
        }
        hwloc_bitmap_list_snprintf(w->cpuset_str, sizeof w->cpuset_str, w->cpuset);
        rt->runs |= w->runs;
    }
out:
    if (cpu_sets) {
        for (i = 0; i < n_cpu; i++)
            hwloc_bitmap_free(cpu_sets[i]);
        free(cpu_sets);
    }
    hwloc_bitmap_free(taken);
    free(gpu_unit);
    return st;
}

static tw_status
start_workers(tw_runtime *rt, tw_error *err)
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
    sched_lock(rt);
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
    sched_unlock(rt);
    return st;
}

tw_status
tw_runtime_create(const tw_config *cfg, tw_runtime **out, tw_error *err)
{
    tw_status st = TW_OK;
    tw_runtime *rt = NULL;
    int64_t cpu_workers = 0, team = 1;
    const char *gpus = NULL, *policy = NULL, *trace = NULL, *downloads = NULL, *share = NULL;
    const char *pinned = NULL;
    int *ordinals = NULL;
    size_t i;
    int g;

    if (!out)
        return twi_error_set(err, TW_E_INVALID, "runtime: no place for the runtime (out is NULL)");
    if (!(rt = calloc(1, sizeof *rt)))
        return twi_error_set(err, TW_E_NOMEM, "runtime: out of memory");
    if ((cfg ? tw_config_clone(cfg, &rt->cfg) : tw_config_create(&rt->cfg)) != TW_OK) {
        st = twi_error_set(err, TW_E_NOMEM, "runtime: cannot copy the configuration");
        goto out;
    }
    if ((st = get_int(rt->cfg, "runtime.cpu_workers", &cpu_workers, err)) != TW_OK ||
        (st = get_int(rt->cfg, "runtime.cpu_team", &team, err)) != TW_OK ||
        (st = get_string(rt->cfg, "runtime.gpus", &gpus, err)) != TW_OK ||
        (st = get_string(rt->cfg, "runtime.policy", &policy, err)) != TW_OK ||
        (st = get_string(rt->cfg, "runtime.trace", &trace, err)) != TW_OK ||
        (st = get_string(rt->cfg, "runtime.gpu_downloads", &downloads, err)) != TW_OK)
        goto out;
    if (cpu_workers < -1 || cpu_workers > 4096 || team < 1 || team > 4096) {
        st = twi_error_set(err, TW_E_INVALID,
                           "runtime: bad worker layout (runtime.cpu_workers=%" PRId64
                           ", runtime.cpu_team=%" PRId64 ")", cpu_workers, team);
        goto out;
    }
    for (i = 0; i < sizeof policies / sizeof policies[0]; i++)
        if (strcmp(policies[i]->name, policy) == 0)
            rt->sched.policy = policies[i];
    if (!rt->sched.policy) {
        st = twi_error_set(err, TW_E_INVALID,
                           "runtime: unknown runtime.policy '%s' (fcfs, fair, pats, locality)",
                           policy);
        goto out;
    }
    if ((st = twi_fault_setup(rt, err)) != TW_OK)
        goto out;
    if ((st = twi_topo_load(&rt->topo, err)) != TW_OK)
        goto out;
    /* runtime.cpu_share: processes sharing a node (MPI ranks) take a part of its cores each. */
    if (tw_config_get_string(rt->cfg, "runtime.cpu_share", &share) == TW_OK && *share) {
        int64_t k, parts;

        if (twi_parse_share(share, &k, &parts) != TW_OK) {
            st = twi_error_set(err, TW_E_INVALID, "runtime: bad runtime.cpu_share '%s'", share);
            goto out;
        }
        twi_topo_restrict(&rt->topo, k, parts);
    }
    if (*trace && (st = twi_trace_open(rt, trace, err)) != TW_OK)
        goto out;

    rt->n_gpus_present = twi_cuda_device_count();
    if ((st = parse_gpus(gpus, rt->n_gpus_present, &ordinals, &rt->n_gpus, err)) != TW_OK)
        goto out;
    if (rt->n_gpus > 0) {
        if (!(rt->gpus = calloc((size_t)rt->n_gpus, sizeof *rt->gpus))) {
            st = twi_error_set(err, TW_E_NOMEM, "runtime: out of memory");
            goto out;
        }
        for (g = 0; g < rt->n_gpus; g++) {
            rt->gpus[g].ordinal = ordinals[g];
            if ((st = twi_cuda_describe(rt->topo.topo, ordinals[g], &rt->gpus[g], err)) != TW_OK)
                goto out;
        }
    }
    /* Host tiles are pinned when GPUs take part, so their copies run asynchronously (unless
     * runtime.pinned_tiles = no). */
    if (rt->n_gpus > 0 && tw_config_get_string(rt->cfg, "runtime.pinned_tiles", &pinned) == TW_OK &&
        strcmp(pinned, "yes") == 0 &&
        twi_hostpool_create(rt->gpus[0].ordinal, pinned_cache_bytes(rt->cfg), &rt->host_pool) !=
            TW_OK)
        rt->host_pool = NULL;
    if ((st = plan_workers(rt, cpu_workers, (int)team, err)) != TW_OK ||
        (st = twi_budget_create(rt, err)) != TW_OK)
        goto out;

    if (pthread_mutex_init(&rt->lock, NULL) != 0) {
        st = twi_error_set(err, TW_E_NOMEM, "runtime: out of memory");
        goto out;
    }
    if (pthread_cond_init(&rt->ctl, NULL) != 0) {
        pthread_mutex_destroy(&rt->lock);
        st = twi_error_set(err, TW_E_NOMEM, "runtime: out of memory");
        goto out;
    }
    for (i = 0; i < sizeof rt->sync_lock / sizeof rt->sync_lock[0]; i++)
        (void)pthread_mutex_init(&rt->sync_lock[i], NULL); /* default attributes: cannot fail */
    rt->lock_init = true;
    /* Lazy downloads need the host copy of a tile to be where a sync can write it; under a
     * host budget it may be spilled instead, so downloads stay eager there. */
    rt->lazy_down = rt->n_gpus > 0 && !rt->budget && strcmp(downloads, "lazy") == 0;
    rt->sched.rt = rt;
    if ((st = twi_models_open(rt, err)) != TW_OK)
        goto out;
    if ((st = rt->sched.policy->init(&rt->sched)) != TW_OK) {
        st = twi_error_set(err, st, "runtime: cannot start the %s policy", rt->sched.policy->name);
        goto out;
    }
    rt->sched_init = true;
    if ((st = start_workers(rt, err)) != TW_OK)
        goto out;
    TW_INFO("runtime", "started %d CPU workers (team %d) and %d GPU managers (%d GPUs present)",
            rt->n_cpu_workers, (int)team, rt->n_gpus, rt->n_gpus_present);
    rt->started = true;
    *out = rt;
    rt = NULL;
out:
    free(ordinals);
    tw_runtime_destroy(rt);
    return st;
}

/* Stop the workers and wait for them (once). */
static void
stop_workers(tw_runtime *rt)
{
    int i;

    if (rt->finished)
        return;
    rt->finished = true;
    if (rt->lock_init) {
        sched_lock(rt);
        rt->stopping = true;
        for (i = 0; i < rt->n_workers; i++)
            if (rt->workers[i].cond_init)
                pthread_cond_signal(&rt->workers[i].cond);
        sched_unlock(rt);
    }
    for (i = 0; i < rt->n_workers; i++)
        if (rt->workers[i].thread_started)
            pthread_join(rt->workers[i].thread, NULL);
}

tw_status
tw_runtime_finish(tw_runtime *rt, tw_error *err)
{
    if (!rt)
        return twi_error_set(err, TW_E_INVALID, "runtime: tw_runtime_finish: NULL runtime");
    stop_workers(rt);
    rt->trace_reported = true;
    return twi_trace_close(rt, err);
}

void
tw_runtime_destroy(tw_runtime *rt)
{
    tw_error err;
    int i;

    if (!rt)
        return;
    stop_workers(rt);
    /* tw_runtime_destroy() returns nothing: the log is the only way to say it, when
     * tw_runtime_finish() did not. */
    if (twi_trace_close(rt, &err) != TW_OK && !rt->trace_reported)
        TW_LOG(TW_LOG_ERROR, "runtime", "%s", err.message);
    twi_trace_free(rt);
    if (rt->sched_init)
        rt->sched.policy->fini(&rt->sched);
    twi_models_close(rt);
    for (i = 0; i < rt->n_workers; i++) {
        if (rt->workers[i].cond_init)
            pthread_cond_destroy(&rt->workers[i].cond);
        hwloc_bitmap_free(rt->workers[i].cpuset);
        free(rt->workers[i].lent);
    }
    if (rt->lock_init) {
        pthread_cond_destroy(&rt->ctl);
        pthread_mutex_destroy(&rt->lock);
        for (i = 0; i < (int)(sizeof rt->sync_lock / sizeof rt->sync_lock[0]); i++)
            pthread_mutex_destroy(&rt->sync_lock[i]);
    }
    for (i = 0; i < rt->n_gpus && rt->gpus; i++)
        hwloc_bitmap_free(rt->gpus[i].near);
    free(rt->gpus);
    free(rt->workers);
    free(rt->idle);
    twi_budget_destroy(rt);
    twi_devpool_destroy(rt->host_pool);
    twi_topo_fini(&rt->topo);
    tw_config_destroy(rt->cfg);
    free(rt);
}

const tw_config *
tw_runtime_get_config(const tw_runtime *rt)
{
    return rt ? rt->cfg : NULL;
}

tw_status
tw_runtime_get_topology(const tw_runtime *rt, tw_topology_info *out)
{
    if (!rt || !out)
        return TW_E_INVALID;
    memset(out, 0, sizeof *out);
    out->n_packages = rt->topo.n_packages;
    out->n_numa_nodes = rt->topo.n_numa_nodes;
    out->n_cores = rt->topo.n_cores;
    out->n_pus = rt->topo.n_pus;
    out->n_gpus = rt->n_gpus;
    out->n_gpus_present = rt->n_gpus_present;
    return TW_OK;
}

tw_status
tw_runtime_get_gpu(const tw_runtime *rt, int i, tw_gpu_info *out)
{
    if (!rt || !out || i < 0 || i >= rt->n_gpus)
        return TW_E_INVALID;
    *out = rt->gpus[i].info;
    return TW_OK;
}

int
tw_runtime_get_worker_count(const tw_runtime *rt)
{
    return rt ? rt->n_workers : 0;
}

tw_status
tw_runtime_get_worker(const tw_runtime *rt, int i, tw_worker_info *out)
{
    const tw_worker *w;

    if (!rt || !out || i < 0 || i >= rt->n_workers)
        return TW_E_INVALID;
    w = &rt->workers[i];
    memset(out, 0, sizeof *out);
    out->index = w->index;
    out->type = w->type;
    out->gpu = w->gpu;
    out->team = w->team;
    snprintf(out->cpuset, sizeof out->cpuset, "%s", w->cpuset_str);
    snprintf(out->bound_cpuset, sizeof out->bound_cpuset, "%s", w->bound_str);
    out->tasks_run = (uint64_t)atomic_load_explicit(&w->tasks_run, memory_order_relaxed);
    out->busy_s = 1e-9 * (double)atomic_load_explicit(&w->busy_ns, memory_order_relaxed);
    out->alive_s = 1e-9 * (double)(twi_trace_now() - w->start_ns);
    out->bytes_to_gpu = (uint64_t)atomic_load_explicit(&w->bytes_up, memory_order_relaxed);
    out->bytes_from_gpu = (uint64_t)atomic_load_explicit(&w->bytes_down, memory_order_relaxed);
    out->bytes_gpu_resident =
        (uint64_t)atomic_load_explicit(&w->bytes_hit, memory_order_relaxed);
    out->tasks_retried = (uint64_t)atomic_load_explicit(&w->tasks_retried, memory_order_relaxed);
    return TW_OK;
}

int
twi_runtime_gpu_count(const tw_runtime *rt)
{
    return rt ? rt->n_gpus : 0;
}

int64_t
twi_runtime_keep_gpu_bytes(const tw_runtime *rt)
{
    int64_t n = 0;

    if (!rt || !rt->lazy_down)
        return 0;
    for (int i = 0; i < rt->n_gpus; i++)
        n += (int64_t)(rt->gpus[i].budget / 2);
    return n;
}

int64_t
twi_runtime_keep_host_bytes(const tw_runtime *rt)
{
    int64_t budget = 0;

    if (!rt)
        return 0;
    if (tw_config_get_int(rt->cfg, "runtime.host_mem", &budget) == TW_OK && budget > 0)
        return budget / 4;
    return twi_phys_bytes() / 8;
}

int64_t
twi_phys_bytes(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);

    return pages > 0 && page > 0 ? (int64_t)pages * page : 0;
}
