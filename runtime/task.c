/* SPDX-License-Identifier: MIT */
/* tilewave: tasks (reference counting, dependencies, submission, completion) and task ctx. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_core.h"
#include "rt_job.h"

/*
 * Dependencies without a lock. Each task keeps the edges to its dependents in a lock-free
 * stack (`dependents`). Completing a task swaps the stack for the CLOSED marker and releases
 * every dependent found; twi_task_depend() pushes with a compare-and-swap that fails on
 * CLOSED, which is how "depending on a completed task is a no-op" holds even when the
 * dependency completes concurrently on a worker.
 *
 * `deps_left` counts unfinished dependencies plus one that twi_task_submit() removes, so a
 * task becomes ready exactly once: on whichever decrement reaches zero (its last dependency
 * or its submission). Every edge holds a reference on its dependent, so a dependent the
 * caller released before its dependencies completed stays valid until they have.
 *
 * The first TWI_TASK_INLINE_EDGES edges of a task live inside it (most tasks have a handful
 * of dependencies), the rest are malloc'd.
 */

static twi_edge closed_marker;
#define EDGES_CLOSED (&closed_marker)

static unsigned
kind_variants(const tw_task_kind *k)
{
    unsigned v = 0;

    if ((k->devices & TW_DEVICE_CPU) && k->cpu)
        v |= TW_DEVICE_CPU;
    if ((k->devices & TW_DEVICE_CUDA) && k->cuda)
        v |= TW_DEVICE_CUDA;
    return v;
}

/* On failure the caller keeps ownership of arg. */
tw_status
twi_task_create(tw_job *job, const tw_task_kind *kind, void *arg, void (*arg_free)(void *),
                tw_task **out)
{
    tw_task *t;

    if (!job || !kind || !out || !kind_variants(kind))
        return TW_E_INVALID;
    if (!(t = malloc(sizeof *t)))
        return TW_E_NOMEM;
    /* Only the header is cleared: tiles and edges are written before they are read. */
    atomic_init(&t->refs, 1);
    atomic_init(&t->state, TWI_TASK_CREATED);
    atomic_init(&t->deps_left, 1);
    atomic_init(&t->dependents, NULL);
    t->kind = kind;
    t->variants = kind_variants(kind);
    t->cpu_retry = false;
    t->arg = arg;
    t->arg_free = arg_free;
    t->job = job;
    t->n_tiles = 0;
    t->n_inline_edges = 0;
    t->next = NULL;
    t->seq = 0;
    t->model_key = -1;
    t->mem.dispatched = false; /* host budget (runtime/budget.c) */
    twi_window_tag(t);
    twi_job_acquire(job);
    *out = t;
    return TW_OK;
}

tw_status
twi_task_add_tile(tw_task *t, tw_tile *tile, tw_access mode)
{
    if (!t || !tile || (mode != TW_R && mode != TW_W && mode != TW_RW) ||
        t->n_tiles >= TW_TASK_MAX_TILES ||
        atomic_load_explicit(&t->state, memory_order_relaxed) != TWI_TASK_CREATED)
        return TW_E_INVALID;
    twi_tile_acquire(tile);
    t->tiles[t->n_tiles] = tile;
    t->modes[t->n_tiles] = mode;
    t->n_tiles++;
    return TW_OK;
}

static void
task_free(tw_task *t)
{
    twi_edge *e = atomic_load(&t->dependents);
    int i;

    /* Freed before completing (never submitted): let go of the edges it still holds. */
    while (e && e != EDGES_CLOSED) {
        twi_edge *next = e->next;
        tw_task *d = e->task;
        bool heap = e->heap;

        twi_task_release(d);
        if (heap)
            free(e);
        e = next;
    }
    for (i = 0; i < t->n_tiles; i++)
        twi_tile_release(t->tiles[i]);
    if (t->arg_free)
        t->arg_free(t->arg);
    twi_job_release(t->job);
    free(t);
}

