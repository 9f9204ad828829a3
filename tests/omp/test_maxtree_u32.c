/* SPDX-License-Identifier: MIT */
/* tilewave tests: the 32-bit-level max-tree (in place, union-find per block) against naive. */
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

/* Criterion 2.4 assertions store into a 1-bit field, which -Wconversion flags at every use. */
#pragma GCC diagnostic ignored "-Wconversion"

#include "omp_kernels.h"
#include "twtest.h"
#include "twtest_maxtree.h"

/* An order-preserving map of the 8/16-bit levels onto 32 bits (random gaps, some levels near
 * 2^32 - 1): the max-tree depends only on the order, so the naive tree of the original image
 * is the reference. */
static void
widen(uint64_t *rng, const void *img, tw_sample_type type, size_t n, uint32_t *out)
{
    uint32_t *map = malloc(65536 * sizeof *map);
    uint64_t v = twtest_rnd(rng, 1000);

    cr_assert(map != NULL);
    for (uint32_t l = 0; l < 65536; l++) {
        map[l] = (uint32_t)v;
        v += 1 + twtest_rnd(rng, twtest_rnd(rng, 2) ? 3 : 60000);
    }
    if (twtest_rnd(rng, 3) == 0) /* push the top levels against UINT32_MAX */
        for (uint32_t l = 0; l < 65536; l++)
            map[l] = UINT32_MAX - (uint32_t)(65535 - l) * 7u;
    for (size_t k = 0; k < n; k++)
        out[k] = map[type == TW_U16 ? ((const uint16_t *)img)[k] : ((const uint8_t *)img)[k]];
    free(map);
}

static void
expect_same(const uint32_t *got, const uint64_t *want, size_t n, const char *what, int w, int h)
{
    for (size_t k = 0; k < n; k++)
        if (got[k] != want[k])
            cr_fatal("%s %dx%d: parent[%zu] = %u, want %llu", what, w, h, k, got[k],
                     (unsigned long long)want[k]);
}

/* The canonical pixels from a parent image and the levels: parent is itself or lower. */
static void
expect_canon(const uint64_t *canon, const void *img, tw_sample_type type, const uint64_t *want,
             size_t n)
{
    for (size_t k = 0; k < n; k++) {
        uint32_t fk = type == TW_U16 ? ((const uint16_t *)img)[k] : ((const uint8_t *)img)[k];
        uint32_t fp = type == TW_U16 ? ((const uint16_t *)img)[want[k]]
                                     : ((const uint8_t *)img)[want[k]];
        int is = want[k] == k || fp != fk;

        cr_assert(eq(int, (int)(canon[k / 64] >> (k % 64) & 1), is), "canonical bit of %zu", k);
    }
}

Test(maxtree_u32, random_images_in_place_match_naive)
{
    /* 1500 images up to 64 x 64 (every random mode, both connectivities): the in-place
     * kernel on one block, on random forced grids (down to one pixel per block) and on the
     * automatic grid with two threads gives the naive tree byte for byte, and its canonical
     * bit map marks exactly the canonical pixels. */
    uint64_t rng = 0x7533322d6d74ull;

    for (int it = 0; it < 1500; it++) {
        tw_sample_type type = twtest_rnd(&rng, 2) ? TW_U16 : TW_U8;
        int conn = twtest_rnd(&rng, 2) ? 8 : 4, mode = (int)twtest_rnd(&rng, 6);
        int w = 1 + (int)twtest_rnd(&rng, 1 + twtest_rnd(&rng, 64));
        int h = 1 + (int)twtest_rnd(&rng, 1 + twtest_rnd(&rng, 64));
        size_t n = (size_t)w * (size_t)h;
        void *img = malloc(n * 2);
        uint32_t *lev = malloc(n * sizeof *lev), *a = malloc(n * sizeof *a);
        uint64_t *want = malloc(n * sizeof *want), *canon = malloc((n + 63) / 64 * 8);
        int32_t gx, gy;

        cr_assert(img && lev && a && want && canon);
        twtest_maxtree_random_image(&rng, img, type, w, h, mode);
        twtest_maxtree_naive(img, type, w, h, conn, want);
        widen(&rng, img, type, n, lev);

        memcpy(a, lev, n * sizeof *a);
        cr_assert(eq(int, twi_omp_maxtree_u32(a, w, h, conn, canon, 1, 1, 1), TW_OK));
        expect_same(a, want, n, "one block", w, h);
        expect_canon(canon, img, type, want, n);

        gx = 1 + (int32_t)twtest_rnd(&rng, (uint32_t)w);
        gy = 1 + (int32_t)twtest_rnd(&rng, (uint32_t)h);
        if (twtest_rnd(&rng, 5) == 0) {
            gx = w;
            gy = h;
        }
        memcpy(a, lev, n * sizeof *a);
        cr_assert(eq(int, twi_omp_maxtree_u32(a, w, h, conn, canon, 1 + (int)(it % 2), gx, gy),
                     TW_OK));
        expect_same(a, want, n, "forced grid", w, h);
        expect_canon(canon, img, type, want, n);

        memcpy(a, lev, n * sizeof *a);
        cr_assert(eq(int, twi_omp_maxtree_u32(a, w, h, conn, NULL, 2, 0, 0), TW_OK));
        expect_same(a, want, n, "automatic", w, h);
        free(canon);
        free(want);
        free(a);
        free(lev);
        free(img);
    }
}

