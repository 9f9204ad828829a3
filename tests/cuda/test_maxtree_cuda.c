/* SPDX-License-Identifier: MIT */
/* tilewave tests: the CUDA max-tree against the naive reference and the CPU twin. */
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
#include "twtest.h"
#include "twtest_maxtree.h"

/*
 * Suites: maxtree_cuda/small_* are quick hand-picked shapes (the compute-sanitizer runs of
 * tests/gpu/validate.sh select them); maxtree_cuda/random_* sweep 2,000+ random images up to
 * 256 x 256 against the naive reference and the CPU twin; maxtree_cuda_large holds images of
 * several tiles in each direction against the CPU twin.
 */

#define PAD_WORD 0xA5A5A5A5u

/* Device buffers sized for the largest case of a test, reused across its images. */
typedef struct gpu_bufs {
    void *in, *out, *scratch;
    size_t in_bytes, out_bytes, scratch_bytes;
} gpu_bufs;

static void
bufs_init(gpu_bufs *b, int32_t maxw, int32_t maxh, int maxpad)
{
    memset(b, 0, sizeof *b);
    b->in_bytes = (size_t)(maxw + maxpad) * (size_t)maxh * 2 + 16;
    b->out_bytes = (size_t)(maxw + maxpad) * (size_t)maxh * 4 + 16;
    b->scratch_bytes = twi_cuda_maxtree_scratch_size(maxw, maxh, TW_U16, 8);
    cr_assert(eq(int, cudaMalloc(&b->in, b->in_bytes), cudaSuccess));
    cr_assert(eq(int, cudaMalloc(&b->out, b->out_bytes), cudaSuccess));
    cr_assert(eq(int, cudaMalloc(&b->scratch, b->scratch_bytes), cudaSuccess));
}

static void
bufs_fini(gpu_bufs *b)
{
    cudaFree(b->in);
    cudaFree(b->out);
    cudaFree(b->scratch);
}

/*
 * Run the CUDA kernel on img (packed w x h) with `ipad` / `opad` extra samples per row on the
 * device; returns the packed parent image (malloc'd) and checks that the output's row padding
 * was left alone.
 */
static uint32_t *
gpu_maxtree(gpu_bufs *b, const void *img, tw_sample_type type, int32_t w, int32_t h, int conn,
            int ipad, int opad)
{
    const size_t ss = type == TW_U16 ? 2 : 1, n = (size_t)w * (size_t)h;
    const int64_t istride = (int64_t)((size_t)(w + ipad) * ss), ostride = (int64_t)(w + opad) * 4;
    uint32_t *host = malloc((size_t)ostride * (size_t)h + 4), *par = malloc((n ? n : 1) * 4);
    tw_tile_view vin = {b->in, istride, w, h, 1, type, 0, 0};
    tw_tile_view vout = {b->out, ostride, w, h, 1, TW_U32, 0, 0};
    const size_t scratch = twi_cuda_maxtree_scratch_size(w, h, type, conn);

    cr_assert(host && par);
    cr_assert(le(sz, (size_t)istride * (size_t)h, b->in_bytes));
    cr_assert(le(sz, (size_t)ostride * (size_t)h, b->out_bytes));
    cr_assert(le(sz, scratch, b->scratch_bytes));
    if (h > 0 && w > 0)
        cr_assert(eq(int,
                     cudaMemcpy2D(b->in, (size_t)istride, img, (size_t)w * ss, (size_t)w * ss,
                                  (size_t)h, cudaMemcpyHostToDevice),
                     cudaSuccess));
    cr_assert(eq(int, cudaMemset(b->out, 0xA5, (size_t)ostride * (size_t)h + 4), cudaSuccess));
    cr_assert(eq(int, twi_cuda_maxtree(&vin, conn, &vout, b->scratch, scratch, NULL), TW_OK),
              "twi_cuda_maxtree failed on %dx%d type %d conn %d", w, h, (int)type, conn);
    cr_assert(eq(int, cudaDeviceSynchronize(), cudaSuccess));
    cr_assert(eq(int, cudaMemcpy(host, b->out, (size_t)ostride * (size_t)h, cudaMemcpyDeviceToHost),
                 cudaSuccess));
    for (int32_t y = 0; y < h; y++) {
        const uint32_t *row = host + (size_t)y * (size_t)(w + opad);

        memcpy(par + (size_t)y * (size_t)w, row, (size_t)w * 4);
        for (int i = 0; i < opad; i++)
            cr_assert(eq(u32, row[w + i], PAD_WORD), "row padding overwritten at y %d", y);
    }
    free(host);
    return par;
}

