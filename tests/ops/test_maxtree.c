/* SPDX-License-Identifier: MIT */
/* tilewave tests: whole-slide attribute filters (border max-trees) and the max-tree job. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops_internal.h"
#include "tilewave.h"
#include "twtest.h"
#include "twtest_filter.h"
#include "twtest_maxtree.h"

/*
 * The reference (tests/common/twtest_filter.c) floods every level of the image and never
 * builds a tree; the jobs run on caller buffers with many tile grids (1x1 pixels, single rows
 * and columns, uneven edges, one tile), so the border max-tree merge must reproduce the
 * whole-image answer exactly whatever the tiling.
 */

static uint64_t rng = 0x9e3779b97f4a7c15ull;

/* A random image: mode 0 few levels (0..3), 1 full range, 2 plateaus, 3 smooth ramps + noise,
 * 4 extremes only, 5 two levels inside the range (a mask: omp/maxtree_two.c's tiles). */
static void
random_image(void *img, tw_sample_type t, int w, int h, int mode)
{
    uint32_t vmax = t == TW_U8 ? 255 : 65535;

    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            uint32_t v;

            switch (mode) {
            case 0: v = twtest_rnd(&rng, 4); break;
            case 1: v = twtest_rnd(&rng, vmax + 1); break;
            case 2: v = ((uint32_t)(x / 3) * 7 + (uint32_t)(y / 4) * 13) % 5 * (vmax / 4); break;
            case 3: v = ((uint32_t)(x + 2 * y) * 3 + twtest_rnd(&rng, 8)) % (vmax + 1); break;
            case 4: v = twtest_rnd(&rng, 2) ? vmax : 0; break;
            default: v = twtest_rnd(&rng, 3) ? vmax / 5 : vmax / 3; break;
            }
            if (t == TW_U8)
                ((uint8_t *)img)[y * w + x] = (uint8_t)v;
            else
                ((uint16_t *)img)[y * w + x] = (uint16_t)v;
        }
}

static tw_runtime *
runtime_or_die(int workers)
{
    tw_error err;
    tw_runtime *rt = twtest_runtime(workers, "none", &err);

    cr_assert(rt != NULL, "runtime: %s", err.message);
    return rt;
}

static tw_status
run_filter(tw_runtime *rt, const void *img, tw_sample_type t, int w, int h, tw_attr_filter flt,
           uint64_t thr, int conn, int tw, int th, void *out, bool map, tw_error *err)
{
    tw_attr_filter_opts o;
    tw_job *job = NULL;
    tw_status st;

    tw_attr_filter_opts_init(&o);
    o.image = (tw_host_image){(void *)img, w, h, 0, t};
    o.result = (tw_host_image){out, w, h, 0, map ? TW_U64 : t};
    o.filter = flt;
    o.threshold = thr;
    o.connectivity = conn;
    o.tile_w = tw;
    o.tile_h = th;
    st = map ? twi_area_map_submit(rt, &o, &job, err) : tw_attr_filter_submit(rt, &o, &job, err);
    if (st != TW_OK)
        return st;
    st = tw_job_wait(job, -1);
    if (st != TW_OK)
        snprintf(err->message, sizeof err->message, "%s", tw_job_get_error(job));
    tw_job_destroy(job);
    return st;
}

static const int rule_of[] = {TWTEST_AREA, TWTEST_AREA, TWTEST_HEIGHT, TWTEST_HEIGHT};

/* n random cases through rt: every filter, both connectivities, 8 and 16 bits, random tile
 * grids (including 1-pixel rows and columns) against the level-by-level flooding reference. */
