/* SPDX-License-Identifier: MIT */
/* tilewave tests: jobs: sticky errors, cancel, wait timeout, finish callback, progress. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Criterion 2.4 assertions store into a 1-bit field, which -Wconversion flags at every use. */
#pragma GCC diagnostic ignored "-Wconversion"

#include "tw_internal.h"
#include "twtest.h"
#include "twtest_rt.h"

/* ---- helpers */


static tw_runtime *
make_runtime(int cpu_workers)
{
    tw_error err = {0};
    tw_runtime *rt = twtest_runtime(cpu_workers, "none", &err);

    cr_assert(rt != NULL, "%s", err.message);
    return rt;
}

/* Task argument: its index, and how long it works (in 1 ms steps, checking cancellation). */
typedef struct work_arg {
    int index;
    int fail_at;   /* the index that fails, -1 for none */
    int ms;
} work_arg;

static atomic_int ran;

static tw_status
work_cpu(tw_task_ctx *ctx, void *arg)
{
    work_arg *a = arg;
    int i;

    atomic_fetch_add(&ran, 1);
    if (a->index == a->fail_at)
        return twi_ctx_fail(ctx, TW_E_IO, "test: task %d failed on purpose", a->index);
    for (i = 0; i < a->ms; i++) {
        if (twi_ctx_canceled(ctx))
            return TW_E_CANCELED;
        twtest_sleep_ms(1);
    }
    return TW_OK;
}

static tw_status
plain_fail_cpu(tw_task_ctx *ctx, void *arg)
{
    (void)ctx;
    (void)arg;
    return TW_E_FORMAT;
}

static const tw_task_kind work_kind = {.name = "test.work", .devices = TW_DEVICE_CPU,
                                       .cpu = work_cpu};
static const tw_task_kind plain_fail_kind = {.name = "test.plain_fail",
                                             .devices = TW_DEVICE_CPU, .cpu = plain_fail_cpu};

/* Submit n independent work tasks to a new sealed job. */
static tw_job *
submit_work(tw_runtime *rt, int n, int fail_at, int ms)
{
    tw_job *job = NULL;
    int i;

    cr_assert(eq(int, twi_job_create(rt, "work", &job), TW_OK));
    for (i = 0; i < n; i++) {
        work_arg *a = malloc(sizeof *a);
        tw_task *t = NULL;
        a->index = i;
        a->fail_at = fail_at;
        a->ms = ms;
        cr_assert(eq(int, twi_task_create(job, &work_kind, a, free, &t), TW_OK));
        cr_assert(eq(int, twi_task_submit(t), TW_OK));
        twi_task_release(t);
    }
    twi_job_seal(job);
    return job;
}

Test(job, failing_task_fails_job_and_runtime_stays_usable)
{
    /* On one worker (FCFS, deterministic), task 10 of 2000 fails with a message: the job
     * returns that status and message, tasks 11.. never run, and a new job on the same runtime
     * then succeeds with no error. */
    tw_runtime *rt = make_runtime(1);
    tw_job *job = submit_work(rt, 2000, 10, 1);

    cr_assert(eq(int, tw_job_wait(job, -1), TW_E_IO));
    cr_assert(eq(str, (char *)tw_job_get_error(job), "test: task 10 failed on purpose"));
    cr_assert(eq(int, atomic_load(&ran), 11));
    tw_job_destroy(job);

    atomic_store(&ran, 0);
    job = submit_work(rt, 100, -1, 0);
    cr_assert(eq(int, tw_job_wait(job, -1), TW_OK));
    cr_assert(eq(ptr, (void *)tw_job_get_error(job), NULL));
    cr_assert(eq(int, atomic_load(&ran), 100));
    tw_job_destroy(job);
    tw_runtime_destroy(rt);
}