/* The CPU twin's parent image (TW_U32, packed). */
static uint32_t *
cpu_maxtree(const void *img, tw_sample_type type, int32_t w, int32_t h, int conn, int nthreads)
{
    const size_t ss = type == TW_U16 ? 2 : 1, n = (size_t)w * (size_t)h;
    uint32_t *par = malloc((n ? n : 1) * 4);
    tw_tile_view vin = {(void *)img, (int64_t)((size_t)w * ss), w, h, 1, type, 0, 0};
    tw_tile_view vout = {par, (int64_t)w * 4, w, h, 1, TW_U32, 0, 0};

    cr_assert_not_null(par);
    cr_assert(eq(int, twi_omp_maxtree(&vin, conn, &vout, nthreads), TW_OK));
    return par;
}

static void
assert_same(const uint32_t *got, const uint32_t *want, size_t n, const char *what, int32_t w,
            int32_t h, tw_sample_type type, int conn, int mode)
{
    for (size_t i = 0; i < n; i++)
        if (got[i] != want[i])
            cr_fatal("%s: %dx%d type %d conn %d mode %d: parent(%zu) = %u, want %u", what,
                           w, h, (int)type, conn, mode, i, got[i], want[i]);
}

static void *
random_image(uint64_t *rng, tw_sample_type type, int32_t w, int32_t h, int mode)
{
    const size_t n = (size_t)w * (size_t)h, ss = type == TW_U16 ? 2 : 1;
    void *img = malloc((n ? n : 1) * ss);

    cr_assert_not_null(img);
    twtest_maxtree_random_image(rng, img, type, w, h, mode);
    return img;
}

/* One image through GPU, CPU and (when `naive`) the naive reference; all must agree. */
static void
check_image(gpu_bufs *b, const void *img, tw_sample_type type, int32_t w, int32_t h, int conn,
            int mode, int ipad, int opad, bool naive)
{
    const size_t n = (size_t)w * (size_t)h;
    uint32_t *g = gpu_maxtree(b, img, type, w, h, conn, ipad, opad);
    uint32_t *c = cpu_maxtree(img, type, w, h, conn, 1);

    assert_same(g, c, n, "GPU vs CPU", w, h, type, conn, mode);
    if (naive) {
        uint64_t *r = malloc((n ? n : 1) * sizeof *r);

        cr_assert_not_null(r);
        twtest_maxtree_naive(img, type, w, h, conn, r);
        for (size_t i = 0; i < n; i++)
            if ((uint64_t)g[i] != r[i])
                cr_fatal("GPU vs naive: %dx%d type %d conn %d mode %d: parent(%zu) = %u, "
                               "want %llu",
                               w, h, (int)type, conn, mode, i, g[i], (unsigned long long)r[i]);
        free(r);
    }
    free(g);
    free(c);
}

/* A random side: mostly off the tile grid (64 x 64 tiles for 8-bit, 64 x 32 for 16-bit),
 * sometimes tiny or on it. */
static int32_t
random_side(uint64_t *rng, int32_t max)
{
    switch (twtest_rnd(rng, 8)) {
    case 0:
        return 1 + (int32_t)twtest_rnd(rng, 4);
    case 1: {
        const int32_t m = 64 * (1 + (int32_t)twtest_rnd(rng, (uint32_t)(max / 64))) +
                          (int32_t)twtest_rnd(rng, 3) - 1;

        return m > max ? max : m;
    }
    default:
        return 1 + (int32_t)twtest_rnd(rng, (uint32_t)max);
    }
}

