/* SPDX-License-Identifier: MIT */
/* tilewave tests: faults: injection, retry of failed CUDA runs on CPU, sticky errors, cancel. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Criterion 2.4 assertions store into a 1-bit field, which -Wconversion flags at every use. */
#pragma GCC diagnostic ignored "-Wconversion"

#include "rt_core.h"
#include "rt_job.h"
#include "twtest.h"
#include "twtest_rt.h"

/*
 * The retry path runs without a GPU: a CUDA worker made by hand (as test_policy.c makes one
 * for the policies) gets tasks as the scheduler would hand them over, with runtime.fault_inject
 * failing the CUDA attempt before anything touches a device; the runtime's real CPU workers
 * then run the retries. Whole jobs of every op under injection on a real GPU:
 * tests/cuda/test_fault_job.c.
 */

/* ---- helpers */

/* Log capture: warnings and debug lines of the runtime, counted by content. */
#define LOG_MAX 256
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static char log_msg[LOG_MAX][TW_ERROR_MAX];
static tw_log_level log_lvl[LOG_MAX];
static int log_n;

static void
capture(tw_log_level level, const char *domain, const char *message, void *user)
{
    (void)user;
    if (strcmp(domain, "runtime") != 0)
        return;
    pthread_mutex_lock(&log_lock);
    if (log_n < LOG_MAX) {
        snprintf(log_msg[log_n], sizeof log_msg[log_n], "%s", message);
        log_lvl[log_n++] = level;
    }
    pthread_mutex_unlock(&log_lock);
}

/* Lines at `level` containing every one of the (up to two) needles. */
static int
count_logs(tw_log_level level, const char *a, const char *b)
{
    int n = 0;

    pthread_mutex_lock(&log_lock);
    for (int i = 0; i < log_n; i++)
        if (log_lvl[i] == level && strstr(log_msg[i], a) && (!b || strstr(log_msg[i], b)))
            n++;
    pthread_mutex_unlock(&log_lock);
    return n;
}

/* A CPU-only runtime (the environment applies, as in twtest_runtime) with fault injection. */
static tw_runtime *
make_rt(const char *fault, int cpu_workers, tw_log_level level)
{
    char n[16];

    snprintf(n, sizeof n, "%d", cpu_workers);
    tw_log_set_handler(capture, NULL);
    tw_log_set_level(level);
    return twtest_runtime_kv_ok(true, (const char *const[]){"runtime.gpus", "none",
                                                            "runtime.cpu_workers", n,
                                                            "runtime.fault_inject", fault, NULL});
}

/* A GPU manager as the runtime would have one, in gw (it never touches a device here), and a
 * new job `name` for the tasks handed to it. */
static tw_job *
gpu_job(tw_runtime *rt, tw_worker *gw, const char *name)
{
    tw_job *job = NULL;

    memset(gw, 0, sizeof *gw);
    gw->rt = rt;
    gw->index = 99;
    gw->type = TW_DEVICE_CUDA;
    gw->gpu = 0;
    gw->team = 1;
    gw->runs = TW_DEVICE_CUDA;
    atomic_init(&gw->tasks_run, 0);
    atomic_init(&gw->busy_ns, 0);
    atomic_init(&gw->bytes_up, 0);
    atomic_init(&gw->bytes_down, 0);
    atomic_init(&gw->tasks_retried, 0);
    cr_assert(eq(int, twi_job_create(rt, name, &job), TW_OK));
    return job;
}

/* Submit t as twi_task_submit would, but hand it to gw's CUDA variant instead of the queue
 * (t must have no dependencies): the scheduler's reference goes with it. */
static void
run_on_gpu(tw_worker *gw, tw_task *t)
{
    int expect = TWI_TASK_CREATED;

    cr_assert(atomic_compare_exchange_strong(&t->state, &expect, TWI_TASK_SUBMITTED));
    cr_assert(eq(int, twi_job_task_begin(t->job), TW_OK));
    atomic_fetch_add(&t->refs, 1);
    cr_assert(eq(int, atomic_fetch_sub(&t->deps_left, 1), 1));
    twi_task_execute(gw, t, TW_DEVICE_CUDA);
}

