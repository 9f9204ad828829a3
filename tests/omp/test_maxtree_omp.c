/* SPDX-License-Identifier: MIT */
/* tilewave tests: the CPU max-tree (sequential and block-parallel) against naive references. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

/* Criterion 2.4 assertions store into a 1-bit field, which -Wconversion flags at every use. */
#pragma GCC diagnostic ignored "-Wconversion"

#include "omp_kernels.h"
#include "twtest.h"
#include "twtest_maxtree.h"
#include "twtest_stop.h"

#define PAD_BYTE 0xA5

/* ---- running the kernel ------------------------------------------------------------------- */

/* How to call the kernel: gx 0 = twi_omp_maxtree(nthreads), else the forced grid gx x gy. */
typedef struct run_cfg {
    tw_sample_type ptype;  /* TW_U32 or TW_U64 */
    int nthreads;
    int32_t gx, gy;
    int pad_in, pad_out;   /* extra samples at the end of each row */
} run_cfg;

/* Run the kernel on a packed image through padded views; the parent comes back as uint64.
 * Checks that the padding of the output was left alone. */
static tw_status
run_kernel(const void *img, tw_sample_type type, int w, int h, int conn, const run_cfg *c,
           uint64_t *parent)
{
    size_t ls = tw_sample_size(type), ps = tw_sample_size(c->ptype);
    size_t in_row = ((size_t)w + (size_t)c->pad_in) * ls;
    size_t out_row = ((size_t)w + (size_t)c->pad_out) * ps;
    size_t n = (size_t)w * (size_t)h;
    uint8_t *in = malloc(in_row * (size_t)h + 1), *out = malloc(out_row * (size_t)h + 1);
    tw_tile_view vi, vp;
    tw_status st;

    cr_assert(in && out);
    memset(in, 0x5A, in_row * (size_t)h + 1);
    memset(out, PAD_BYTE, out_row * (size_t)h + 1);
    for (int y = 0; y < h; y++)
        memcpy(in + (size_t)y * in_row, (const uint8_t *)img + (size_t)y * (size_t)w * ls,
               (size_t)w * ls);
    vi = (tw_tile_view){ .data = in, .stride = (int64_t)in_row, .w = w, .h = h, .channels = 1,
                         .type = type };
    vp = (tw_tile_view){ .data = out, .stride = (int64_t)out_row, .w = w, .h = h, .channels = 1,
                         .type = c->ptype };
    if (c->gx > 0)
        st = twi_omp_maxtree_grid(&vi, conn, &vp, c->nthreads, c->gx, c->gy);
    else
        st = twi_omp_maxtree(&vi, conn, &vp, c->nthreads);
    for (int y = 0; y < h; y++) {
        const uint8_t *row = out + (size_t)y * out_row;

        for (int x = 0; x < w; x++)
            parent[(size_t)y * (size_t)w + (size_t)x] =
                c->ptype == TW_U32 ? ((const uint32_t *)(const void *)row)[x]
                                   : ((const uint64_t *)(const void *)row)[x];
        for (size_t b = (size_t)w * ps; b < out_row; b++)
            cr_assert(eq(u8, row[b], PAD_BYTE), "output padding overwritten");
    }
    (void)n;
    free(in);
    free(out);
    return st;
}

/* Compare with the reference, printing the first difference. */
static void
expect_same(const uint64_t *got, const uint64_t *want, int w, int h, const char *what)
{
    size_t n = (size_t)w * (size_t)h;

    for (size_t k = 0; k < n; k++) {
        if (got[k] != want[k])
            cr_fatal("%s: %dx%d: parent[%zu] = %llu, want %llu", what, w, h, k,
                     (unsigned long long)got[k], (unsigned long long)want[k]);
    }
}

/* ---- the semantic reference (flood fills) ------------------------------------------------- */

static uint32_t
lvl(const void *img, tw_sample_type type, size_t i)
{
    return type == TW_U16 ? ((const uint16_t *)img)[i] : ((const uint8_t *)img)[i];
}

static int
cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

    return x < y ? -1 : x > y;
}

/*
 * The definition, by brute force: for every level t present, label the connected components
 * of [f >= t] (flood fill); a component holding a pixel of level t is a node at t, its
 * canonical pixel the largest index among those. A pixel points to its node's canonical
 * pixel; a canonical pixel to that of the nearest lower node containing it; the root to
 * itself. Writes the expected parent image.
 */