/* `count` random images of one type and connectivity, cycling the six modes. */
static void
random_sweep(tw_sample_type type, int conn, int count, uint64_t seed)
{
    uint64_t rng = seed;
    gpu_bufs b;

    twtest_need_gpu();
    bufs_init(&b, 256, 256, 5);
    for (int k = 0; k < count; k++) {
        const int32_t w = random_side(&rng, 256), h = random_side(&rng, 256);
        const int mode = k % 6;
        const int ipad = twtest_rnd(&rng, 4) ? 0 : 1 + (int)twtest_rnd(&rng, 5);
        const int opad = twtest_rnd(&rng, 4) ? 0 : 1 + (int)twtest_rnd(&rng, 5);
        void *img = random_image(&rng, type, w, h, mode);

        /* the naive reference is O(n log n) with qsort: every image, but it dominates */
        check_image(&b, img, type, w, h, conn, mode, ipad, opad, (size_t)w * (size_t)h <= 40000);
        free(img);
    }
    bufs_fini(&b);
}

Test(maxtree_cuda, random_u8_conn4)
{
    /* 520 random 8-bit images, 4-connected: GPU == CPU twin == naive reference. */
    random_sweep(TW_U8, 4, 520, 0x1234567ull);
}

Test(maxtree_cuda, random_u8_conn8)
{
    /* 520 random 8-bit images, 8-connected (grid simplification of propositions 1-2). */
    random_sweep(TW_U8, 8, 520, 0x2345678ull);
}

Test(maxtree_cuda, random_u16_conn4)
{
    /* 520 random 16-bit images, 4-connected. */
    random_sweep(TW_U16, 4, 520, 0x3456789ull);
}

Test(maxtree_cuda, random_u16_conn8)
{
    /* 520 random 16-bit images, 8-connected. */
    random_sweep(TW_U16, 8, 520, 0x456789Aull);
}

Test(maxtree_cuda, small_shapes_on_and_off_the_tile_grid)
{
    /* Lines, columns, exact tiles and one pixel past them, every mode, type and connectivity. */
    static const int32_t shapes[][2] = {{1, 1},   {1, 2},   {2, 1},   {1, 300}, {300, 1},
                                        {2, 130}, {130, 2}, {64, 64}, {65, 64}, {64, 65},
                                        {63, 65}, {65, 63}, {65, 65}, {128, 128}, {129, 127},
                                        {3, 200}, {200, 3}, {17, 16}, {16, 17}, {191, 66},
                                        {31, 33}, {33, 31}, {32, 64}, {97, 129}, {129, 97}};
    uint64_t rng = 77;
    gpu_bufs b;

    twtest_need_gpu();
    bufs_init(&b, 300, 300, 3);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int mode = 0; mode < 6; mode++)
            for (int t = 0; t < 2; t++)
                for (int conn = 4; conn <= 8; conn += 4) {
                    const tw_sample_type type = t ? TW_U16 : TW_U8;
                    void *img = random_image(&rng, type, shapes[s][0], shapes[s][1], mode);

                    check_image(&b, img, type, shapes[s][0], shapes[s][1], conn, mode, t, 1 - t,
                                true);
                    free(img);
                }
    bufs_fini(&b);
}

Test(maxtree_cuda, small_constant_and_ramp_images)
{
    /* Flat images (one node: every pixel points to the last one), ramps along each axis and a
     * checkerboard (8-connected: two levels, two nodes). */
    const int32_t w = 150, h = 97;
    const size_t n = (size_t)w * (size_t)h;
    uint16_t *img = malloc(n * 2);
    gpu_bufs b;

    twtest_need_gpu();
    cr_assert_not_null(img);
    bufs_init(&b, w, h, 0);
    for (int pat = 0; pat < 5; pat++) {
        for (int32_t y = 0; y < h; y++)
            for (int32_t x = 0; x < w; x++)
                img[(size_t)y * (size_t)w + (size_t)x] =
                    (uint16_t)(pat == 0   ? 7
                               : pat == 1 ? x
                               : pat == 2 ? h - 1 - y
                               : pat == 3 ? (x + y) & 1
                                          : 65535 - (uint16_t)(x * y));
        for (int conn = 4; conn <= 8; conn += 4)
            check_image(&b, img, TW_U16, w, h, conn, 100 + pat, 0, 0, true);
    }
    {
        uint32_t *g;

        for (size_t i = 0; i < n; i++)
            img[i] = 7;
        g = gpu_maxtree(&b, img, TW_U16, w, h, 4, 0, 0);
        for (size_t i = 0; i < n; i++)
            cr_assert(eq(u32, g[i], (uint32_t)(n - 1)));
        free(g);
    }
    bufs_fini(&b);
    free(img);
}

