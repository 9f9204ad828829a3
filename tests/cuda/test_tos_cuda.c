/* SPDX-License-Identifier: MIT */
/* tilewave tests: the GPU max-tree of 32-bit levels and the tree-of-shapes job with a GPU. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

/* Criterion 2.4 assertions store into a 1-bit field, which -Wconversion flags at every use. */
#pragma GCC diagnostic ignored "-Wconversion"

#ifdef TW_HAVE_CUDA

#include <cuda_runtime.h>

#include "cuda_kernels.h"
#include "omp_kernels.h"
#include "tilewave.h"
#include "twtest.h"
#include "twtest_maxtree.h"
#include "twtest_rt.h"

/*
 * Suites (small images throughout, for compute-sanitizer): tos_cuda/u32_* compare
 * twi_cuda_maxtree_canon on 32-bit levels (the ranks of the tree of shapes take up to 31 bits)
 * with twi_omp_maxtree_u32, parent image and canonical bit map byte for byte, in place and
 * not; tos_cuda/job_* run tw_tos_submit and tw_grain_submit on a runtime with a GPU worker
 * (the max-tree of the ranks as one task, tos.mt.gpu) and compare with runtime.gpus=none,
 * also under runtime.fault_inject=cuda (every GPU attempt fails: the blocks on the CPU).
 */

static uint64_t rng = 0x9e3779b97f4a7c15ull;

/* Random 32-bit levels: `mode` 0 few distinct values (ties everywhere), 1 values up to
 * 2^31 - 1, 2 smooth ramps of large values with noise, 3 the full 32-bit range. */
static void
random_u32(uint32_t *a, int w, int h, int mode)
{
    const uint32_t base = (uint32_t)twtest_rnd(&rng, 1u << 30);

    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            uint32_t v;

            switch (mode) {
            case 0: v = base + (uint32_t)twtest_rnd(&rng, 4); break;
            case 1: v = (uint32_t)twtest_rnd(&rng, 0x80000000u); break;
            case 2:
                v = 0x7fffff00u - (uint32_t)(x * 3 + y * 5) * 1000u +
                    (uint32_t)twtest_rnd(&rng, 3) * 1000u;
                break;
            default:
                v = (uint32_t)twtest_rnd(&rng, 0xffffffffu) << 1 ^ (uint32_t)twtest_rnd(&rng, 2);
                break;
            }
            a[(size_t)y * (size_t)w + (size_t)x] = v;
        }
    /* a few extremes */
    if (w * h > 2) {
        a[twtest_rnd(&rng, (uint32_t)(w * h))] = 0x7fffffffu;
        a[twtest_rnd(&rng, (uint32_t)(w * h))] = mode == 3 ? 0xffffffffu : 0;
    }
}

/* The GPU's parent image and bit map of `lev` (packed w x h), in place or into a second
 * device buffer with a padded row; *canon: (w h + 63) / 64 words. */
