/* SPDX-License-Identifier: MIT */
/* tilewave tests: the GPU data path: replicas, versions, prefetch, memory budget, 2 GPUs. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Criterion 2.4 assertions store into a 1-bit field, which -Wconversion flags at every use. */
#pragma GCC diagnostic ignored "-Wconversion"

#include "rt_core.h"
#include "twtest.h"
#include "twtest_rt.h"

#ifdef TW_HAVE_CUDA
#include <cuda_runtime_api.h>

/* ---- the kind: dst = src rotated left by k bytes (the whole packed buffer), k = arg */

static atomic_int on_gpu, on_cpu;

static tw_status
rot_cuda(tw_task_ctx *ctx, void *arg)
{
    tw_tile_view s = twi_ctx_view(ctx, 0), d = twi_ctx_view(ctx, 1);
    cudaStream_t st = (cudaStream_t)twi_ctx_stream(ctx);
    size_t n = (size_t)s.stride * (size_t)s.h, k = (size_t)(uintptr_t)arg % n;
    void *scratch = twi_ctx_scratch(ctx, 4096);

    if (!scratch)
        return twi_ctx_fail(ctx, TW_E_DEVICE, "test: no scratch");
    atomic_fetch_add(&on_gpu, 1);
    if (cudaMemsetAsync(scratch, 0, 4096, st) != cudaSuccess ||
        cudaMemcpyAsync(d.data, (char *)s.data + k, n - k, cudaMemcpyDeviceToDevice, st) !=
            cudaSuccess ||
        (k && cudaMemcpyAsync((char *)d.data + (n - k), s.data, k, cudaMemcpyDeviceToDevice,
                              st) != cudaSuccess))
        return twi_ctx_fail(ctx, TW_E_DEVICE, "test: copy failed");
    return TW_OK;
}

static void
rot_host(uint8_t *dst, const uint8_t *src, size_t n, size_t k)
{
    k %= n;
    memcpy(dst, src + k, n - k);
    memcpy(dst + (n - k), src, k);
}

static tw_status
rot_cpu(tw_task_ctx *ctx, void *arg)
{
    tw_tile_view s = twi_ctx_view(ctx, 0), d = twi_ctx_view(ctx, 1);

    atomic_fetch_add(&on_cpu, 1);
    rot_host(d.data, s.data, (size_t)s.stride * (size_t)s.h, (size_t)(uintptr_t)arg);
    return TW_OK;
}

static const tw_task_kind rot_gpu_kind = {.name = "test.rot_gpu", .devices = TW_DEVICE_CUDA,
                                          .cuda = rot_cuda};
static const tw_task_kind rot_both_kind = {.name = "test.rot",
                                           .devices = TW_DEVICE_CPU | TW_DEVICE_CUDA,
                                           .cpu = rot_cpu, .cuda = rot_cuda};
static const tw_task_kind rot_cpu_kind = {.name = "test.rot_cpu", .devices = TW_DEVICE_CPU,
                                          .cpu = rot_cpu};

/* ---- helpers */

/* A runtime with GPUs `gpus`, `cpu` CPU workers and runtime.gpu_mem = `mem` (NULL: default),
 * the TILEWAVE_* environment applied first (TILEWAVE_RUNTIME_POLICY=locality ctest). */
static tw_runtime *
make_rt_dl(const char *gpus, const char *cpu, const char *mem, const char *trace,
           const char *downloads)
{
    tw_runtime *rt;

    twtest_quiet_logs();
    rt = twtest_runtime_kv_ok(true, (const char *const[]){"runtime.gpus", gpus,
                                                          "runtime.cpu_workers", cpu,
                                                          "runtime.gpu_mem", mem,
                                                          "runtime.trace", trace,
                                                          "runtime.gpu_downloads", downloads,
                                                          NULL});
    atomic_store(&on_gpu, 0);
    atomic_store(&on_cpu, 0);
    return rt;
}

/* The same with the default downloads (lazy). */
static tw_runtime *
make_rt(const char *gpus, const char *cpu, const char *mem, const char *trace)
{
    return make_rt_dl(gpus, cpu, mem, trace, NULL);
}

