/* SPDX-License-Identifier: MIT */
/* tilewave tests: the host memory budget (runtime.host_mem): accounting, gating, spilling. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <dirent.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Criterion 2.4 assertions store into a 1-bit field, which -Wconversion flags at every use. */
#pragma GCC diagnostic ignored "-Wconversion"

#include "tw_internal.h"
#include "twtest.h"
#include "twtest_rt.h"

/* ---- helpers */

static atomic_int warnings, escape_warnings;

static void
count_log(tw_log_level level, const char *domain, const char *message, void *user)
{
    (void)domain;
    (void)user;
    if (level <= TW_LOG_WARN) {
        atomic_fetch_add(&warnings, 1);
        if (strstr(message, "working set of task"))
            atomic_fetch_add(&escape_warnings, 1);
    }
}

/* A runtime of `workers` CPU workers with host_mem = `budget` spilling to `dir` (NULL: the
 * default); the TILEWAVE_* environment applies to the other keys (a policy, say). */
static tw_status
make_runtime(int workers, const char *budget, const char *dir, tw_runtime **rt, tw_error *err)
{
    char n[16];

    atomic_store(&warnings, 0);
    atomic_store(&escape_warnings, 0);
    tw_log_set_handler(count_log, NULL);
    snprintf(n, sizeof n, "%d", workers);
    return twtest_runtime_kv(true, (const char *const[]){"runtime.gpus", "none",
                                                         "runtime.cpu_workers", n,
                                                         "runtime.models", "none",
                                                         "runtime.host_mem", budget,
                                                         "runtime.scratch_dir", dir, NULL},
                             rt, err);
}

static tw_runtime *
runtime_ok(int workers, const char *budget, const char *dir)
{
    tw_runtime *rt = NULL;
    tw_error err = {0};

    cr_assert(eq(int, make_runtime(workers, budget, dir, &rt, &err), TW_OK), "%s", err.message);
    return rt;
}

static tw_memory_info
memory(const tw_runtime *rt)
{
    tw_memory_info mi;

    cr_assert(eq(int, tw_runtime_get_memory(rt, &mi), TW_OK));
    return mi;
}

/* Open file descriptors of this process on a file with no name: the spill file, made with
 * O_TMPFILE or unlinked at once (twi_scratch_open), is such a file. */
static int
nameless_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    int n = 0;

    cr_assert(d != NULL);
    while ((e = readdir(d))) {
        char path[300], target[PATH_MAX];
        ssize_t len;

        snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
        if ((len = readlink(path, target, sizeof target - 1)) <= 0)
            continue;
        target[len] = '\0';
        n += strstr(target, " (deleted)") != NULL;
    }
    closedir(d);
    return n;
}

/* The test runner's own nameless files (Criterion's arena in /dev/shm, the ThreadSanitizer
 * shim's captured output), counted when each test starts. */
static int fds_before;

static void
count_fds_before(void)
{
    fds_before = nameless_fds();
}

TestSuite(budget, .init = count_fds_before);

/* Spill files this test's runtimes hold open. */
static int
spill_fds(void)
{
    return nameless_fds() - fds_before;
}

/* ---- accounting */

