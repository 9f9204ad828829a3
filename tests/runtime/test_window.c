/* SPDX-License-Identifier: MIT */
/* tilewave tests: the streaming window: admission order, the bound, cancel, failure. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* Criterion 2.4 assertions store into a 1-bit field, which -Wconversion flags at every use. */
#pragma GCC diagnostic ignored "-Wconversion"

#include "tw_internal.h"
#include "twtest.h"
#include "twtest_rt.h"

/* A stream of units, each a chain read -> write of two CPU tasks; write retires its unit. */
typedef struct stream {
    tw_job *job;
    twi_window *win;
    int64_t n;
    int fail_at;              /* the unit whose admission fails, -1 none */
    int ms;                   /* each task's work, checking cancellation */
    pthread_mutex_t lock;
    int64_t *order;           /* units in the order of their admit calls */
    int64_t n_admitted;
    atomic_llong live, peak;  /* admitted and not retired */
    atomic_llong written;
    atomic_int bad_order;
    tw_task *gate;            /* every unit's read waits for it, or NULL */
    atomic_llong admitted_at_gate; /* units admitted when the gate ran */
} stream;

typedef struct unit {
    stream *s;
    int64_t k;
} unit;

static tw_status
step(tw_task_ctx *ctx, int ms)
{
    for (int i = 0; i < ms; i++) {
        if (twi_ctx_canceled(ctx))
            return TW_E_CANCELED;
        twtest_sleep_ms(1);
    }
    return TW_OK;
}

static tw_status
read_cpu(tw_task_ctx *ctx, void *arg)
{
    return step(ctx, ((unit *)arg)->s->ms);
}

static tw_status
write_cpu(tw_task_ctx *ctx, void *arg)
{
    unit *u = arg;
    tw_status st = step(ctx, u->s->ms);

    if (st != TW_OK)
        return st;
    atomic_fetch_add(&u->s->written, 1);
    atomic_fetch_sub(&u->s->live, 1);
    twi_window_retire(u->s->win);
    return TW_OK;
}

static tw_status
gate_cpu(tw_task_ctx *ctx, void *arg)
{
    stream *s = arg;

    (void)ctx;
    twtest_sleep_ms(100); /* the other workers are idle meanwhile */
    pthread_mutex_lock(&s->lock);
    atomic_store(&s->admitted_at_gate, s->n_admitted);
    pthread_mutex_unlock(&s->lock);
    return TW_OK;
}

static const tw_task_kind gate_kind = {.name = "test.gate", .devices = TW_DEVICE_CPU,
                                       .cpu = gate_cpu};
static const tw_task_kind read_kind = {.name = "test.read", .devices = TW_DEVICE_CPU,
                                       .cpu = read_cpu};
static const tw_task_kind write_kind = {.name = "test.write", .devices = TW_DEVICE_CPU,
                                        .cpu = write_cpu};

static tw_status
admit(void *arg, int64_t k)
{
    stream *s = arg;
    unit *u = malloc(sizeof *u);
    tw_task *rd = NULL, *wr = NULL;
    tw_status st;
    long long live;

    pthread_mutex_lock(&s->lock);
    s->order[s->n_admitted++] = k;
    pthread_mutex_unlock(&s->lock);
    if (k == s->fail_at) {
        free(u);
        return TW_E_NOMEM;
    }
    live = atomic_fetch_add(&s->live, 1) + 1;
    for (long long p = atomic_load(&s->peak); live > p;)
        if (atomic_compare_exchange_weak(&s->peak, &p, live))
            break;
    u->s = s;
    u->k = k;
    if ((st = twi_task_create(s->job, &write_kind, u, free, &wr)) != TW_OK) {
        free(u);
        return st;
    }
    if ((st = twi_task_create(s->job, &read_kind, u, NULL, &rd)) == TW_OK &&
        (!s->gate || (st = twi_task_depend(rd, s->gate)) == TW_OK) &&
        (st = twi_task_depend(wr, rd)) == TW_OK && (st = twi_task_submit(wr)) == TW_OK)
        st = twi_task_submit(rd);
    twi_task_release(rd);
    twi_task_release(wr);
    return st;
}

static stream *
stream_start_gated(tw_runtime *rt, int64_t n, int fail_at, int ms, bool gated)
{
    stream *s = calloc(1, sizeof *s);

    cr_assert(s != NULL);
    s->n = n;
    s->fail_at = fail_at;
    s->ms = ms;
    s->order = calloc((size_t)(n > 0 ? n : 1), sizeof *s->order);
    pthread_mutex_init(&s->lock, NULL);
    atomic_store(&s->admitted_at_gate, -1);
    cr_assert(eq(int, twi_job_create(rt, "stream", &s->job), TW_OK));
    if (gated) {
        cr_assert(eq(int, twi_task_create(s->job, &gate_kind, s, NULL, &s->gate), TW_OK));
        cr_assert(eq(int, twi_task_submit(s->gate), TW_OK));
    }
    cr_assert(eq(int, twi_window_open(s->job, n, 1 << 20, admit, s, &s->win), TW_OK));
    twi_job_seal(s->job);
    return s;
}