/* Pin a tile for reading between jobs: with lazy downloads this brings a GPU's result back. */
static const uint8_t *
host_pixels(tw_tile *t)
{
    cr_assert(eq(int, twi_tile_pin_read(t), TW_OK), "%s", twi_tile_pin_message());
    return twi_tile_host_view(t).data;
}

static tw_tile *
new_tile(tw_runtime *rt, int32_t w, int32_t h, uint64_t seed)
{
    tw_tile *t = NULL;
    uint8_t *p;

    cr_assert(eq(int, twi_tile_create(rt, w, h, 1, TW_U8, &t), TW_OK));
    p = twi_tile_host_view(t).data;
    for (size_t i = 0; i < t->bytes; i++)
        p[i] = (uint8_t)(twtest_xorshift(&seed) >> 56);
    return t;
}

/* Submit rot(src -> dst, k) of `kind` after `dep` (may be NULL); returns the task (a
 * reference the caller releases). */
static tw_task *
rot_task(tw_job *job, const tw_task_kind *kind, tw_tile *src, tw_tile *dst, size_t k,
         tw_task *dep)
{
    tw_task *t = NULL;

    cr_assert(eq(int, twi_task_create(job, kind, (void *)(uintptr_t)k, NULL, &t), TW_OK));
    cr_assert(eq(int, twi_task_add_tile(t, src, TW_R), TW_OK));
    cr_assert(eq(int, twi_task_add_tile(t, dst, TW_W), TW_OK));
    if (dep)
        cr_assert(eq(int, twi_task_depend(t, dep), TW_OK));
    cr_assert(eq(int, twi_task_submit(t), TW_OK));
    return t;
}

static void
finish(tw_job *job)
{
    twi_job_seal(job);
    cr_assert(eq(int, tw_job_wait(job, -1), TW_OK), "%s", tw_job_get_error(job));
    tw_job_destroy(job);
}

/* Sums over the GPU workers. */
typedef struct gpu_bytes {
    uint64_t up, down, resident, tasks;
} gpu_bytes;

static gpu_bytes
bytes_of(const tw_runtime *rt)
{
    gpu_bytes b = {0};
    tw_worker_info wi;

    for (int i = 0; i < tw_runtime_get_worker_count(rt); i++) {
        cr_assert(eq(int, tw_runtime_get_worker(rt, i, &wi), TW_OK));
        if (wi.type != TW_DEVICE_CUDA)
            continue;
        b.up += wi.bytes_to_gpu;
        b.down += wi.bytes_from_gpu;
        b.resident += wi.bytes_gpu_resident;
        b.tasks += wi.tasks_run;
    }
    return b;
}

static void
check_rot(tw_tile *dst, const uint8_t *src, size_t k, const char *what, int i)
{
    uint8_t *want = malloc(dst->bytes);

    cr_assert(want != NULL);
    rot_host(want, src, dst->bytes, k);
    cr_assert(eq(int, memcmp(host_pixels(dst), want, dst->bytes), 0), "%s %d", what, i);
    twi_tile_unpin(dst);
    free(want);
}

/* The pool's bytes in use that cannot be evicted go back to 0 once the managers are idle. */
static void
wait_pool_idle(const tw_runtime *rt)
{
    struct timespec ts = {0, 1000000};

    for (int g = 0; g < rt->n_gpus; g++) {
        for (int i = 0; i < 2000 && twi_devpool_hard_bytes(rt->gpus[g].pool) != 0; i++)
            nanosleep(&ts, NULL);
        cr_assert(eq(sz, twi_devpool_hard_bytes(rt->gpus[g].pool), 0), "GPU %d", g);
    }
}

/* ---- tests */