Test(budget, accounting_counts_every_tile_byte_without_a_budget)
{
    /* Without a budget (0) pixels are allocated with the tile: live bytes are the sum of the
     * sizes of the tiles alive through creates and releases, the peak their maximum; pins
     * are no-ops and the view is valid at once. */
    tw_runtime *rt = runtime_ok(1, "0", NULL);
    tw_tile *t[5] = {0};
    int64_t sizes[5], sum = 0, peak = 0;
    tw_memory_info mi;

    for (int i = 0; i < 5; i++) {
        cr_assert(eq(int, twi_tile_create(rt, 100 + 37 * i, 3 + i, 1 + i % 3, TW_U16, &t[i]),
                     TW_OK));
        sizes[i] = (int64_t)(100 + 37 * i) * (3 + i) * (1 + i % 3) * 2;
        sum += sizes[i];
        peak = sum;
        cr_assert(eq(i64, memory(rt).host_live, sum));
    }
    cr_assert(eq(int, twi_tile_pin(t[0]), TW_OK));
    cr_assert(twi_tile_host_view(t[0]).data != NULL);
    twi_tile_unpin(t[0]);
    twi_tile_acquire(t[1]);
    twi_tile_release(t[1]); /* not the last reference: nothing freed */
    cr_assert(eq(i64, memory(rt).host_live, sum));
    for (int i = 0; i < 5; i += 2) {
        twi_tile_release(t[i]);
        sum -= sizes[i];
        cr_assert(eq(i64, memory(rt).host_live, sum));
    }
    twi_tile_release(t[1]);
    twi_tile_release(t[3]);
    mi = memory(rt);
    cr_assert(eq(i64, mi.host_live, 0));
    cr_assert(eq(i64, mi.host_peak, peak));
    cr_assert(eq(i64, mi.host_budget, 0));
    cr_assert(eq(u64, mi.spills, 0));
    cr_assert(eq(int, spill_fds(), 0)); /* no budget: no scratch file */
    tw_runtime_destroy(rt);
}

Test(budget, spilled_tile_comes_back_exactly_and_live_counts_resident_pixels)
{
    /* With a budget a tile has pixels only from its first pin; live counts resident pixels.
     * Pinning a second tile that does not fit beside an idle first one spills the first to
     * the scratch file; pinning it again reads it back byte for byte. The scratch file is
     * never visible in its directory and is closed with the runtime. */
    char *dir = twtest_tmpdir();
    tw_runtime *rt = runtime_ok(1, "1M", dir);
    tw_tile *a = NULL, *b = NULL;
    tw_tile_view v;
    tw_memory_info mi;
    const int64_t bytes = 600 * 1024;

    cr_assert(eq(int, spill_fds(), 1));
    cr_assert(eq(int, twtest_count_entries(dir), 0)); /* unlinked at once */
    cr_assert(eq(int, twi_tile_create(rt, 600, 1024, 1, TW_U8, &a), TW_OK));
    cr_assert(eq(int, twi_tile_create(rt, 300, 1024, 1, TW_U16, &b), TW_OK));
    cr_assert(eq(i64, memory(rt).host_live, 0));
    cr_assert(eq(int, twi_tile_pin(a), TW_OK));
    cr_assert(eq(i64, memory(rt).host_live, bytes));
    v = twi_tile_host_view(a);
    for (int64_t i = 0; i < bytes; i++)
        ((uint8_t *)v.data)[i] = (uint8_t)(i * 7 + i / 1000);
    twi_tile_unpin(a);
    cr_assert(eq(i64, memory(rt).host_live, bytes)); /* idle, still resident */

    cr_assert(eq(int, twi_tile_pin(b), TW_OK)); /* 1.2M > 1M: a goes to the scratch file */
    mi = memory(rt);
    cr_assert(eq(i64, mi.host_live, bytes));
    cr_assert(eq(u64, mi.spills, 1));
    cr_assert(eq(u64, mi.spill_bytes, (uint64_t)bytes));
    cr_assert(eq(i64, mi.host_spilled, bytes));
    memset(twi_tile_host_view(b).data, 0xee, (size_t)bytes);
    twi_tile_unpin(b);

    cr_assert(eq(int, twi_tile_pin_read(a), TW_OK)); /* b is spilled, a read back */
    v = twi_tile_host_view(a);
    for (int64_t i = 0; i < bytes; i++)
        cr_assert(eq(u8, ((uint8_t *)v.data)[i], (uint8_t)(i * 7 + i / 1000)), "byte %lld",
                  (long long)i);
    mi = memory(rt);
    cr_assert(eq(u64, mi.reloads, 1));
    cr_assert(eq(u64, mi.reload_bytes, (uint64_t)bytes));
    cr_assert(eq(u64, mi.spills, 2));
    cr_assert(le(i64, mi.host_peak, 1024 * 1024));
    twi_tile_unpin(a);
    /* a read-only pin keeps a's copy in the file valid: spilling it again writes nothing */
    cr_assert(eq(int, twi_tile_pin(b), TW_OK));
    cr_assert(eq(u8, ((uint8_t *)twi_tile_host_view(b).data)[12345], 0xee));
    twi_tile_unpin(b);
    mi = memory(rt);
    cr_assert(eq(u64, mi.spills, 2));
    cr_assert(eq(u64, mi.over_budget, 0));
    cr_assert(eq(int, twtest_count_entries(dir), 0));
    twi_tile_release(a);
    twi_tile_release(b);
    mi = memory(rt);
    cr_assert(eq(i64, mi.host_live, 0));
    cr_assert(eq(i64, mi.host_spilled, 0));
    tw_runtime_destroy(rt);
    cr_assert(eq(int, spill_fds(), 0));
    cr_assert(eq(int, twtest_count_entries(dir), 0));
    twtest_rmtree(dir);
    free(dir);
}