static void
random_cases(tw_runtime *rt, int n)
{
    int cases = 0;

    for (int it = 0; it < n; it++) {
        tw_sample_type t = it % 3 == 2 ? TW_U16 : TW_U8;
        int mode = (int)twtest_rnd(&rng, 6), w = 1 + (int)twtest_rnd(&rng, 24),
            h = 1 + (int)twtest_rnd(&rng, 24), conn = twtest_rnd(&rng, 2) ? 8 : 4;
        tw_attr_filter flt = (tw_attr_filter)twtest_rnd(&rng, 4);
        int area = flt <= TW_AREA_CLOSING;
        uint64_t thr = area ? 1 + twtest_rnd(&rng, (uint32_t)(w * h + 3))
                            : twtest_rnd(&rng, t == TW_U8 ? 300 : 70000);
        int tw = 1 + (int)twtest_rnd(&rng, (uint32_t)w + 2),
            th = 1 + (int)twtest_rnd(&rng, (uint32_t)h + 2);
        size_t ss = tw_sample_size(t);
        void *img = malloc((size_t)(w * h) * ss), *got = calloc((size_t)(w * h), ss),
             *want = calloc((size_t)(w * h), ss);
        tw_error err;
        tw_status st;

        if (mode == 1 && t == TW_U16 && w * h > 400)
            mode = 3; /* keep the reference's level count small */
        if (it % 7 == 0)
            tw = 1; /* one-pixel-wide tiles */
        else if (it % 7 == 1)
            th = 1;
        random_image(img, t, w, h, mode);
        twtest_attr_filter_naive(img, t, w, h, conn, rule_of[flt], thr,
                                 flt == TW_AREA_CLOSING || flt == TW_HEIGHT_CLOSING, want);
        st = run_filter(rt, img, t, w, h, flt, thr, conn, tw, th, got, false, &err);
        cr_assert(eq(int, st, TW_OK), "case %d: %s", it, err.message);
        if (memcmp(got, want, (size_t)(w * h) * ss) != 0) {
            int64_t p = 0;

            while (!memcmp((char *)got + p * (int64_t)ss, (char *)want + p * (int64_t)ss, ss))
                p++;
            cr_fatal("case %d: filter %d thr %llu %dx%d %s mode %d conn %d tiles %dx%d: pixel "
                     "(%lld,%lld) differs",
                     it, (int)flt, (unsigned long long)thr, w, h, tw_sample_type_name(t), mode,
                     conn, tw, th, (long long)(p % w), (long long)(p / w));
        }
        cases++;
        free(img);
        free(got);
        free(want);
    }
    cr_assert(eq(int, cases, n));
}

Test(attr_filter, random_images_every_tiling_match_the_flooding_reference, .timeout = TWTEST_TIMEOUT(240))
{
    /* 700 random cases (random_cases), the border max-trees merged all at once. */
    tw_runtime *rt = runtime_or_die(2);

    random_cases(rt, 700);
    tw_runtime_destroy(rt);
}

Test(attr_filter, merged_in_blocks_match_the_flooding_reference, .timeout = TWTEST_TIMEOUT(240))
{
    /* The same with the border max-trees merged in blocks of 1x1, 2x2 and 3x3 tiles
     * (maxtree.merge_block: each block's cells' answers through the scratch file, the blocks'
     * trees merged), 200 random cases each. */
    static const char *const blocks[] = {"1", "2", "3"};

    for (int b = 0; b < 3; b++) {
        tw_runtime *rt;

        cr_assert(eq(int, setenv("TILEWAVE_MAXTREE_MERGE_BLOCK", blocks[b], 1), 0));
        rt = runtime_or_die(2);
        random_cases(rt, 200);
        tw_runtime_destroy(rt);
    }
    unsetenv("TILEWAVE_MAXTREE_MERGE_BLOCK");
}

Test(attr_filter, border_tree_merge_gives_the_whole_image_node_areas, .timeout = TWTEST_TIMEOUT(120))
{
    /* The merged border max-trees give every pixel's node its whole-image area, for tile
     * grids of 1x1, 2x1, 1x2, 3x3 and 7x5 tiles and random ones (research note 1b.7). */
    tw_runtime *rt = runtime_or_die(2);

    for (int it = 0; it < 200; it++) {
        tw_sample_type t = it % 2 ? TW_U16 : TW_U8;
        int w = 1 + (int)twtest_rnd(&rng, 30), h = 1 + (int)twtest_rnd(&rng, 30);
        int conn = it % 4 < 2 ? 4 : 8, mode = it % 5 == 1 && t == TW_U16 ? 3 : it % 5;
        static const int grids[5][2] = {{1, 1}, {2, 1}, {1, 2}, {3, 3}, {7, 5}};
        int gx = it < 100 ? grids[it % 5][0] : 1 + (int)twtest_rnd(&rng, (uint32_t)w);
        int gy = it < 100 ? grids[it % 5][1] : 1 + (int)twtest_rnd(&rng, (uint32_t)h);
        int tw = (w + gx - 1) / gx, th = (h + gy - 1) / gy;
        void *img = malloc((size_t)(w * h) * 2);
        uint64_t *got = calloc((size_t)(w * h), 8), *want = calloc((size_t)(w * h), 8);
        tw_error err;

        random_image(img, t, w, h, mode);
        twtest_attr_filter_naive(img, t, w, h, conn, TWTEST_AREA_MAP, 0, 0, want);
        cr_assert(eq(int, run_filter(rt, img, t, w, h, TW_AREA_OPENING, 1, conn, tw, th, got,
                                     true, &err),
                     TW_OK),
                  "%s", err.message);
        for (int p = 0; p < w * h; p++)
            cr_assert(eq(u64, got[p], want[p]), "case %d (%dx%d, tiles %dx%d): pixel %d", it, w,
                      h, tw, th, p);
        free(img);
        free(got);
        free(want);
    }
    tw_runtime_destroy(rt);
}