Test(gpu_data, tile_read_by_ten_tasks_is_uploaded_once)
{
    /* A mask tile read by 10 GPU tasks (each writing its own output) crosses the bus once:
     * bytes to the GPU = the mask's size, 9 mask reads found resident; outputs are not
     * uploaded (W only), and (lazy downloads) come back only as they are read here, each
     * once; every output is right. */
    twtest_need_gpu();
    tw_runtime *rt = make_rt("0", "0", NULL, NULL);
    tw_tile *m = new_tile(rt, 333, 97, 1), *out[10];
    tw_job *job = NULL;
    gpu_bytes b;

    cr_assert(eq(int, twi_job_create(rt, "ten", &job), TW_OK));
    for (int i = 0; i < 10; i++) {
        out[i] = new_tile(rt, 333, 97, 100 + (uint64_t)i);
        twi_task_release(rot_task(job, &rot_gpu_kind, m, out[i], (size_t)i + 1, NULL));
    }
    finish(job);
    b = bytes_of(rt);
    cr_assert(eq(u64, b.up, m->bytes));
    cr_assert(eq(u64, b.resident, 9 * m->bytes));
    cr_assert(eq(u64, b.down, 0));
    for (int i = 0; i < 10; i++) {
        check_rot(out[i], twi_tile_host_view(m).data, (size_t)i + 1, "out", i);
        check_rot(out[i], twi_tile_host_view(m).data, (size_t)i + 1, "out read again", i);
    }
    cr_assert(eq(u64, bytes_of(rt).down, 10 * m->bytes));
    for (int i = 0; i < 10; i++)
        twi_tile_release(out[i]);
    wait_pool_idle(rt);
    twi_tile_release(m);
    tw_runtime_destroy(rt);
}

Test(gpu_data, writes_invalidate_replicas)
{
    /* A GPU read keeps the tile on the GPU; a CPU task writing the tile makes the next GPU read
     * upload it again (and see the new pixels); so does twi_tile_host_written() after host
     * writes outside tasks; a read with no write in between uploads nothing. */
    twtest_need_gpu();
    tw_runtime *rt = make_rt("0", "1", NULL, NULL);
    tw_tile *m = new_tile(rt, 200, 50, 7), *src2 = new_tile(rt, 200, 50, 8);
    tw_tile *o1 = new_tile(rt, 200, 50, 9), *o3 = new_tile(rt, 200, 50, 10);
    uint8_t *snap = malloc(m->bytes);
    tw_task *t1, *t2, *t3;
    tw_job *job = NULL;
    uint64_t up0;

    cr_assert(snap != NULL);
    cr_assert(eq(int, twi_job_create(rt, "inval", &job), TW_OK));
    t1 = rot_task(job, &rot_gpu_kind, m, o1, 3, NULL);
    t2 = rot_task(job, &rot_cpu_kind, src2, m, 5, t1); /* the CPU writes m */
    t3 = rot_task(job, &rot_gpu_kind, m, o3, 11, t2);
    twi_task_release(t1);
    twi_task_release(t2);
    twi_task_release(t3);
    finish(job);
    cr_assert(eq(int, atomic_load(&on_cpu), 1));
    cr_assert(eq(u64, bytes_of(rt).up, 2 * m->bytes)); /* m before and after the CPU write */
    rot_host(snap, twi_tile_host_view(src2).data, m->bytes, 5);
    cr_assert(eq(int, memcmp(snap, twi_tile_host_view(m).data, m->bytes), 0));
    check_rot(o3, snap, 11, "after the CPU write", 0);

    /* Read again with nothing written: resident, no upload. */
    up0 = bytes_of(rt).up;
    cr_assert(eq(int, twi_job_create(rt, "again", &job), TW_OK));
    twi_task_release(rot_task(job, &rot_gpu_kind, m, o3, 2, NULL));
    finish(job);
    cr_assert(eq(u64, bytes_of(rt).up, up0));
    check_rot(o3, snap, 2, "resident", 0);

    /* Host writes outside tasks, announced: uploaded again, new pixels seen. */
    memset(twi_tile_host_view(m).data, 0x5a, 1000);
    twi_tile_host_written(m);
    memcpy(snap, twi_tile_host_view(m).data, m->bytes);
    cr_assert(eq(int, twi_job_create(rt, "host", &job), TW_OK));
    twi_task_release(rot_task(job, &rot_gpu_kind, m, o3, 17, NULL));
    finish(job);
    cr_assert(eq(u64, bytes_of(rt).up, up0 + m->bytes));
    check_rot(o3, snap, 17, "after twi_tile_host_written", 0);
    wait_pool_idle(rt);
    twi_tile_release(m);
    twi_tile_release(src2);
    twi_tile_release(o1);
    twi_tile_release(o3);
    free(snap);
    tw_runtime_destroy(rt);
}