/* ---- a synthetic pipeline: load -> work -> store per tile */

#define PW 256
#define PH 256
#define TB ((int64_t)PW * PH) /* bytes of one u8 tile */

typedef struct pipe_job {
    uint8_t *result;
    atomic_int loaded_unconsumed, max_unconsumed;
} pipe_job;

typedef struct pipe_arg {
    pipe_job *p;
    int64_t i;
} pipe_arg;

static uint8_t
pattern(int64_t i, int32_t x, int32_t y)
{
    return (uint8_t)(i * 31 + x * 7 + y * 13 + (x ^ y));
}

static tw_status
pipe_load(tw_task_ctx *ctx, void *arg)
{
    pipe_arg *a = arg;
    tw_tile_view v = twi_ctx_view(ctx, 0);
    int n = atomic_fetch_add(&a->p->loaded_unconsumed, 1) + 1, m;

    while (n > (m = atomic_load(&a->p->max_unconsumed)) &&
           !atomic_compare_exchange_weak(&a->p->max_unconsumed, &m, n))
        ;
    for (int32_t y = 0; y < v.h; y++)
        for (int32_t x = 0; x < v.w; x++)
            ((uint8_t *)v.data)[y * v.stride + x] = pattern(a->i, x, y);
    return TW_OK;
}

static tw_status
pipe_work(tw_task_ctx *ctx, void *arg)
{
    pipe_arg *a = arg;
    tw_tile_view in = twi_ctx_view(ctx, 0), out = twi_ctx_view(ctx, 1);

    for (int32_t y = 0; y < in.h; y++)
        for (int32_t x = 0; x < in.w; x++)
            ((uint8_t *)out.data)[y * out.stride + x] =
                (uint8_t)(((uint8_t *)in.data)[y * in.stride + x] * 3 + 1);
    atomic_fetch_sub(&a->p->loaded_unconsumed, 1);
    return TW_OK;
}

static tw_status
pipe_store(tw_task_ctx *ctx, void *arg)
{
    pipe_arg *a = arg;
    tw_tile_view v = twi_ctx_view(ctx, 0);

    for (int32_t y = 0; y < v.h; y++)
        memcpy(a->p->result + a->i * TB + y * PW, (uint8_t *)v.data + y * v.stride, PW);
    return TW_OK;
}

static int64_t
pipe_load_bytes(const void *arg)
{
    (void)arg;
    return TB; /* the output tile its data becomes */
}

static const tw_task_kind load_kind = {
    .name = "test.load",
    .devices = TW_DEVICE_CPU,
    .cpu = pipe_load,
    .host_bytes = pipe_load_bytes,
    .load = true,
};
static const tw_task_kind work_kind = {.name = "test.work", .devices = TW_DEVICE_CPU,
                                       .cpu = pipe_work};
static const tw_task_kind store_kind = {.name = "test.store", .devices = TW_DEVICE_CPU,
                                        .cpu = pipe_store};