static uint32_t *
gpu_u32(const uint32_t *lev, int w, int h, int conn, bool in_place, uint64_t *canon)
{
    const size_t n = (size_t)w * (size_t)h, words = (n + 63) / 64;
    const int opad = in_place ? 0 : 3;
    const size_t ostride = (size_t)(w + opad) * 4;
    const size_t sb = twi_cuda_maxtree_scratch_size(w, h, TW_U32, conn);
    uint32_t *par = malloc(n * 4), *host = malloc(ostride * (size_t)h);
    void *d_in = NULL, *d_out = NULL, *d_s = NULL, *d_c = NULL;
    tw_tile_view vi = {0}, vo;

    cr_assert(par && host && sb > 0);
    cr_assert(eq(int, cudaMalloc(&d_in, n * 4), cudaSuccess));
    cr_assert(eq(int, cudaMalloc(&d_s, sb), cudaSuccess));
    cr_assert(eq(int, cudaMalloc(&d_c, words * 8), cudaSuccess));
    cr_assert(eq(int, cudaMemset(d_c, 0xA5, words * 8), cudaSuccess));
    cr_assert(eq(int, cudaMemcpy(d_in, lev, n * 4, cudaMemcpyHostToDevice), cudaSuccess));
    vi = (tw_tile_view){ .data = d_in, .stride = 4 * (int64_t)w, .w = w, .h = h, .channels = 1,
                         .type = TW_U32 };
    vo = vi;
    if (!in_place) {
        cr_assert(eq(int, cudaMalloc(&d_out, ostride * (size_t)h), cudaSuccess));
        cr_assert(eq(int, cudaMemset(d_out, 0xA5, ostride * (size_t)h), cudaSuccess));
        vo.data = d_out;
        vo.stride = (int64_t)ostride;
    }
    cr_assert(eq(int, twi_cuda_maxtree_canon(&vi, conn, &vo, d_c, d_s, sb, NULL), TW_OK),
              "%dx%d conn %d", w, h, conn);
    cr_assert(eq(int, cudaDeviceSynchronize(), cudaSuccess));
    cr_assert(eq(int, cudaMemcpy(host, vo.data, ostride * (size_t)h, cudaMemcpyDeviceToHost),
                 cudaSuccess));
    cr_assert(eq(int, cudaMemcpy(canon, d_c, words * 8, cudaMemcpyDeviceToHost), cudaSuccess));
    for (int y = 0; y < h; y++) {
        memcpy(par + (size_t)y * (size_t)w, (char *)host + (size_t)y * ostride, (size_t)w * 4);
        for (int i = 0; i < opad; i++)
            cr_assert(eq(u32, host[(size_t)y * (size_t)(w + opad) + (size_t)w + (size_t)i],
                         0xA5A5A5A5u), "row padding overwritten at y %d", y);
    }
    if (!in_place) {
        /* the levels are left alone */
        cr_assert(eq(int, cudaMemcpy(host, d_in, n * 4, cudaMemcpyDeviceToHost), cudaSuccess));
        cr_assert(eq(int, memcmp(host, lev, n * 4), 0));
    }
    cudaFree(d_in);
    cudaFree(d_out);
    cudaFree(d_s);
    cudaFree(d_c);
    free(host);
    return par;
}

static void
u32_cases(int count, int maxw, int maxh, int conn)
{
    twtest_need_gpu();
    for (int it = 0; it < count; it++) {
        const int w = 1 + (int)twtest_rnd(&rng, (uint32_t)maxw),
                  h = 1 + (int)twtest_rnd(&rng, (uint32_t)maxh), mode = it % 4;
        const size_t n = (size_t)w * (size_t)h, words = (n + 63) / 64;
        uint32_t *lev = malloc(n * 4), *want = malloc(n * 4), *got;
        uint64_t *wc = malloc(words * 8), *gc = malloc(words * 8);
        /* the CPU's blocks too: a grid of several blocks on images of a few hundred pixels */
        const int32_t gx = 1 + (int32_t)twtest_rnd(&rng, 4), gy = 1 + (int32_t)twtest_rnd(&rng, 4);

        cr_assert(lev && want && wc && gc);
        random_u32(lev, w, h, mode);
        memcpy(want, lev, n * 4);
        cr_assert(eq(int, twi_omp_maxtree_u32(want, w, h, conn, wc, 1, gx, gy), TW_OK));
        got = gpu_u32(lev, w, h, conn, it % 2 == 0, gc);
        for (size_t i = 0; i < n; i++)
            cr_assert(eq(u32, got[i], want[i]),
                      "case %d: %dx%d mode %d conn %d: parent of %zu is %u, CPU %u", it, w, h,
                      mode, conn, i, got[i], want[i]);
        cr_assert(eq(int, memcmp(gc, wc, words * 8), 0), "case %d: %dx%d: canonical bit map",
                  it, w, h);
        free(lev);
        free(want);
        free(got);
        free(wc);
        free(gc);
    }
}