/* A chain of n rotations ping-ponging between two tiles; returns the total shift. */
static size_t
run_chain(tw_runtime *rt, const tw_task_kind *kind, tw_tile *a, tw_tile *b, int n)
{
    tw_job *job = NULL;
    tw_task *prev = NULL;
    size_t total = 0;

    cr_assert(eq(int, twi_job_create(rt, "chain", &job), TW_OK));
    for (int i = 0; i < n; i++) {
        size_t k = (size_t)(i % 7) + 1;
        tw_task *t = rot_task(job, kind, i % 2 ? b : a, i % 2 ? a : b, k, prev);

        twi_task_release(prev);
        prev = t;
        total += k;
    }
    twi_task_release(prev);
    finish(job);
    return total;
}

Test(gpu_data, long_chain_keeps_outputs_resident)
{
    /* 300 dependent GPU tasks ping-pong between two tiles: each reads what the previous one
     * wrote on the same GPU, so only the first input is uploaded (299 reads resident); the
     * final bytes equal the rotations applied on the host. */
    twtest_need_gpu();
    tw_runtime *rt = make_rt("0", "1", NULL, NULL);
    tw_tile *a = new_tile(rt, 129, 31, 3), *b = new_tile(rt, 129, 31, 4);
    uint8_t *init = malloc(a->bytes);
    size_t total;
    gpu_bytes g;

    cr_assert(init != NULL);
    memcpy(init, twi_tile_host_view(a).data, a->bytes);
    total = run_chain(rt, &rot_gpu_kind, a, b, 300);
    g = bytes_of(rt);
    cr_assert(eq(u64, g.up, a->bytes));
    cr_assert(eq(u64, g.resident, 299 * a->bytes));
    check_rot(a, init, total, "chain end", 300); /* 300 steps end in a */
    wait_pool_idle(rt);
    twi_tile_release(a);
    twi_tile_release(b);
    free(init);
    tw_runtime_destroy(rt);
}

/* in -> mid on the GPU, mid -> out on the GPU, out -> res on a CPU worker; returns the bytes
 * downloaded, res checked. */
static uint64_t
gpu_gpu_cpu(const char *downloads)
{
    tw_runtime *rt = make_rt_dl("0", "1", NULL, NULL, downloads);
    tw_tile *in = new_tile(rt, 200, 60, 61), *mid = new_tile(rt, 200, 60, 62);
    tw_tile *out = new_tile(rt, 200, 60, 63), *res = new_tile(rt, 200, 60, 64);
    tw_job *job = NULL;
    tw_task *a, *b;
    uint64_t down;

    cr_assert(eq(int, twi_job_create(rt, downloads, &job), TW_OK));
    a = rot_task(job, &rot_gpu_kind, in, mid, 5, NULL);
    b = rot_task(job, &rot_gpu_kind, mid, out, 7, a);
    twi_task_release(rot_task(job, &rot_cpu_kind, out, res, 11, b));
    twi_task_release(a);
    twi_task_release(b);
    finish(job);
    down = bytes_of(rt).down;
    check_rot(res, twi_tile_host_view(in).data, 23, downloads, 0);
    check_rot(mid, twi_tile_host_view(in).data, 5, downloads, 1);
    wait_pool_idle(rt);
    twi_tile_release(in);
    twi_tile_release(mid);
    twi_tile_release(out);
    twi_tile_release(res);
    tw_runtime_destroy(rt);
    return down;
}