/* Reads every byte of its tile (in the sum, which nobody checks: the reads are the point). */
static tw_status
touch(tw_task_ctx *ctx, void *arg)
{
    tw_tile_view v = twi_ctx_view(ctx, 0);
    unsigned sum = 0;

    (void)arg;
    for (int32_t y = 0; y < v.h; y++)
        for (int32_t x = 0; x < v.w; x++)
            sum += ((uint8_t *)v.data)[y * v.stride + x];
    return sum == UINT_MAX ? TW_E_INTERNAL : TW_OK;
}

static const tw_task_kind touch_kind = {.name = "test.touch", .devices = TW_DEVICE_CPU,
                                        .cpu = touch};

static void
check_pipeline(const pipe_job *p, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        for (int32_t y = 0; y < PH; y++)
            for (int32_t x = 0; x < PW; x++)
                cr_assert(eq(u8, p->result[i * TB + y * PW + x],
                             (uint8_t)(pattern(i, x, y) * 3 + 1)),
                          "tile %lld pixel (%d, %d)", (long long)i, x, y);
}

/* Submit n pipelines at once (every tile created up front), wait and check the results, kept
 * in p->result (malloc'd). */
static void
run_pipeline(tw_runtime *rt, int64_t n, pipe_job *p)
{
    pipe_arg *args = calloc((size_t)n, sizeof *args);
    tw_job *job = NULL;

    p->result = malloc((size_t)(n * TB));
    cr_assert(args != NULL && p->result != NULL);
    cr_assert(eq(int, twi_job_create(rt, "pipe", &job), TW_OK));
    for (int64_t i = 0; i < n; i++) {
        tw_tile *in = NULL, *out = NULL;
        tw_task *ld = NULL, *wk = NULL, *st = NULL;

        args[i].p = p;
        args[i].i = i;
        cr_assert(eq(int, twi_tile_create(rt, PW, PH, 1, TW_U8, &in), TW_OK));
        cr_assert(eq(int, twi_tile_create(rt, PW, PH, 1, TW_U8, &out), TW_OK));
        cr_assert(eq(int, twi_task_create(job, &load_kind, &args[i], NULL, &ld), TW_OK));
        cr_assert(eq(int, twi_task_create(job, &work_kind, &args[i], NULL, &wk), TW_OK));
        cr_assert(eq(int, twi_task_create(job, &store_kind, &args[i], NULL, &st), TW_OK));
        cr_assert(eq(int, twi_task_add_tile(ld, in, TW_W), TW_OK));
        cr_assert(eq(int, twi_task_add_tile(wk, in, TW_R), TW_OK));
        cr_assert(eq(int, twi_task_add_tile(wk, out, TW_W), TW_OK));
        cr_assert(eq(int, twi_task_add_tile(st, out, TW_R), TW_OK));
        cr_assert(eq(int, twi_task_depend(wk, ld), TW_OK));
        cr_assert(eq(int, twi_task_depend(st, wk), TW_OK));
        cr_assert(eq(int, twi_task_submit(st), TW_OK));
        cr_assert(eq(int, twi_task_submit(wk), TW_OK));
        cr_assert(eq(int, twi_task_submit(ld), TW_OK));
        twi_task_release(ld);
        twi_task_release(wk);
        twi_task_release(st);
        twi_tile_release(in); /* the tasks hold the rest: a tile goes with its last task */
        twi_tile_release(out);
    }
    twi_job_seal(job);
    cr_assert(eq(int, tw_job_wait(job, -1), TW_OK), "%s", tw_job_get_error(job));
    tw_job_destroy(job);
    free(args);
    check_pipeline(p, n);
}