Test(maxtree_cuda, small_empty_image_is_a_noop)
{
    /* 0 x h and w x 0 views return TW_OK and enqueue nothing. */
    tw_tile_view vin = {NULL, 0, 0, 5, 1, TW_U8, 0, 0};
    tw_tile_view vout = {NULL, 0, 0, 5, 1, TW_U32, 0, 0};

    twtest_need_gpu();
    cr_assert(eq(int, twi_cuda_maxtree(&vin, 4, &vout, NULL, 0, NULL), TW_OK));
    vin.w = vout.w = 5;
    vin.h = vout.h = 0;
    vin.stride = 5;
    vout.stride = 20;
    cr_assert(eq(int, twi_cuda_maxtree(&vin, 8, &vout, NULL, 0, NULL), TW_OK));
    cr_assert(eq(int, cudaDeviceSynchronize(), cudaSuccess));
}

Test(maxtree_cuda, small_rejects_invalid_arguments)
{
    /* Bad views, types, connectivity, TW_U64 parents, more than UINT32_MAX pixels and short
     * scratch are TW_E_INVALID, with nothing enqueued. */
    void *d_in = NULL, *d_out = NULL, *scr = NULL;
    const size_t bytes = twi_cuda_maxtree_scratch_size(16, 8, TW_U8, 4);

    twtest_need_gpu();
    cr_assert(gt(sz, bytes, (size_t)0));
    cr_assert(eq(sz, twi_cuda_maxtree_scratch_size(70000, 70000, TW_U8, 4), (size_t)0));
    cr_assert(eq(sz, twi_cuda_maxtree_scratch_size(-1, 5, TW_U8, 4), (size_t)0));
    cr_assert(eq(int, cudaMalloc(&d_in, 16 * 8 * 2), cudaSuccess));
    cr_assert(eq(int, cudaMalloc(&d_out, 16 * 8 * 8), cudaSuccess));
    cr_assert(eq(int, cudaMalloc(&scr, bytes), cudaSuccess));
    const tw_tile_view in0 = {d_in, 16, 16, 8, 1, TW_U8, 0, 0};
    const tw_tile_view out0 = {d_out, 64, 16, 8, 1, TW_U32, 0, 0};
    tw_tile_view in = in0, out = out0;

    cr_assert(eq(int, twi_cuda_maxtree(&in, 4, &out, scr, bytes, NULL), TW_OK));
    cr_assert(eq(int, twi_cuda_maxtree(NULL, 4, &out, scr, bytes, NULL), TW_E_INVALID));
    cr_assert(eq(int, twi_cuda_maxtree(&in, 4, NULL, scr, bytes, NULL), TW_E_INVALID));
    cr_assert(eq(int, twi_cuda_maxtree(&in, 6, &out, scr, bytes, NULL), TW_E_INVALID));
    cr_assert(eq(int, twi_cuda_maxtree(&in, 0, &out, scr, bytes, NULL), TW_E_INVALID));
    cr_assert(eq(int, twi_cuda_maxtree(&in, 4, &out, NULL, bytes, NULL), TW_E_INVALID));
    cr_assert(eq(int, twi_cuda_maxtree(&in, 4, &out, scr, bytes - 1, NULL), TW_E_INVALID));
    out.type = TW_U64;
    out.stride = 128;
    cr_assert(eq(int, twi_cuda_maxtree(&in, 4, &out, scr, bytes, NULL), TW_E_INVALID));
    out = out0;
    out.type = TW_U16;
    cr_assert(eq(int, twi_cuda_maxtree(&in, 4, &out, scr, bytes, NULL), TW_E_INVALID));
    out = out0;
    in.type = TW_F32;
    in.stride = 64;
    cr_assert(eq(int, twi_cuda_maxtree(&in, 4, &out, scr, bytes, NULL), TW_E_INVALID));
    in = in0;
    in.channels = 3;
    in.stride = 48;
    cr_assert(eq(int, twi_cuda_maxtree(&in, 4, &out, scr, bytes, NULL), TW_E_INVALID));
    in = in0;
    out.w = 15;
    cr_assert(eq(int, twi_cuda_maxtree(&in, 4, &out, scr, bytes, NULL), TW_E_INVALID));
    out = out0;
    in.stride = 15;
    cr_assert(eq(int, twi_cuda_maxtree(&in, 4, &out, scr, bytes, NULL), TW_E_INVALID));
    in = in0;
    out.stride = 62;
    cr_assert(eq(int, twi_cuda_maxtree(&in, 4, &out, scr, bytes, NULL), TW_E_INVALID));
    out = out0;
    in.data = NULL;
    cr_assert(eq(int, twi_cuda_maxtree(&in, 4, &out, scr, bytes, NULL), TW_E_INVALID));
    in = in0;
    /* more than UINT32_MAX pixels: rejected before anything touches the (small) buffers */
    in.w = out.w = 70000;
    in.h = out.h = 70000;
    in.stride = 70000;
    out.stride = 280000;
    cr_assert(eq(int, twi_cuda_maxtree(&in, 4, &out, scr, bytes, NULL), TW_E_INVALID));
    cr_assert(eq(int, cudaDeviceSynchronize(), cudaSuccess));
    cudaFree(d_in);
    cudaFree(d_out);
    cudaFree(scr);
}