Test(job, failure_stops_dependents_on_two_workers)
{
    /* A chain of 500 tasks whose 3rd fails: nothing after it runs (its dependents are
     * dropped), the job ends with the error, and a second job runs all its tasks. */
    tw_runtime *rt = make_runtime(2);
    tw_job *job = NULL;
    tw_task *prev = NULL;
    int i;

    cr_assert(eq(int, twi_job_create(rt, "chain", &job), TW_OK));
    for (i = 0; i < 500; i++) {
        work_arg *a = malloc(sizeof *a);
        tw_task *t = NULL;
        a->index = i;
        a->fail_at = 2;
        a->ms = 0;
        cr_assert(eq(int, twi_task_create(job, &work_kind, a, free, &t), TW_OK));
        if (prev)
            cr_assert(eq(int, twi_task_depend(t, prev), TW_OK));
        cr_assert(eq(int, twi_task_submit(t), TW_OK));
        twi_task_release(prev);
        prev = t;
    }
    twi_task_release(prev);
    twi_job_seal(job);
    cr_assert(eq(int, tw_job_wait(job, -1), TW_E_IO));
    cr_assert(eq(int, atomic_load(&ran), 3));
    tw_job_destroy(job);

    atomic_store(&ran, 0);
    job = submit_work(rt, 300, -1, 0);
    cr_assert(eq(int, tw_job_wait(job, -1), TW_OK));
    cr_assert(eq(int, atomic_load(&ran), 300));
    tw_job_destroy(job);
    tw_runtime_destroy(rt);
}

Test(job, failure_without_message_names_the_kind)
{
    /* A variant returning an error without twi_ctx_fail gives "<kind>: failed (TW_E_X)". */
    tw_runtime *rt = make_runtime(2);
    tw_job *job = NULL;
    tw_task *t = NULL;

    cr_assert(eq(int, twi_job_create(rt, "plain", &job), TW_OK));
    cr_assert(eq(int, twi_task_create(job, &plain_fail_kind, NULL, NULL, &t), TW_OK));
    cr_assert(eq(int, twi_task_submit(t), TW_OK));
    twi_task_release(t);
    twi_job_seal(job);
    cr_assert(eq(int, tw_job_wait(job, -1), TW_E_FORMAT));
    cr_assert(eq(str, (char *)tw_job_get_error(job), "test.plain_fail: failed (TW_E_FORMAT)"));
    tw_job_destroy(job);
    tw_runtime_destroy(rt);
}

Test(job, first_error_sticks)
{
    /* twi_job_fail twice: the first status and message stay; a later cancel changes nothing. */
    tw_runtime *rt = make_runtime(1);
    tw_job *job = NULL;

    cr_assert(eq(int, twi_job_create(rt, "sticky", &job), TW_OK));
    cr_assert(eq(int, twi_job_fail(job, TW_E_IO, "io: first %d", 1), TW_E_IO));
    cr_assert(twi_job_stopping(job));
    cr_assert(eq(int, twi_job_fail(job, TW_E_FORMAT, "io: second"), TW_E_FORMAT));
    tw_job_cancel(job);
    twi_job_seal(job);
    cr_assert(eq(int, tw_job_wait(job, -1), TW_E_IO));
    cr_assert(eq(str, (char *)tw_job_get_error(job), "io: first 1"));
    tw_job_destroy(job);
    tw_runtime_destroy(rt);
}

Test(job, cancel_returns_quickly)
{
    /* 1000 tasks of 20 ms each on 2 workers (10 s of work): canceled after 50 ms, the wait
     * returns TW_E_CANCELED soon (tens of ms; the bound is generous), not every task ran, and there is no error
     * message. */
    tw_runtime *rt = make_runtime(2);
    tw_job *job = submit_work(rt, 1000, -1, 20);
    double t0;

    twtest_sleep_ms(50);
    t0 = twtest_now_s();
    tw_job_cancel(job);
    cr_assert(eq(int, tw_job_wait(job, -1), TW_E_CANCELED));
    /* a generous bound (a loaded machine under sanitizers), the time in the message */
    cr_assert(lt(dbl, twtest_now_s() - t0, 5.0 * TWTEST_SLOWDOWN), "canceled after %.2f s",
              twtest_now_s() - t0);
    cr_assert(lt(int, atomic_load(&ran), 1000));
    cr_assert(eq(ptr, (void *)tw_job_get_error(job), NULL));
    cr_assert(eq(int, tw_job_wait(job, 0), TW_E_CANCELED)); /* final status stays */
    tw_job_destroy(job);
    tw_runtime_destroy(rt);
}