void
twi_task_release(tw_task *t)
{
    if (t && atomic_fetch_sub_explicit(&t->refs, 1, memory_order_acq_rel) == 1)
        task_free(t);
}

tw_status
twi_task_depend(tw_task *t, tw_task *dep)
{
    twi_edge *e, *head;

    if (!t || !dep || t == dep || t->job != dep->job ||
        atomic_load_explicit(&t->state, memory_order_relaxed) != TWI_TASK_CREATED)
        return TW_E_INVALID;
    head = atomic_load_explicit(&dep->dependents, memory_order_acquire);
    if (head == EDGES_CLOSED)
        return TW_OK;
    if (t->n_inline_edges < TWI_TASK_INLINE_EDGES) {
        e = &t->inline_edges[t->n_inline_edges++];
        e->heap = false;
    } else {
        if (!(e = malloc(sizeof *e)))
            return TW_E_NOMEM;
        e->heap = true;
    }
    e->task = t;
    atomic_fetch_add_explicit(&t->deps_left, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&t->refs, 1, memory_order_relaxed);
    do {
        if (head == EDGES_CLOSED) {
            /* dep completed meanwhile: nothing to wait for. */
            atomic_fetch_sub_explicit(&t->deps_left, 1, memory_order_relaxed);
            atomic_fetch_sub_explicit(&t->refs, 1, memory_order_relaxed);
            if (e->heap)
                free(e);
            return TW_OK;
        }
        e->next = head;
    } while (!atomic_compare_exchange_weak_explicit(&dep->dependents, &head, e,
                                                    memory_order_acq_rel, memory_order_acquire));
    return TW_OK;
}

tw_status
twi_task_submit(tw_task *t)
{
    tw_runtime *rt;
    int expect = TWI_TASK_CREATED;
    tw_status st;

    if (!t)
        return TW_E_INVALID;
    rt = t->job->rt;
    /* Refuse what no worker of this runtime can run (StarPU's -ENODEV) instead of queueing
     * a task that would never leave the queue. */
    if (!(t->variants & rt->runs))
        return TW_E_NODEV;
    if (!atomic_compare_exchange_strong(&t->state, &expect, TWI_TASK_SUBMITTED))
        return TW_E_INVALID;
    if ((st = twi_job_task_begin(t->job)) != TW_OK) {
        atomic_store(&t->state, TWI_TASK_CREATED);
        return st;
    }
    atomic_fetch_add_explicit(&t->refs, 1, memory_order_relaxed); /* the scheduler's */
    if (atomic_fetch_sub_explicit(&t->deps_left, 1, memory_order_acq_rel) == 1) {
        t->next = NULL;
        twi_sched_push_list(rt, t);
    }
    return TW_OK;
}

/* Release the dependents of a finished (or dropped) t, then count it out of its job. */
static void
task_complete(tw_worker *w, tw_task *t, bool ran)
{
    twi_edge *e = atomic_exchange_explicit(&t->dependents, EDGES_CLOSED, memory_order_acq_rel);
    twi_edge *rev = NULL;
    tw_task *ready = NULL, *ready_tail = NULL;
    tw_job *job = t->job;

    /* The stack holds the edges newest first; reverse it so dependents become ready in the
     * order they were declared, which keeps FCFS close to submission order. */
    while (e) {
        twi_edge *next = e->next;

        e->next = rev;
        rev = e;
        e = next;
    }
    for (e = rev; e;) {
        twi_edge *next = e->next;
        tw_task *d = e->task;
        bool heap = e->heap;

        if (atomic_fetch_sub_explicit(&d->deps_left, 1, memory_order_acq_rel) == 1) {
            /* d is submitted (its +1 is gone), so the scheduler's reference keeps it alive. */
            d->next = NULL;
            if (ready_tail)
                ready_tail->next = d;
            else
                ready = d;
            ready_tail = d;
        }
        if (heap)
            free(e);
        twi_task_release(d); /* the edge's reference; may free d's inline edges */
        e = next;
    }
    if (ready)
        twi_sched_push_list(job->rt, ready);
    if (ran)
        atomic_fetch_add_explicit(&w->tasks_run, 1, memory_order_relaxed);
    twi_job_task_end(job);
    twi_task_release(t);
}