/* ---- kinds: fill a tile with a value (CPU), never run on a GPU here, count commits */

typedef struct fill_arg {
    uint8_t value;
} fill_arg;

static atomic_int commits_cpu, commits_cuda, cuda_ran;

static tw_status
fill_cpu(tw_task_ctx *ctx, void *arg)
{
    const fill_arg *a = arg;
    tw_tile_view v = twi_ctx_view(ctx, 0);

    for (int32_t y = 0; y < v.h; y++)
        memset((char *)v.data + y * v.stride, a->value, (size_t)v.w);
    return TW_OK;
}

static tw_status
fill_cuda(tw_task_ctx *ctx, void *arg)
{
    (void)arg;
    atomic_fetch_add(&cuda_ran, 1);
    return twi_ctx_fail(ctx, TW_E_INTERNAL, "test: the CUDA variant ran");
}

static tw_status
count_commit(tw_task_ctx *ctx, void *arg)
{
    (void)arg;
    atomic_fetch_add(twi_ctx_device(ctx) == TW_DEVICE_CUDA ? &commits_cuda : &commits_cpu, 1);
    return TW_OK;
}

/* Prefers the GPU as edt.band does with GPUs present: a retry must run on the CPU anyway. */
static bool
gpu_only_can_run(const void *arg, tw_device_type dev)
{
    (void)arg;
    return dev == TW_DEVICE_CUDA;
}

static const tw_task_kind fill_kind = {.name = "test.fill",
                                       .devices = TW_DEVICE_CPU | TW_DEVICE_CUDA,
                                       .cpu = fill_cpu, .cuda = fill_cuda,
                                       .commit = count_commit};
static const tw_task_kind picky_kind = {.name = "test.picky",
                                        .devices = TW_DEVICE_CPU | TW_DEVICE_CUDA,
                                        .cpu = fill_cpu, .cuda = fill_cuda,
                                        .can_run = gpu_only_can_run, .commit = count_commit};
static const tw_task_kind cuda_only_kind = {.name = "test.cuda_only",
                                            .devices = TW_DEVICE_CUDA, .cuda = fill_cuda,
                                            .commit = count_commit};

/* Copy tile 0 into tile 1 (a dependent of a retried task). */
static tw_status
copy_cpu(tw_task_ctx *ctx, void *arg)
{
    tw_tile_view a = twi_ctx_view(ctx, 0), b = twi_ctx_view(ctx, 1);

    (void)arg;
    for (int32_t y = 0; y < a.h; y++)
        memcpy((char *)b.data + y * b.stride, (char *)a.data + y * a.stride, (size_t)a.w);
    return TW_OK;
}

static const tw_task_kind copy_kind = {.name = "test.copy", .devices = TW_DEVICE_CPU,
                                       .cpu = copy_cpu};

static tw_tile *
new_tile(tw_runtime *rt)
{
    tw_tile *t = NULL;

    cr_assert(eq(int, twi_tile_create(rt, 19, 7, 1, TW_U8, &t), TW_OK));
    /* Host pixels outside tasks are pinned (a host budget may come from TILEWAVE_*). */
    cr_assert(eq(int, twi_tile_pin(t), TW_OK));
    memset(twi_tile_host_view(t).data, 0, t->bytes);
    twi_tile_unpin(t);
    return t;
}

static bool
tile_is(tw_tile *t, uint8_t v)
{
    const uint8_t *p;
    bool same = true;

    cr_assert(eq(int, twi_tile_pin_read(t), TW_OK));
    p = twi_tile_host_view(t).data;
    for (size_t i = 0; i < t->bytes; i++)
        same = same && p[i] == v;
    twi_tile_unpin(t);
    return same;
}

static uint64_t
retried(tw_runtime *rt, const tw_worker *gw)
{
    uint64_t n = atomic_load(&gw->tasks_retried);
    tw_worker_info wi;

    /* The runtime's own workers (CPU only here) retried nothing themselves. */
    for (int i = 0; i < tw_runtime_get_worker_count(rt); i++) {
        cr_assert(eq(int, tw_runtime_get_worker(rt, i, &wi), TW_OK));
        n += wi.tasks_retried;
    }
    return n;
}