Test(gpu_data, lazy_downloads_only_what_the_host_reads)
{
    /* GPU -> GPU -> CPU: with lazy downloads only the tile the CPU task reads comes back
     * during the job (the intermediate one stays on the GPU until the test reads it); eager
     * downloads bring back both; the bytes are the same either way. */
    twtest_need_gpu();
    uint64_t lazy = gpu_gpu_cpu("lazy"), eager = gpu_gpu_cpu("eager");

    cr_assert(eq(u64, lazy, (uint64_t)200 * 60));
    cr_assert(eq(u64, eager, (uint64_t)2 * 200 * 60));
}

Test(gpu_data, pageable_tiles_come_back_through_the_bounce_buffers)
{
    /* Pageable host tiles (runtime.pinned_tiles = no, as the CLI has them): GPU tasks write
     * tiles that CPU tasks on 3 workers then read, so the lazy downloads run on the CPU
     * workers at once, through the bounce buffers' halves (4 MiB: one chunk, one chunk and a
     * row, several chunks, an odd last chunk) or, for a row larger than a half, a plain copy. */
    twtest_need_gpu();
    static const int32_t size[][2] = {{5000, 1901}, {4200, 4200}, {3, 3},
                                      {4500000, 1}, {1000, 4194}, {1000, 4195}};
    enum { N = sizeof size / sizeof size[0] };
    tw_runtime *rt;
    tw_tile *src[N], *mid[N], *out[N];
    tw_job *job = NULL;

    twtest_quiet_logs();
    rt = twtest_runtime_kv_ok(true, (const char *const[]){"runtime.gpus", "0",
                                                          "runtime.cpu_workers", "3",
                                                          "runtime.pinned_tiles", "no",
                                                          NULL});
    cr_assert(eq(int, twi_job_create(rt, "bounce", &job), TW_OK));
    for (int i = 0; i < N; i++) {
        tw_task *g;

        src[i] = new_tile(rt, size[i][0], size[i][1], 100 + (uint64_t)i);
        mid[i] = new_tile(rt, size[i][0], size[i][1], 200 + (uint64_t)i);
        out[i] = new_tile(rt, size[i][0], size[i][1], 300 + (uint64_t)i);
        cr_assert(not(mid[i]->pinned), "tile %d is page-locked", i);
        g = rot_task(job, &rot_gpu_kind, src[i], mid[i], (size_t)(7 + i), NULL);
        twi_task_release(rot_task(job, &rot_cpu_kind, mid[i], out[i], 3, g));
        twi_task_release(g);
    }
    finish(job);
    for (int i = 0; i < N; i++) {
        check_rot(out[i], twi_tile_host_view(src[i]).data, (size_t)(7 + i + 3), "out", i);
        check_rot(mid[i], twi_tile_host_view(src[i]).data, (size_t)(7 + i), "mid", i);
        twi_tile_release(src[i]);
        twi_tile_release(mid[i]);
        twi_tile_release(out[i]);
    }
    wait_pool_idle(rt);
    tw_runtime_destroy(rt);
}

Test(gpu_data, mixed_devices_chain_and_fan_give_right_bytes)
{
    /* A kind with both variants on 1 GPU + 2 CPU workers: a 400-step chain (each step on
     * whichever device takes it, so replicas go stale under CPU writes) and a fan of 300 small
     * tasks reading one source give the host reference's bytes. */
    twtest_need_gpu();
    tw_runtime *rt = make_rt("0", "2", NULL, NULL);
    tw_tile *a = new_tile(rt, 64, 16, 5), *b = new_tile(rt, 64, 16, 6);
    tw_tile *src = new_tile(rt, 77, 13, 9), *out[300];
    uint8_t *init = malloc(a->bytes);
    tw_job *job = NULL;
    size_t total;

    cr_assert(init != NULL);
    memcpy(init, twi_tile_host_view(a).data, a->bytes);
    total = run_chain(rt, &rot_both_kind, a, b, 400);
    check_rot(a, init, total, "mixed chain end", 400);
    cr_log_info("mixed chain: %d on GPU, %d on CPU", atomic_load(&on_gpu), atomic_load(&on_cpu));

    cr_assert(eq(int, twi_job_create(rt, "fan", &job), TW_OK));
    for (int i = 0; i < 300; i++) {
        out[i] = new_tile(rt, 77, 13, 1000 + (uint64_t)i);
        twi_task_release(rot_task(job, &rot_both_kind, src, out[i], (size_t)(i % 13), NULL));
    }
    finish(job);
    for (int i = 0; i < 300; i++) {
        check_rot(out[i], twi_tile_host_view(src).data, (size_t)(i % 13), "fan", i);
        twi_tile_release(out[i]);
    }
    wait_pool_idle(rt);
    twi_tile_release(a);
    twi_tile_release(b);
    twi_tile_release(src);
    free(init);
    tw_runtime_destroy(rt);
}