/*
 * Faults. A CUDA run that fails (a launch or copy error, no device memory, an injected fault)
 * does not fail the job when a CPU variant can redo it with the same result: the task, not in
 * any queue while it runs, loses its CUDA variant and goes back to the scheduler, and a CPU
 * worker (or, on a runtime without any, a GPU manager's host thread) runs it. The same result
 * holds because a failed CUDA run changed nothing a CPU run reads: the host copy of a W/RW
 * tile changes only with the write-back after the variant succeeded, scratch is private, and
 * what ops do outside their tiles waits for the kind's commit hook, which runs only after a
 * success. A variant that cannot keep to that calls twi_ctx_no_retry(). (StarPU's
 * starpu_task_ft_prologue() retries likewise, and not for RW data it cannot restore.)
 *
 * Not retried, so the job fails with the message (the first error sticks): CPU failures, a
 * job already stopping (its failure is moot), TW_E_CANCELED, kinds without a CPU variant,
 * runtimes where nothing runs CPU variants, and twi_ctx_no_retry().
 *
 * runtime.fault_inject fails chosen CUDA attempts here, before the tiles are uploaded, as a
 * launch error would: it exercises this path on every kind without a broken GPU.
 */

static bool
fault_injected(tw_runtime *rt, const tw_task *t)
{
    int64_t n;

    if (rt->fault_every <= 0 || (rt->fault_kind[0] && strcmp(rt->fault_kind, t->kind->name)))
        return false;
    n = (int64_t)atomic_fetch_add_explicit(&rt->fault_attempts, 1, memory_order_relaxed) + 1;
    return n % rt->fault_every == 0;
}

static bool
retriable(const tw_task *t, const tw_task_ctx *ctx, tw_status st)
{
    return st != TW_E_CANCELED && !ctx->no_retry && (t->variants & TW_DEVICE_CPU) &&
           (t->job->rt->runs & TW_DEVICE_CPU) && !twi_job_stopping(t->job);
}

/* Hand a task whose CUDA run failed to the CPU variant; the first time on this runtime, say
 * so. The scheduler's reference goes with the task: t must not be touched afterwards. */
static void
retry_on_cpu(tw_worker *w, tw_task *t, const tw_task_ctx *ctx, tw_status st)
{
    tw_runtime *rt = w->rt;

    atomic_fetch_add_explicit(&w->tasks_retried, 1, memory_order_relaxed);
    if (!atomic_exchange(&rt->fault_logged, true)) {
        if (ctx->failed)
            TW_WARN("runtime", "%s; retrying on CPU; further faults are counted", ctx->msg);
        else
            TW_WARN("runtime", "%s: failed on GPU %d (%s); retrying on CPU; further faults are "
                    "counted", t->kind->name, w->gpu, tw_status_string(st));
    } else {
        TW_DEBUG("runtime", "%s: retrying on CPU (%s)", t->kind->name,
                 ctx->failed ? ctx->msg : tw_status_string(st));
    }
    t->variants &= ~(unsigned)TW_DEVICE_CUDA;
    t->cpu_retry = true;
    t->next = NULL;
    twi_sched_push_list(rt, t);
}