Test(attr_filter, threshold_above_the_image_area_gives_the_minimum)
{
    /* As scikit-image: when no node reaches the area, the opening is 0 everywhere and the
     * closing the type's maximum. */
    tw_runtime *rt = runtime_or_die(1);
    uint8_t img[35], out[35];
    tw_error err;

    random_image(img, TW_U8, 7, 5, 1);
    cr_assert(eq(int, run_filter(rt, img, TW_U8, 7, 5, TW_AREA_OPENING, 36, 4, 3, 2, out, false,
                                 &err),
                 TW_OK));
    for (int i = 0; i < 35; i++)
        cr_assert(eq(u8, out[i], 0));
    cr_assert(eq(int, run_filter(rt, img, TW_U8, 7, 5, TW_AREA_CLOSING, 36, 8, 1, 1, out, false,
                                 &err),
                 TW_OK));
    for (int i = 0; i < 35; i++)
        cr_assert(eq(u8, out[i], 255));
    tw_runtime_destroy(rt);
}

Test(attr_filter, the_caller_images_are_the_tiles_when_they_can_be)
{
    /* Filters on caller buffers with padded rows: the tiles are windows of the input (openings)
     * and of the result (runtime/tile.c, "Wrapped tiles"), so the runtime's tile memory stays
     * under one image; closings (inverted input tiles), the result in the input's buffer and
     * a 16-bit image with an odd stride copy as before. Every case equals the naive reference
     * on the packed image and leaves the input as it was. */
    const int w = 157, h = 109;

    for (int c = 0; c < 5; c++) {
        bool u16 = c >= 3, in_place = c == 2;
        tw_attr_filter flt = c == 1 ? TW_AREA_CLOSING : c == 4 ? TW_HEIGHT_OPENING
                                                              : TW_AREA_OPENING;
        uint64_t thr = flt == TW_HEIGHT_OPENING ? 3000 : 40;
        tw_sample_type t = u16 ? TW_U16 : TW_U8;
        size_t ss = tw_sample_size(t), stride = (size_t)w * ss + (c == 3 ? 1 : 10);
        void *img = malloc((size_t)(w * h) * ss), *want = malloc((size_t)(w * h) * ss);
        char *in = calloc(stride * (size_t)h, 1), *res = calloc(stride * (size_t)h, 1);
        char *before = malloc(stride * (size_t)h);
        tw_runtime *rt = runtime_or_die(2);
        tw_attr_filter_opts o;
        tw_job *job = NULL;
        tw_memory_info mi;
        tw_error err;

        random_image(img, t, w, h, 3);
        twtest_attr_filter_naive(img, t, w, h, 8, rule_of[flt], thr,
                                 flt == TW_AREA_CLOSING || flt == TW_HEIGHT_CLOSING, want);
        for (int y = 0; y < h; y++)
            memcpy(in + (size_t)y * stride, (char *)img + (size_t)y * (size_t)w * ss,
                   (size_t)w * ss);
        memcpy(before, in, stride * (size_t)h);
        tw_attr_filter_opts_init(&o);
        o.image = (tw_host_image){in, w, h, stride, t};
        o.result = (tw_host_image){in_place ? in : res, w, h, stride, t};
        o.filter = flt;
        o.threshold = thr;
        o.connectivity = 8;
        o.tile_w = 40;
        o.tile_h = 32;
        cr_assert(eq(int, tw_attr_filter_submit(rt, &o, &job, &err), TW_OK), "%s", err.message);
        cr_assert(eq(int, tw_job_wait(job, -1), TW_OK), "case %d: %s", c, tw_job_get_error(job));
        tw_job_destroy(job);
        for (int y = 0; y < h; y++)
            cr_assert(memcmp((in_place ? in : res) + (size_t)y * stride,
                             (char *)want + (size_t)y * (size_t)w * ss, (size_t)w * ss) == 0,
                      "case %d: row %d differs", c, y);
        cr_assert(in_place || memcmp(before, in, stride * (size_t)h) == 0,
                  "case %d: the input was written", c);
        cr_assert(eq(int, tw_runtime_get_memory(rt, &mi), TW_OK));
        if (c == 0 || c == 4)
            cr_assert(mi.host_peak < (int64_t)w * h, "case %d: host_peak %lld", c,
                      (long long)mi.host_peak);
        tw_runtime_destroy(rt);
        free(img);
        free(want);
        free(in);
        free(res);
        free(before);
    }
}