static void
semantic_parent(const void *img, tw_sample_type type, int w, int h, int conn, uint64_t *want)
{
    size_t n = (size_t)w * (size_t)h, nl = 0;
    uint32_t *levels = malloc(n * sizeof *levels);
    int32_t *label = malloc(n * n * sizeof *label); /* [level index][pixel], n levels at most */
    int64_t *canon = malloc(n * n * sizeof *canon); /* [level index][component] */
    size_t *stack = malloc(n * sizeof *stack);

    cr_assert(levels && label && canon && stack);
    for (size_t k = 0; k < n; k++)
        levels[k] = lvl(img, type, k);
    qsort(levels, n, sizeof *levels, cmp_u32);
    for (size_t k = 0; k < n; k++)
        if (nl == 0 || levels[nl - 1] != levels[k])
            levels[nl++] = levels[k];
    for (size_t li = 0; li < nl; li++) {
        int32_t *lab = label + li * n;
        int64_t *can = canon + li * n;
        int32_t nc = 0;

        for (size_t k = 0; k < n; k++) {
            lab[k] = -1;
            can[k] = -1;
        }
        for (size_t s = 0; s < n; s++) {
            size_t sp = 0;

            if (lab[s] >= 0 || lvl(img, type, s) < levels[li])
                continue;
            lab[s] = nc;
            stack[sp++] = s;
            while (sp) {
                size_t p = stack[--sp];
                int x = (int)(p % (size_t)w), y = (int)(p / (size_t)w);

                if (lvl(img, type, p) == levels[li] && (int64_t)p > can[nc])
                    can[nc] = (int64_t)p;
                for (int dy = -1; dy <= 1; dy++) {
                    for (int dx = -1; dx <= 1; dx++) {
                        int nx = x + dx, ny = y + dy;
                        size_t q;

                        if ((dx == 0 && dy == 0) || (conn == 4 && dx && dy))
                            continue;
                        if (nx < 0 || ny < 0 || nx >= w || ny >= h)
                            continue;
                        q = (size_t)ny * (size_t)w + (size_t)nx;
                        if (lab[q] < 0 && lvl(img, type, q) >= levels[li]) {
                            lab[q] = nc;
                            stack[sp++] = q;
                        }
                    }
                }
            }
            nc++;
        }
    }
    for (size_t p = 0; p < n; p++) {
        size_t li = 0;
        int64_t c;

        while (levels[li] != lvl(img, type, p))
            li++;
        c = canon[li * n + (size_t)label[li * n + p]];
        cr_assert(c >= 0);
        if ((size_t)c != p) {
            want[p] = (uint64_t)c;
            continue;
        }
        want[p] = p; /* the root unless a lower node holds it */
        while (li-- > 0) {
            int64_t pc = canon[li * n + (size_t)label[li * n + p]];

            if (pc >= 0) {
                want[p] = (uint64_t)pc;
                break;
            }
        }
    }
    free(stack);
    free(canon);
    free(label);
    free(levels);
}

/* ---- random sweeps ------------------------------------------------------------------------ */

typedef struct sweep {
    uint64_t seed;
    int images;
    int max_side;   /* sides drawn in 1..max_side (skewed to small) */
    int thin;       /* 1: one side is 1 or 2 */
} sweep;

/* A side in 1..max: uniform below a random power-of-two cap (4..256), so small sizes are
 * common and full-size ones not rare. */
static int
draw_side(uint64_t *rng, int max)
{
    int cap = 1 << (2 + twtest_rnd(rng, 7));

    cap = cap > max ? max : cap;
    return 1 + (int)twtest_rnd(rng, (uint32_t)cap);
}

/*
 * Per image: the naive reference (itself checked structurally), then the kernel sequential
 * (nthreads 1), on a random forced grid with two threads (a third of the time w x 1, 1 x h
 * or the whole pixel grid in one direction), and through the automatic choice with two
 * threads; the parent alternately TW_U32 and TW_U64, the views sometimes padded.
 */