Test(job, wait_times_out_and_job_goes_on)
{
    /* A 300 ms task: a 30 ms wait gives TW_E_TIMEOUT, the job goes on and then succeeds. */
    tw_runtime *rt = make_runtime(1);
    tw_job *job = submit_work(rt, 1, -1, 300);
    double t0 = twtest_now_s();
    tw_progress pr;

    cr_assert(eq(int, tw_job_wait(job, 30), TW_E_TIMEOUT));
    cr_assert(ge(dbl, twtest_now_s() - t0, 0.025));
    tw_job_get_progress(job, &pr);
    cr_assert(not(pr.finished));
    cr_assert(eq(int, tw_job_wait(job, -1), TW_OK));
    cr_assert(eq(int, atomic_load(&ran), 1));
    tw_job_destroy(job);
    tw_runtime_destroy(rt);
}

Test(job, destroy_cancels_an_unfinished_job)
{
    /* Destroying a running job cancels it and waits: it returns quickly, nothing leaks
     * (checked under ASan in CI), and the runtime still runs new jobs. */
    tw_runtime *rt = make_runtime(2);
    tw_job *job = submit_work(rt, 500, -1, 20);
    double t0;

    twtest_sleep_ms(20);
    t0 = twtest_now_s();
    tw_job_destroy(job);
    cr_assert(lt(dbl, twtest_now_s() - t0, 5.0 * TWTEST_SLOWDOWN), "destroyed after %.2f s",
              twtest_now_s() - t0);
    job = submit_work(rt, 10, -1, 0);
    cr_assert(eq(int, tw_job_wait(job, -1), TW_OK));
    tw_job_destroy(job);
    tw_runtime_destroy(rt);
}

/* ---- finish callback */

static atomic_int finish_calls;
static tw_status finish_seen;

static tw_status
finish_ok(tw_job *job, tw_status st, void *user)
{
    (void)job;
    (void)user;
    atomic_fetch_add(&finish_calls, 1);
    finish_seen = st;
    return TW_OK;
}

static tw_status
finish_fail(tw_job *job, tw_status st, void *user)
{
    (void)st;
    (void)user;
    atomic_fetch_add(&finish_calls, 1);
    return twi_job_fail(job, TW_E_IO, "test: rename failed");
}

static atomic_int user_freed;

static void
count_free(void *p)
{
    (void)p;
    atomic_fetch_add(&user_freed, 1);
}

Test(job, finish_runs_once_after_all_tasks)
{
    /* The finish callback runs exactly once, sees TW_OK, and its user data is freed once
     * when the job is destroyed. */
    tw_runtime *rt = make_runtime(2);
    tw_job *job = NULL;
    int i;

    cr_assert(eq(int, twi_job_create(rt, "fin", &job), TW_OK));
    twi_job_set_finish(job, finish_ok, &finish_calls, count_free);
    for (i = 0; i < 200; i++) {
        work_arg *a = calloc(1, sizeof *a);
        tw_task *t = NULL;
        a->fail_at = -1;
        cr_assert(eq(int, twi_task_create(job, &work_kind, a, free, &t), TW_OK));
        cr_assert(eq(int, twi_task_submit(t), TW_OK));
        twi_task_release(t);
    }
    twi_job_seal(job);
    cr_assert(eq(int, tw_job_wait(job, -1), TW_OK));
    cr_assert(eq(int, atomic_load(&finish_calls), 1));
    cr_assert(eq(int, finish_seen, TW_OK));
    cr_assert(eq(int, atomic_load(&ran), 200));
    tw_job_destroy(job);
    tw_runtime_destroy(rt);
    cr_assert(eq(int, atomic_load(&user_freed), 1));
}