Test(gpu_data, budget_never_exceeded_by_a_larger_job)
{
    /* runtime.gpu_mem = 4M; a two-pass job over 32 + 32 + 32 tiles of 256 KiB (24 MiB, six
     * times the budget): the pool's high-water mark (in use + cached) stays within 4 MiB,
     * replicas get evicted, every byte is right. */
    twtest_need_gpu();
    const size_t budget = (size_t)4 << 20;
    tw_runtime *rt = make_rt("0", "0", "4M", NULL);
    tw_tile *in[32], *mid[32], *out[32];
    tw_job *job = NULL;
    uint8_t *want = malloc((size_t)512 * 512);

    cr_assert(want != NULL);
    cr_assert(eq(sz, rt->gpus[0].budget, budget));
    cr_assert(eq(int, twi_job_create(rt, "big", &job), TW_OK));
    for (int i = 0; i < 32; i++) {
        tw_task *t;

        in[i] = new_tile(rt, 512, 512, 50 + (uint64_t)i);
        mid[i] = new_tile(rt, 512, 512, 1);
        out[i] = new_tile(rt, 512, 512, 2);
        t = rot_task(job, &rot_gpu_kind, in[i], mid[i], (size_t)i + 1, NULL);
        twi_task_release(rot_task(job, &rot_gpu_kind, mid[i], out[i], 1000, t));
        twi_task_release(t);
    }
    finish(job);
    for (int i = 0; i < 32; i++) {
        rot_host(want, twi_tile_host_view(in[i]).data, in[i]->bytes, (size_t)i + 1 + 1000);
        cr_assert(eq(int, memcmp(want, host_pixels(out[i]), in[i]->bytes), 0), "tile %d", i);
        twi_tile_unpin(out[i]);
    }
    cr_log_info("budget %zu, high water %zu, %" PRIu64 " evictions", budget,
                twi_devpool_high_water(rt->gpus[0].pool),
                twi_devpool_evictions(rt->gpus[0].pool));
    cr_assert(le(sz, twi_devpool_high_water(rt->gpus[0].pool), budget));
    cr_assert(gt(u64, twi_devpool_evictions(rt->gpus[0].pool), 0));
    wait_pool_idle(rt);
    for (int i = 0; i < 32; i++) {
        twi_tile_release(in[i]);
        twi_tile_release(mid[i]);
        twi_tile_release(out[i]);
    }
    free(want);
    tw_runtime_destroy(rt);
}

Test(gpu_data, tile_larger_than_the_budget)
{
    /* With runtime.gpu_mem = 1M, a task over two 2 MiB tiles runs on the CPU worker when its
     * kind has a CPU variant, and fails the job naming runtime.gpu_mem when it has none. */
    twtest_need_gpu();
    tw_runtime *rt = make_rt("0", "1", "1M", NULL);
    tw_tile *a = new_tile(rt, 2048, 1024, 11), *b = new_tile(rt, 2048, 1024, 12);
    tw_job *job = NULL;
    const char *msg;

    cr_assert(eq(int, twi_job_create(rt, "cpu", &job), TW_OK));
    twi_task_release(rot_task(job, &rot_both_kind, a, b, 9, NULL));
    finish(job);
    cr_assert(eq(int, atomic_load(&on_cpu), 1));
    cr_assert(eq(int, atomic_load(&on_gpu), 0));
    check_rot(b, twi_tile_host_view(a).data, 9, "on the CPU", 0);

    cr_assert(eq(int, twi_job_create(rt, "gpu only", &job), TW_OK));
    twi_task_release(rot_task(job, &rot_gpu_kind, a, b, 9, NULL));
    twi_job_seal(job);
    cr_assert(eq(int, tw_job_wait(job, -1), TW_E_DEVICE));
    msg = tw_job_get_error(job);
    cr_assert(msg != NULL && strstr(msg, "runtime.gpu_mem") != NULL, "%s", msg ? msg : "(none)");
    tw_job_destroy(job);
    wait_pool_idle(rt);
    twi_tile_release(a);
    twi_tile_release(b);
    tw_runtime_destroy(rt);
}