/* Many small images, odd sizes across the 64 x 32 tiles' borders. */
Test(tos_cuda, u32_random_conn4, .timeout = TWTEST_TIMEOUT(300))
{
    u32_cases(120, 150, 90, 4);
}

Test(tos_cuda, u32_random_conn8, .timeout = TWTEST_TIMEOUT(300))
{
    u32_cases(60, 150, 90, 8);
}

/* A few quick shapes for compute-sanitizer: one pixel, one row, one column, a constant
 * image, ranks of a real tree of shapes' grid. */
Test(tos_cuda, u32_small_shapes, .timeout = TWTEST_TIMEOUT(120))
{
    static const int dims[][2] = { { 1, 1 }, { 67, 1 }, { 1, 70 }, { 65, 33 }, { 3, 129 } };

    twtest_need_gpu();
    for (size_t d = 0; d < sizeof dims / sizeof dims[0]; d++)
        for (int mode = 0; mode < 5; mode++) {
            const int w = dims[d][0], h = dims[d][1];
            const size_t n = (size_t)w * (size_t)h, words = (n + 63) / 64;
            uint32_t *lev = malloc(n * 4), *want = malloc(n * 4), *got;
            uint64_t *wc = malloc(words * 8), *gc = malloc(words * 8);

            cr_assert(lev && want && wc && gc);
            if (mode == 4)
                for (size_t i = 0; i < n; i++)
                    lev[i] = 0x7fffffffu;
            else
                random_u32(lev, w, h, mode);
            memcpy(want, lev, n * 4);
            cr_assert(eq(int, twi_omp_maxtree_u32(want, w, h, 4, wc, 1, 0, 0), TW_OK));
            got = gpu_u32(lev, w, h, 4, mode % 2 == 0, gc);
            cr_assert(eq(int, memcmp(got, want, n * 4), 0), "%dx%d mode %d", w, h, mode);
            cr_assert(eq(int, memcmp(gc, wc, words * 8), 0), "%dx%d mode %d: bit map", w, h,
                      mode);
            free(lev);
            free(want);
            free(got);
            free(wc);
            free(gc);
        }
}

/* Not 32-bit levels, or no map: refused. */
Test(tos_cuda, u32_canon_contract)
{
    tw_tile_view v = { .data = (void *)16, .stride = 8, .w = 8, .h = 1, .channels = 1,
                       .type = TW_U8 },
                 p = { .data = (void *)64, .stride = 32, .w = 8, .h = 1, .channels = 1,
                       .type = TW_U32 };

    cr_assert(eq(int, twi_cuda_maxtree_canon(&v, 4, &p, (uint64_t *)128, (void *)256, 1 << 20,
                                             NULL),
                 TW_E_INVALID));
    v.type = TW_U32;
    v.stride = 32;
    cr_assert(eq(int, twi_cuda_maxtree_canon(&v, 4, &p, NULL, (void *)256, 1 << 20, NULL),
                 TW_E_INVALID));
}

/* ---- the job ------------------------------------------------------------------------------ */

static tw_runtime *
job_rt(const char *gpus, const char *fault)
{
    tw_log_set_level(TW_LOG_ERROR);
    return twtest_runtime_kv_ok(true, (const char *const[]){ "runtime.gpus", gpus,
                                                             "runtime.cpu_workers", "3",
                                                             "runtime.fault_inject", fault,
                                                             NULL });
}

