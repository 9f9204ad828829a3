/* SPDX-License-Identifier: MIT */
/* tilewave tests: injected GPU faults on every op with CUDA kinds: retried on CPU, same bytes. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_core.h"
#include "tilewave.h"
#include "twtest.h"
#include "twtest_rt.h"

/*
 * Every op whose task kinds have CUDA variants (gray.tp; mrecon.tp under reconstruction and
 * the filters built on it; edt.band and edt.wavefront; maxtree.tree; maxtree.tp1, .merge and
 * .tp2 of the attribute filters) runs under runtime.fault_inject=cuda (every CUDA attempt
 * fails) and cuda:3 (every third), on a GPU runtime with CPU workers and on one with none (the
 * GPU manager's host thread then runs the retries), and its output is compared byte for byte
 * with a fault-free CPU-only run. Retries are counted; the runtime warns once.
 */

/* ---- log capture */

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static int retry_warnings;

static void
capture(tw_log_level level, const char *domain, const char *message, void *user)
{
    (void)domain;
    (void)user;
    if (level == TW_LOG_WARN && strstr(message, "retrying on CPU; further faults are counted")) {
        pthread_mutex_lock(&log_lock);
        retry_warnings++;
        pthread_mutex_unlock(&log_lock);
    }
}

static tw_runtime *
make_rt(const char *gpus, const char *cpu_workers, const char *fault)
{
    tw_log_set_handler(capture, NULL);
    tw_log_set_level(TW_LOG_WARN);
    return twtest_runtime_kv_ok(true, (const char *const[]){"runtime.gpus", gpus,
                                                            "runtime.cpu_workers", cpu_workers,
                                                            "runtime.fault_inject", fault, NULL});
}

static uint64_t
retries(tw_runtime *rt)
{
    uint64_t n = 0;
    tw_worker_info wi;

    for (int i = 0; i < tw_runtime_get_worker_count(rt); i++) {
        cr_assert(eq(int, tw_runtime_get_worker(rt, i, &wi), TW_OK));
        n += wi.tasks_retried;
    }
    return n;
}

/* ---- inputs */

#define W 301
#define H 203
#define TILE 64

static uint8_t img8[W * H];
static uint8_t marker8[W * H];
static char *dir, *sample;

static void
make_inputs(void)
{
    uint64_t s = 12345;

    for (int64_t y = 0; y < H; y++)
        for (int64_t x = 0; x < W; x++) {
            unsigned v = twtest_rnd(&s, 60) + (unsigned)((x / 23 + y / 17) % 4) * 45;
            /* Rings and blobs give holes to fill, regional maxima and long propagations. */
            if (((x - 150) * (x - 150) + (y - 100) * (y - 100)) / 400 % 3 == 0)
                v += 60;
            img8[y * W + x] = (uint8_t)(v > 255 ? 255 : v);
            marker8[y * W + x] = (x % 97 == 5 && y % 61 == 7) ? img8[y * W + x] : 0;
        }
    dir = twtest_tmpdir();
    sample = twtest_path(dir, "sample.tif");
    tw_sample_opts so;
    tw_sample_opts_init(&so);
    so.w = 900;
    so.h = 700;
    cr_assert(eq(int, tw_sample_write(sample, &so, NULL), TW_OK));
}

static void
free_inputs(void)
{
    twtest_rmtree(dir);
    free(dir);
    free(sample);
}

/* ---- the ops: each returns its output bytes (malloc'd) and their count */

typedef struct out_buf {
    void *data;
    size_t bytes;
} out_buf;

/* The end of a job just submitted with status st: the submission and the job succeeded. */
static void
wait_ok(tw_status st, tw_job **job, const tw_error *err, const char *what)
{
    cr_assert(eq(int, st, TW_OK), "%s", err->message);
    st = tw_job_wait(*job, -1);
    cr_assert(eq(int, st, TW_OK), "%s: %s", what, tw_job_get_error(*job));
    tw_job_destroy(*job);
}