Test(budget, pipeline_ten_times_the_budget_stays_within_it)
{
    /* 160 load -> work -> store pipelines of 64 KiB tiles (20 MiB of tiles) under a 1 MiB
     * budget, every task submitted at once, 3 workers: the results are exact, the high-water
     * mark of tile pixels never exceeds the budget (exactly: every task's working set fits,
     * so nothing is ever over it), and loads wait for the work on what they read: at most
     * budget / tile loaded tiles wait for their work at any time. */
    const int64_t n = 160, budget = 1024 * 1024;
    char *dir = twtest_tmpdir();
    tw_runtime *rt = runtime_ok(3, "1M", dir);
    pipe_job p = {0};
    tw_memory_info mi;

    run_pipeline(rt, n, &p);
    mi = memory(rt);
    cr_assert(le(i64, mi.host_peak, budget), "peak %lld", (long long)mi.host_peak);
    cr_assert(gt(i64, mi.host_peak, 0));
    cr_assert(eq(u64, mi.over_budget, 0));
    cr_assert(eq(i64, mi.host_live, 0));
    cr_assert(eq(i64, mi.host_spilled, 0));
    cr_assert(le(int, atomic_load(&p.max_unconsumed), (int)(budget / TB)));
    cr_assert(eq(int, atomic_load(&escape_warnings), 0));
    tw_runtime_destroy(rt);
    cr_assert(eq(int, twtest_count_entries(dir), 0));
    twtest_rmtree(dir);
    free(dir);
    free(p.result);
}

Test(budget, pipeline_on_one_worker_never_spills)
{
    /* One worker pops in submission order, so every load is ahead of every work in the
     * queue: the loads' host_bytes (the output tile) keep room for the work on what they
     * read, so the reader stops instead of filling the budget, and nothing is spilled. */
    const int64_t n = 40, budget = 512 * 1024;
    tw_runtime *rt = runtime_ok(1, "512K", NULL);
    pipe_job p = {0};
    tw_memory_info mi;

    run_pipeline(rt, n, &p);
    mi = memory(rt);
    cr_assert(le(i64, mi.host_peak, budget));
    cr_assert(eq(u64, mi.spills, 0));
    cr_assert(eq(u64, mi.over_budget, 0));
    cr_assert(le(int, atomic_load(&p.max_unconsumed), (int)(budget / (2 * TB))));
    tw_runtime_destroy(rt);
    free(p.result);
}

Test(budget, task_larger_than_the_budget_runs_alone_with_one_warning)
{
    /* A task whose tile alone exceeds the budget is not held back forever: when nothing else
     * runs it runs, over the budget, with one warning, counted in over_budget; the bound is
     * then its working set. */
    tw_runtime *rt = runtime_ok(2, "64K", NULL);
    tw_memory_info mi;
    tw_tile *big = NULL;
    tw_job *job = NULL;
    tw_task *t = NULL;

    cr_assert(eq(int, twi_job_create(rt, "big", &job), TW_OK));
    cr_assert(eq(int, twi_tile_create(rt, 512, 512, 1, TW_U8, &big), TW_OK));
    cr_assert(eq(int, twi_task_create(job, &touch_kind, NULL, NULL, &t), TW_OK));
    cr_assert(eq(int, twi_task_add_tile(t, big, TW_R), TW_OK));
    cr_assert(eq(int, twi_task_submit(t), TW_OK));
    twi_task_release(t);
    twi_tile_release(big);
    twi_job_seal(job);
    cr_assert(eq(int, tw_job_wait(job, -1), TW_OK), "%s", tw_job_get_error(job));
    tw_job_destroy(job);
    mi = memory(rt);
    cr_assert(eq(i64, mi.host_peak, 512 * 512));
    cr_assert(eq(u64, mi.over_budget, 1)); /* its one allocation */
    cr_assert(eq(int, atomic_load(&escape_warnings), 1));
    cr_assert(eq(i64, mi.host_live, 0));
    tw_runtime_destroy(rt);
}

/* ---- operations through the public API */

typedef struct img16 {
    uint16_t *mask, *marker, *out;
    int64_t w, h;
} img16;

/* A mask of smooth hills plus noise, a marker of a few seeds under it. */
static void
make_images(img16 *im, int64_t w, int64_t h, uint64_t seed)
{
    uint64_t s = seed;

    im->w = w;
    im->h = h;
    im->mask = malloc((size_t)(w * h) * 2);
    im->marker = calloc((size_t)(w * h), 2);
    im->out = malloc((size_t)(w * h) * 2);
    cr_assert(im->mask && im->marker && im->out);
    for (int64_t y = 0; y < h; y++)
        for (int64_t x = 0; x < w; x++) {
            int64_t v = 20000 + (int64_t)(15000.0 * ((double)((x * 37 + y * 91) % 512) / 512.0)) +
                        (int64_t)twtest_rnd(&s, 20000) - ((x / 97 + y / 61) % 3 == 0 ? 15000 : 0);
            im->mask[y * w + x] = (uint16_t)(v < 0 ? 0 : v > 65535 ? 65535 : v);
        }
    for (int i = 0; i < 12; i++) {
        int64_t p = (int64_t)twtest_rnd(&s, (uint32_t)(w * h));
        im->marker[p] = im->mask[p];
    }
}