static void
run_sweep(const sweep *s)
{
    uint64_t rng = s->seed;

    for (int it = 0; it < s->images; it++) {
        tw_sample_type type = twtest_rnd(&rng, 2) ? TW_U16 : TW_U8;
        int mode = (int)twtest_rnd(&rng, 6), conn = twtest_rnd(&rng, 2) ? 8 : 4;
        int w = draw_side(&rng, s->max_side), h = draw_side(&rng, s->max_side);
        size_t n, ls = tw_sample_size(type);
        void *img;
        uint64_t *want, *got;
        const char *msg;
        run_cfg c = { 0 };
        uint32_t g;

        if (s->thin) {
            if (twtest_rnd(&rng, 2))
                w = 1 + (int)twtest_rnd(&rng, 2);
            else
                h = 1 + (int)twtest_rnd(&rng, 2);
        }
        n = (size_t)w * (size_t)h;
        img = malloc(n * ls);
        want = malloc(n * sizeof *want);
        got = malloc(n * sizeof *got);
        cr_assert(img && want && got);
        twtest_maxtree_random_image(&rng, img, type, w, h, mode);
        twtest_maxtree_naive(img, type, w, h, conn, want);
        msg = twtest_maxtree_check(img, type, w, h, conn, want);
        cr_assert_null(msg, "naive reference: %s (%dx%d mode %d)", msg, w, h, mode);

        c.ptype = it % 2 ? TW_U64 : TW_U32;
        c.pad_in = twtest_rnd(&rng, 4) == 0 ? 1 + (int)twtest_rnd(&rng, 5) : 0;
        c.pad_out = twtest_rnd(&rng, 4) == 0 ? 1 + (int)twtest_rnd(&rng, 5) : 0;
        c.nthreads = 1;
        c.gx = c.gy = twtest_rnd(&rng, 2); /* the one-block path, forced or automatic */
        cr_assert(eq(int, run_kernel(img, type, w, h, conn, &c, got), TW_OK));
        expect_same(got, want, w, h, "sequential");

        c.nthreads = 2;
        g = twtest_rnd(&rng, 9);
        if (g == 0) {
            c.gx = w;
            c.gy = 1;
        } else if (g == 1) {
            c.gx = 1;
            c.gy = h;
        } else if (g == 2) {
            c.gx = w;
            c.gy = h;
        } else {
            c.gx = 1 + (int32_t)twtest_rnd(&rng, 6);
            c.gy = 1 + (int32_t)twtest_rnd(&rng, 6);
        }
        cr_assert(eq(int, run_kernel(img, type, w, h, conn, &c, got), TW_OK));
        if (memcmp(got, want, n * sizeof *got) != 0) {
            char what[64];

            snprintf(what, sizeof what, "grid %dx%d conn %d mode %d", c.gx, c.gy, conn, mode);
            expect_same(got, want, w, h, what);
        }
        if (n >= 256 * 256) {
            c.gx = c.gy = 0;
            cr_assert(eq(int, run_kernel(img, type, w, h, conn, &c, got), TW_OK));
            expect_same(got, want, w, h, "automatic, 2 threads");
        }
        free(got);
        free(want);
        free(img);
    }
}

Test(maxtree_omp, small_random_images_match_naive)
{
    /* 1200 images up to 40 x 40: sequential, forced grids and both parent types equal the
     * naive reference byte for byte. */
    sweep s = { .seed = 0x6d617874726565ull, .images = 1200, .max_side = 40 };

    run_sweep(&s);
}

Test(maxtree_omp, medium_random_images_match_naive)
{
    /* 1200 images up to 256 x 256 (mostly smaller): the same comparisons. */
    sweep s = { .seed = 0x9e3779b97f4a7c15ull, .images = 1200, .max_side = 256 };

    run_sweep(&s);
}

Test(maxtree_omp, thin_random_images_match_naive)
{
    /* 600 images one or two pixels wide or high (rows, columns): the same comparisons. */
    sweep s = { .seed = 0x1234567887654321ull, .images = 600, .max_side = 256, .thin = 1 };

    run_sweep(&s);
}

Test(maxtree_omp, full_size_images_match_naive_with_auto_parallel)
{
    /* Twelve 256 x 256 images (every mode, both types, both connectivities): the automatic
     * two-thread path (bands) equals the reference too. */
    uint64_t rng = 0xabcdefull;

    for (int it = 0; it < 12; it++) {
        tw_sample_type type = it % 2 ? TW_U16 : TW_U8;
        int conn = it / 6 ? 8 : 4, w = 256, h = 256;
        size_t n = (size_t)w * (size_t)h;
        void *img = malloc(n * 2);
        uint64_t *want = malloc(n * sizeof *want), *got = malloc(n * sizeof *got);
        run_cfg c = { .ptype = it % 3 ? TW_U32 : TW_U64, .nthreads = 2 };

        cr_assert(img && want && got);
        twtest_maxtree_random_image(&rng, img, type, w, h, it % 6);
        twtest_maxtree_naive(img, type, w, h, conn, want);
        cr_assert(eq(int, run_kernel(img, type, w, h, conn, &c, got), TW_OK));
        expect_same(got, want, w, h, "automatic, 2 threads");
        free(got);
        free(want);
        free(img);
    }
}