Test(attr_filter, larger_image_many_tilings_agree)
{
    /* A 300x200 natural-like image: the filters with 4 tile grids give the same bytes as one
     * tile (the local-tree path with no border), for each filter. */
    tw_runtime *rt = runtime_or_die(2);
    int w = 300, h = 200;
    uint8_t *img = malloc((size_t)(w * h)), *one = malloc((size_t)(w * h)),
            *got = malloc((size_t)(w * h));
    static const int tiles[4][2] = {{64, 64}, {17, 300}, {300, 1}, {37, 23}};
    tw_error err;

    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            img[y * w + x] = (uint8_t)((x * x / 97 + y * 3 + (int)twtest_rnd(&rng, 40)) % 256);
    for (int f = 0; f < 4; f++) {
        uint64_t thr = f < 2 ? 50 : 20;

        cr_assert(eq(int, run_filter(rt, img, TW_U8, w, h, (tw_attr_filter)f, thr, 8, w, h, one,
                                     false, &err),
                     TW_OK));
        for (int k = 0; k < 4; k++) {
            cr_assert(eq(int, run_filter(rt, img, TW_U8, w, h, (tw_attr_filter)f, thr, 8,
                                         tiles[k][0], tiles[k][1], got, false, &err),
                         TW_OK),
                      "%s", err.message);
            cr_assert(eq(int, memcmp(got, one, (size_t)(w * h)), 0), "filter %d tiles %dx%d", f,
                      tiles[k][0], tiles[k][1]);
        }
    }
    free(img);
    free(one);
    free(got);
    tw_runtime_destroy(rt);
}

Test(attr_filter, bad_options_are_rejected_before_anything_runs)
{
    /* One clear TW_E_INVALID per mistake. */
    tw_runtime *rt = runtime_or_die(1);
    uint8_t img[16] = {0}, out[16];
    uint16_t out16[16];
    tw_attr_filter_opts o;
    tw_job *job = NULL;
    tw_error err;

    tw_attr_filter_opts_init(&o);
    o.image = (tw_host_image){img, 4, 4, 0, TW_U8};
    o.result = (tw_host_image){out, 4, 4, 0, TW_U8};
    o.connectivity = 6;
    cr_assert(eq(int, tw_attr_filter_submit(rt, &o, &job, &err), TW_E_INVALID));
    cr_assert(strstr(err.message, "connectivity 6") != NULL, "%s", err.message);
    o.connectivity = 4;
    o.threshold = 0;
    cr_assert(eq(int, tw_attr_filter_submit(rt, &o, &job, &err), TW_E_INVALID));
    cr_assert(strstr(err.message, "at least 1") != NULL, "%s", err.message);
    o.threshold = 3;
    o.result.type = TW_U16;
    o.result.data = out16;
    cr_assert(eq(int, tw_attr_filter_submit(rt, &o, &job, &err), TW_E_INVALID));
    cr_assert(strstr(err.message, "result image") != NULL, "%s", err.message);
    o.result.data = NULL;
    cr_assert(eq(int, tw_attr_filter_submit(rt, &o, &job, &err), TW_E_INVALID));
    cr_assert(strstr(err.message, "no output") != NULL, "%s", err.message);
    o.filter = (tw_attr_filter)9;
    cr_assert(eq(int, tw_attr_filter_submit(rt, &o, &job, &err), TW_E_INVALID));
    o.struct_size = 3;
    cr_assert(eq(int, tw_attr_filter_submit(rt, &o, &job, &err), TW_E_INVALID));
    cr_assert(eq(ptr, job, NULL));
    tw_runtime_destroy(rt);
}

Test(attr_filter, names_parse)
{
    /* The CLI's names map to the enum and nothing else parses. */
    tw_attr_filter f;

    cr_assert(eq(int, tw_attr_filter_parse("area-open", &f), TW_OK));
    cr_assert(eq(int, f, TW_AREA_OPENING));
    cr_assert(eq(int, tw_attr_filter_parse("height-close", &f), TW_OK));
    cr_assert(eq(int, f, TW_HEIGHT_CLOSING));
    cr_assert(eq(int, tw_attr_filter_parse("area", &f), TW_E_INVALID));
}

