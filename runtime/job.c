/* SPDX-License-Identifier: MIT */
/* tilewave: jobs: completion counting, sticky error, cancel, wait, progress. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_job.h"
#include "rt_sched.h"

/*
 * A job ends when its `outstanding` count reaches zero. The count starts at one (the seal
 * guard, removed by twi_job_seal) and every submitted task adds one until it completes, so the
 * job cannot end while its driver is still submitting, nor while a running task may still
 * submit more (the running task itself counts). Exactly one thread sees the count reach zero:
 * it runs the finish callback, outside every lock, then marks the job finished.
 *
 * Stopping (cancel or the first failure) only sets a flag: queued tasks are dropped when a
 * worker takes them (completed without running), so dependents and counts resolve as usual.
 */

static double
elapsed_since(const struct timespec *t0)
{
    return twi_now_s() - ((double)t0->tv_sec + (double)t0->tv_nsec * 1e-9);
}

tw_status
twi_job_create(tw_runtime *rt, const char *name, tw_job **out)
{
    tw_status st = TW_OK;
    tw_job *job = NULL;
    pthread_condattr_t ca;
    bool ca_init = false, lock_init = false;
    size_t n;

    if (!rt || !out)
        return TW_E_INVALID;
    if (!name)
        name = "job";
    if (!(job = calloc(1, sizeof *job))) {
        st = TW_E_NOMEM;
        goto out;
    }
    n = strlen(name) + 1;
    if (!(job->name = malloc(n))) {
        st = TW_E_NOMEM;
        goto out;
    }
    memcpy(job->name, name, n);
    if (pthread_mutex_init(&job->lock, NULL) != 0) {
        st = TW_E_NOMEM;
        goto out;
    }
    lock_init = true;
    /* Timed waits use the monotonic clock so that a clock change cannot stretch them. */
    if (pthread_condattr_init(&ca) != 0) {
        st = TW_E_NOMEM;
        goto out;
    }
    ca_init = true;
    if (pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) != 0 ||
        pthread_cond_init(&job->cond, &ca) != 0) {
        st = TW_E_NOMEM;
        goto out;
    }
    job->rt = rt;
    atomic_init(&job->refs, 1);
    atomic_init(&job->outstanding, 1);
    atomic_init(&job->sealed, false);
    atomic_init(&job->stopping, false);
    atomic_init(&job->total, 0);
    atomic_init(&job->done, 0);
    atomic_init(&job->has_progress, false);
    atomic_init(&job->streaming, false);
    atomic_init(&job->progress_interval_ns, 0);
    atomic_init(&job->progress_last_ns, 0);
    clock_gettime(CLOCK_MONOTONIC, &job->t0);
    job->stop_status = TW_OK;
    *out = job;
    job = NULL;
out:
    if (ca_init)
        pthread_condattr_destroy(&ca);
    if (job) {
        if (lock_init)
            pthread_mutex_destroy(&job->lock);
        free(job->name);
        free(job);
    }
    return st;
}

void
twi_job_acquire(tw_job *job)
{
    atomic_fetch_add_explicit(&job->refs, 1, memory_order_relaxed);
}

void
twi_job_release(tw_job *job)
{
    if (!job || atomic_fetch_sub_explicit(&job->refs, 1, memory_order_acq_rel) != 1)
        return;
    if (job->finish_user_free)
        job->finish_user_free(job->finish_user);
    for (int i = 0; i < job->n_registered; i++) /* a job that never ran to its end */
        twi_host_unregister(job->registered[i]);
    free(job->registered);
    twi_window_free_all(job);
    pthread_cond_destroy(&job->cond);
    pthread_mutex_destroy(&job->lock);
    free(job->name);
    free(job);
}

void
twi_job_set_finish(tw_job *job, twi_job_finish_fn fn, void *user, void (*user_free)(void *))
{
    void *old_user;
    void (*old_free)(void *);

    if (!job)
        return;
    pthread_mutex_lock(&job->lock);
    old_user = job->finish_user;
    old_free = job->finish_user_free;
    job->finish = fn;
    job->finish_user = user;
    job->finish_user_free = user_free;
    pthread_mutex_unlock(&job->lock);
    if (old_free)
        old_free(old_user);
}

