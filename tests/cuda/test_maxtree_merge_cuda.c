/* SPDX-License-Identifier: MIT */
/* tilewave tests: the GPU merge of border max-trees against the CPU merge (twi_maxtree_merge). */
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
 * Suites: maxtree_merge_cuda/small_* sweep 600+ random tiled images (the compute-sanitizer runs
 * select them); maxtree_merge_cuda/lines_* take 1 x N and N x 1 grids of one-pixel tiles;
 * maxtree_merge_cuda/large_* whole 4096^2 and 2048^2 images in 256^2 and 128^2 tiles. Each grid:
 * every tile's tree by twi_omp_maxtree, its border tree by twi_maxtree_border_extract, then
 * twi_maxtree_merge on the CPU and twi_maxtree_pack_build + upload + twi_cuda_maxtree_merge on the
 * GPU for the three rules with random thresholds: the answers must be equal entry for entry, and
 * the GPU's link count equal to the CPU's.
 */

typedef twtest_maxtree_grid grid;

static grid
make_grid(uint64_t *rng, const void *img, int32_t W, int32_t H, tw_sample_type type, int conn,
          int32_t tw, int32_t th, bool extra)
{
    return twtest_maxtree_grid_make(rng, img, W, H, type, conn, tw, th, extra ? 6 : 0);
}

/* A random filter of `rule`: thresholds around the interesting range, sometimes beyond. */
static twi_maxtree_filter
random_filter(uint64_t *rng, int rule, const grid *g)
{
    twi_maxtree_filter f;

    f.rule = (twi_maxtree_rule)rule;
    switch (twtest_rnd(rng, 4)) {
    case 0:
        f.threshold = twtest_rnd(rng, 6);
        break;
    case 1:
        f.threshold = rule == TWI_MAXTREE_HEIGHT ? twtest_rnd(rng, g->maxv + 2)
                                            : twtest_rnd(rng, (uint32_t)g->pixels + 2);
        break;
    case 2:
        f.threshold = rule == TWI_MAXTREE_HEIGHT ? (uint64_t)g->maxv + 1 : (uint64_t)g->pixels + 1;
        break;
    default:
        f.threshold = 1 + twtest_rnd(rng, 64);
        break;
    }
    f.vmin = (uint16_t)twtest_rnd(rng, g->maxv + 1);
    return f;
}

/*
 * CPU merge vs pack + upload + GPU merge for each rule; returns the number of answers
 * compared. The scratch and the answers are poisoned first (alternating bytes), the scratch
 * is passed at a random misaligned-to-256 offset, and `stream` may be a created stream.
 */