static tw_status
run_maxtree(tw_runtime *rt, const void *img, tw_sample_type t, int w, int h, int conn, int bits,
            void *parent, void *area, tw_error *err)
{
    tw_maxtree_opts o;
    tw_job *job = NULL;
    tw_sample_type pt = bits == 64 ? TW_U64 : TW_U32;
    tw_status st;

    tw_maxtree_opts_init(&o);
    o.image = (tw_host_image){(void *)img, w, h, 0, t};
    o.parent = (tw_host_image){parent, w, h, 0, pt};
    if (area)
        o.area = (tw_host_image){area, w, h, 0, pt};
    o.connectivity = conn;
    o.index_bits = bits;
    if ((st = tw_maxtree_submit(rt, &o, &job, err)) != TW_OK)
        return st;
    st = tw_job_wait(job, -1);
    if (st != TW_OK)
        snprintf(err->message, sizeof err->message, "%s", tw_job_get_error(job));
    tw_job_destroy(job);
    return st;
}

Test(maxtree_job, parent_and_area_images_match_the_naive_tree)
{
    /* The in-memory job (CPU workers with a 2-thread team) gives the naive canonical parent
     * image and the flooding reference's node areas, with 32- and 64-bit indices. */
    tw_error err;
    tw_runtime *rt = twtest_runtime_with("none", "1");

    cr_assert(rt != NULL);
    for (int it = 0; it < 120; it++) {
        tw_sample_type t = it % 2 ? TW_U16 : TW_U8;
        int w = 1 + (int)twtest_rnd(&rng, 60), h = 1 + (int)twtest_rnd(&rng, 60);
        int conn = it % 4 < 2 ? 4 : 8, bits = it % 3 == 0 ? 64 : 32, mode = it % 6;
        size_t n = (size_t)(w * h);
        void *img = malloc(n * 2);
        uint64_t *want = malloc(n * 8), *warea = malloc(n * 8);
        void *par = malloc(n * 8), *area = malloc(n * 8);

        if (t == TW_U16 && mode == 0)
            mode = 4;
        twtest_maxtree_random_image(&rng, img, t, w, h, mode);
        twtest_maxtree_naive(img, t, w, h, conn, want);
        twtest_attr_filter_naive(img, t, w, h, conn, TWTEST_AREA_MAP, 0, 0, warea);
        cr_assert(eq(int, run_maxtree(rt, img, t, w, h, conn, bits, par, area, &err), TW_OK),
                  "%s", err.message);
        for (size_t p = 0; p < n; p++) {
            uint64_t g = bits == 64 ? ((uint64_t *)par)[p] : ((uint32_t *)par)[p];
            uint64_t a = bits == 64 ? ((uint64_t *)area)[p] : ((uint32_t *)area)[p];

            cr_assert(eq(u64, g, want[p]), "case %d (%dx%d conn %d): pixel %zu", it, w, h,
                      conn, p);
            cr_assert(eq(u64, a, warea[p]), "case %d: area of pixel %zu", it, p);
        }
        free(img);
        free(want);
        free(warea);
        free(par);
        free(area);
    }
    tw_runtime_destroy(rt);
}

Test(maxtree_job, bad_options)
{
    /* Wrong connectivity, index bits, buffer types and missing outputs are TW_E_INVALID. */
    tw_runtime *rt = runtime_or_die(1);
    uint8_t img[6] = {1, 2, 3, 4, 5, 6};
    uint32_t par[6];
    uint64_t par64[6];
    tw_maxtree_opts o;
    tw_job *job = NULL;
    tw_error err;

    tw_maxtree_opts_init(&o);
    o.image = (tw_host_image){img, 3, 2, 0, TW_U8};
    cr_assert(eq(int, tw_maxtree_submit(rt, &o, &job, &err), TW_E_INVALID));
    cr_assert(strstr(err.message, "no output") != NULL, "%s", err.message);
    o.parent = (tw_host_image){par, 3, 2, 0, TW_U32};
    o.connectivity = 5;
    cr_assert(eq(int, tw_maxtree_submit(rt, &o, &job, &err), TW_E_INVALID));
    o.connectivity = 8;
    o.index_bits = 16;
    cr_assert(eq(int, tw_maxtree_submit(rt, &o, &job, &err), TW_E_INVALID));
    o.index_bits = 64;
    cr_assert(eq(int, tw_maxtree_submit(rt, &o, &job, &err), TW_E_INVALID));
    cr_assert(strstr(err.message, "parent image") != NULL, "%s", err.message);
    o.parent = (tw_host_image){par64, 3, 2, 0, TW_U64};
    o.area = (tw_host_image){par, 3, 2, 0, TW_U32};
    cr_assert(eq(int, tw_maxtree_submit(rt, &o, &job, &err), TW_E_INVALID));
    cr_assert(strstr(err.message, "area image") != NULL, "%s", err.message);
    cr_assert(eq(ptr, job, NULL));
    tw_runtime_destroy(rt);
}