Test(gpu_data, cancel_with_a_prefetched_task)
{
    /* Canceling a job of many GPU tasks (one usually prefetched at that moment) ends it with
     * TW_E_CANCELED, leaves no pinned GPU memory, and the runtime runs the next job. */
    twtest_need_gpu();
    tw_runtime *rt = make_rt("0", "0", NULL, NULL);
    tw_tile *src = new_tile(rt, 1024, 256, 21), *out[200];
    tw_job *job = NULL;

    cr_assert(eq(int, twi_job_create(rt, "cancel", &job), TW_OK));
    for (int i = 0; i < 200; i++) {
        out[i] = new_tile(rt, 1024, 256, 1);
        twi_task_release(rot_task(job, &rot_gpu_kind, src, out[i], (size_t)i, NULL));
    }
    twi_job_seal(job);
    tw_job_cancel(job);
    cr_assert(eq(int, tw_job_wait(job, -1), TW_E_CANCELED));
    tw_job_destroy(job);
    wait_pool_idle(rt);
    cr_assert(eq(int, twi_job_create(rt, "after", &job), TW_OK));
    twi_task_release(rot_task(job, &rot_gpu_kind, src, out[0], 3, NULL));
    finish(job);
    check_rot(out[0], twi_tile_host_view(src).data, 3, "after cancel", 0);
    for (int i = 0; i < 200; i++)
        twi_tile_release(out[i]);
    twi_tile_release(src);
    tw_runtime_destroy(rt);
}

Test(gpu_data, trace_has_upload_kernel_and_download_lanes)
{
    /* A traced run writes per task an upload, the device work and a download on the GPU's
     * uploads, kernels and downloads lanes (eager downloads), and the lazy download of a tile
     * that a CPU task reads after a GPU task wrote it. */
    twtest_need_gpu();
    char *dir = twtest_tmpdir(), *path = twtest_path(dir, "t.json");
    char *lazy_path = twtest_path(dir, "lazy.json");
    tw_runtime *rt = make_rt_dl("0", "0", NULL, path, "eager");
    tw_tile *src = new_tile(rt, 256, 64, 31), *dst = new_tile(rt, 256, 64, 32), *end;
    tw_job *job = NULL;
    tw_task *t;
    FILE *f;
    char *text;
    long n;

    cr_assert(eq(int, twi_job_create(rt, "traced", &job), TW_OK));
    twi_task_release(rot_task(job, &rot_gpu_kind, src, dst, 1, NULL));
    finish(job);
    twi_tile_release(src);
    twi_tile_release(dst);
    tw_runtime_destroy(rt);

    rt = make_rt_dl("0", "1", NULL, lazy_path, "lazy");
    src = new_tile(rt, 256, 64, 31);
    dst = new_tile(rt, 256, 64, 32);
    end = new_tile(rt, 256, 64, 33);
    cr_assert(eq(int, twi_job_create(rt, "traced lazily", &job), TW_OK));
    t = rot_task(job, &rot_gpu_kind, src, dst, 1, NULL);
    twi_task_release(rot_task(job, &rot_cpu_kind, dst, end, 2, t));
    twi_task_release(t);
    finish(job);
    check_rot(end, twi_tile_host_view(src).data, 3, "GPU then CPU", 0);
    twi_tile_release(src);
    twi_tile_release(dst);
    twi_tile_release(end);
    tw_runtime_destroy(rt);
    cr_assert(ne(ptr, (void *)(f = fopen(lazy_path, "r")), NULL));
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    text = calloc(1, (size_t)n + 1);
    cr_assert(eq(sz, fread(text, 1, (size_t)n, f), (size_t)n));
    fclose(f);
    cr_assert(strstr(text, "\"name\": \"download\", \"cat\": \"cpu\"") != NULL, "%s", text);
    free(text);
    cr_assert(ne(ptr, (void *)(f = fopen(path, "r")), NULL));
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    text = calloc(1, (size_t)n + 1);
    cr_assert(eq(sz, fread(text, 1, (size_t)n, f), (size_t)n));
    fclose(f);
    cr_assert(strstr(text, "\"name\": \"upload\"") != NULL);
    cr_assert(strstr(text, "\"name\": \"download\"") != NULL);
    cr_assert(strstr(text, "\"name\": \"test.rot_gpu\"") != NULL);
    cr_assert(strstr(text, "uploads") != NULL && strstr(text, "kernels") != NULL &&
              strstr(text, "downloads") != NULL);
    free(text);
    twtest_rmtree(dir);
    free(dir);
    free(path);
    free(lazy_path);
}