Test(maxtree_u32, through_twi_omp_maxtree_views)
{
    /* The TW_U32 input of twi_omp_maxtree: into a TW_U64 parent, into a padded TW_U32
     * parent, and in place (the parent view is the input view); large enough (700 x 500,
     * 16-bit noise) for the automatic grid to cut blocks. */
    const int w = 700, h = 500;
    const size_t n = (size_t)w * h;
    uint64_t rng = 0x55aa55aa1234ull;
    uint16_t *img = malloc(n * 2);
    uint32_t *lev = malloc(n * 4), *pad = malloc((n + (size_t)h * 3) * 4);
    uint64_t *want = malloc(n * 8), *p64 = malloc(n * 8);
    tw_tile_view vi, vp;

    cr_assert(img && lev && pad && want && p64);
    for (int mode = 0; mode < 6; mode++) {
        twtest_maxtree_random_image(&rng, img, TW_U16, w, h, mode);
        twtest_maxtree_naive(img, TW_U16, w, h, 4, want);
        widen(&rng, img, TW_U16, n, lev);
        vi = (tw_tile_view){ .data = lev, .stride = 4 * w, .w = w, .h = h, .channels = 1,
                             .type = TW_U32 };
        vp = (tw_tile_view){ .data = p64, .stride = 8 * w, .w = w, .h = h, .channels = 1,
                             .type = TW_U64 };
        cr_assert(eq(int, twi_omp_maxtree(&vi, 4, &vp, 2), TW_OK));
        cr_assert(eq(int, memcmp(p64, want, n * 8), 0), "TW_U64 parent, mode %d", mode);
        vp = (tw_tile_view){ .data = pad, .stride = 4 * (w + 3), .w = w, .h = h, .channels = 1,
                             .type = TW_U32 };
        cr_assert(eq(int, twi_omp_maxtree(&vi, 4, &vp, 1), TW_OK));
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++)
                cr_assert(eq(u64, pad[(size_t)y * (size_t)(w + 3) + (size_t)x],
                             want[(size_t)y * (size_t)w + (size_t)x]));
        cr_assert(eq(int, twi_omp_maxtree(&vi, 4, &vi, 2), TW_OK));
        for (size_t k = 0; k < n; k++)
            cr_assert(eq(u64, lev[k], want[k]), "in place, mode %d, pixel %zu", mode, k);
    }
    free(p64);
    free(want);
    free(pad);
    free(lev);
    free(img);
}

Test(maxtree_u32, bad_arguments)
{
    /* 2^31 pixels or more, a view aliasing the input with another stride, a bad grid or
     * connectivity: TW_E_INVALID before anything is touched. */
    uint32_t a[8] = { 0 };
    twi_maxtree32 *m = NULL;
    tw_tile_view vi = { .data = a, .stride = 16, .w = 4, .h = 2, .channels = 1,
                        .type = TW_U32 },
                 vp = vi;

    cr_assert(eq(int, twi_maxtree32_create(a, 65536, 32768, 4, 1, 1, NULL, &m), TW_E_INVALID));
    cr_assert(eq(int, twi_maxtree32_create(a, 4, 2, 6, 1, 1, NULL, &m), TW_E_INVALID));
    cr_assert(eq(int, twi_maxtree32_create(a, 4, 2, 4, 0, 1, NULL, &m), TW_E_INVALID));
    cr_assert_null(m);
    vp.stride = 20;
    vp.w = 3;
    cr_assert(eq(int, twi_omp_maxtree(&vi, 4, &vp, 1), TW_E_INVALID));
    vp.w = 4;
    cr_assert(eq(int, twi_maxtree_check(&vi, 4, &vp), TW_E_INVALID));
    cr_assert(eq(int, twi_maxtree_check(&vi, 4, &vi), TW_OK));
}