static void
free_images(img16 *im)
{
    free(im->mask);
    free(im->marker);
    free(im->out);
}

static tw_status
reconstruct_tiles(tw_runtime *rt, img16 *im, tw_mrecon_stats *stats, int32_t tile)
{
    tw_mrecon_opts o;
    tw_job *job = NULL;
    tw_error err = {0};

    tw_mrecon_opts_init(&o);
    o.marker_image = (tw_host_image){im->marker, im->w, im->h, 0, TW_U16};
    o.mask_image = (tw_host_image){im->mask, im->w, im->h, 0, TW_U16};
    o.result = (tw_host_image){im->out, im->w, im->h, 0, TW_U16};
    o.tile_w = o.tile_h = tile;
    o.stats = stats;
    return twtest_job_finish(tw_mrecon_submit(rt, &o, &job, &err), &job);
}

static tw_status
reconstruct(tw_runtime *rt, img16 *im, tw_mrecon_stats *stats)
{
    return reconstruct_tiles(rt, im, stats, 64);
}

Test(budget, reconstruction_six_times_the_budget_matches_the_unbudgeted_run)
{
    /* Reconstruction keeps every marker and mask tile until it converges: 640 x 480 u16 under
     * 64x64 tiles is 1.2 MB of tiles, six times a 200 KiB budget. It spills and reads back
     * (traffic > 0), never holds more than the budget, and gives the bytes of the run without
     * a budget; the scratch file never shows in its directory and is gone afterwards. */
    char *dir = twtest_tmpdir();
    img16 a, b;
    tw_runtime *rt;
    tw_mrecon_stats sa, sb;
    tw_memory_info mi;

    make_images(&a, 640, 480, 42);
    make_images(&b, 640, 480, 42);
    rt = runtime_ok(2, "0", NULL);
    tw_mrecon_stats_init(&sa);
    cr_assert(eq(int, reconstruct(rt, &a, &sa), TW_OK));
    cr_assert(eq(u64, memory(rt).spills, 0));
    tw_runtime_destroy(rt);

    rt = runtime_ok(2, "200K", dir);
    tw_mrecon_stats_init(&sb);
    cr_assert(eq(int, reconstruct(rt, &b, &sb), TW_OK));
    mi = memory(rt);
    cr_assert(gt(u64, mi.spill_bytes, 0));
    cr_assert(gt(u64, mi.reload_bytes, 0));
    cr_assert(le(i64, mi.host_peak, 200 * 1024), "peak %lld", (long long)mi.host_peak);
    cr_assert(eq(u64, mi.over_budget, 0));
    cr_assert(eq(int, twtest_count_entries(dir), 0));
    tw_runtime_destroy(rt);
    cr_assert(gt(i64, sa.rounds, 1)); /* borders were crossed: BP pinned tiles */
    cr_assert(eq(int, memcmp(a.out, b.out, (size_t)(a.w * a.h) * 2), 0));
    cr_assert(eq(int, spill_fds(), 0));
    cr_assert(eq(int, twtest_count_entries(dir), 0));
    free_images(&a);
    free_images(&b);
    twtest_rmtree(dir);
    free(dir);
}