/* Hand n tasks of `kind` (values 1..n into their own tiles) to gw; returns the tiles. With
 * `first`, the first task's reference is kept there (for a dependent; release it). */
static tw_tile **
run_fill_tasks(tw_runtime *rt, tw_job *job, tw_worker *gw, const tw_task_kind *kind, int n,
               fill_arg *args, tw_task **first)
{
    tw_tile **tiles = calloc((size_t)n, sizeof *tiles);

    for (int i = 0; i < n; i++) {
        tw_task *t = NULL;

        tiles[i] = new_tile(rt);
        args[i].value = (uint8_t)(i + 1);
        cr_assert(eq(int, twi_task_create(job, kind, &args[i], NULL, &t), TW_OK));
        cr_assert(eq(int, twi_task_add_tile(t, tiles[i], TW_W), TW_OK));
        run_on_gpu(gw, t);
        if (first && i == 0)
            *first = t;
        else
            twi_task_release(t);
    }
    return tiles;
}

static void
free_tiles(tw_tile **tiles, int n)
{
    for (int i = 0; i < n; i++)
        twi_tile_release(tiles[i]);
    free(tiles);
}

/* ---- runtime.fault_inject */

Test(fault, inject_setting_syntax)
{
    /* Accepted forms and their canonical text (blanks around a value dropped, as for every
     * key and source); everything else is refused with the syntax in the message; a bad value
     * set another way (the environment) fails runtime creation. */
    static const char *const good[][2] = {
        {"", ""},          {"cuda", "cuda"},       {"cuda:1", "cuda"},
        {"cuda:3", "cuda:3"}, {"cuda:007", "cuda:7"}, {"cuda:2:mrecon.tp", "cuda:2:mrecon.tp"},
        {"cuda:1:edt.band", "cuda:1:edt.band"}, {" cuda\t", "cuda"}};
    static const char *const bad[] = {"gpu", "cuda:", "cuda:0", "cuda:-1", "cuda:+2", "cuda:x",
                                      "cuda:3:", "cuda:3:a b", "cudax", "cu da", "cuda:1:2:3",
                                      "CUDA", "cuda:99999999999999999999"};
    tw_config *cfg = NULL;
    tw_error err;
    const char *v = NULL;

    cr_assert(eq(int, tw_config_create(&cfg), TW_OK));
    cr_assert(eq(int, tw_config_get_string(cfg, "runtime.fault_inject", &v), TW_OK));
    cr_assert(eq(str, (char *)v, ""));
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        cr_assert(eq(int, tw_config_set(cfg, "runtime.fault_inject", good[i][0], TW_CONFIG_SET,
                                        &err), TW_OK), "'%s': %s", good[i][0], err.message);
        cr_assert(eq(int, tw_config_get_string(cfg, "runtime.fault_inject", &v), TW_OK));
        cr_assert(eq(str, (char *)v, (char *)good[i][1]));
    }
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_assert(eq(int, tw_config_set(cfg, "runtime.fault_inject", bad[i], TW_CONFIG_SET, &err),
                     TW_E_INVALID), "'%s' accepted", bad[i]);
        cr_assert(strstr(err.message, "cuda:N:KIND") != NULL, "%s", err.message);
    }

    int64_t every = -1;
    char kind[TWI_FAULT_KIND_MAX];

    cr_assert(eq(int, twi_fault_parse("cuda:5:maxtree.tp1", &every, kind, NULL, 0), TW_OK));
    cr_assert(eq(i64, every, 5));
    cr_assert(eq(str, kind, "maxtree.tp1"));
    cr_assert(eq(int, twi_fault_parse("", &every, kind, NULL, 0), TW_OK));
    cr_assert(eq(i64, every, 0));
    cr_assert(eq(str, kind, ""));
    tw_config_destroy(cfg);
}

/* ---- retry on CPU */