Test(maxtree_omp, large_blocked_paths_match_one_block)
{
    /* Larger images through the automatic grids (one block with one thread at these sizes;
     * bands for tall images and columns for wide short ones with two) equal the one-block
     * path (forced 1 x 1 grid), which the other tests tie to the naive reference. */
    static const int sizes[][2] = { { 700, 613 }, { 4096, 20 }, { 300, 1111 }, { 9000, 37 } };
    uint64_t rng = 0x55aa55aaull;

    for (int s = 0; s < 4; s++) {
        for (int t = 0; t < 4; t++) {
            tw_sample_type type = t % 2 ? TW_U16 : TW_U8;
            int conn = t / 2 ? 8 : 4, w = sizes[s][0], h = sizes[s][1];
            size_t n = (size_t)w * (size_t)h;
            void *img = malloc(n * 2);
            uint64_t *want = malloc(n * sizeof *want), *got = malloc(n * sizeof *got);
            run_cfg c = { .ptype = TW_U32, .nthreads = 1, .gx = 1, .gy = 1 };

            cr_assert(img && want && got);
            twtest_maxtree_random_image(&rng, img, type, w, h, 3 + (s + t) % 3);
            cr_assert(eq(int, run_kernel(img, type, w, h, conn, &c, want), TW_OK));
            c = (run_cfg){ .ptype = TW_U64, .nthreads = 1, .pad_out = 1 };
            cr_assert(eq(int, run_kernel(img, type, w, h, conn, &c, got), TW_OK));
            expect_same(got, want, w, h, "automatic, 1 thread");
            c = (run_cfg){ .ptype = TW_U32, .nthreads = 2, .pad_in = 3 };
            cr_assert(eq(int, run_kernel(img, type, w, h, conn, &c, got), TW_OK));
            expect_same(got, want, w, h, "automatic, 2 threads");
            free(got);
            free(want);
            free(img);
        }
    }
}

Test(maxtree_omp, callable_from_inside_a_parallel_region)
{
    /* Two threads of an enclosing OpenMP team each run the kernel on their own image (a forced
     * 3 x 3 grid with nthreads 1, then nthreads 2 on a blocked grid): the blocks of one call
     * must not run on the other thread's scratch. Both equal the naive reference. */
    enum { W = 300, H = 280, RUNS = 2 };
    size_t n = (size_t)W * H;
    uint8_t *img[RUNS];
    uint64_t *want[RUNS];
    uint32_t *got[RUNS][2];
    tw_status st[RUNS][2];
    uint64_t rng = 777;

    for (int r = 0; r < RUNS; r++) {
        img[r] = malloc(n);
        want[r] = malloc(n * sizeof *want[r]);
        got[r][0] = malloc(n * sizeof *got[r][0]);
        got[r][1] = malloc(n * sizeof *got[r][1]);
        cr_assert(img[r] && want[r] && got[r][0] && got[r][1]);
        twtest_maxtree_random_image(&rng, img[r], TW_U8, W, H, 3 + r);
        twtest_maxtree_naive(img[r], TW_U8, W, H, 8, want[r]);
    }
#pragma omp parallel for num_threads(RUNS) schedule(static, 1)
    for (int r = 0; r < RUNS; r++) {
        tw_tile_view vi = { .data = img[r], .stride = W, .w = W, .h = H, .channels = 1,
                            .type = TW_U8 };
        tw_tile_view v0 = { .data = got[r][0], .stride = 4 * W, .w = W, .h = H, .channels = 1,
                            .type = TW_U32 };
        tw_tile_view v1 = v0;

        v1.data = got[r][1];
        st[r][0] = twi_omp_maxtree_grid(&vi, 8, &v0, 1, 3, 3);
        st[r][1] = twi_omp_maxtree_grid(&vi, 8, &v1, 2, 4, 2);
    }
    for (int r = 0; r < RUNS; r++) {
        for (int k = 0; k < 2; k++) {
            cr_assert(eq(int, st[r][k], TW_OK));
            for (size_t p = 0; p < n; p++)
                cr_assert(eq(u64, got[r][k][p], want[r][p]), "run %d call %d pixel %zu", r, k,
                          p);
            free(got[r][k]);
        }
        free(want[r]);
        free(img[r]);
    }
}