/* Call the progress callback: the last call (`final`), or a periodic one when its interval
 * has passed (one thread wins each interval). */
/* The last progress call: finished, final counts, the job's whole time. */
static void
progress_final(tw_job *job, tw_progress_fn fn, void *user)
{
    tw_progress p;

    tw_job_get_progress(job, &p);
    /* Not yet marked finished when job_end calls (waiters wake after it): say it here. */
    p.finished = true;
    p.eta_s = 0.0;
    pthread_mutex_lock(&job->lock);
    p.elapsed_s = job->end_s;
    pthread_mutex_unlock(&job->lock);
    fn(job, &p, user);
}

static void
progress_notify(tw_job *job, bool final)
{
    tw_progress_fn fn;
    void *user;
    tw_progress p;
    int64_t now;
    int_fast64_t last;

    if (final) {
        /* Under the lock, so that a callback set from now on sees final_taken and makes the
         * last call itself (tw_job_set_progress_callback) */
        pthread_mutex_lock(&job->lock);
        job->final_taken = true;
        fn = job->progress_fn;
        user = job->progress_user;
        pthread_mutex_unlock(&job->lock);
        if (fn)
            progress_final(job, fn, user);
        return;
    }
    if (!atomic_load_explicit(&job->has_progress, memory_order_acquire))
        return;
    now = twi_now_ns();
    last = atomic_load_explicit(&job->progress_last_ns, memory_order_relaxed);
    if (now - last < atomic_load_explicit(&job->progress_interval_ns, memory_order_relaxed) ||
        !atomic_compare_exchange_strong(&job->progress_last_ns, &last, now))
        return;
    pthread_mutex_lock(&job->lock);
    fn = job->progress_fn;
    user = job->progress_user;
    pthread_mutex_unlock(&job->lock);
    if (!fn)
        return;
    tw_job_get_progress(job, &p);
    fn(job, &p, user);
}

/* The job's last task ended (or it was sealed with none left). */
static void
job_end(tw_job *job)
{
    twi_job_finish_fn fn;
    void *user;
    tw_status st;

    pthread_mutex_lock(&job->lock);
    st = job->stop_status;
    fn = job->finish;
    user = job->finish_user;
    pthread_mutex_unlock(&job->lock);
    if (fn) {
        tw_status r = fn(job, st, user);

        if (r != TW_OK)
            (void)twi_job_fail(job, r, "%s: finishing failed (%s)", job->name,
                               tw_status_string(r));
    }
    pthread_mutex_lock(&job->lock);
    job->end_s = elapsed_since(&job->t0);
    for (int i = 0; i < job->n_registered; i++)
        twi_host_unregister(job->registered[i]);
    free(job->registered);
    job->registered = NULL;
    job->n_registered = 0;
    pthread_mutex_unlock(&job->lock);
    /* The last notification comes before waiters return, so they see it done. */
    progress_notify(job, true);
    pthread_mutex_lock(&job->lock);
    job->finished = true;
    pthread_cond_broadcast(&job->cond);
    pthread_mutex_unlock(&job->lock);
}

void
twi_job_register_host(tw_job *job, void *p, size_t len)
{
    void **more;

    if (!job || !p || !len || !twi_runtime_registers_caller(job->rt))
        return;
    pthread_mutex_lock(&job->lock);
    more = realloc(job->registered, (size_t)(job->n_registered + 1) * sizeof *more);
    if (more) {
        job->registered = more;
        if (twi_host_register(p, len))
            job->registered[job->n_registered++] = p;
    }
    pthread_mutex_unlock(&job->lock);
}

void
twi_job_seal(tw_job *job)
{
    if (!job || atomic_exchange(&job->sealed, true))
        return;
    twi_job_task_end(job);
}