static out_buf
op_gray(tw_runtime *rt)
{
    static int n;
    char name[32];
    tw_gray_opts o;
    tw_job *job = NULL;
    tw_error err;
    tw_slide *s = NULL;
    tw_level_info li;
    out_buf r;

    snprintf(name, sizeof name, "gray%d.tif", n++);
    char *out = twtest_path(dir, name);
    tw_gray_opts_init(&o);
    o.input.path = sample;
    o.output.path = out;
    o.tile_w = 128;
    o.tile_h = 96;
    wait_ok(tw_gray_submit(rt, &o, &job, &err), &job, &err, "gray");
    cr_assert(eq(int, tw_slide_open(out, TW_READER_TIFF, &s, NULL), TW_OK));
    cr_assert(eq(int, tw_slide_get_level(s, 0, &li), TW_OK));
    r.bytes = (size_t)(li.w * li.h);
    r.data = malloc(r.bytes);
    cr_assert(eq(int, tw_slide_read_region(s, 0, 0, 0, li.w, li.h, r.data, (size_t)li.w, NULL),
                 TW_OK));
    tw_slide_close(s);
    free(out);
    return r;
}

static out_buf
op_mrecon(tw_runtime *rt)
{
    tw_mrecon_opts o;
    tw_job *job = NULL;
    tw_error err;
    out_buf r = {malloc(W * H), W * H};

    tw_mrecon_opts_init(&o);
    o.marker_image = (tw_host_image){marker8, W, H, 0, TW_U8};
    o.mask_image = (tw_host_image){img8, W, H, 0, TW_U8};
    o.result = (tw_host_image){r.data, W, H, 0, TW_U8};
    o.tile_w = o.tile_h = TILE;
    wait_ok(tw_mrecon_submit(rt, &o, &job, &err), &job, &err, "reconstruct");
    return r;
}

/* The filters built on the reconstruction: 0 fill-holes, 1 hmax, 2 h-dome, 3 open-rec,
 * 4 close-rec, 5 regional-max. */
static out_buf
op_mrecon_filter(tw_runtime *rt, int which)
{
    tw_mrecon_filter_opts o;
    tw_job *job = NULL;
    tw_error err;
    tw_status st = TW_E_INTERNAL;
    out_buf r = {malloc(W * H), W * H};

    tw_mrecon_filter_opts_init(&o);
    o.image = (tw_host_image){img8, W, H, 0, TW_U8};
    o.result = (tw_host_image){r.data, W, H, 0, TW_U8};
    o.tile_w = o.tile_h = TILE;
    o.h = 20;
    o.radius = 2;
    switch (which) {
    case 0: st = tw_fill_holes_submit(rt, &o, &job, &err); break;
    case 1: st = tw_hmax_submit(rt, &o, &job, &err); break;
    case 2: o.dome = true; st = tw_hmax_submit(rt, &o, &job, &err); break;
    case 3: st = tw_open_rec_submit(rt, &o, &job, &err); break;
    case 4: st = tw_close_rec_submit(rt, &o, &job, &err); break;
    default: st = tw_regional_max_submit(rt, &o, &job, &err); break;
    }
    wait_ok(st, &job, &err, "reconstruction filter");
    return r;
}

static out_buf
op_edt(tw_runtime *rt, tw_edt_method method)
{
    tw_edt_opts o;
    tw_job *job = NULL;
    tw_error err;
    out_buf r = {malloc(W * H * sizeof(float)), W * H * sizeof(float)};

    tw_edt_opts_init(&o);
    o.image = (tw_host_image){img8, W, H, 0, TW_U8};
    o.result = (tw_host_image){r.data, W, H, 0, TW_F32};
    o.threshold = 120;
    o.method = method;
    o.tile_w = o.tile_h = TILE;
    wait_ok(tw_edt_submit(rt, &o, &job, &err), &job, &err, "edt");
    return r;
}

static out_buf
op_maxtree(tw_runtime *rt)
{
    tw_maxtree_opts o;
    tw_job *job = NULL;
    tw_error err;
    out_buf r = {malloc(2 * W * H * sizeof(uint32_t)), 2 * W * H * sizeof(uint32_t)};
    uint32_t *par = r.data;

    tw_maxtree_opts_init(&o);
    o.image = (tw_host_image){img8, W, H, 0, TW_U8};
    o.parent = (tw_host_image){par, W, H, 0, TW_U32};
    o.area = (tw_host_image){par + W * H, W, H, 0, TW_U32};
    o.index_bits = 32;
    wait_ok(tw_maxtree_submit(rt, &o, &job, &err), &job, &err, "maxtree");
    return r;
}