Test(fault, injected_gpu_failures_rerun_on_cpu_logged_once)
{
    /* Eight tasks handed to a GPU worker under runtime.fault_inject=cuda: each CUDA attempt
     * fails before its variant runs, goes back to the scheduler and runs on a CPU worker with
     * the right result; the commit hook runs once per task, on the CPU; a task depending on a
     * retried one sees its result; one warning for the runtime, eight retries counted, the job
     * succeeds without an error message. */
    tw_runtime *rt = make_rt("cuda", 2, TW_LOG_WARN);
    tw_worker gw;
    tw_job *job = gpu_job(rt, &gw, "retry");
    fill_arg args[8];
    tw_tile **tiles, *copy = new_tile(rt);
    tw_task *dep = NULL, *first = NULL;

    tiles = run_fill_tasks(rt, job, &gw, &fill_kind, 8, args, &first);
    /* Depends on the first, declared after it was handed over: it may already be done (then
     * nothing to wait for). Without the edge the copy could run before the retry (a race
     * the TSan run caught once in about 40). */
    cr_assert(eq(int, twi_task_create(job, &copy_kind, NULL, NULL, &dep), TW_OK));
    cr_assert(eq(int, twi_task_add_tile(dep, tiles[0], TW_R), TW_OK));
    cr_assert(eq(int, twi_task_add_tile(dep, copy, TW_W), TW_OK));
    cr_assert(eq(int, twi_task_depend(dep, first), TW_OK));
    cr_assert(eq(int, twi_task_submit(dep), TW_OK));
    twi_task_release(dep);
    twi_task_release(first);
    twi_job_seal(job);
    cr_assert(eq(int, tw_job_wait(job, 10000), TW_OK), "%s", tw_job_get_error(job));
    cr_assert(tw_job_get_error(job) == NULL);
    for (int i = 0; i < 8; i++)
        cr_assert(tile_is(tiles[i], (uint8_t)(i + 1)), "tile %d", i);
    cr_assert(tile_is(copy, 1));
    cr_assert(eq(int, atomic_load(&cuda_ran), 0));
    cr_assert(eq(int, atomic_load(&commits_cpu), 8));
    cr_assert(eq(int, atomic_load(&commits_cuda), 0));
    cr_assert(eq(u64, retried(rt, &gw), 8));
    cr_assert(eq(u64, atomic_load(&gw.tasks_run), 0));
    cr_assert(eq(int, count_logs(TW_LOG_WARN, "", NULL), 1));
    cr_assert(eq(int, count_logs(TW_LOG_WARN, "cuda: injected fault in task test.fill on GPU 0",
                                 "retrying on CPU; further faults are counted"), 1));
    tw_job_destroy(job);
    free_tiles(tiles, 8);
    twi_tile_release(copy);
    tw_runtime_destroy(rt);
}

Test(fault, retry_runs_on_cpu_even_when_can_run_prefers_the_gpu)
{
    /* A kind whose can_run refuses the CPU (edt.band and the attribute filters' passes do so
     * when GPUs are present) still completes on a CPU worker after its CUDA run failed. */
    tw_runtime *rt = make_rt("cuda", 1, TW_LOG_ERROR);
    tw_worker gw;
    tw_job *job = gpu_job(rt, &gw, "picky");
    fill_arg args[3];
    tw_tile **tiles;

    tiles = run_fill_tasks(rt, job, &gw, &picky_kind, 3, args, NULL);
    twi_job_seal(job);
    cr_assert(eq(int, tw_job_wait(job, 10000), TW_OK), "hung or failed: %s",
              tw_job_get_error(job));
    for (int i = 0; i < 3; i++)
        cr_assert(tile_is(tiles[i], (uint8_t)(i + 1)));
    cr_assert(eq(u64, retried(rt, &gw), 3));
    tw_job_destroy(job);
    free_tiles(tiles, 3);
    tw_runtime_destroy(rt);
}

#ifndef TW_HAVE_CUDA
/* Without CUDA in the build, an attempt that is not injected reaches the stub, which fails
 * with TW_E_NODEV: retried too, which lets the count of injected ones show in the log. */
static const tw_task_kind other_kind = {.name = "test.other",
                                        .devices = TW_DEVICE_CPU | TW_DEVICE_CUDA,
                                        .cpu = fill_cpu, .cuda = fill_cuda,
                                        .commit = count_commit};