Test(job, finish_error_fails_the_job)
{
    /* A job with no task ends on the sealing thread; its finish callback's error (with its
     * message) becomes the job's error. */
    tw_runtime *rt = make_runtime(1);
    tw_job *job = NULL;

    cr_assert(eq(int, twi_job_create(rt, "fin", &job), TW_OK));
    twi_job_set_finish(job, finish_fail, NULL, NULL);
    twi_job_seal(job);
    cr_assert(eq(int, atomic_load(&finish_calls), 1)); /* ran on this thread, in seal */
    cr_assert(eq(int, tw_job_wait(job, 0), TW_E_IO));
    cr_assert(eq(str, (char *)tw_job_get_error(job), "test: rename failed"));
    tw_job_destroy(job);
    tw_runtime_destroy(rt);
}

Test(job, finish_sees_canceled)
{
    /* A canceled job's finish callback is told TW_E_CANCELED. */
    tw_runtime *rt = make_runtime(1);
    tw_job *job = NULL;

    cr_assert(eq(int, twi_job_create(rt, "fin", &job), TW_OK));
    twi_job_set_finish(job, finish_ok, NULL, NULL);
    tw_job_cancel(job);
    twi_job_seal(job);
    cr_assert(eq(int, tw_job_wait(job, -1), TW_E_CANCELED));
    cr_assert(eq(int, finish_seen, TW_E_CANCELED));
    tw_job_destroy(job);
    tw_runtime_destroy(rt);
}

/* ---- progress, submission rules, concurrent jobs */

Test(job, progress_reports_done_total_eta)
{
    /* Progress: eta < 0 before any unit is done; done/total as added; elapsed grows; once
     * finished the flag is set and elapsed stops. */
    tw_runtime *rt = make_runtime(1);
    tw_job *job = NULL;
    tw_progress pr;
    double e1;

    cr_assert(eq(int, twi_job_create(rt, "progress", &job), TW_OK));
    twi_job_add_total(job, 10);
    tw_job_get_progress(job, &pr);
    cr_assert(eq(i64, pr.total, 10));
    cr_assert(eq(i64, pr.done, 0));
    cr_assert(lt(dbl, pr.eta_s, 0.0));
    cr_assert(not(pr.finished));
    twtest_sleep_ms(20);
    twi_job_add_done(job, 5);
    tw_job_get_progress(job, &pr);
    cr_assert(ge(dbl, pr.elapsed_s, 0.015));
    cr_assert(gt(dbl, pr.eta_s, 0.0));
    twi_job_add_done(job, 5);
    twi_job_seal(job);
    tw_job_get_progress(job, &pr);
    cr_assert(pr.finished);
    e1 = pr.elapsed_s;
    twtest_sleep_ms(20);
    tw_job_get_progress(job, &pr);
    cr_assert(eq(dbl, pr.elapsed_s, e1));
    tw_job_destroy(job);
    tw_runtime_destroy(rt);
}

Test(job, submit_rules)
{
    /* Submitting twice, depending after submission, or submitting into an ended job is
     * TW_E_INVALID; a task depending on a completed task runs at once. */
    tw_runtime *rt = make_runtime(1);
    tw_job *job = NULL;
    tw_task *a = NULL, *b = NULL, *c = NULL;
    work_arg *wa = calloc(3, sizeof *wa);

    wa[0].fail_at = wa[1].fail_at = wa[2].fail_at = -1;
    cr_assert(eq(int, twi_job_create(rt, "rules", &job), TW_OK));
    cr_assert(eq(int, twi_task_create(job, &work_kind, &wa[0], NULL, &a), TW_OK));
    cr_assert(eq(int, twi_task_submit(a), TW_OK));
    cr_assert(eq(int, twi_task_submit(a), TW_E_INVALID));
    cr_assert(eq(int, twi_task_create(job, &work_kind, &wa[1], NULL, &b), TW_OK));
    cr_assert(eq(int, twi_task_depend(b, b), TW_E_INVALID));
    while (atomic_load(&ran) < 1)
        twtest_sleep_ms(1);
    twtest_sleep_ms(5); /* let a complete */
    cr_assert(eq(int, twi_task_depend(b, a), TW_OK));
    cr_assert(eq(int, twi_task_submit(b), TW_OK));
    cr_assert(eq(int, twi_task_depend(b, a), TW_E_INVALID));
    twi_job_seal(job);
    cr_assert(eq(int, tw_job_wait(job, -1), TW_OK));
    cr_assert(eq(int, atomic_load(&ran), 2));
    cr_assert(eq(int, twi_task_create(job, &work_kind, &wa[2], NULL, &c), TW_OK));
    cr_assert(eq(int, twi_task_submit(c), TW_E_INVALID));
    twi_task_release(a);
    twi_task_release(b);
    twi_task_release(c);
    tw_job_destroy(job);
    tw_runtime_destroy(rt);
    free(wa);
}