/* The parent image (and area image) or the grain result of `img` on rt; the report's device. */
static void
run_job(tw_runtime *rt, const void *img, tw_sample_type t, int w, int h, uint64_t grain,
        void *out, uint32_t *area, tw_device_type *dev)
{
    tw_tos_report rep;
    tw_job *job = NULL;
    tw_error err;

    tw_tos_report_init(&rep);
    if (grain) {
        tw_grain_opts g;

        tw_grain_opts_init(&g);
        g.image = (tw_host_image){ (void *)img, w, h, 0, t };
        g.result = (tw_host_image){ out, w, h, 0, t };
        g.area = grain;
        g.report = &rep;
        cr_assert(eq(int, tw_grain_submit(rt, &g, &job, &err), TW_OK), "%s", err.message);
    } else {
        tw_tos_opts o;

        tw_tos_opts_init(&o);
        o.image = (tw_host_image){ (void *)img, w, h, 0, t };
        o.parent = (tw_host_image){ out, w, h, 0, TW_U32 };
        o.area = (tw_host_image){ area, w, h, 0, TW_U32 };
        o.report = &rep;
        cr_assert(eq(int, tw_tos_submit(rt, &o, &job, &err), TW_OK), "%s", err.message);
    }
    cr_assert(eq(int, tw_job_wait(job, -1), TW_OK), "%s", tw_job_get_error(job));
    {
        tw_progress prog;

        tw_job_get_progress(job, &prog);
        cr_assert(eq(i64, prog.done, prog.total));
    }
    tw_job_destroy(job);
    cr_assert(ge(dbl, rep.mt_s, 0.0));
    cr_assert(ge(dbl, rep.tree_s, rep.mt_s));
    *dev = rep.mt_device;
}

static void
job_cases(const char *fault, tw_device_type want_dev, int count)
{
    tw_runtime *cpu, *gpu;

    twtest_need_gpu();
    cpu = job_rt("none", "");
    gpu = job_rt("0", fault);
    for (int it = 0; it < count; it++) {
        const tw_sample_type t = it % 3 == 2 ? TW_U16 : TW_U8;
        const int w = 1 + (int)twtest_rnd(&rng, 90), h = 1 + (int)twtest_rnd(&rng, 70);
        const size_t n = (size_t)w * (size_t)h, ss = tw_sample_size(t);
        const uint64_t grain = it % 4 == 3 ? 1 + twtest_rnd(&rng, (uint32_t)n) : 0;
        void *img = malloc(n * ss), *a = malloc(n * 4), *b = malloc(n * 4);
        uint32_t *aa = malloc(n * 4), *ab = malloc(n * 4);
        tw_device_type da, db;

        cr_assert(img && a && b && aa && ab);
        if (it % 2)
            twtest_maxtree_natural_image(&rng, img, t, w, h);
        else
            twtest_maxtree_random_image(&rng, img, t, w, h, (int)twtest_rnd(&rng, 6));
        run_job(cpu, img, t, w, h, grain, a, aa, &da);
        run_job(gpu, img, t, w, h, grain, b, ab, &db);
        cr_assert(eq(int, (int)da, (int)TW_DEVICE_CPU));
        cr_assert(eq(int, (int)db, (int)want_dev), "case %d: the max-tree ran on device %d", it,
                  (int)db);
        cr_assert(eq(int, memcmp(a, b, n * (grain ? ss : 4)), 0),
                  "case %d: %dx%d %s grain %llu: GPU and CPU differ", it, w, h,
                  tw_sample_type_name(t), (unsigned long long)grain);
        if (!grain)
            cr_assert(eq(int, memcmp(aa, ab, n * 4), 0), "case %d: area image", it);
        free(img);
        free(a);
        free(b);
        free(aa);
        free(ab);
    }
    tw_runtime_destroy(cpu);
    tw_runtime_destroy(gpu);
}

/* The max-tree of the ranks on the GPU: the same parent, area and grain images. */
Test(tos_cuda, job_gpu_matches_cpu, .timeout = TWTEST_TIMEOUT(300))
{
    job_cases("", TW_DEVICE_CUDA, 40);
}

/* Every GPU attempt fails: retried on a CPU worker, which submits the blocks. */
Test(tos_cuda, job_gpu_faults_fall_back_to_the_blocks, .timeout = TWTEST_TIMEOUT(300))
{
    job_cases("cuda", TW_DEVICE_CPU, 12);
}

#else

Test(tos_cuda, skipped_without_cuda)
{
    /* Builds without CUDA have no kernel to test. */
    cr_skip_test("built without CUDA");
}

#endif