Test(fault, every_nth_attempt_of_a_kind_is_injected)
{
    /* cuda:3: of 9 attempts the 3rd, 6th and 9th are injected; cuda:2:test.fill on 6 test.fill
     * and 6 test.other attempts: 3 test.fill ones, no test.other one. Every task is retried
     * (the others fail in the build's CUDA stub) and the results are right. */
    static const struct {
        const char *spec;
        int n_fill, n_other, want_fill, want_other;
    } cases[] = {{"cuda:3", 9, 0, 3, 0}, {"cuda:2:test.fill", 6, 6, 3, 0}};

    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        tw_runtime *rt = make_rt(cases[c].spec, 2, TW_LOG_DEBUG);
        tw_worker gw;
        tw_job *job;
        fill_arg a1[9], a2[6];
        tw_tile **t1, **t2;

        pthread_mutex_lock(&log_lock);
        log_n = 0;
        pthread_mutex_unlock(&log_lock);
        job = gpu_job(rt, &gw, "nth");
        t1 = run_fill_tasks(rt, job, &gw, &fill_kind, cases[c].n_fill, a1, NULL);
        t2 = run_fill_tasks(rt, job, &gw, &other_kind, cases[c].n_other, a2, NULL);
        twi_job_seal(job);
        cr_assert(eq(int, tw_job_wait(job, 10000), TW_OK), "%s", tw_job_get_error(job));
        for (int i = 0; i < cases[c].n_fill; i++)
            cr_assert(tile_is(t1[i], (uint8_t)(i + 1)));
        for (int i = 0; i < cases[c].n_other; i++)
            cr_assert(tile_is(t2[i], (uint8_t)(i + 1)));
        cr_assert(eq(u64, retried(rt, &gw), (uint64_t)(cases[c].n_fill + cases[c].n_other)));
        cr_assert(eq(int,
                     count_logs(TW_LOG_WARN, "injected fault in task test.fill", NULL) +
                         count_logs(TW_LOG_DEBUG, "injected fault in task test.fill", NULL),
                     cases[c].want_fill), "%s", cases[c].spec);
        cr_assert(eq(int,
                     count_logs(TW_LOG_WARN, "injected fault in task test.other", NULL) +
                         count_logs(TW_LOG_DEBUG, "injected fault in task test.other", NULL),
                     cases[c].want_other), "%s", cases[c].spec);
        cr_assert(eq(int, count_logs(TW_LOG_WARN, "retrying on CPU", NULL), 1));
        tw_job_destroy(job);
        free_tiles(t1, cases[c].n_fill);
        free_tiles(t2, cases[c].n_other);
        tw_runtime_destroy(rt);
    }
}
#endif

/* ---- not retried: sticky failures */

static atomic_bool slow_started;

/* Runs until the job stops, then fails with its own message (too late to count). */
static tw_status
late_fail_cpu(tw_task_ctx *ctx, void *arg)
{
    (void)arg;
    atomic_store(&slow_started, true);
    for (int i = 0; i < 10000 && !twi_ctx_canceled(ctx); i++)
        twtest_sleep_ms(1);
    return twi_ctx_fail(ctx, TW_E_IO, "test: a later failure");
}

static const tw_task_kind late_fail_kind = {.name = "test.late_fail", .devices = TW_DEVICE_CPU,
                                            .cpu = late_fail_cpu};