static int64_t
check_grid(uint64_t *rng, const grid *g, int conn, cudaStream_t stream, const char *what)
{
    twi_maxtree_pack l;
    void *buf = NULL, *d_pack = NULL, *d_scr = NULL;
    uint64_t *d_res = NULL, *got = NULL;
    int64_t *d_links = NULL, links = -1, compared = 0;
    size_t scr;
    const size_t shift = 8 * twtest_rnd(rng, 32);

    cr_assert(eq(int, twi_maxtree_pack_build(g->bp, g->tx, g->ty, &l, &buf), TW_OK), "%s: pack",
              what);
    scr = twi_cuda_maxtree_merge_scratch_size(&l, conn);
    cr_assert(gt(sz, scr, 0));
    got = malloc((size_t)l.n * sizeof *got);
    cr_assert_not_null(got);
    cr_assert(eq(int, cudaMalloc(&d_pack, l.bytes), cudaSuccess));
    cr_assert(eq(int, cudaMalloc((void **)&d_res, (size_t)l.n * 8), cudaSuccess));
    cr_assert(eq(int, cudaMalloc((void **)&d_links, 8), cudaSuccess));
    cr_assert(eq(int, cudaMalloc(&d_scr, scr + shift), cudaSuccess));
    cr_assert(eq(int, cudaMemcpy(d_pack, buf, l.bytes, cudaMemcpyHostToDevice), cudaSuccess));
    for (int rule = 0; rule < 3; rule++) {
        const twi_maxtree_filter f = random_filter(rng, rule, g);
        uint64_t *res = NULL;
        int64_t *off = NULL, edges = -1;
        const int poison = twtest_rnd(rng, 2) ? 0xA5 : 0x00;

        cr_assert(eq(int, twi_maxtree_merge(g->bp, g->tx, g->ty, conn, &f, &res, &off, &edges),
                     TW_OK),
                  "%s: CPU merge", what);
        cr_assert(eq(int, cudaMemset(d_scr, poison, scr + shift), cudaSuccess));
        cr_assert(eq(int, cudaMemset(d_res, 0xff - poison, (size_t)l.n * 8), cudaSuccess));
        cr_assert(eq(int,
                     twi_cuda_maxtree_merge(d_pack, &l, conn, &f, d_res, d_links,
                                            (char *)d_scr + shift, scr, stream),
                     TW_OK),
                  "%s: GPU merge", what);
        cr_assert(eq(int, cudaStreamSynchronize(stream), cudaSuccess), "%s: kernels", what);
        cr_assert(eq(int, cudaMemcpy(got, d_res, (size_t)l.n * 8, cudaMemcpyDeviceToHost),
                     cudaSuccess));
        cr_assert(eq(int, cudaMemcpy(&links, d_links, 8, cudaMemcpyDeviceToHost), cudaSuccess));
        /* the CPU's tile offsets are the pack's */
        for (int64_t t = 0; t <= g->tx * g->ty; t++)
            cr_assert(eq(i64, off[t], ((const int64_t *)(const void *)((const char *)buf +
                                                                        l.off_at))[t]));
        for (int64_t v = 0; v < l.n; v++)
            if (got[v] != res[v])
                cr_fatal("%s: %lldx%lld tiles conn %d rule %d threshold %llu vmin %u: "
                         "res[%lld] = %llu, want %llu",
                         what, (long long)g->tx, (long long)g->ty, conn, rule,
                         (unsigned long long)f.threshold, f.vmin, (long long)v,
                         (unsigned long long)got[v], (unsigned long long)res[v]);
        cr_assert(eq(i64, links, edges), "%s: links", what);
        compared += l.n;
        free(res);
        free(off);
    }
    cudaFree(d_pack);
    cudaFree(d_res);
    cudaFree(d_links);
    cudaFree(d_scr);
    free(got);
    free(buf);
    return compared;
}

static void *
random_image(uint64_t *rng, tw_sample_type type, int32_t w, int32_t h, int mode)
{
    void *img = malloc((size_t)w * (size_t)h * (type == TW_U16 ? 2 : 1));

    cr_assert_not_null(img);
    twtest_maxtree_random_image(rng, img, type, w, h, mode);
    return img;
}

/* `count` random images of one type and connectivity, 1..48 pixels a side (every eighth up
 * to 160), cut at random, every image mode. */
static void
small_sweep(tw_sample_type type, int conn, int count, uint64_t seed)
{
    uint64_t rng = seed;
    int64_t compared = 0;

    twtest_need_gpu();
    for (int k = 0; k < count; k++) {
        const uint32_t big = k % 8 == 7 ? 160 : 48;
        const int32_t W = 1 + (int32_t)twtest_rnd(&rng, big);
        const int32_t H = 1 + (int32_t)twtest_rnd(&rng, big);
        void *img = random_image(&rng, type, W, H, k % 6);
        grid g = make_grid(&rng, img, W, H, type, conn, 0, 0, true);
        char what[64];

        snprintf(what, sizeof what, "case %d (%dx%d mode %d)", k, W, H, k % 6);
        compared += check_grid(&rng, &g, conn, NULL, what);
        twtest_maxtree_grid_free(&g);
        free(img);
    }
    cr_log_info("%d grids, %lld answers compared", count, (long long)compared);
}

Test(maxtree_merge_cuda, small_u8_conn4)
{
    /* 160 random tiled 8-bit images, 4-connected: GPU answers == CPU answers, 3 rules. */
    small_sweep(TW_U8, 4, 160, 0x1111ull);
}