/* ---- the definition ----------------------------------------------------------------------- */

Test(maxtree_omp, small_images_match_the_definition)
{
    /* 360 small images: the naive reference, the sequential kernel and a forced 3 x 2 grid
     * equal the parent image derived from flood fills of every upper level set. */
    uint64_t rng = 0x5eed5eedull;

    for (int it = 0; it < 360; it++) {
        tw_sample_type type = it % 2 ? TW_U16 : TW_U8;
        int mode = (it / 2) % 6, conn = (it / 12) % 2 ? 8 : 4;
        int w = 1 + (int)twtest_rnd(&rng, 20), h = 1 + (int)twtest_rnd(&rng, 20);
        size_t n = (size_t)w * (size_t)h;
        void *img = malloc(n * 2);
        uint64_t *def = malloc(n * sizeof *def), *got = malloc(n * sizeof *got);
        run_cfg c = { .ptype = TW_U32, .nthreads = 1 };

        cr_assert(img && def && got);
        twtest_maxtree_random_image(&rng, img, type, w, h, mode);
        semantic_parent(img, type, w, h, conn, def);
        twtest_maxtree_naive(img, type, w, h, conn, got);
        expect_same(got, def, w, h, "naive vs definition");
        cr_assert(eq(int, run_kernel(img, type, w, h, conn, &c, got), TW_OK));
        expect_same(got, def, w, h, "sequential vs definition");
        c = (run_cfg){ .ptype = TW_U64, .nthreads = 2, .gx = 3, .gy = 2 };
        cr_assert(eq(int, run_kernel(img, type, w, h, conn, &c, got), TW_OK));
        expect_same(got, def, w, h, "grid 3x2 vs definition");
        free(got);
        free(def);
        free(img);
    }
}

/* ---- hand-made cases ---------------------------------------------------------------------- */

/* Sequential and a few grids on one image: all equal `want` (and the structural check). */
static void
expect_all_paths(const void *img, tw_sample_type type, int w, int h, int conn,
                 const uint64_t *want)
{
    static const int32_t grids[][2] = { { 1, 1 }, { 2, 2 }, { 3, 5 }, { 1000, 1 }, { 1, 1000 },
                                        { 1000, 1000 } };
    size_t n = (size_t)w * (size_t)h;
    uint64_t *got = malloc(n * sizeof *got);

    cr_assert_not_null(got);
    cr_assert_null(twtest_maxtree_check(img, type, w, h, conn, want));
    for (int g = 0; g < 6; g++) {
        for (int pt = 0; pt < 2; pt++) {
            run_cfg c = { .ptype = pt ? TW_U64 : TW_U32, .nthreads = 2, .gx = grids[g][0],
                          .gy = grids[g][1] };

            cr_assert(eq(int, run_kernel(img, type, w, h, conn, &c, got), TW_OK));
            expect_same(got, want, w, h, "hand-made case");
        }
    }
    free(got);
}

Test(maxtree_omp, one_pixel_is_its_own_root)
{
    /* 1 x 1, both types and connectivities: parent[0] = 0. */
    uint16_t px = 7;
    uint64_t want = 0;

    for (int conn = 4; conn <= 8; conn += 4) {
        expect_all_paths(&px, TW_U8, 1, 1, conn, &want);
        expect_all_paths(&px, TW_U16, 1, 1, conn, &want);
    }
}

Test(maxtree_omp, constant_image_is_one_node)
{
    /* A constant 37 x 23 image: every pixel points to the last one, which is the root. */
    int w = 37, h = 23;
    size_t n = (size_t)w * (size_t)h;
    uint8_t *img = malloc(n);
    uint64_t *want = malloc(n * sizeof *want);

    cr_assert(img && want);
    memset(img, 200, n);
    for (size_t k = 0; k < n; k++)
        want[k] = n - 1;
    expect_all_paths(img, TW_U8, w, h, 4, want);
    expect_all_paths(img, TW_U8, w, h, 8, want);
    free(want);
    free(img);
}