Test(job, concurrent_jobs_fail_independently)
{
    /* Two jobs share the workers: one fails, the other completes every task. */
    tw_runtime *rt = make_runtime(2);
    tw_job *bad = submit_work(rt, 300, 5, 1);
    tw_job *good = submit_work(rt, 300, -1, 0);

    cr_assert(eq(int, tw_job_wait(bad, -1), TW_E_IO));
    cr_assert(eq(int, tw_job_wait(good, -1), TW_OK));
    cr_assert(eq(ptr, (void *)tw_job_get_error(good), NULL));
    tw_job_destroy(bad);
    tw_job_destroy(good);
    tw_runtime_destroy(rt);
}

/* ---- traces (runtime.trace) */

static tw_runtime *
traced_runtime(const char *path, const char *gpus, tw_error *err)
{
    tw_config *cfg = NULL;
    tw_runtime *rt = NULL;

    cr_assert(eq(int, tw_config_create(&cfg), TW_OK));
    cr_assert(eq(int, tw_config_set(cfg, "runtime.cpu_workers", "2", TW_CONFIG_SET, NULL), TW_OK));
    cr_assert(eq(int, tw_config_set(cfg, "runtime.gpus", gpus, TW_CONFIG_SET, NULL), TW_OK));
    cr_assert(eq(int, tw_config_set(cfg, "runtime.trace", path, TW_CONFIG_SET, NULL), TW_OK));
    if (tw_runtime_create(cfg, &rt, err) != TW_OK)
        rt = NULL;
    tw_config_destroy(cfg);
    return rt;
}


static bool
exists(const char *path)
{
    FILE *f = fopen(path, "rb");

    if (f)
        fclose(f);
    return f != NULL;
}

Test(trace, every_task_appears_once_with_its_duration)
{
    /* A traced runtime runs 40 tasks of 2 ms: the trace (written when the runtime ends) holds
     * 40 complete events named after the kind, each at least 1.5 ms long and not before the
     * runtime began, lanes named for both workers, and no .part file remains. */
    char *dir = twtest_tmpdir(), *path = twtest_path(dir, "run.json"), *part, *json, *p;
    tw_error err = {0};
    tw_runtime *rt = traced_runtime(path, "none", &err);
    tw_job *job;
    int n = 0;

    cr_assert(rt != NULL, "%s", err.message);
    job = submit_work(rt, 40, -1, 2);
    cr_assert(eq(int, tw_job_wait(job, -1), TW_OK));
    tw_job_destroy(job);
    cr_assert(exists(path) == false, "the trace is written when the runtime ends");
    tw_runtime_destroy(rt);
    json = twtest_slurp(path);
    cr_assert(strncmp(json, "{\"displayTimeUnit\"", 18) == 0);
    cr_assert(strstr(json, "\"name\": \"cpu worker 0 (cores ") != NULL);
    cr_assert(strstr(json, "\"name\": \"cpu worker 1 (cores ") != NULL);
    static const char ev[] = "\"name\": \"test.work\", \"cat\": \"cpu\", \"ph\": \"X\"";

    for (p = json; (p = strstr(p, ev)); p++) {
        double ts = -1, dur = -1;
        const char *q = strstr(p, "\"ts\": ");

        cr_assert(q && sscanf(q, "\"ts\": %lf, \"dur\": %lf", &ts, &dur) == 2);
        cr_assert(ts >= 0 && dur >= 1500, "event %d: ts %f dur %f", n, ts, dur);
        n++;
    }
    cr_assert(eq(int, n, 40));
    cr_assert(strstr(json, "\"dropped_events\": 0}}") != NULL);
    part = malloc(strlen(path) + 6);
    sprintf(part, "%s.part", path);
    cr_assert(exists(part) == false);
    free(part);
    free(json);
    twtest_rmtree(dir);
    free(path);
    free(dir);
}