static stream *
stream_start(tw_runtime *rt, int64_t n, int fail_at, int ms)
{
    return stream_start_gated(rt, n, fail_at, ms, false);
}

static void
stream_free(stream *s)
{
    twi_task_release(s->gate);
    tw_job_destroy(s->job);
    pthread_mutex_destroy(&s->lock);
    free(s->order);
    free(s);
}

static int
cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

    return (x > y) - (x < y);
}

static tw_runtime *
make_runtime(int cpu_workers)
{
    tw_error err = {0};
    tw_runtime *rt = twtest_runtime(cpu_workers, "none", &err);

    cr_assert(rt != NULL, "%s", err.message);
    return rt;
}

Test(window, admits_every_unit_once_in_order_within_the_cap)
{
    /* 300 units of two 1 ms tasks on 3 workers: each unit 0..299 is admitted exactly once,
     * all are written, and never more than the window's cap exist at once. */
    tw_runtime *rt = make_runtime(3);
    stream *s = stream_start(rt, 300, -1, 1);
    int64_t cap = twi_window_cap(rt, 1 << 20);

    cr_assert(eq(int, tw_job_wait(s->job, -1), TW_OK));
    cr_assert(eq(i64, s->n_admitted, 300));
    /* claimed in order; two workers' admit calls may interleave, so compare the set */
    qsort(s->order, 300, sizeof *s->order, cmp_i64);
    for (int64_t i = 0; i < 300; i++)
        cr_assert(eq(i64, s->order[i], i));
    cr_assert(eq(i64, atomic_load(&s->written), 300));
    cr_assert(le(i64, atomic_load(&s->peak), cap));
    cr_assert(eq(i64, twi_window_in_flight(s->win), 0));
    stream_free(s);
    tw_runtime_destroy(rt);
}

Test(window, cap_follows_workers_and_memory)
{
    /* The cap is twice the workers plus two for small units, and shrinks to what 1/16 of the
     * machine's memory (or half of runtime.host_mem) holds for large ones, never below 2. */
    tw_runtime *rt = make_runtime(3);
    static const char *const kv[] = {"runtime.cpu_workers", "3", "runtime.gpus", "none",
                                     "runtime.host_mem", "40M", NULL};
    tw_runtime *rt2;

    cr_assert(eq(i64, twi_window_cap(rt, 1024), 2 * 3 + 2));
    cr_assert(eq(i64, twi_window_cap(rt, INT64_MAX / 4), 2));
    tw_runtime_destroy(rt);
    rt2 = twtest_runtime_kv_ok(false, kv);
    cr_assert(eq(i64, twi_window_cap(rt2, 4 << 20), 5)); /* 20 MiB / 4 MiB */
    tw_runtime_destroy(rt2);
}

Test(window, one_worker_and_empty_window)
{
    /* On one worker the stream still completes (the worker admits between its tasks); a
     * window of no units ends its job at once. */
    tw_runtime *rt = make_runtime(1);
    stream *s = stream_start(rt, 50, -1, 0);
    stream *e;

    cr_assert(eq(int, tw_job_wait(s->job, -1), TW_OK));
    cr_assert(eq(i64, atomic_load(&s->written), 50));
    stream_free(s);
    e = stream_start(rt, 0, -1, 0);
    cr_assert(eq(int, tw_job_wait(e->job, 5000), TW_OK));
    cr_assert(eq(i64, e->n_admitted, 0));
    stream_free(e);
    tw_runtime_destroy(rt);
}

Test(window, cancel_ends_the_stream_without_hanging)
{
    /* 10,000 units of 2 x 5 ms on 2 workers, canceled after 50 ms: the job ends canceled
     * (the window's hold on it goes even though units remain), having admitted few units. */
    tw_runtime *rt = make_runtime(2);
    stream *s = stream_start(rt, 10000, -1, 5);

    twtest_sleep_ms(50);
    tw_job_cancel(s->job);
    cr_assert(eq(int, tw_job_wait(s->job, 20000), TW_E_CANCELED));
    cr_assert(lt(i64, s->n_admitted, 10000));
    stream_free(s);
    tw_runtime_destroy(rt);
}

Test(window, failed_admission_fails_the_job)
{
    /* The admission of unit 7 fails: the job fails with a message naming the unit, and no
     * unit after it is admitted once the failure is known. */
    tw_runtime *rt = make_runtime(2);
    stream *s = stream_start(rt, 1000, 7, 1);

    cr_assert(eq(int, tw_job_wait(s->job, 20000), TW_E_NOMEM));
    cr_assert(not(eq(ptr, (void *)strstr(tw_job_get_error(s->job), "unit 7"), NULL)), "%s",
              tw_job_get_error(s->job));
    cr_assert(lt(i64, s->n_admitted, 1000));
    stream_free(s);
    tw_runtime_destroy(rt);
}