Test(gpu_data, two_gpus_share_tiles)
{
    /* With 2 GPUs (skipped with fewer): a 300-step ping-pong chain (consecutive steps may run
     * on different GPUs, so each GPU's replicas go stale under the other's writes) and a fan
     * of 200 tasks over one mask give the host reference's bytes; both GPUs run tasks and the
     * mask crosses the bus at most once per GPU. */
    int n = 0;

    if (!twtest_have_gpu() || cudaGetDeviceCount(&n) != cudaSuccess || n < 2)
        cr_skip_test("fewer than 2 CUDA devices");
    tw_runtime *rt = make_rt("all", "0", NULL, NULL);
    tw_tile *a = new_tile(rt, 300, 40, 41), *b = new_tile(rt, 300, 40, 42);
    tw_tile *m = new_tile(rt, 500, 100, 43), *out[200];
    uint8_t *init = malloc(a->bytes);
    tw_job *job = NULL;
    gpu_bytes g0, g1;
    int busy = 0;
    size_t total;

    cr_assert(init != NULL);
    memcpy(init, twi_tile_host_view(a).data, a->bytes);
    total = run_chain(rt, &rot_gpu_kind, a, b, 300);
    check_rot(a, init, total, "2-GPU chain end", 300);
    g0 = bytes_of(rt);
    cr_assert(eq(int, twi_job_create(rt, "fan2", &job), TW_OK));
    for (int i = 0; i < 200; i++) {
        out[i] = new_tile(rt, 500, 100, 1);
        twi_task_release(rot_task(job, &rot_gpu_kind, m, out[i], (size_t)i * 3, NULL));
    }
    finish(job);
    g1 = bytes_of(rt);
    cr_assert(le(u64, g1.up - g0.up, 2 * m->bytes));
    for (int i = 0; i < 200; i++) {
        check_rot(out[i], twi_tile_host_view(m).data, (size_t)i * 3, "2-GPU fan", i);
        twi_tile_release(out[i]);
    }
    for (int i = 0; i < tw_runtime_get_worker_count(rt); i++) {
        tw_worker_info wi;

        cr_assert(eq(int, tw_runtime_get_worker(rt, i, &wi), TW_OK));
        if (wi.type == TW_DEVICE_CUDA && wi.tasks_run > 0)
            busy++;
        cr_log_info("worker %d (gpu %d): %" PRIu64 " tasks", i, wi.gpu, wi.tasks_run);
    }
    cr_assert(ge(int, busy, 2));
    wait_pool_idle(rt);
    twi_tile_release(a);
    twi_tile_release(b);
    twi_tile_release(m);
    free(init);
    tw_runtime_destroy(rt);
}

#else /* !TW_HAVE_CUDA */

Test(gpu_data, built_without_cuda)
{
    /* Nothing to test in a build without CUDA. */
    cr_skip_test("built without CUDA");
}

#endif /* TW_HAVE_CUDA */