Test(maxtree_merge_cuda, small_u8_conn8)
{
    /* 160 random tiled 8-bit images, 8-connected (diagonals and corner links). */
    small_sweep(TW_U8, 8, 160, 0x2222ull);
}

Test(maxtree_merge_cuda, small_u16_conn4)
{
    /* 160 random tiled 16-bit images, 4-connected. */
    small_sweep(TW_U16, 4, 160, 0x3333ull);
}

Test(maxtree_merge_cuda, small_u16_conn8)
{
    /* 160 random tiled 16-bit images, 8-connected. */
    small_sweep(TW_U16, 8, 160, 0x4444ull);
}

Test(maxtree_merge_cuda, lines_of_one_pixel_tiles)
{
    /* 1 x N and N x 1 grids: images of one row or one column cut into one-pixel tiles, and
     * wide or tall images cut along one direction only, both connectivities and types. */
    uint64_t rng = 0x5555ull;

    twtest_need_gpu();
    for (int k = 0; k < 48; k++) {
        const tw_sample_type type = k & 1 ? TW_U16 : TW_U8;
        const int conn = k & 2 ? 8 : 4, across = (k >> 2) & 1;
        const int32_t len = 2 + (int32_t)twtest_rnd(&rng, 120);
        const int32_t thick = k < 24 ? 1 : 2 + (int32_t)twtest_rnd(&rng, 9);
        const int32_t W = across ? len : thick, H = across ? thick : len;
        void *img = random_image(&rng, type, W, H, k % 6);
        /* tiles of one pixel along the line, whole across it */
        grid g = make_grid(&rng, img, W, H, type, conn, across ? 1 : W, across ? H : 1, false);
        char what[64];

        cr_assert(across ? g.ty == 1 && g.tx == W : g.tx == 1 && g.ty == H);
        snprintf(what, sizeof what, "line %d (%dx%d)", k, W, H);
        check_grid(&rng, &g, conn, NULL, what);
        twtest_maxtree_grid_free(&g);
        free(img);
    }
}

/* One large image in fixed tiles on a created stream. */
static void
large_case(tw_sample_type type, int32_t side, int32_t tile, int mode, uint64_t seed)
{
    uint64_t rng = seed;
    cudaStream_t s;
    void *img;

    twtest_need_gpu();
    cr_assert(eq(int, cudaStreamCreate(&s), cudaSuccess));
    img = random_image(&rng, type, side, side, mode);
    for (int conn = 4; conn <= 8; conn += 4) {
        grid g = make_grid(&rng, img, side, side, type, conn, tile, tile, false);
        char what[64];

        snprintf(what, sizeof what, "%dx%d in %dx%d tiles", side, side, tile, tile);
        check_grid(&rng, &g, conn, s, what);
        twtest_maxtree_grid_free(&g);
    }
    free(img);
    cudaStreamDestroy(s);
}

Test(maxtree_merge_cuda, large_u8_4096_in_256_tiles, .timeout = TWTEST_TIMEOUT(300))
{
    /* A 4096 x 4096 smooth-ish 8-bit image in 256 x 256 tiles, 4- and 8-connected. */
    large_case(TW_U8, 4096, 256, 3, 0x6666ull);
}

Test(maxtree_merge_cuda, large_u8_noise_2048_in_100_tiles, .timeout = TWTEST_TIMEOUT(300))
{
    /* A 2048 x 2048 8-bit noise image in 100 x 100 tiles (the last ones 48 wide/tall). */
    large_case(TW_U8, 2048, 100, 0, 0x7777ull);
}

Test(maxtree_merge_cuda, large_u16_2048_in_128_tiles, .timeout = TWTEST_TIMEOUT(300))
{
    /* A 2048 x 2048 16-bit image of many levels in 128 x 128 tiles: deep trees. */
    large_case(TW_U16, 2048, 128, 4, 0x8888ull);
}