Test(window, two_streams_share_the_workers)
{
    /* Two jobs streaming at once on 2 workers both complete every unit. */
    tw_runtime *rt = make_runtime(2);
    stream *a = stream_start(rt, 200, -1, 1);
    stream *b = stream_start(rt, 200, -1, 1);

    cr_assert(eq(int, tw_job_wait(a->job, -1), TW_OK));
    cr_assert(eq(int, tw_job_wait(b->job, -1), TW_OK));
    cr_assert(eq(i64, atomic_load(&a->written), 200));
    cr_assert(eq(i64, atomic_load(&b->written), 200));
    stream_free(a);
    stream_free(b);
    tw_runtime_destroy(rt);
}

Test(window, units_waiting_on_a_dependency_are_not_admitted_ahead)
{
    /* Every unit's first task waits for a 100 ms gate task: while it runs, the 3 idle workers
     * admit no more than 2 units (units whose tasks cannot start hold no worker's attention
     * and would only take memory); once it ends, all 100 units complete. */
    tw_runtime *rt = make_runtime(4);
    stream *s = stream_start_gated(rt, 100, -1, 0, true);

    cr_assert(eq(int, tw_job_wait(s->job, -1), TW_OK));
    cr_assert(le(i64, atomic_load(&s->admitted_at_gate), 2));
    cr_assert(eq(i64, atomic_load(&s->written), 100));
    stream_free(s);
    tw_runtime_destroy(rt);
}

/* ---- lending idle cores to a task that runs a team (runtime/worker_cpu.c) */

static atomic_int team_seen[4];
static atomic_int team_runs;

static tw_status
team_cpu(tw_task_ctx *ctx, void *arg)
{
    int k = atomic_fetch_add(&team_runs, 1);

    (void)arg;
    if (k < 4)
        atomic_store(&team_seen[k], twi_ctx_team(ctx));
    twtest_sleep_ms(20);
    return TW_OK;
}

static const tw_task_kind team_kind = {.name = "test.team", .devices = TW_DEVICE_CPU,
                                       .cpu = team_cpu, .team = true};
static const tw_task_kind solo_kind = {.name = "test.solo", .devices = TW_DEVICE_CPU,
                                       .cpu = team_cpu};

static tw_status
nothing_cpu(tw_task_ctx *ctx, void *arg)
{
    (void)ctx;
    (void)arg;
    return TW_OK;
}

static const tw_task_kind gate0_kind = {.name = "test.gate0", .devices = TW_DEVICE_CPU,
                                        .cpu = nothing_cpu};

/* n tasks of `kind`, all made ready at once by the end of one gate task. */
static void
run_tasks(tw_runtime *rt, const tw_task_kind *kind, int n)
{
    tw_job *job = NULL;
    tw_task *gate = NULL;

    atomic_store(&team_runs, 0);
    cr_assert(eq(int, twi_job_create(rt, "team", &job), TW_OK));
    cr_assert(eq(int, twi_task_create(job, &gate0_kind, NULL, NULL, &gate), TW_OK));
    for (int i = 0; i < n; i++) {
        tw_task *t = NULL;

        cr_assert(eq(int, twi_task_create(job, kind, NULL, NULL, &t), TW_OK));
        cr_assert(eq(int, twi_task_depend(t, gate), TW_OK));
        cr_assert(eq(int, twi_task_submit(t), TW_OK));
        twi_task_release(t);
    }
    cr_assert(eq(int, twi_task_submit(gate), TW_OK));
    twi_task_release(gate);
    twi_job_seal(job);
    cr_assert(eq(int, tw_job_wait(job, -1), TW_OK));
    tw_job_destroy(job);
}

Test(lending, a_lone_team_task_gets_the_idle_workers)
{
    /* On 3 CPU workers, a team task alone in the queue runs with a team of 2 or 3 (the workers
     * that run nothing lent); a kind without `team` keeps 1; of two team tasks made ready at once, the first
     * to start borrows nobody (another task is ready), so it has at most 2 (the second may
     * borrow the third worker). */
    tw_runtime *rt = make_runtime(3);

    twtest_sleep_ms(50); /* the workers asleep */
    run_tasks(rt, &team_kind, 1);
    /* the worker that ran the gate may still be finishing it: at least one is lent */
    cr_assert(ge(int, atomic_load(&team_seen[0]), 2));
    run_tasks(rt, &solo_kind, 1);
    cr_assert(eq(int, atomic_load(&team_seen[0]), 1));
    run_tasks(rt, &team_kind, 2);
    cr_assert(le(int, atomic_load(&team_seen[0]), 2));
    cr_assert(eq(int, atomic_load(&team_runs), 2));
    /* and the lent workers came back: a stream afterwards uses them */
    stream *s = stream_start(rt, 60, -1, 1);

    cr_assert(eq(int, tw_job_wait(s->job, -1), TW_OK));
    cr_assert(eq(i64, atomic_load(&s->written), 60));
    stream_free(s);
    tw_runtime_destroy(rt);
}