Test(budget, reconstruction_with_a_team_in_border_propagation_stays_within_the_budget)
{
    /* With 1,200 tiles of 16x16 (u16) the budget of 200 KiB (a sixth of the tiles) leaves room
     * for several threads' pins in BP, which then runs on the 4 workers' cores, each thread
     * pinning the four tiles of its pair against BP's reservation: it spills, never holds more
     * than the budget, never allocates beyond it, and gives the bytes of the unbudgeted run. */
    char *dir = twtest_tmpdir();
    img16 a, b;
    tw_runtime *rt;
    tw_mrecon_stats sa, sb;
    tw_memory_info mi;

    make_images(&a, 640, 480, 43);
    make_images(&b, 640, 480, 43);
    rt = runtime_ok(4, "0", NULL);
    tw_mrecon_stats_init(&sa);
    cr_assert(eq(int, reconstruct_tiles(rt, &a, &sa, 16), TW_OK));
    tw_runtime_destroy(rt);

    rt = runtime_ok(4, "200K", dir);
    tw_mrecon_stats_init(&sb);
    cr_assert(eq(int, reconstruct_tiles(rt, &b, &sb, 16), TW_OK));
    mi = memory(rt);
    cr_assert(gt(u64, mi.spill_bytes, 0));
    cr_assert(le(i64, mi.host_peak, 200 * 1024), "peak %lld", (long long)mi.host_peak);
    cr_assert(eq(u64, mi.over_budget, 0));
    tw_runtime_destroy(rt);
    cr_assert(gt(i64, sa.rounds, 1));
    cr_assert(eq(int, memcmp(a.out, b.out, (size_t)(a.w * a.h) * 2), 0));
    cr_assert(eq(int, twtest_count_entries(dir), 0));
    free_images(&a);
    free_images(&b);
    twtest_rmtree(dir);
    free(dir);
}

static tw_status
open_rec(tw_runtime *rt, img16 *im)
{
    tw_mrecon_filter_opts o;
    tw_job *job = NULL;
    tw_error err = {0};

    tw_mrecon_filter_opts_init(&o);
    o.image = (tw_host_image){im->mask, im->w, im->h, 0, TW_U16};
    o.result = (tw_host_image){im->out, im->w, im->h, 0, TW_U16};
    o.radius = 40; /* wider than a tile: the prep pins up to 3 x 3 neighbouring masks */
    o.tile_w = o.tile_h = 64;
    return twtest_job_finish(tw_open_rec_submit(rt, &o, &job, &err), &job);
}

Test(budget, opening_by_reconstruction_under_a_budget_matches_the_unbudgeted_run)
{
    /* Opening by reconstruction erodes each tile from the masks of its neighbours (pinned by
     * the prep task, outside their own tasks) before reconstructing: under a budget of a sixth
     * of its tiles it gives the unbudgeted bytes within the budget. */
    img16 a, b;
    tw_runtime *rt;
    tw_memory_info mi;

    make_images(&a, 640, 480, 3);
    make_images(&b, 640, 480, 3);
    rt = runtime_ok(2, "0", NULL);
    cr_assert(eq(int, open_rec(rt, &a), TW_OK));
    tw_runtime_destroy(rt);
    rt = runtime_ok(2, "200K", NULL);
    cr_assert(eq(int, open_rec(rt, &b), TW_OK));
    mi = memory(rt);
    cr_assert(gt(u64, mi.reload_bytes, 0));
    cr_assert(le(i64, mi.host_peak, 200 * 1024), "peak %lld", (long long)mi.host_peak);
    cr_assert(eq(u64, mi.over_budget, 0));
    tw_runtime_destroy(rt);
    cr_assert(eq(int, memcmp(a.out, b.out, (size_t)(a.w * a.h) * 2), 0));
    free_images(&a);
    free_images(&b);
}

static tw_status
distance(tw_runtime *rt, const img16 *im, float *out)
{
    tw_edt_opts o;
    tw_job *job = NULL;
    tw_error err = {0};

    tw_edt_opts_init(&o);
    o.image = (tw_host_image){im->mask, im->w, im->h, 0, TW_U16};
    o.result = (tw_host_image){out, im->w, im->h, 0, TW_F32};
    o.threshold = 26000;
    o.tile_w = 64;
    o.tile_h = 16;
    return twtest_job_finish(tw_edt_submit(rt, &o, &job, &err), &job);
}

