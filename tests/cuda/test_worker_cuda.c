/* SPDX-License-Identifier: MIT */
/* tilewave tests: GPU manager workers: transfers, streams, scratch, errors, CPU fallback. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Criterion 2.4 assertions store into a 1-bit field, which -Wconversion flags at every use. */
#pragma GCC diagnostic ignored "-Wconversion"

#include "tw_internal.h"
#include "twtest_rnd.h"

#ifdef TW_HAVE_CUDA
#include <cuda_runtime_api.h>

static bool
have_gpu(void)
{
    int n = 0;
    return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

#define SKIP_WITHOUT_GPU()                                                                      \
    do {                                                                                        \
        if (!have_gpu())                                                                        \
            cr_skip_test("no CUDA device");                                                     \
    } while (0)

/* A runtime with GPU 0 (all GPUs when `gpus` is "all") and `cpu` CPU workers. */
static tw_runtime *
make_runtime(const char *gpus, const char *cpu)
{
    tw_config *cfg = NULL;
    tw_runtime *rt = NULL;
    tw_error err = {0};

    cr_assert(eq(int, tw_config_create(&cfg), TW_OK));
    cr_assert(eq(int, tw_config_set(cfg, "runtime.gpus", gpus, TW_CONFIG_SET, NULL), TW_OK));
    cr_assert(eq(int, tw_config_set(cfg, "runtime.cpu_workers", cpu, TW_CONFIG_SET, NULL), TW_OK));
    cr_assert(eq(int, tw_runtime_create(cfg, &rt, &err), TW_OK), "%s", err.message);
    tw_config_destroy(cfg);
    return rt;
}

/* ---- kinds */

#define MARK 0xab

static atomic_int on_gpu, on_cpu;

/* Copy tile 0 to tile 1 on the device, then overwrite row 0 of tile 1 with MARK bytes (a
 * second step on the same stream) and use a scratch buffer on the way. */
static tw_status
copy_cuda(tw_task_ctx *ctx, void *arg)
{
    tw_tile_view in = twi_ctx_view(ctx, 0), out = twi_ctx_view(ctx, 1);
    cudaStream_t s = (cudaStream_t)twi_ctx_stream(ctx);
    size_t row = (size_t)in.w * (size_t)in.channels * tw_sample_size(in.type);
    void *d_scratch = twi_ctx_scratch(ctx, row);

    (void)arg;
    if (!d_scratch)
        return twi_ctx_fail(ctx, TW_E_DEVICE, "test: no scratch");
    atomic_fetch_add(&on_gpu, 1);
    if (cudaMemcpy2DAsync(out.data, (size_t)out.stride, in.data, (size_t)in.stride, row,
                          (size_t)in.h, cudaMemcpyDeviceToDevice, s) != cudaSuccess ||
        cudaMemsetAsync(d_scratch, MARK, row, s) != cudaSuccess ||
        cudaMemcpyAsync(out.data, d_scratch, row, cudaMemcpyDeviceToDevice, s) != cudaSuccess)
        return twi_ctx_fail(ctx, TW_E_DEVICE, "test: copy failed");
    return TW_OK;
}

static tw_status
copy_cpu(tw_task_ctx *ctx, void *arg)
{
    tw_tile_view in = twi_ctx_view(ctx, 0), out = twi_ctx_view(ctx, 1);
    size_t row = (size_t)in.w * (size_t)in.channels * tw_sample_size(in.type);
    int32_t y;

    (void)arg;
    atomic_fetch_add(&on_cpu, 1);
    for (y = 0; y < in.h; y++)
        memcpy((char *)out.data + y * out.stride, (char *)in.data + y * in.stride, row);
    memset(out.data, MARK, row);
    return TW_OK;
}

static const tw_task_kind copy_cuda_only = {.name = "test.copy_cuda", .devices = TW_DEVICE_CUDA,
                                            .cuda = copy_cuda};
static const tw_task_kind copy_both = {.name = "test.copy",
                                       .devices = TW_DEVICE_CPU | TW_DEVICE_CUDA,
                                       .cpu = copy_cpu, .cuda = copy_cuda};
static const tw_task_kind copy_cpu_only = {.name = "test.copy_cpu", .devices = TW_DEVICE_CPU,
                                           .cpu = copy_cpu};

/* Leaves an invalid-pitch error behind without checking it: the worker must catch it. */
static tw_status
bad_cuda(tw_task_ctx *ctx, void *arg)
{
    tw_tile_view v = twi_ctx_view(ctx, 0);

    (void)arg;
    (void)cudaMemcpy2DAsync(v.data, 1, v.data, 1, 16, 2, cudaMemcpyDeviceToDevice,
                            (cudaStream_t)twi_ctx_stream(ctx));
    return TW_OK;
}

static const tw_task_kind bad_kind = {.name = "test.bad", .devices = TW_DEVICE_CUDA,
                                      .cuda = bad_cuda};

/* ---- helpers */

static void
fill(tw_tile *t, uint32_t seed)
{
    tw_tile_view v = twi_tile_host_view(t);
    uint8_t *p = v.data;
    size_t i, n = (size_t)v.stride * (size_t)v.h;
    uint64_t s = twtest_rnd_stream(seed);

    for (i = 0; i < n; i++)
        p[i] = (uint8_t)(twtest_xorshift(&s) >> 56);
}

static void
check_copy(tw_tile *in, tw_tile *out)
{
    tw_tile_view a, b;
    const uint8_t *pa, *pb;
    int64_t i;

    /* Pinned to read between jobs: with lazy downloads the output may still be on the GPU. */
    cr_assert(eq(int, twi_tile_pin_read(out), TW_OK), "%s", twi_tile_pin_message());
    a = twi_tile_host_view(in);
    b = twi_tile_host_view(out);
    pa = a.data;
    pb = b.data;

    for (i = 0; i < a.stride; i++)
        cr_assert(eq(u8, pb[i], MARK), "row 0 byte %" PRId64, i);
    cr_assert(eq(int, memcmp(pa + a.stride, pb + b.stride, (size_t)(a.stride * (a.h - 1))), 0));
    twi_tile_unpin(out);
}

/* Run n copy tasks of `kind` (in -> out) and check every output. */
static void
run_copies(tw_runtime *rt, const tw_task_kind *kind, int n, int32_t w, int32_t h,
           tw_sample_type type)
{
    tw_job *job = NULL;
    tw_tile **in = calloc((size_t)n, sizeof *in), **out = calloc((size_t)n, sizeof *out);
    int i;

    cr_assert(eq(int, twi_job_create(rt, "copy", &job), TW_OK));
    for (i = 0; i < n; i++) {
        tw_task *t = NULL;
        int32_t wi = w + i % 3; /* a few sizes, so the pool serves several classes */
        cr_assert(eq(int, twi_tile_create(rt, wi, h, 1, type, &in[i]), TW_OK));
        cr_assert(eq(int, twi_tile_create(rt, wi, h, 1, type, &out[i]), TW_OK));
        fill(in[i], (uint32_t)i + 1);
        memset(twi_tile_host_view(out[i]).data, 0,
               (size_t)twi_tile_host_view(out[i]).stride * (size_t)h);
        cr_assert(eq(int, twi_task_create(job, kind, NULL, NULL, &t), TW_OK));
        cr_assert(eq(int, twi_task_add_tile(t, in[i], TW_R), TW_OK));
        cr_assert(eq(int, twi_task_add_tile(t, out[i], TW_W), TW_OK));
        cr_assert(eq(int, twi_task_submit(t), TW_OK));
        twi_task_release(t);
    }
    twi_job_seal(job);
    cr_assert(eq(int, tw_job_wait(job, -1), TW_OK), "%s", tw_job_get_error(job));
    for (i = 0; i < n; i++) {
        check_copy(in[i], out[i]);
        twi_tile_release(in[i]);
        twi_tile_release(out[i]);
    }
    tw_job_destroy(job);
    free(in);
    free(out);
}

/* ---- tests */

Test(worker_cuda, gpu_info_and_worker)
{
    /* With gpus=0, the runtime has one GPU manager for ordinal 0 with a name, a PCI bus id,
     * a compute capability, memory, and a binding read back equal to its core. */
    SKIP_WITHOUT_GPU();
    tw_runtime *rt = make_runtime("0", "1");
    tw_gpu_info gi;
    tw_worker_info wi;
    int i, n_gpu_workers = 0;

    cr_assert(eq(int, twi_runtime_gpu_count(rt), 1));
    cr_assert(eq(int, tw_runtime_get_gpu(rt, 0, &gi), TW_OK));
    cr_assert(eq(int, gi.ordinal, 0));
    cr_assert(gt(int, (int)strlen(gi.name), 0));
    cr_assert(gt(int, (int)strlen(gi.pci_bus_id), 0));
    cr_assert(ge(int, gi.cc_major, 3));
    cr_assert(gt(u64, gi.total_mem, 0));
    for (i = 0; i < tw_runtime_get_worker_count(rt); i++) {
        cr_assert(eq(int, tw_runtime_get_worker(rt, i, &wi), TW_OK));
        if (wi.type != TW_DEVICE_CUDA)
            continue;
        n_gpu_workers++;
        cr_assert(eq(int, wi.gpu, 0));
        cr_assert(eq(int, wi.team, 1));
        if (wi.bound_cpuset[0])
            cr_assert(eq(str, wi.bound_cpuset, wi.cpuset));
    }
    cr_assert(eq(int, n_gpu_workers, 1));
    cr_log_info("GPU 0: %s, %s, cc %d.%d, near cores %s", gi.name, gi.pci_bus_id, gi.cc_major,
                gi.cc_minor, gi.near_cpuset);
    tw_runtime_destroy(rt);
}

Test(worker_cuda, cuda_variant_copies_tiles)
{
    /* A CUDA-only kind copies tile 0 (R) to tile 1 (W) with cudaMemcpy2DAsync on the worker's
     * stream and marks row 0 from a scratch buffer; the host copies hold the result after
     * the job (u8 and f32 tiles, odd widths). */
    SKIP_WITHOUT_GPU();
    tw_runtime *rt = make_runtime("0", "1");

    run_copies(rt, &copy_cuda_only, 64, 301, 77, TW_U8);
    run_copies(rt, &copy_cuda_only, 16, 129, 65, TW_F32);
    cr_assert(eq(int, atomic_load(&on_gpu), 80));
    tw_runtime_destroy(rt);
}

Test(worker_cuda, mixed_kind_runs_on_both_devices)
{
    /* A kind with CPU and CUDA variants gives the same bytes whichever device ran it. */
    SKIP_WITHOUT_GPU();
    tw_runtime *rt = make_runtime("0", "1");

    run_copies(rt, &copy_both, 200, 257, 129, TW_U16);
    cr_assert(eq(int, atomic_load(&on_gpu) + atomic_load(&on_cpu), 200));
    cr_log_info("mixed: %d on GPU, %d on CPU", atomic_load(&on_gpu), atomic_load(&on_cpu));
    tw_runtime_destroy(rt);
}

Test(worker_cuda, gpu_manager_runs_cpu_kinds_without_cpu_workers)
{
    /* With cpu_workers=0, the GPU manager runs CPU-only kinds (I/O tasks) on its host
     * thread, so such jobs complete. */
    SKIP_WITHOUT_GPU();
    tw_runtime *rt = make_runtime("0", "0");

    cr_assert(eq(int, tw_runtime_get_worker_count(rt), 1));
    run_copies(rt, &copy_cpu_only, 10, 64, 64, TW_U8);
    cr_assert(eq(int, atomic_load(&on_cpu), 10));
    tw_runtime_destroy(rt);
}

Test(worker_cuda, unchecked_cuda_error_fails_the_job)
{
    /* A CUDA error the variant leaves behind becomes TW_E_DEVICE with "cuda: ... in task
     * test.bad on GPU 0"; the next job on the runtime still succeeds. */
    SKIP_WITHOUT_GPU();
    /* compute-sanitizer reports every API error, this deliberate one too. */
    if (getenv("NV_SANITIZER_INJECTION_PORT_BASE"))
        cr_skip_test("makes a deliberate CUDA API error; skipped under compute-sanitizer");
    tw_runtime *rt = make_runtime("0", "1");
    tw_job *job = NULL;
    tw_tile *tile = NULL;
    tw_task *t = NULL;
    const char *msg;

    cr_assert(eq(int, twi_job_create(rt, "bad", &job), TW_OK));
    cr_assert(eq(int, twi_tile_create(rt, 64, 8, 1, TW_U8, &tile), TW_OK));
    cr_assert(eq(int, twi_task_create(job, &bad_kind, NULL, NULL, &t), TW_OK));
    cr_assert(eq(int, twi_task_add_tile(t, tile, TW_RW), TW_OK));
    cr_assert(eq(int, twi_task_submit(t), TW_OK));
    twi_task_release(t);
    twi_tile_release(tile);
    twi_job_seal(job);
    cr_assert(eq(int, tw_job_wait(job, -1), TW_E_DEVICE));
    msg = tw_job_get_error(job);
    cr_assert(ne(ptr, (void *)msg, NULL));
    cr_assert(ne(ptr, strstr(msg, "cuda: "), NULL), "%s", msg);
    cr_assert(ne(ptr, strstr(msg, "in task test.bad on GPU 0"), NULL), "%s", msg);
    tw_job_destroy(job);
    run_copies(rt, &copy_cuda_only, 4, 100, 10, TW_U8);
    tw_runtime_destroy(rt);
}

#else /* !TW_HAVE_CUDA */

Test(worker_cuda, built_without_cuda)
{
    /* Nothing to test in a build without CUDA. */
    cr_skip_test("built without CUDA");
}

#endif /* TW_HAVE_CUDA */
