/* SPDX-License-Identifier: MIT */
/* tilewave tests: max-tree and attribute-filter jobs with GPU workers vs the references. */
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

static uint64_t rng = 0x2545f4914f6cdd1dull;

/* Tiles of a tw x th grid over img whose samples take at most two values (masks: their tile
 * passes may run on CPU workers too, ops/attr_filter.c). */
static int64_t
mask_tiles(const void *img, tw_sample_type t, int w, int h, int tw, int th)
{
    int64_t n = 0;

    for (int ty = 0; ty < h; ty += th)
        for (int tx = 0; tx < w; tx += tw) {
            uint32_t v[3];
            int k = 0;

            for (int y = ty; y < h && y < ty + th && k < 3; y++)
                for (int x = tx; x < w && x < tx + tw && k < 3; x++) {
                    uint32_t s = t == TW_U8 ? ((const uint8_t *)img)[y * w + x]
                                            : ((const uint16_t *)img)[y * w + x];
                    int seen = 0;

                    for (int i = 0; i < k; i++)
                        seen |= v[i] == s;
                    if (!seen)
                        v[k++] = s;
                }
            n += k <= 2;
        }
    return n;
}

/* `jobs` random filter jobs, alternately on a GPU-only and a GPU + CPU runtime: every filter,
 * 8/16-bit, 4/8-conn, tiles down to 1 pixel wide; the same bytes as the flooding reference,
 * every tile pass of a tile that is not a mask and the merge on the GPU. */
static void
random_filters(int jobs)
{
    tw_runtime *rts[2] = {twtest_runtime_with("0", "0"), twtest_runtime_with("0", "2")};

    cr_assert(rts[0] && rts[1]);
    for (int it = 0; it < jobs; it++) {
        tw_sample_type t = it % 3 == 2 ? TW_U16 : TW_U8;
        int w = 1 + (int)twtest_rnd(&rng, 70), h = 1 + (int)twtest_rnd(&rng, 70);
        int conn = it % 2 ? 8 : 4, mode = (int)twtest_rnd(&rng, 6);
        tw_attr_filter flt = (tw_attr_filter)(it % 4);
        uint64_t thr = flt <= TW_AREA_CLOSING ? 1 + twtest_rnd(&rng, (uint32_t)(w * h))
                                              : twtest_rnd(&rng, t == TW_U8 ? 200 : 5000);
        int tw = it % 5 == 0 ? 1 : 1 + (int)twtest_rnd(&rng, (uint32_t)w + 5);
        int th = it % 5 == 1 ? 1 : 1 + (int)twtest_rnd(&rng, (uint32_t)h + 5);
        size_t ss = tw_sample_size(t), n = (size_t)(w * h);
        void *img = malloc(n * ss), *want = malloc(n * ss), *got = malloc(n * ss);
        tw_attr_filter_opts o;
        tw_attr_filter_report rep;
        tw_job *job = NULL;
        tw_error err;
        int64_t passes, masks;

        if (t == TW_U16 && (mode == 0 || mode == 4) && n > 900)
            mode = 3; /* keep the reference's level count small */
        twtest_maxtree_random_image(&rng, img, t, w, h, mode);
        twtest_attr_filter_naive(img, t, w, h, conn, flt <= TW_AREA_CLOSING ? TWTEST_AREA
                                                                            : TWTEST_HEIGHT,
                                 thr, flt == TW_AREA_CLOSING || flt == TW_HEIGHT_CLOSING, want);
        tw_attr_filter_opts_init(&o);
        o.image = (tw_host_image){img, w, h, 0, t};
        o.result = (tw_host_image){got, w, h, 0, t};
        o.filter = flt;
        o.threshold = thr;
        o.connectivity = conn;
        o.tile_w = tw;
        o.tile_h = th;
        o.report = &rep;
        tw_attr_filter_report_init(&rep);
        cr_assert(eq(int, tw_attr_filter_submit(rts[it % 2], &o, &job, &err), TW_OK), "%s",
                  err.message);
        cr_assert(eq(int, tw_job_wait(job, -1), TW_OK), "%s", tw_job_get_error(job));
        tw_job_destroy(job);
        cr_assert(eq(int, memcmp(got, want, n * ss), 0),
                  "case %d: filter %d %dx%d %s conn %d tiles %dx%d", it, (int)flt, w, h,
                  tw_sample_type_name(t), conn, tw, th);
        /* Every tile pass and the merge ran on the GPU, with or without CPU workers, but
         * those of masks, which CPU workers may take. */
        passes = rep.tiles > 1 ? 2 : 1;
        masks = mask_tiles(img, t, w, h, tw, th);
        cr_assert(eq(i64, rep.tp_cpu + rep.tp_cuda, passes * rep.tiles));
        cr_assert(le(i64, rep.tp_cpu, it % 2 ? passes * masks : 0), "case %d", it);
        if (rep.tiles > 1)
            cr_assert(eq(int, (int)rep.merge_device, (int)TW_DEVICE_CUDA));
        free(img);
        free(want);
        free(got);
    }
    tw_runtime_destroy(rts[0]);
    tw_runtime_destroy(rts[1]);
}

Test(maxtree_job_cuda, filters_on_gpu_and_mixed_workers_match_the_references, .timeout = TWTEST_TIMEOUT(300))
{
    /* 160 random filter jobs on GPU workers (random_filters), border max-trees merged at once. */
    twtest_need_gpu();
    random_filters(160);
}