Test(maxtree_omp, checkerboard_differs_between_4_and_8_connectivity)
{
    /* A 6 x 5 checkerboard of 0 / 255: with 4-connectivity every 255 pixel is its own leaf
     * under the root; with 8-connectivity all the 255 pixels form one node. */
    int w = 6, h = 5;
    size_t n = (size_t)w * (size_t)h, last0 = 0, last1 = 0;
    uint8_t img[30];
    uint64_t want4[30], want8[30];

    for (size_t k = 0; k < n; k++) {
        size_t x = k % (size_t)w, y = k / (size_t)w;

        img[k] = (x + y) % 2 ? 255 : 0;
        if (img[k])
            last1 = k;
        else
            last0 = k;
    }
    for (size_t k = 0; k < n; k++) {
        want4[k] = last0;                        /* every 255 pixel: a leaf under the root */
        want8[k] = img[k] ? last1 : last0;       /* one node of 255, its canonical under root */
    }
    want8[last1] = last0;
    expect_all_paths(img, TW_U8, w, h, 4, want4);
    expect_all_paths(img, TW_U8, w, h, 8, want8);
    cr_assert(memcmp(want4, want8, sizeof want4) != 0);
}

Test(maxtree_omp, single_row_and_column)
{
    /* A 1 x 50 and a 50 x 1 image of the same values give the same tree (raster indices are
     * the same); checked against the definition. */
    uint8_t img[50];
    uint64_t def[50], got[50];
    uint64_t rng = 99;

    for (int k = 0; k < 50; k++)
        img[k] = (uint8_t)twtest_rnd(&rng, 6);
    semantic_parent(img, TW_U8, 50, 1, 4, def);
    expect_all_paths(img, TW_U8, 50, 1, 4, def);
    expect_all_paths(img, TW_U8, 50, 1, 8, def);
    expect_all_paths(img, TW_U8, 1, 50, 4, def);
    expect_all_paths(img, TW_U8, 1, 50, 8, def);
    twtest_maxtree_naive(img, TW_U8, 1, 50, 8, got);
    expect_same(got, def, 1, 50, "naive column");
}

Test(maxtree_omp, extreme_values)
{
    /* Only 0 and the maximum (255, 65535), 8- and 16-bit, against the definition. */
    uint64_t rng = 4242;
    int w = 17, h = 13;
    size_t n = (size_t)w * (size_t)h;
    uint16_t img[17 * 13];
    uint64_t def[17 * 13];

    for (int t = 0; t < 2; t++) {
        tw_sample_type type = t ? TW_U16 : TW_U8;

        twtest_maxtree_random_image(&rng, img, type, w, h, 5);
        for (int conn = 4; conn <= 8; conn += 4) {
            semantic_parent(img, type, w, h, conn, def);
            expect_all_paths(img, type, w, h, conn, def);
        }
    }
    (void)n;
}

Test(maxtree_omp, ramp_with_more_than_256_levels)
{
    /* A 16-bit 40 x 30 ramp f = 50 * index: a chain, each pixel the child of the previous
     * one; then the same ramp reversed: every pixel the parent of the previous one. */
    int w = 40, h = 30;
    size_t n = (size_t)w * (size_t)h;
    uint16_t img[40 * 30];
    uint64_t want[40 * 30];

    for (size_t k = 0; k < n; k++) {
        img[k] = (uint16_t)(50 * k);
        want[k] = k ? k - 1 : 0;
    }
    expect_all_paths(img, TW_U16, w, h, 4, want);
    expect_all_paths(img, TW_U16, w, h, 8, want);
    for (size_t k = 0; k < n; k++) {
        img[k] = (uint16_t)(50 * (n - 1 - k));
        want[k] = k + 1 < n ? k + 1 : k;
    }
    expect_all_paths(img, TW_U16, w, h, 4, want);
    expect_all_paths(img, TW_U16, w, h, 8, want);
}

Test(maxtree_omp, empty_image_is_a_no_op)
{
    /* w or h 0: TW_OK and nothing written. */
    uint8_t in = 0;
    uint32_t out = 12345;
    tw_tile_view vi = { .data = &in, .stride = 1, .w = 0, .h = 5, .channels = 1, .type = TW_U8 };
    tw_tile_view vp = { .data = &out, .stride = 4, .w = 0, .h = 5, .channels = 1,
                        .type = TW_U32 };

    cr_assert(eq(int, twi_omp_maxtree(&vi, 4, &vp, 1), TW_OK));
    cr_assert(eq(int, twi_omp_maxtree_grid(&vi, 8, &vp, 2, 2, 2), TW_OK));
    cr_assert(eq(u32, out, 12345));
}