Test(fault, failure_without_cpu_variant_fails_the_job_and_sticks)
{
    /* A CUDA-only kind cannot be retried: its injected fault fails the job with that message
     * (no retry, no warning). A task already running fails afterwards, and twi_job_fail and a
     * cancel come later still: the first status and message stay. */
    tw_runtime *rt = make_rt("cuda", 2, TW_LOG_WARN);
    tw_worker gw;
    tw_job *job = gpu_job(rt, &gw, "sticky");
    tw_task *slow = NULL, *t = NULL;
    tw_tile *tile = new_tile(rt);

    cr_assert(eq(int, twi_task_create(job, &late_fail_kind, NULL, NULL, &slow), TW_OK));
    cr_assert(eq(int, twi_task_submit(slow), TW_OK));
    twi_task_release(slow);
    while (!atomic_load(&slow_started))
        twtest_sleep_ms(1);
    cr_assert(eq(int, twi_task_create(job, &cuda_only_kind, NULL, NULL, &t), TW_OK));
    cr_assert(eq(int, twi_task_add_tile(t, tile, TW_W), TW_OK));
    run_on_gpu(&gw, t);
    twi_task_release(t);
    twi_job_seal(job);
    cr_assert(eq(int, tw_job_wait(job, 10000), TW_E_DEVICE));
    (void)twi_job_fail(job, TW_E_FORMAT, "test: after the end");
    tw_job_cancel(job);
    cr_assert(eq(int, tw_job_wait(job, 0), TW_E_DEVICE));
    cr_assert(eq(str, (char *)tw_job_get_error(job),
                 "cuda: injected fault in task test.cuda_only on GPU 0"));
    cr_assert(eq(u64, retried(rt, &gw), 0));
    cr_assert(eq(int, count_logs(TW_LOG_WARN, "retrying", NULL), 0));
    cr_assert(eq(int, atomic_load(&commits_cuda) + atomic_load(&commits_cpu), 0));
    tw_job_destroy(job);
    twi_tile_release(tile);
    tw_runtime_destroy(rt);
}

Test(fault, stopping_job_is_not_retried)
{
    /* A job canceled before its task reaches the GPU worker: the task is dropped, neither run
     * nor retried, and the job reports TW_E_CANCELED. */
    tw_runtime *rt = make_rt("cuda", 1, TW_LOG_WARN);
    tw_worker gw;
    tw_job *job = gpu_job(rt, &gw, "canceled");
    fill_arg args[1];
    tw_tile **tiles;

    tw_job_cancel(job);
    tiles = run_fill_tasks(rt, job, &gw, &fill_kind, 1, args, NULL);
    twi_job_seal(job);
    cr_assert(eq(int, tw_job_wait(job, 10000), TW_E_CANCELED));
    cr_assert(tile_is(tiles[0], 0));
    cr_assert(eq(u64, retried(rt, &gw), 0));
    cr_assert(eq(int, count_logs(TW_LOG_WARN, "retrying", NULL), 0));
    tw_job_destroy(job);
    free_tiles(tiles, 1);
    tw_runtime_destroy(rt);
}

/* ---- cancel latency of real operations */

/* A deterministic texture with bright blobs and dark holes, so that every op has work. */
static uint8_t *
texture(int64_t w, int64_t h)
{
    uint8_t *p = malloc((size_t)(w * h));
    uint64_t s = 0x9e3779b97f4a7c15ull;

    cr_assert(p != NULL);
    for (int64_t y = 0; y < h; y++)
        for (int64_t x = 0; x < w; x++) {
            unsigned v = (unsigned)(((x * 7) ^ (y * 13)) & 0x7f) + (twtest_rnd(&s, 64));
            if (((x / 97) + (y / 89)) % 5 == 0)
                v = 255 - v / 4;
            p[y * w + x] = (uint8_t)v;
        }
    return p;
}

typedef enum { OP_FILL_HOLES, OP_EDT, OP_AREA_OPEN, OP_RECON, OP_MAXTREE, OP_TOS } cancel_op;