Test(maxtree_cuda, small_deterministic_over_50_runs)
{
    /* 50 runs on one image with many concurrent CONNECTs (16-bit noise, 8-connected) give the
     * same bytes each time. */
    const int32_t w = 777, h = 555;
    uint64_t rng = 99;
    void *img = random_image(&rng, TW_U16, w, h, 0);
    uint32_t *first;
    gpu_bufs b;

    twtest_need_gpu();
    bufs_init(&b, w, h, 0);
    first = gpu_maxtree(&b, img, TW_U16, w, h, 8, 0, 0);
    for (int run = 1; run < 50; run++) {
        uint32_t *g = gpu_maxtree(&b, img, TW_U16, w, h, 8, 0, 0);

        cr_assert(eq(int, memcmp(g, first, (size_t)w * (size_t)h * 4), 0), "run %d differs", run);
        free(g);
    }
    free(first);
    free(img);
    bufs_fini(&b);
}

Test(maxtree_cuda_large, images_of_many_tiles_match_cpu, .timeout = TWTEST_TIMEOUT(600))
{
    /* 1000 x 700 (every mode) and 2048 x 2048 (smooth, noise) against the CPU twin, both
     * types and connectivities; the structural check on one of them as a third opinion. */
    static const int32_t sizes[][3] = {{1000, 700, 0}, {1000, 700, 1}, {1000, 700, 2},
                                       {1000, 700, 3}, {1000, 700, 4}, {1000, 700, 5},
                                       {2048, 2048, 3}, {2048, 2048, 0}, {4099, 1031, 3}};
    uint64_t rng = 2024;
    gpu_bufs b;

    twtest_need_gpu();
    bufs_init(&b, 4099, 2048, 0);
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (int t = 0; t < 2; t++)
            for (int conn = 4; conn <= 8; conn += 4) {
                const tw_sample_type type = t ? TW_U16 : TW_U8;
                const int32_t w = sizes[s][0], h = sizes[s][1];
                const size_t n = (size_t)w * (size_t)h;
                void *img = random_image(&rng, type, w, h, sizes[s][2]);
                uint32_t *g = gpu_maxtree(&b, img, type, w, h, conn, 0, 0);
                uint32_t *c = cpu_maxtree(img, type, w, h, conn, 4);

                assert_same(g, c, n, "GPU vs CPU", w, h, type, conn, sizes[s][2]);
                if (s == 0) {
                    uint64_t *p64 = malloc(n * sizeof *p64);
                    const char *msg;

                    cr_assert_not_null(p64);
                    for (size_t i = 0; i < n; i++)
                        p64[i] = g[i];
                    msg = twtest_maxtree_check(img, type, w, h, conn, p64);
                    cr_assert_null(msg, "structural check: %s", msg ? msg : "");
                    free(p64);
                }
                free(g);
                free(c);
                free(img);
            }
    bufs_fini(&b);
}

#else

Test(maxtree_cuda, skipped_without_cuda)
{
    /* Builds without CUDA have no kernel to test. */
    cr_skip_test("built without CUDA");
}

#endif