/* ---- bad arguments ------------------------------------------------------------------------ */

Test(maxtree_omp, bad_arguments_are_invalid)
{
    /* NULL views, wrong types or channels, conn 6, mismatched sizes, strides too small or
     * misaligned, bad grids and a TW_U32 parent for more than UINT32_MAX pixels. */
    uint16_t in[64];
    uint64_t out[64];
    tw_tile_view vi, vp, bi, bp;

    memset(in, 0, sizeof in);
    vi = (tw_tile_view){ .data = in, .stride = 8, .w = 8, .h = 8, .channels = 1,
                         .type = TW_U8 };
    vp = (tw_tile_view){ .data = out, .stride = 32, .w = 8, .h = 8, .channels = 1,
                         .type = TW_U32 };
    cr_assert(eq(int, twi_omp_maxtree(&vi, 4, &vp, 1), TW_OK));
    cr_assert(eq(int, twi_maxtree_check(&vi, 4, &vp), TW_OK));
    cr_assert(eq(int, twi_omp_maxtree(NULL, 4, &vp, 1), TW_E_INVALID));
    cr_assert(eq(int, twi_omp_maxtree(&vi, 4, NULL, 1), TW_E_INVALID));
    cr_assert(eq(int, twi_omp_maxtree_grid(NULL, 4, &vp, 1, 2, 2), TW_E_INVALID));
    cr_assert(eq(int, twi_maxtree_check(NULL, 4, &vp), TW_E_INVALID));
    for (int conn = -1; conn <= 9; conn++) {
        if (conn != 4 && conn != 8) {
            cr_assert(eq(int, twi_omp_maxtree(&vi, conn, &vp, 1), TW_E_INVALID));
            cr_assert(eq(int, twi_omp_maxtree_grid(&vi, conn, &vp, 2, 2, 2), TW_E_INVALID));
        }
    }
    bi = vi;
    bi.type = TW_U32;
    cr_assert(eq(int, twi_omp_maxtree(&bi, 4, &vp, 1), TW_E_INVALID));
    bi.type = TW_F32;
    cr_assert(eq(int, twi_omp_maxtree(&bi, 4, &vp, 1), TW_E_INVALID));
    bi = vi;
    bi.channels = 3;
    bi.stride = 24;
    cr_assert(eq(int, twi_omp_maxtree(&bi, 4, &vp, 1), TW_E_INVALID));
    bp = vp;
    bp.type = TW_U16;
    cr_assert(eq(int, twi_omp_maxtree(&vi, 4, &bp, 1), TW_E_INVALID));
    bp.type = TW_F32;
    cr_assert(eq(int, twi_omp_maxtree(&vi, 4, &bp, 1), TW_E_INVALID));
    bp = vp;
    bp.channels = 2;
    cr_assert(eq(int, twi_omp_maxtree(&vi, 4, &bp, 1), TW_E_INVALID));
    bp = vp;
    bp.w = 7;
    cr_assert(eq(int, twi_omp_maxtree(&vi, 4, &bp, 1), TW_E_INVALID));
    bp = vp;
    bp.h = 4;
    cr_assert(eq(int, twi_omp_maxtree(&vi, 4, &bp, 1), TW_E_INVALID));
    bp = vp;
    bp.stride = 28; /* too small */
    cr_assert(eq(int, twi_omp_maxtree(&vi, 4, &bp, 1), TW_E_INVALID));
    bp.stride = 34; /* not a multiple of 4 */
    cr_assert(eq(int, twi_omp_maxtree(&vi, 4, &bp, 1), TW_E_INVALID));
    bp = vp;
    bp.data = (uint8_t *)out + 2; /* misaligned */
    cr_assert(eq(int, twi_omp_maxtree(&vi, 4, &bp, 1), TW_E_INVALID));
    bp = vp;
    bp.data = NULL;
    cr_assert(eq(int, twi_omp_maxtree(&vi, 4, &bp, 1), TW_E_INVALID));
    bi = vi;
    bi.type = TW_U16;
    bi.stride = 15; /* 16-bit rows need 16 bytes, aligned */
    cr_assert(eq(int, twi_omp_maxtree(&bi, 4, &vp, 1), TW_E_INVALID));
    bi.stride = 17;
    cr_assert(eq(int, twi_omp_maxtree(&bi, 4, &vp, 1), TW_E_INVALID));
    bi = vi;
    bi.w = -1;
    bp = vp;
    bp.w = -1;
    cr_assert(eq(int, twi_omp_maxtree(&bi, 4, &bp, 1), TW_E_INVALID));
    cr_assert(eq(int, twi_omp_maxtree_grid(&vi, 4, &vp, 2, 0, 2), TW_E_INVALID));
    cr_assert(eq(int, twi_omp_maxtree_grid(&vi, 4, &vp, 2, 2, -1), TW_E_INVALID));
    /* 70000 x 70000 > UINT32_MAX pixels: TW_U32 is too small (rejected before any access) */
    bi = (tw_tile_view){ .data = in, .stride = 70000, .w = 70000, .h = 70000, .channels = 1,
                         .type = TW_U8 };
    bp = (tw_tile_view){ .data = out, .stride = 280000, .w = 70000, .h = 70000, .channels = 1,
                         .type = TW_U32 };
    cr_assert(eq(int, twi_maxtree_check(&bi, 4, &bp), TW_E_INVALID));
    cr_assert(eq(int, twi_omp_maxtree(&bi, 4, &bp, 1), TW_E_INVALID));
    bp.type = TW_U64;
    bp.stride = 560000;
    cr_assert(eq(int, twi_maxtree_check(&bi, 4, &bp), TW_OK));
}