static tw_job *
submit_op(tw_runtime *rt, cancel_op op, uint8_t *img, void *out, int64_t w, int64_t h)
{
    tw_job *job = NULL;
    tw_error err = {0};
    tw_status st = TW_E_INTERNAL;

    if (op == OP_FILL_HOLES) {
        tw_mrecon_filter_opts o;

        tw_mrecon_filter_opts_init(&o);
        o.image = (tw_host_image){img, w, h, 0, TW_U8};
        o.result = (tw_host_image){out, w, h, 0, TW_U8};
        st = tw_fill_holes_submit(rt, &o, &job, &err);
    } else if (op == OP_RECON) {
        tw_mrecon_filter_opts o;

        tw_mrecon_filter_opts_init(&o);
        o.image = (tw_host_image){img, w, h, 0, TW_U8};
        o.result = (tw_host_image){out, w, h, 0, TW_U8};
        o.radius = 3;
        st = tw_open_rec_submit(rt, &o, &job, &err);
    } else if (op == OP_EDT) {
        tw_edt_opts o;

        tw_edt_opts_init(&o);
        o.image = (tw_host_image){img, w, h, 0, TW_U8};
        o.result = (tw_host_image){out, w, h, 0, TW_U16};
        o.format = TW_EDT_U16;
        o.threshold = 100;
        st = tw_edt_submit(rt, &o, &job, &err);
    } else if (op == OP_MAXTREE) {
        /* out: w h uint32 (the parent image) */
        tw_maxtree_opts o;

        tw_maxtree_opts_init(&o);
        o.image = (tw_host_image){img, w, h, 0, TW_U8};
        o.parent = (tw_host_image){out, w, h, 0, TW_U32};
        st = tw_maxtree_submit(rt, &o, &job, &err);
    } else if (op == OP_TOS) {
        tw_tos_opts o;

        tw_tos_opts_init(&o);
        o.image = (tw_host_image){img, w, h, 0, TW_U8};
        o.parent = (tw_host_image){out, w, h, 0, TW_U32};
        st = tw_tos_submit(rt, &o, &job, &err);
    } else {
        tw_attr_filter_opts o;

        tw_attr_filter_opts_init(&o);
        o.image = (tw_host_image){img, w, h, 0, TW_U8};
        o.result = (tw_host_image){out, w, h, 0, TW_U8};
        o.threshold = 50;
        st = tw_attr_filter_submit(rt, &o, &job, &err);
    }
    cr_assert(eq(int, st, TW_OK), "%s", err.message);
    return job;
}

Test(cancel, real_jobs_stop_soon_after_a_cancel, .timeout = TWTEST_TIMEOUT(600))
{
    /* Reconstruction filters, the EDT, an area opening, the max-tree and the tree of shapes of
     * an 8192 x 6144 image run for seconds on two CPU workers: canceled 300 ms after
     * submission, each ends with TW_E_CANCELED and no error message, soon after the cancel (the
     * longest task must end: none may run for seconds; max-tree and tree of shapes stop inside
     * their kernels). The bound is generous (a loaded machine under sanitizers); the measured
     * latency is logged, and bench/cancel.py measures it on the CLI (docs/reliability.md). */
    static const char *const names[] = {"fill-holes", "edt", "area-open", "open-rec", "maxtree",
                                        "tos"};
    const int64_t w = 8192, h = 6144;
    const double bound = 5.0 * TWTEST_SLOWDOWN;
    uint8_t *img = texture(w, h);
    uint32_t *out = malloc((size_t)(w * h) * sizeof *out);
    tw_runtime *rt = make_rt("", 2, TW_LOG_ERROR);

    cr_assert(out != NULL);
    for (int op = 0; op < 6; op++) {
        tw_job *job = submit_op(rt, (cancel_op)op, img, out, w, h);
        double t0, t1;
        tw_status st;

        twtest_sleep_ms(300);
        cr_assert(eq(int, tw_job_wait(job, 0), TW_E_TIMEOUT), "%s ended within 300 ms: make "
                  "the image larger", names[op]);
        t0 = twtest_now_s();
        tw_job_cancel(job);
        st = tw_job_wait(job, (int)(1000 * 2 * bound));
        t1 = twtest_now_s();
        cr_log_info("%s: ended %.0f ms after the cancel", names[op], 1e3 * (t1 - t0));
        cr_assert(eq(int, st, TW_E_CANCELED), "%s: %s (%.2f s after the cancel)", names[op],
                  tw_status_string(st), t1 - t0);
        cr_assert(tw_job_get_error(job) == NULL, "%s: %s", names[op], tw_job_get_error(job));
        cr_assert(t1 - t0 < bound, "%s: ended %.2f s after the cancel (bound %.0f s)", names[op],
                  t1 - t0, bound);
        tw_job_destroy(job);
    }
    tw_runtime_destroy(rt);
    free(out);
    free(img);
}