Test(maxtree_job_cuda, merged_in_blocks_on_the_gpu_match_the_references, .timeout = TWTEST_TIMEOUT(300))
{
    /* The same with the border max-trees merged in blocks of 1x1, 2x2 and 3x3 tiles
     * (maxtree.merge_block): the blocks' trees merged on the GPU; 60 jobs each. */
    static const char *const blocks[] = {"1", "2", "3"};

    twtest_need_gpu();
    for (int b = 0; b < 3; b++) {
        cr_assert(eq(int, setenv("TILEWAVE_MAXTREE_MERGE_BLOCK", blocks[b], 1), 0));
        random_filters(60);
    }
    unsetenv("TILEWAVE_MAXTREE_MERGE_BLOCK");
}

Test(maxtree_job_cuda, in_memory_tree_on_the_gpu_matches_the_naive_tree)
{
    /* tw_maxtree_submit on a GPU runtime: the naive canonical parent image. */
    twtest_need_gpu();
    tw_runtime *rt = twtest_runtime_with("0", "1");

    cr_assert(rt != NULL);
    for (int it = 0; it < 60; it++) {
        tw_sample_type t = it % 2 ? TW_U16 : TW_U8;
        int w = 1 + (int)twtest_rnd(&rng, 300), h = 1 + (int)twtest_rnd(&rng, 200);
        int conn = it % 4 < 2 ? 4 : 8;
        size_t n = (size_t)(w * h);
        void *img = malloc(n * 2);
        uint64_t *want = malloc(n * 8);
        uint32_t *par = malloc(n * 4);
        tw_maxtree_opts o;
        tw_job *job = NULL;
        tw_error err;

        twtest_maxtree_random_image(&rng, img, t, w, h, it % 6);
        twtest_maxtree_naive(img, t, w, h, conn, want);
        tw_maxtree_opts_init(&o);
        o.image = (tw_host_image){img, w, h, 0, t};
        o.parent = (tw_host_image){par, w, h, 0, TW_U32};
        o.connectivity = conn;
        cr_assert(eq(int, tw_maxtree_submit(rt, &o, &job, &err), TW_OK), "%s", err.message);
        cr_assert(eq(int, tw_job_wait(job, -1), TW_OK), "%s", tw_job_get_error(job));
        tw_job_destroy(job);
        for (size_t p = 0; p < n; p++)
            cr_assert(eq(u64, par[p], want[p]), "case %d (%dx%d): pixel %zu", it, w, h, p);
        free(img);
        free(want);
        free(par);
    }
    tw_runtime_destroy(rt);
}

Test(maxtree_job_cuda, gpu_border_trees_and_merge_give_whole_image_areas, .timeout = TWTEST_TIMEOUT(300))
{
    /* The GPU's border max-trees, merge and area map (TW_U64) on larger images cut into many
     * tiles (square, 1-pixel-wide strips, uneven edges) equal the flooding reference. */
    twtest_need_gpu();
    tw_runtime *rt = twtest_runtime_with("0", "1");
    static const int sizes[][4] = {{700, 500, 64, 64},     {1000, 333, 128, 100},
                                   {257, 301, 1, 301},     {301, 257, 301, 1},
                                   {640, 480, 640, 7},     {513, 511, 512, 510},
                                   {1200, 900, 256, 256},  {90, 700, 13, 700}};

    cr_assert(rt != NULL);
    for (int it = 0; it < 16; it++) {
        const int *sz = sizes[it % 8];
        int w = sz[0], h = sz[1], conn = it < 8 ? 4 : 8, mode = 1 + it % 5;
        tw_sample_type t = it % 3 == 1 ? TW_U16 : TW_U8;
        size_t n = (size_t)w * (size_t)h;
        void *img = malloc(n * 2);
        uint64_t *got = calloc(n, 8), *want = calloc(n, 8);
        tw_attr_filter_opts o;
        tw_job *job = NULL;
        tw_error err;

        cr_assert(img && got && want);
        if (t == TW_U16)
            mode = 1 + it % 2; /* few levels: the reference floods level by level */
        twtest_maxtree_random_image(&rng, img, t, w, h, mode);
        twtest_attr_filter_naive(img, t, w, h, conn, TWTEST_AREA_MAP, 0, 0, want);
        tw_attr_filter_opts_init(&o);
        o.image = (tw_host_image){img, w, h, 0, t};
        o.result = (tw_host_image){got, w, h, 0, TW_U64};
        o.connectivity = conn;
        o.tile_w = sz[2];
        o.tile_h = sz[3];
        cr_assert(eq(int, twi_area_map_submit(rt, &o, &job, &err), TW_OK), "%s", err.message);
        cr_assert(eq(int, tw_job_wait(job, -1), TW_OK), "%s", tw_job_get_error(job));
        tw_job_destroy(job);
        for (size_t p = 0; p < n; p++)
            cr_assert(eq(u64, got[p], want[p]), "case %d (%dx%d %s, tiles %dx%d): pixel %zu", it,
                      w, h, tw_sample_type_name(t), sz[2], sz[3], p);
        free(img);
        free(got);
        free(want);
    }
    /* The GPU worker's counters saw the tiles go up and the results come down. */
    for (int i = 0; i < tw_runtime_get_worker_count(rt); i++) {
        tw_worker_info wi;

        cr_assert(eq(int, tw_runtime_get_worker(rt, i, &wi), TW_OK));
        if (wi.type == TW_DEVICE_CUDA)
            cr_assert(wi.tasks_run > 0 && wi.bytes_to_gpu > 0 && wi.bytes_from_gpu > 0 &&
                      wi.busy_s > 0);
    }
    tw_runtime_destroy(rt);
}