void
twi_task_execute(tw_worker *w, tw_task *t, unsigned variant)
{
    tw_task_ctx ctx;
    tw_status st;
    bool ran = false;

    if (t->win)
        twi_window_task_starts(t);
    if (variant && !twi_job_stopping(t->job)) {
        /* The message buffer is written only on failure; skip clearing it. */
        ctx.task = t;
        ctx.w = w;
        ctx.dev = (tw_device_type)variant;
        ctx.failed = false;
        ctx.no_retry = false;
        ctx.fail_status = TW_OK;
        ctx.n_scratch = 0;
        ctx.msg[0] = '\0';
        int64_t t0, t1;

        /* Host budget (runtime/budget.c): its tiles resident and pinned until it ends. */
        st = t->mem.dispatched ? twi_budget_task_begin(t, ctx.msg, sizeof ctx.msg) : TW_OK;
        if (st != TW_OK)
            ctx.failed = true;
        if (w->rt->models) /* the content feature as the task starts, before it changes it */
            twi_model_task_key(t);
        t0 = twi_trace_now();
        if (st != TW_OK)
            (void)0; /* not run: a tile could not be brought back (message in ctx.msg) */
        else if (variant == TW_DEVICE_CUDA && fault_injected(w->rt, t))
            st = twi_ctx_fail(&ctx, TW_E_DEVICE, "cuda: injected fault in task %s on GPU %d",
                              t->kind->name, w->gpu);
        else if (variant == TW_DEVICE_CUDA)
            st = twi_cuda_run(w, &ctx);
        else if ((st = twi_task_host_begin(t, ctx.msg, sizeof ctx.msg)) != TW_OK)
            ctx.failed = true; /* its pixels could not be brought back from a GPU */
        else
            st = twi_cpu_run(w, &ctx);
        t1 = twi_trace_now();
        atomic_fetch_add_explicit(&w->busy_ns, t1 - t0, memory_order_relaxed);
        if (w->rt->models && st == TW_OK)
            twi_model_task_ran(w, t, variant, 1e-9 * (double)(t1 - t0));
        if (w->rt->trace_file)
            twi_trace_add(w, TWI_TRACE_TASKS, t->kind->name, t0, t1);
        /* A prefetched task that failed before twi_cuda_run took it over (a pin, an injected
         * fault): its uploads may still be reading its host tiles, which the budget is about
         * to unpin, and its staged blocks must not pass for current. */
        if (st != TW_OK && variant == TW_DEVICE_CUDA && w->pf_task == t)
            twi_cuda_unstage(w);
        if (st != TW_OK && variant == TW_DEVICE_CUDA && retriable(t, &ctx, st)) {
            if (t->mem.dispatched)
                twi_budget_task_end(t);
            retry_on_cpu(w, t, &ctx, st);
            return;
        }
        /* Only a run that is final may have effects beyond its tiles. */
        if (st == TW_OK && t->kind->commit)
            st = t->kind->commit(&ctx, t->arg);
        ran = true;
        if (st != TW_OK) {
            if (ctx.failed)
                (void)twi_job_fail(t->job, st, "%s", ctx.msg);
            else
                (void)twi_job_fail(t->job, st, "%s: failed (%s)", t->kind->name,
                                   tw_status_string(st));
        }
    }
    if (!variant && !twi_job_stopping(t->job))
        /* Popped, yet no device of this worker can run it: fail the job rather than complete
         * the task unrun and release its dependents on missing data. */
        (void)twi_job_fail(t->job, TW_E_NODEV, "runtime: worker %d could not run task %s",
                           w->index, t->kind->name);
    if (t->mem.dispatched) /* also for a task dropped after its dispatch */
        twi_budget_task_end(t);
    task_complete(w, t, ran);
}

/* ---- inside a variant */

tw_tile_view
twi_ctx_view(tw_task_ctx *ctx, int i)
{
    tw_tile_view v = {0};

    if (!ctx || i < 0 || i >= ctx->task->n_tiles)
        return v;
    return ctx->views[i];
}

tw_tile *
twi_ctx_tile(tw_task_ctx *ctx, int i)
{
    if (!ctx || i < 0 || i >= ctx->task->n_tiles)
        return NULL;
    return ctx->task->tiles[i];
}

tw_device_type
twi_ctx_device(const tw_task_ctx *ctx)
{
    return ctx->dev;
}

int
twi_ctx_worker(const tw_task_ctx *ctx)
{
    return ctx->w->index;
}