Test(trace, unwritable_path_fails_creation_and_failed_creation_leaves_nothing)
{
    /* A trace in a missing directory: creation fails with TW_E_IO naming the path. A runtime
     * whose creation fails later (a GPU that does not exist) leaves neither the trace nor its
     * .part file. */
    char *dir = twtest_tmpdir(), *path = twtest_path(dir, "t.json"), *part;
    tw_error err = {0};
    tw_runtime *rt = traced_runtime("/nonexistent-dir/t.json", "none", &err);

    cr_assert(rt == NULL);
    cr_assert(strstr(err.message, "cannot write the trace '/nonexistent-dir/t.json'") != NULL,
              "%s", err.message);
    rt = traced_runtime(path, "1023", &err);
    cr_assert(rt == NULL);
    part = malloc(strlen(path) + 6);
    sprintf(part, "%s.part", path);
    cr_assert(exists(path) == false);
    cr_assert(exists(part) == false);
    free(part);
    twtest_rmtree(dir);
    free(path);
    free(dir);
}

Test(trace, is_nameless_until_complete_and_a_write_failure_is_returned)
{
    /* While the runtime runs, the trace's folder holds nothing (the file is nameless, so a
     * killed process leaves nothing); tw_runtime_finish() names it and returns TW_OK, a
     * second call does nothing more. When the file cannot be given its name (its folder was
     * removed meanwhile), tw_runtime_finish() returns TW_E_IO naming the trace, and
     * tw_runtime_destroy() afterwards neither crashes nor leaves anything. */
    char *dir = twtest_tmpdir(), *sub = twtest_path(dir, "sub"), *path, *gone;
    tw_error err = {0};
    tw_runtime *rt;
    tw_job *job;

    cr_assert(eq(int, mkdir(sub, 0700), 0));
    path = twtest_path(sub, "t.json");
    rt = traced_runtime(path, "none", &err);
    cr_assert(rt != NULL, "%s", err.message);
    job = submit_work(rt, 4, -1, 1);
    cr_assert(eq(int, tw_job_wait(job, -1), TW_OK));
    tw_job_destroy(job);
    cr_assert(eq(int, twtest_count_entries(sub), 0), "the trace has a name before the end");
    cr_assert(eq(int, tw_runtime_finish(rt, &err), TW_OK), "%s", err.message);
    cr_assert(eq(int, tw_runtime_finish(rt, &err), TW_OK));
    tw_runtime_destroy(rt);
    cr_assert(exists(path));
    cr_assert(eq(int, twtest_count_entries(sub), 1), "a temporary file was left beside it");

    gone = twtest_path(dir, "gone");
    cr_assert(eq(int, mkdir(gone, 0700), 0));
    free(path);
    path = twtest_path(gone, "t.json");
    rt = traced_runtime(path, "none", &err);
    cr_assert(rt != NULL, "%s", err.message);
    job = submit_work(rt, 4, -1, 1);
    cr_assert(eq(int, tw_job_wait(job, -1), TW_OK));
    tw_job_destroy(job);
    cr_assert(eq(int, rmdir(gone), 0), "the trace's folder was not empty during the run");
    cr_assert(eq(int, tw_runtime_finish(rt, &err), TW_E_IO));
    cr_assert(strstr(err.message, "runtime: cannot write the trace '") != NULL, "%s",
              err.message);
    cr_assert(strstr(err.message, "gone/t.json") != NULL, "%s", err.message);
    tw_runtime_destroy(rt);
    cr_assert(exists(path) == false);
    twtest_rmtree(dir);
    free(path);
    free(gone);
    free(sub);
    free(dir);
}