tw_status
twi_job_task_begin(tw_job *job)
{
    int_fast64_t n = atomic_load_explicit(&job->outstanding, memory_order_relaxed);

    do {
        if (n == 0)
            return TW_E_INVALID; /* the job has ended */
    } while (!atomic_compare_exchange_weak_explicit(&job->outstanding, &n, n + 1,
                                                    memory_order_acq_rel,
                                                    memory_order_relaxed));
    return TW_OK;
}

void
twi_job_task_end(tw_job *job)
{
    if (atomic_fetch_sub_explicit(&job->outstanding, 1, memory_order_acq_rel) == 1)
        job_end(job);
}

tw_status
twi_job_hold(tw_job *job)
{
    return job ? twi_job_task_begin(job) : TW_E_INVALID;
}

void
twi_job_unhold(tw_job *job)
{
    if (job)
        twi_job_task_end(job);
}

void
twi_job_add_total(tw_job *job, int64_t n)
{
    if (job)
        atomic_fetch_add_explicit(&job->total, n, memory_order_relaxed);
}

void
twi_job_add_done(tw_job *job, int64_t n)
{
    if (!job)
        return;
    atomic_fetch_add_explicit(&job->done, n, memory_order_relaxed);
    progress_notify(job, false);
}

tw_status
tw_job_set_progress_callback(tw_job *job, tw_progress_fn fn, void *user, int64_t interval_ms)
{
    if (!job || interval_ms < 0 || interval_ms > INT64_MAX / 1000000)
        return TW_E_INVALID;
    bool late;

    pthread_mutex_lock(&job->lock);
    job->progress_fn = fn;
    job->progress_user = user;
    atomic_store(&job->progress_interval_ns, interval_ms * 1000000);
    atomic_store_explicit(&job->has_progress, fn != NULL, memory_order_release);
    late = fn && job->final_taken;
    pthread_mutex_unlock(&job->lock);
    /* The job ended before the callback was set (a small job): its last call is made here */
    if (late)
        progress_final(job, fn, user);
    return TW_OK;
}

/* A job with streaming windows stopped: its windows hold it until a worker closes them, and
 * the workers may all be asleep (runtime/window.c). */
static void
wake_windows(tw_job *job)
{
    if (atomic_load(&job->streaming))
        twi_sched_wake_idle(job->rt);
}

tw_status
twi_job_fail(tw_job *job, tw_status st, const char *fmt, ...)
{
    bool stopped = false;
    va_list ap;

    if (!job || st == TW_OK)
        return st;
    pthread_mutex_lock(&job->lock);
    if (!job->finished && job->stop_status == TW_OK) {
        job->stop_status = st;
        va_start(ap, fmt);
        vsnprintf(job->message, sizeof job->message, fmt, ap);
        va_end(ap);
        job->has_message = true;
        atomic_store(&job->stopping, true);
        stopped = true;
    }
    pthread_mutex_unlock(&job->lock);
    if (stopped)
        wake_windows(job);
    return st;
}

twi_io_counts *
twi_job_io(tw_job *job)
{
    return job ? &job->io : NULL;
}

void
twi_job_started_at(tw_job *job, int64_t t0_ns)
{
    int64_t cur;

    if (!job || t0_ns <= 0)
        return;
    cur = (int64_t)job->t0.tv_sec * 1000000000 + (int64_t)job->t0.tv_nsec;
    if (t0_ns < cur) {
        job->t0.tv_sec = (time_t)(t0_ns / 1000000000);
        job->t0.tv_nsec = (long)(t0_ns % 1000000000); /* lint-allow: the timespec field */
    }
}

void
tw_job_get_io(tw_job *job, tw_job_io *out)
{
    if (!out)
        return;
    memset(out, 0, sizeof *out);
    if (!job)
        return;
    out->bytes_read = atomic_load(&job->io.bytes_read);
    out->bytes_decoded = atomic_load(&job->io.bytes_decoded);
    out->tiles_decoded = atomic_load(&job->io.tiles_decoded);
    out->tiles_redecoded = atomic_load(&job->io.tiles_redecoded);
    out->bytes_encoded = atomic_load(&job->io.bytes_encoded);
    out->bytes_written = atomic_load(&job->io.bytes_written);
    out->kept = (tw_keep)atomic_load(&job->io.kept);
    out->tiles_bad = atomic_load(&job->io.tiles_bad);
}