Test(budget, distance_transform_under_a_small_budget_matches_the_unbudgeted_run)
{
    /* The EDT streams bands (load -> band -> store): under a budget of a few bands it gives
     * the bytes of the unbudgeted run and never holds more than the budget. */
    img16 a;
    float *d0, *d1;
    tw_runtime *rt;
    tw_memory_info mi;
    size_t n;

    make_images(&a, 640, 480, 7);
    n = (size_t)(a.w * a.h);
    d0 = malloc(n * sizeof *d0);
    d1 = malloc(n * sizeof *d1);
    cr_assert(d0 && d1);
    rt = runtime_ok(2, "0", NULL);
    cr_assert(eq(int, distance(rt, &a, d0), TW_OK));
    tw_runtime_destroy(rt);
    rt = runtime_ok(2, "160K", NULL); /* a band: 10 KiB in, 40 KiB out */
    cr_assert(eq(int, distance(rt, &a, d1), TW_OK));
    mi = memory(rt);
    cr_assert(le(i64, mi.host_peak, 160 * 1024), "peak %lld", (long long)mi.host_peak);
    cr_assert(eq(u64, mi.over_budget, 0));
    tw_runtime_destroy(rt);
    cr_assert(eq(int, memcmp(d0, d1, n * sizeof *d0), 0));
    free(d0);
    free(d1);
    free_images(&a);
}

/* ---- scratch directory */

Test(budget, unwritable_scratch_dir_is_a_clear_error_at_start)
{
    /* With a budget the scratch file is made when the runtime starts: a directory where it
     * cannot be made fails the start with a message naming it and the key. Without a budget
     * the directory is not used. */
    char *dir = twtest_tmpdir();
    char *file = twtest_path(dir, "not-a-dir");
    tw_runtime *rt = NULL;
    tw_error err = {0};
    FILE *f = fopen(file, "w");

    cr_assert(f != NULL);
    fclose(f);
    cr_assert(eq(int, make_runtime(1, "1M", file, &rt, &err), TW_E_IO));
    cr_assert(rt == NULL);
    cr_assert(strstr(err.message, "not-a-dir") != NULL, "%s", err.message);
    cr_assert(strstr(err.message, "runtime.scratch_dir") != NULL, "%s", err.message);
    cr_assert(eq(int, make_runtime(1, "1M", "/nonexistent/tilewave", &rt, &err), TW_E_IO));
    cr_assert(strstr(err.message, "/nonexistent/tilewave") != NULL, "%s", err.message);
    cr_assert(eq(int, make_runtime(1, "0", file, &rt, &err), TW_OK), "%s", err.message);
    tw_runtime_destroy(rt);
    cr_assert(eq(int, spill_fds(), 0));
    twtest_rmtree(dir);
    free(file);
    free(dir);
}

Test(budget, config_key_and_default)
{
    /* runtime.host_mem takes byte counts with suffixes and defaults to 0 (unlimited);
     * runtime.scratch_dir defaults to empty ($TMPDIR, else /tmp). */
    tw_config *cfg = NULL;
    int64_t v = -1;
    const char *s = NULL;

    cr_assert(eq(int, tw_config_create(&cfg), TW_OK));
    cr_assert(eq(int, tw_config_get_int(cfg, "runtime.host_mem", &v), TW_OK));
    cr_assert(eq(i64, v, 0));
    cr_assert(eq(int, tw_config_get_string(cfg, "runtime.scratch_dir", &s), TW_OK));
    cr_assert(eq(str, (char *)s, ""));
    cr_assert(eq(int, tw_config_set(cfg, "runtime.host_mem", "3G", TW_CONFIG_SET, NULL), TW_OK));
    cr_assert(eq(int, tw_config_get_int(cfg, "runtime.host_mem", &v), TW_OK));
    cr_assert(eq(i64, v, (int64_t)3 << 30));
    cr_assert(eq(int, tw_config_set(cfg, "runtime.host_mem", "-1", TW_CONFIG_SET, NULL),
                 TW_E_INVALID));
    tw_config_destroy(cfg);
}