Test(job, worker_info_counts_tasks_and_busy_time)
{
    /* One CPU worker runs 20 tasks of 3 ms: its info says 20 tasks, at least 60 ms busy, no
     * more busy than alive, and no GPU copies. */
    tw_runtime *rt = make_runtime(1);
    tw_worker_info wi;
    tw_job *job = submit_work(rt, 20, -1, 3);

    cr_assert(eq(int, tw_job_wait(job, -1), TW_OK));
    tw_job_destroy(job);
    cr_assert(eq(int, tw_runtime_get_worker(rt, 0, &wi), TW_OK));
    cr_assert(eq(u64, wi.tasks_run, 20));
    cr_assert(wi.busy_s >= 0.060 && wi.busy_s <= wi.alive_s, "busy %f alive %f", wi.busy_s,
              wi.alive_s);
    cr_assert(eq(u64, wi.bytes_to_gpu, 0));
    cr_assert(eq(u64, wi.bytes_from_gpu, 0));
    tw_runtime_destroy(rt);
}

/* ---- progress callbacks */

typedef struct progress_log {
    atomic_int calls, finals;
    atomic_llong last_done, final_done, final_total;
    atomic_bool wait_returned_early; /* a call seen after tw_job_wait returned */
    atomic_bool waited;
} progress_log;

static void
on_progress(tw_job *job, const tw_progress *p, void *user)
{
    progress_log *l = user;

    (void)job;
    atomic_fetch_add(&l->calls, 1);
    atomic_store(&l->last_done, p->done);
    if (atomic_load(&l->waited))
        atomic_store(&l->wait_returned_early, true);
    if (p->finished) {
        atomic_fetch_add(&l->finals, 1);
        atomic_store(&l->final_done, p->done);
        atomic_store(&l->final_total, p->total);
    }
}

/* Work tasks that count one progress unit each. */
static tw_status
counted_cpu(tw_task_ctx *ctx, void *arg)
{
    (void)arg;
    twtest_sleep_ms(1);
    twi_job_add_done(twi_ctx_job(ctx), 1);
    return TW_OK;
}

static const tw_task_kind counted_kind = {.name = "test.counted", .devices = TW_DEVICE_CPU,
                                          .cpu = counted_cpu};

static tw_job *
submit_counted(tw_runtime *rt, int n, progress_log *l, int64_t interval_ms)
{
    tw_job *job = NULL;

    cr_assert(eq(int, twi_job_create(rt, "counted", &job), TW_OK));
    twi_job_add_total(job, n);
    cr_assert(eq(int, tw_job_set_progress_callback(job, on_progress, l, interval_ms), TW_OK));
    for (int i = 0; i < n; i++) {
        tw_task *t = NULL;

        cr_assert(eq(int, twi_task_create(job, &counted_kind, NULL, NULL, &t), TW_OK));
        cr_assert(eq(int, twi_task_submit(t), TW_OK));
        twi_task_release(t);
    }
    twi_job_seal(job);
    return job;
}

Test(job, progress_callback_reports_steps_and_a_final_call_before_wait_returns)
{
    /* 200 counted tasks on 2 workers with interval 0: a call per step (at least 100 of them,
     * two workers may race for one), then exactly one final call with done = total = 200,
     * all before tw_job_wait returns; with a 10 s interval only the first step and the final
     * call come. Bad arguments are refused. */
    tw_runtime *rt = make_runtime(2);
    static progress_log a, b;
    tw_job *job = submit_counted(rt, 200, &a, 0);

    cr_assert(eq(int, tw_job_wait(job, -1), TW_OK));
    atomic_store(&a.waited, true);
    cr_assert(atomic_load(&a.calls) >= 100, "%d calls", atomic_load(&a.calls));
    cr_assert(eq(int, atomic_load(&a.finals), 1));
    cr_assert(eq(i64, (int64_t)atomic_load(&a.final_done), 200));
    cr_assert(eq(i64, (int64_t)atomic_load(&a.final_total), 200));
    cr_assert(atomic_load(&a.wait_returned_early) == false);
    cr_assert(eq(int, tw_job_set_progress_callback(job, NULL, NULL, -1), TW_E_INVALID));
    cr_assert(eq(int, tw_job_set_progress_callback(NULL, on_progress, NULL, 0), TW_E_INVALID));
    tw_job_destroy(job);

    job = submit_counted(rt, 50, &b, 10000);
    cr_assert(eq(int, tw_job_wait(job, -1), TW_OK));
    cr_assert(atomic_load(&b.calls) <= 2, "%d calls", atomic_load(&b.calls));
    cr_assert(eq(int, atomic_load(&b.finals), 1));
    cr_assert(eq(i64, (int64_t)atomic_load(&b.final_done), 50));
    tw_job_destroy(job);
    tw_runtime_destroy(rt);
}