Test(maxtree_merge_cuda, bad_arguments_are_invalid)
{
    /* Checked on the host before anything is enqueued (no device needed): NULL or
     * misaligned buffers, a layout that does not describe a grid or whose arrays leave the
     * buffer or are misaligned, a bad connectivity or rule, a scratch too small. */
    const twi_maxtree_pack good = {2, 1, 2, 10, 4096, 0, 128, 256, 512, 640, 768, 896, 1024};
    twi_maxtree_pack l;
    const twi_maxtree_filter f = {TWI_MAXTREE_AREA, 5, 0}, bad_rule = {(twi_maxtree_rule)7, 5, 0};
    void *pack = (void *)(uintptr_t)0x10000, *scr = (void *)(uintptr_t)0x20000;
    uint64_t *res = (uint64_t *)(uintptr_t)0x30000;
    int64_t *links = (int64_t *)(uintptr_t)0x40000;
    const size_t need = twi_cuda_maxtree_merge_scratch_size(&good, 4);

    cr_assert(gt(sz, need, 0));
    cr_assert(eq(sz, twi_cuda_maxtree_merge_scratch_size(&good, 8), need));
    cr_assert(eq(sz, twi_cuda_maxtree_merge_scratch_size(NULL, 4), 0));
    cr_assert(eq(sz, twi_cuda_maxtree_merge_scratch_size(&good, 5), 0));
#define BAD(...) cr_assert(eq(int, twi_cuda_maxtree_merge(__VA_ARGS__), TW_E_INVALID))
    BAD(NULL, &good, 4, &f, res, links, scr, need, NULL);
    BAD((char *)pack + 4, &good, 4, &f, res, links, scr, need, NULL);
    BAD(pack, NULL, 4, &f, res, links, scr, need, NULL);
    BAD(pack, &good, 0, &f, res, links, scr, need, NULL);
    BAD(pack, &good, 6, &f, res, links, scr, need, NULL);
    BAD(pack, &good, 4, NULL, res, links, scr, need, NULL);
    BAD(pack, &good, 4, &bad_rule, res, links, scr, need, NULL);
    BAD(pack, &good, 4, &f, NULL, links, scr, need, NULL);
    BAD(pack, &good, 4, &f, (uint64_t *)(void *)((char *)res + 4), links, scr, need, NULL);
    BAD(pack, &good, 4, &f, res, (int64_t *)(void *)((char *)links + 2), scr, need, NULL);
    BAD(pack, &good, 4, &f, res, links, NULL, need, NULL);
    BAD(pack, &good, 4, &f, res, links, scr, need - 1, NULL);
    /* layouts */
    l = good;
    l.n_tiles = 3;
    BAD(pack, &l, 4, &f, res, links, scr, need, NULL);
    cr_assert(eq(sz, twi_cuda_maxtree_merge_scratch_size(&l, 4), 0));
    l = good;
    l.tiles_x = 0;
    l.n_tiles = 0;
    BAD(pack, &l, 4, &f, res, links, scr, need, NULL);
    l = good;
    l.n = 0;
    BAD(pack, &l, 4, &f, res, links, scr, need, NULL);
    l = good;
    l.n = (int64_t)UINT32_MAX;
    BAD(pack, &l, 4, &f, res, links, scr, SIZE_MAX, NULL);
    l = good;
    l.off_at = 4; /* int64_t array on a 4-byte boundary */
    BAD(pack, &l, 4, &f, res, links, scr, need, NULL);
    l = good;
    l.level_at = 1;
    BAD(pack, &l, 4, &f, res, links, scr, need, NULL);
    l = good;
    l.own_at = l.bytes - 8; /* 10 entries do not fit */
    BAD(pack, &l, 4, &f, res, links, scr, need, NULL);
    l = good;
    l.sides_at = l.bytes + 4;
    BAD(pack, &l, 4, &f, res, links, scr, need, NULL);
#undef BAD
}

#else

Test(maxtree_merge_cuda, skipped_without_cuda)
{
    /* Builds without CUDA have no kernel to test. */
    cr_skip_test("built without CUDA");
}

#endif