/* ---- cancellation ------------------------------------------------------------------------- */

Test(maxtree_omp, a_stop_hook_ends_the_run_between_blocks_and_rows)
{
    /* A 3000 x 2000 image in blocks (8-bit on 1 and 3 threads, 16-bit on 3): a hook that never
     * stops gives the same bytes as twi_omp_maxtree and is asked at least once a block; a hook
     * that says stop at its 5th answer ends the run with TW_E_CANCELED, asked at most once
     * more by each other thread of the team (none goes on building or merging). */
    static const struct { tw_sample_type t; int threads; } runs[] = {
        {TW_U8, 1}, {TW_U8, 3}, {TW_U16, 3}};
    const int w = 3000, h = 2000;
    const size_t n = (size_t)w * h;
    uint64_t rng = 0x53544f50ull;
    uint16_t *img = malloc(n * 2);
    uint32_t *want = malloc(n * 4), *got = malloc(n * 4);

    cr_assert(img && want && got);
    for (int r = 0; r < 3; r++) {
        tw_sample_type t = runs[r].t;
        int threads = runs[r].threads;
        tw_tile_view vi = { .data = img, .stride = (int64_t)(w * tw_sample_size(t)), .w = w,
                            .h = h, .channels = 1, .type = t },
                     vw = { .data = want, .stride = 4 * w, .w = w, .h = h, .channels = 1,
                            .type = TW_U32 },
                     vg = vw;
        stop_after never = { 0, 0 }, soon = { 0, 5 };
        twi_stop hn = { stop_after_n, &never }, hs = { stop_after_n, &soon };

        vg.data = got;
        twtest_maxtree_random_image(&rng, img, t, w, h, t == TW_U16 ? 300 : 20);
        cr_assert(eq(int, twi_omp_maxtree(&vi, 4, &vw, threads), TW_OK));
        memset(got, 0xff, n * 4);
        cr_assert(eq(int, twi_omp_maxtree_stop(&vi, 4, &vg, threads, &hn), TW_OK));
        cr_assert(eq(int, memcmp(want, got, n * 4), 0), "run %d", r);
        cr_assert(ge(int, atomic_load(&never.asked), 2), "run %d: asked %d times", r,
                  atomic_load(&never.asked));
        cr_assert(eq(int, twi_omp_maxtree_stop(&vi, 4, &vg, threads, &hs), TW_E_CANCELED),
                  "run %d", r);
        cr_assert(ge(int, atomic_load(&soon.asked), 5));
        cr_assert(le(int, atomic_load(&soon.asked), 5 + threads - 1), "run %d: asked %d times",
                  r, atomic_load(&soon.asked));
    }
    free(got);
    free(want);
    free(img);
}