const char *
tw_keep_name(tw_keep k)
{
    static const char *const names[] = {"none", "gpu", "host", "scratch", "reread"};

    return (unsigned)k < sizeof names / sizeof names[0] ? names[k] : "unknown";
}

bool
twi_job_stopping(const tw_job *job)
{
    return atomic_load_explicit(&job->stopping, memory_order_acquire);
}

tw_runtime *
twi_job_runtime(tw_job *job)
{
    return job ? job->rt : NULL;
}

void
tw_job_cancel(tw_job *job)
{
    bool stopped = false;

    if (!job)
        return;
    pthread_mutex_lock(&job->lock);
    if (!job->finished && job->stop_status == TW_OK) {
        job->stop_status = TW_E_CANCELED;
        atomic_store(&job->stopping, true);
        stopped = true;
    }
    pthread_mutex_unlock(&job->lock);
    if (stopped)
        wake_windows(job);
}

tw_status
tw_job_wait(tw_job *job, int64_t timeout_ms)
{
    tw_status st;
    struct timespec deadline;

    if (!job)
        return TW_E_INVALID;
    if (timeout_ms >= 0) {
        clock_gettime(CLOCK_MONOTONIC, &deadline);
        deadline.tv_sec += (time_t)(timeout_ms / 1000);
        deadline.tv_nsec += timeout_ms % 1000 * 1000000;
        if (deadline.tv_nsec >= 1000000000) {
            deadline.tv_sec++;
            deadline.tv_nsec -= 1000000000;
        }
    }
    pthread_mutex_lock(&job->lock);
    while (!job->finished) {
        if (timeout_ms < 0) {
            pthread_cond_wait(&job->cond, &job->lock);
        } else if (pthread_cond_timedwait(&job->cond, &job->lock, &deadline) == ETIMEDOUT &&
                   !job->finished) {
            pthread_mutex_unlock(&job->lock);
            return TW_E_TIMEOUT;
        }
    }
    st = job->stop_status;
    pthread_mutex_unlock(&job->lock);
    return st;
}

const char *
tw_job_get_error(tw_job *job)
{
    const char *msg = NULL;

    if (!job)
        return NULL;
    /* Written once, before has_message is set, and never again: safe to hand out. */
    pthread_mutex_lock(&job->lock);
    if (job->has_message)
        msg = job->message;
    pthread_mutex_unlock(&job->lock);
    return msg;
}

void
tw_job_get_progress(tw_job *job, tw_progress *out)
{
    int64_t done, total;

    if (!out)
        return;
    memset(out, 0, sizeof *out);
    if (!job)
        return;
    done = (int64_t)atomic_load_explicit(&job->done, memory_order_relaxed);
    total = (int64_t)atomic_load_explicit(&job->total, memory_order_relaxed);
    pthread_mutex_lock(&job->lock);
    out->finished = job->finished;
    out->elapsed_s = job->finished ? job->end_s : elapsed_since(&job->t0);
    pthread_mutex_unlock(&job->lock);
    out->done = done;
    out->total = total;
    if (out->finished)
        out->eta_s = 0.0;
    else if (done > 0)
        out->eta_s = total > done ? out->elapsed_s / (double)done * (double)(total - done) : 0.0;
    else
        out->eta_s = -1.0;
}

void
tw_job_destroy(tw_job *job)
{
    bool finished;

    if (!job)
        return;
    pthread_mutex_lock(&job->lock);
    finished = job->finished;
    pthread_mutex_unlock(&job->lock);
    if (!finished) {
        tw_job_cancel(job);
        /* A driver that gave up half-way may not have sealed it. */
        twi_job_seal(job);
        (void)tw_job_wait(job, -1);
    }
    twi_job_release(job);
}