static out_buf
op_attr(tw_runtime *rt, tw_attr_filter f)
{
    tw_attr_filter_opts o;
    tw_job *job = NULL;
    tw_error err;
    out_buf r = {malloc(W * H), W * H};

    tw_attr_filter_opts_init(&o);
    o.image = (tw_host_image){img8, W, H, 0, TW_U8};
    o.result = (tw_host_image){r.data, W, H, 0, TW_U8};
    o.filter = f;
    o.threshold = f == TW_AREA_OPENING || f == TW_AREA_CLOSING ? 40 : 25;
    o.tile_w = o.tile_h = TILE;
    wait_ok(tw_attr_filter_submit(rt, &o, &job, &err), &job, &err, "attribute filter");
    return r;
}

enum { N_OPS = 14 };
static const char *const op_names[N_OPS] = {
    "gray",     "reconstruct", "fill-holes",   "hmax",      "h-dome",
    "open-rec", "close-rec",   "regional-max", "edt",       "edt-wavefront",
    "maxtree",  "area-open",   "area-close",   "height-open"};

static out_buf
run_op(tw_runtime *rt, int op)
{
    switch (op) {
    case 0: return op_gray(rt);
    case 1: return op_mrecon(rt);
    case 2: case 3: case 4: case 5: case 6: case 7: return op_mrecon_filter(rt, op - 2);
    case 8: return op_edt(rt, TW_EDT_EXACT);
    case 9: return op_edt(rt, TW_EDT_WAVEFRONT);
    case 10: return op_maxtree(rt);
    case 11: return op_attr(rt, TW_AREA_OPENING);
    case 12: return op_attr(rt, TW_AREA_CLOSING);
    default: return op_attr(rt, TW_HEIGHT_OPENING);
    }
}

Test(fault_job, every_op_gives_the_same_bytes_under_injected_faults, .timeout = TWTEST_TIMEOUT(600))
{
    /* For each fault setting and runtime layout, every op's output equals the fault-free
     * CPU-only run; under cuda on the GPU-only runtime every job retried tasks (with CPU
     * workers idle ones may take a small job's every task first), and each runtime retried
     * and warned once. */
    static const char *const faults[] = {"cuda", "cuda:3"};
    static const char *const layouts[][2] = {{"all", "2"}, {"all", "0"}};
    out_buf ref[N_OPS];
    tw_runtime *rt;

    twtest_need_gpu();
    make_inputs();
    rt = make_rt("none", "2", "");
    for (int op = 0; op < N_OPS; op++)
        ref[op] = run_op(rt, op);
    tw_runtime_destroy(rt);

    for (size_t f = 0; f < sizeof faults / sizeof faults[0]; f++) {
        for (size_t l = 0; l < sizeof layouts / sizeof layouts[0]; l++) {
            uint64_t before = 0, after;

            retry_warnings = 0;
            rt = make_rt(layouts[l][0], layouts[l][1], faults[f]);
            for (int op = 0; op < N_OPS; op++) {
                out_buf got = run_op(rt, op);

                after = retries(rt);
                cr_log_info("%s, %s CPU workers, %s: %llu retries", faults[f], layouts[l][1],
                            op_names[op], (unsigned long long)(after - before));
                cr_assert(eq(sz, got.bytes, ref[op].bytes));
                cr_assert(memcmp(got.data, ref[op].data, got.bytes) == 0,
                          "%s differs under %s with %s CPU workers", op_names[op], faults[f],
                          layouts[l][1]);
                if (f == 0 && strcmp(layouts[l][1], "0") == 0)
                    cr_assert(after > before, "%s: no retry under %s", op_names[op], faults[f]);
                before = after;
                free(got.data);
            }
            cr_assert(before > 0);
            cr_assert(eq(int, retry_warnings, 1), "%d warnings", retry_warnings);
            tw_runtime_destroy(rt);
        }
    }
    for (int op = 0; op < N_OPS; op++)
        free(ref[op].data);
    free_inputs();
}