Test(job, progress_callback_set_after_the_job_ended_gets_the_last_call_at_once)
{
    /* A job that ended before its callback was set (a small job, a slow caller): the setter
     * makes the last call itself, once, finished with done = total. */
    tw_runtime *rt = make_runtime(2);
    static progress_log l;
    tw_job *job = NULL;

    cr_assert(eq(int, twi_job_create(rt, "late", &job), TW_OK));
    twi_job_add_total(job, 3);
    twi_job_add_done(job, 3);
    twi_job_seal(job);
    cr_assert(eq(int, tw_job_wait(job, -1), TW_OK));
    cr_assert(eq(int, atomic_load(&l.calls), 0));
    cr_assert(eq(int, tw_job_set_progress_callback(job, on_progress, &l, 0), TW_OK));
    cr_assert(eq(int, atomic_load(&l.calls), 1));
    cr_assert(eq(int, atomic_load(&l.finals), 1));
    cr_assert(eq(i64, (int64_t)atomic_load(&l.final_done), 3));
    cr_assert(eq(i64, (int64_t)atomic_load(&l.final_total), 3));
    cr_assert(eq(int, tw_job_set_progress_callback(job, NULL, NULL, 0), TW_OK));
    cr_assert(eq(int, atomic_load(&l.calls), 1));
    tw_job_destroy(job);
    tw_runtime_destroy(rt);
}

static tw_runtime *
policy_runtime(const char *policy)
{
    tw_config *cfg = NULL;
    tw_runtime *rt = NULL;
    tw_error err = {0};

    cr_assert(eq(int, tw_config_create(&cfg), TW_OK));
    cr_assert(eq(int, tw_config_set(cfg, "runtime.cpu_workers", "1", TW_CONFIG_SET, NULL), TW_OK));
    cr_assert(eq(int, tw_config_set(cfg, "runtime.gpus", "none", TW_CONFIG_SET, NULL), TW_OK));
    cr_assert(eq(int, tw_config_set(cfg, "runtime.policy", policy, TW_CONFIG_SET, NULL), TW_OK));
    cr_assert(eq(int, tw_runtime_create(cfg, &rt, &err), TW_OK), "%s", err.message);
    tw_config_destroy(cfg);
    return rt;
}

Test(job, fair_policy_serves_a_small_job_behind_a_large_one_at_once)
{
    /* One worker; job A makes 300 tasks of 1 ms ready, then job B 5 tasks. Under "fair" B
     * ends while A has done well under half its tasks; under "fcfs" B waits for all of A's.
     * Both jobs complete either way, and one job alone runs in submission order. */
    static const char *const policies[] = {"fair", "fcfs"};

    for (int k = 0; k < 2; k++) {
        tw_runtime *rt = policy_runtime(policies[k]);
        static progress_log la, lb;
        tw_job *a = submit_counted(rt, 300, &la, 1000000), *b = submit_counted(rt, 5, &lb, 1000000);
        tw_progress pa;

        cr_assert(eq(int, tw_job_wait(b, -1), TW_OK));
        tw_job_get_progress(a, &pa);
        if (k == 0)
            cr_assert(pa.done < 150, "fair: A had done %lld of 300 when B ended",
                      (long long)pa.done);
        else
            cr_assert(pa.done >= 290, "fcfs: A had done %lld of 300 when B ended",
                      (long long)pa.done);
        cr_assert(eq(int, tw_job_wait(a, -1), TW_OK));
        tw_job_get_progress(a, &pa);
        cr_assert(eq(i64, pa.done, 300));
        tw_job_destroy(a);
        tw_job_destroy(b);
        tw_runtime_destroy(rt);
    }
}