int
twi_ctx_team(const tw_task_ctx *ctx)
{
    /* A GPU manager running a CPU variant has only its own core; a CPU worker its own and any
     * lent to it for this task (twi_cpu_borrow). */
    return ctx->w->type == TW_DEVICE_CPU ? ctx->w->team_now : 1;
}

void *
twi_ctx_stream(const tw_task_ctx *ctx)
{
    return ctx->dev == TW_DEVICE_CUDA ? ctx->w->stream : NULL;
}

tw_job *
twi_ctx_job(tw_task_ctx *ctx)
{
    return ctx->task->job;
}

bool
twi_ctx_canceled(const tw_task_ctx *ctx)
{
    return twi_job_stopping(ctx->task->job);
}

tw_status
twi_ctx_fail(tw_task_ctx *ctx, tw_status st, const char *fmt, ...)
{
    va_list ap;

    if (!ctx || ctx->failed)
        return st;
    va_start(ap, fmt);
    vsnprintf(ctx->msg, sizeof ctx->msg, fmt, ap);
    va_end(ap);
    ctx->failed = true;
    ctx->fail_status = st;
    return st;
}

void
twi_ctx_no_retry(tw_task_ctx *ctx)
{
    if (ctx)
        ctx->no_retry = true;
}

static tw_status
ctx_copy(tw_task_ctx *ctx, void *dst, const void *src, size_t bytes, bool to_host)
{
    if (!ctx || (bytes && (!dst || !src)))
        return TW_E_INVALID;
    if (!bytes)
        return TW_OK;
    if (ctx->dev == TW_DEVICE_CUDA)
        return twi_cuda_copy(ctx, dst, src, bytes, to_host);
    memcpy(dst, src, bytes);
    return TW_OK;
}

tw_status
twi_ctx_copy_to_device(tw_task_ctx *ctx, void *dst, const void *src, size_t bytes)
{
    return ctx_copy(ctx, dst, src, bytes, false);
}

tw_status
twi_ctx_copy_to_host(tw_task_ctx *ctx, void *dst, const void *src, size_t bytes)
{
    return ctx_copy(ctx, dst, src, bytes, true);
}

void *
twi_ctx_scratch(tw_task_ctx *ctx, size_t bytes)
{
    void *p = NULL;
    size_t cap = 0;

    if (!ctx || ctx->n_scratch >= TWI_CTX_MAX_SCRATCH)
        return NULL;
    if (ctx->dev == TW_DEVICE_CUDA)
        return twi_cuda_scratch(ctx, bytes);
    if (ctx->w) {
        if (!(p = twi_cpu_scratch(ctx->w, bytes, &cap)))
            return NULL;
    } else if (posix_memalign(&p, 64, bytes ? bytes : 1) != 0) {
        return NULL;
    } else {
        cap = bytes;
    }
    ctx->scratch[ctx->n_scratch] = p;
    ctx->scratch_bytes[ctx->n_scratch] = cap;
    ctx->n_scratch++;
    return p;
}

/* ---- fault injection (its syntax: twi_fault_parse in base/syntax.c) */

tw_status
twi_fault_setup(tw_runtime *rt, tw_error *err)
{
    const char *text = NULL;

    atomic_init(&rt->fault_attempts, 0);
    atomic_init(&rt->fault_logged, false);
    rt->fault_every = 0;
    rt->fault_kind[0] = '\0';
    if (tw_config_get_string(rt->cfg, "runtime.fault_inject", &text) != TW_OK || !text)
        return twi_error_set(err, TW_E_INTERNAL,
                             "runtime: config key runtime.fault_inject is missing");
    if (twi_fault_parse(text, &rt->fault_every, rt->fault_kind, NULL, 0) != TW_OK)
        return twi_error_set(err, TW_E_INVALID, "runtime: bad runtime.fault_inject '%s'", text);
    if (rt->fault_every > 0)
        TW_INFO("runtime", "fault injection on (runtime.fault_inject=%s)", text);
    return TW_OK;
}