/* ---- real device failures: a variant that fails after launching, with and without
 * twi_ctx_no_retry */

static atomic_int commits_cpu, commits_cuda;

static tw_status
mark_cpu(tw_task_ctx *ctx, void *arg)
{
    tw_tile_view v = twi_ctx_view(ctx, 0);

    (void)arg;
    memset(v.data, 7, (size_t)v.stride * (size_t)v.h);
    return TW_OK;
}

/* Writes its device tile, then fails: the host tile must not change, the CPU redoes it. */
static tw_status
fail_cuda(tw_task_ctx *ctx, void *arg)
{
    tw_tile_view v = twi_ctx_view(ctx, 0);
    /* The source of an asynchronous copy outlives the task. */
    static const uint8_t junk[64] = {99, 99, 99, 99, 99, 99, 99, 99};

    if (twi_ctx_copy_to_device(ctx, v.data, junk, sizeof junk) != TW_OK)
        return TW_E_DEVICE;
    if (arg)
        twi_ctx_no_retry(ctx);
    return twi_ctx_fail(ctx, TW_E_DEVICE, "test: the kernel failed on purpose");
}

static tw_status
commit_count(tw_task_ctx *ctx, void *arg)
{
    (void)arg;
    atomic_fetch_add(twi_ctx_device(ctx) == TW_DEVICE_CUDA ? &commits_cuda : &commits_cpu, 1);
    return TW_OK;
}

static bool
prefer_gpu(const void *arg, tw_device_type dev)
{
    (void)arg;
    return dev == TW_DEVICE_CUDA;
}

static const tw_task_kind failing_kind = {.name = "test.failing",
                                          .devices = TW_DEVICE_CPU | TW_DEVICE_CUDA,
                                          .cpu = mark_cpu, .cuda = fail_cuda,
                                          .can_run = prefer_gpu, .commit = commit_count};

Test(fault_job, failed_kernel_is_retried_unless_no_retry)
{
    /* A CUDA variant that wrote its device tile and then failed: retried on a CPU worker, the
     * host tile holds the CPU's result, the commit hook ran once (on the CPU). The same after
     * twi_ctx_no_retry(): the job fails with the variant's message, no commit. */
    twtest_need_gpu();
    for (int no_retry = 0; no_retry < 2; no_retry++) {
        tw_runtime *rt = make_rt("all", "1", "");
        tw_job *job = NULL;
        tw_task *t = NULL;
        tw_tile *tile = NULL;
        tw_status st;

        atomic_store(&commits_cpu, 0);
        atomic_store(&commits_cuda, 0);
        cr_assert(eq(int, twi_job_create(rt, "failing", &job), TW_OK));
        cr_assert(eq(int, twi_tile_create(rt, 64, 4, 1, TW_U8, &tile), TW_OK));
        memset(twi_tile_host_view(tile).data, 1, tile->bytes);
        cr_assert(eq(int, twi_task_create(job, &failing_kind, no_retry ? (void *)1 : NULL, NULL,
                                          &t), TW_OK));
        cr_assert(eq(int, twi_task_add_tile(t, tile, TW_RW), TW_OK));
        cr_assert(eq(int, twi_task_submit(t), TW_OK));
        twi_task_release(t);
        twi_job_seal(job);
        st = tw_job_wait(job, 30000);
        if (!no_retry) {
            const uint8_t *p = twi_tile_host_view(tile).data;

            cr_assert(eq(int, st, TW_OK), "%s", tw_job_get_error(job));
            for (size_t i = 0; i < tile->bytes; i++)
                cr_assert(eq(u8, p[i], 7));
            cr_assert(eq(int, atomic_load(&commits_cpu), 1));
            cr_assert(eq(u64, retries(rt), 1));
        } else {
            cr_assert(eq(int, st, TW_E_DEVICE));
            cr_assert(eq(str, (char *)tw_job_get_error(job), "test: the kernel failed on purpose"));
            cr_assert(eq(int, atomic_load(&commits_cpu), 0));
            cr_assert(eq(u64, retries(rt), 0));
        }
        cr_assert(eq(int, atomic_load(&commits_cuda), 0));
        tw_job_destroy(job);
        twi_tile_release(tile);
        tw_runtime_destroy(rt);
    }
}
