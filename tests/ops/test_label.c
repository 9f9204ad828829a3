/* SPDX-License-Identifier: MIT */
/* tilewave tests: the label job (tw_label_submit) across tiles against a naive flood fill. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Criterion 2.4 assertions store into a 1-bit field, which -Wconversion flags at every use. */
#pragma GCC diagnostic ignored "-Wconversion"

#include "tilewave.h"
#include "twtest.h"
#include "twtest_label.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static tw_runtime *
runtime_or_die(int workers)
{
    tw_error err;
    tw_runtime *rt = twtest_runtime(workers, "none", &err);

    cr_assert(rt != NULL, "runtime: %s", err.message);
    return rt;
}

/* Label a packed 8-bit mask in memory into `out` (TW_U32 or TW_U64). */
static tw_status
run_label(tw_runtime *rt, const uint8_t *m, int w, int h, int conn, int tw, int th, void *out,
          tw_sample_type t, tw_label_report *rep, tw_error *err)
{
    tw_label_opts o;
    tw_job *job = NULL;
    tw_status st;

    tw_label_opts_init(&o);
    o.image = (tw_host_image){(void *)m, w, h, 0, TW_U8};
    o.result = (tw_host_image){out, w, h, 0, t};
    o.connectivity = conn;
    o.tile_w = tw;
    o.tile_h = th;
    o.report = rep;
    if ((st = tw_label_submit(rt, &o, &job, err)) != TW_OK)
        return st;
    st = tw_job_wait(job, -1);
    if (st != TW_OK)
        snprintf(err->message, sizeof err->message, "%s", tw_job_get_error(job));
    tw_job_destroy(job);
    return st;
}

/* n random cases through rt: every mask kind, both connectivities, random tile grids (1x1,
 * single rows and columns, uneven edges, one tile), 32- and 64-bit labels: the labels equal
 * the flood fill's and the report counts its components. */
static void
random_cases(tw_runtime *rt, int n)
{
    for (int it = 0; it < n; it++) {
        int w = 1 + (int)twtest_rnd(&rng, 48), h = 1 + (int)twtest_rnd(&rng, 48);
        int tw = 1 + (int)twtest_rnd(&rng, (uint32_t)w + 2),
            th = 1 + (int)twtest_rnd(&rng, (uint32_t)h + 2);
        int conn = twtest_rnd(&rng, 2) ? 8 : 4, mode = (int)twtest_rnd(&rng, 5);
        bool wide = it % 3 == 0;
        uint8_t *m = malloc((size_t)(w * h));
        uint64_t *want = malloc((size_t)(w * h) * 8), nw;
        void *got = calloc((size_t)(w * h), 8);
        tw_label_report rep;
        tw_error err;
        tw_status st;

        if (it % 7 == 0)
            tw = th = 1;
        else if (it % 7 == 1)
            tw = 1;
        else if (it % 7 == 2)
            th = 1;
        tw_label_report_init(&rep);
        twtest_label_mask(m, w, h, mode, 20 + (int)twtest_rnd(&rng, 60), &rng);
        nw = twtest_label_naive(m, w, h, conn, want);
        st = run_label(rt, m, w, h, conn, tw, th, got, wide ? TW_U64 : TW_U32, &rep, &err);
        cr_assert(eq(int, st, TW_OK), "case %d: %s", it, err.message);
        cr_assert(eq(u64, rep.objects, nw), "case %d", it);
        cr_assert(eq(int, rep.label_bits, wide ? 64 : 32));
        for (int64_t i = 0; i < (int64_t)w * h; i++) {
            uint64_t v = wide ? ((uint64_t *)got)[i] : ((uint32_t *)got)[i];

            cr_assert(eq(u64, v, want[i]), "case %d: %dx%d tiles %dx%d conn %d mode %d pixel %lld",
                      it, w, h, tw, th, conn, mode, (long long)i);
        }
        free(m);
        free(want);
        free(got);
    }
}

/* One worker, then several: the numbering never depends on the order tiles finish in. */
Test(label, random_masks_match_flood_fill_one_worker)
{
    tw_runtime *rt = runtime_or_die(1);

    random_cases(rt, 150);
    tw_runtime_destroy(rt);
}

Test(label, random_masks_match_flood_fill_three_workers)
{
    tw_runtime *rt = runtime_or_die(3);

    random_cases(rt, 150);
    tw_runtime_destroy(rt);
}

/* An image in memory with no tile size asked for goes whole through the CPU workers (one
 * label.whole task on a team: the runs of the whole image, omp/label_runs.c): every mask kind,
 * a checkerboard (the most runs), sizes up to several chunks a thread, 1 and 3 workers, both
 * connectivities: the flood fill's labels, one tile in the report. 64-bit labels and an
 * explicit tile size keep the tile passes (the same labels). */
Test(label, whole_images_on_the_cpu_workers)
{
    for (int workers = 1; workers <= 3; workers += 2) {
        tw_runtime *rt = runtime_or_die(workers);

        for (int it = 0; it < 40; it++) {
            int w = 1 + (int)twtest_rnd(&rng, it < 20 ? 40 : 700),
                h = 1 + (int)twtest_rnd(&rng, it < 20 ? 40 : 500);
            int conn = it % 2 ? 8 : 4, mode = it % 6, tiles = it % 5 == 4;
            bool wide = it % 7 == 3;
            uint8_t *m = malloc((size_t)(w * h));
            uint64_t *want = malloc((size_t)(w * h) * 8), nw;
            void *got = calloc((size_t)(w * h), 8);
            tw_label_report rep;
            tw_error err;
            tw_status st;

            if (mode == 5)
                for (int64_t i = 0; i < (int64_t)w * h; i++)
                    m[i] = (uint8_t)((i % w + i / w) % 2 == 0);
            else
                twtest_label_mask(m, w, h, mode, 20 + (int)twtest_rnd(&rng, 60), &rng);
            tw_label_report_init(&rep);
            nw = twtest_label_naive(m, w, h, conn, want);
            st = run_label(rt, m, w, h, conn, tiles ? 16 : 0, tiles ? 16 : 0, got,
                           wide ? TW_U64 : TW_U32, &rep, &err);
            cr_assert(eq(int, st, TW_OK), "case %d: %s", it, err.message);
            cr_assert(eq(u64, rep.objects, nw), "case %d", it);
            if (!tiles && !wide) {
                cr_assert(eq(i64, rep.tiles, 1), "case %d", it);
                cr_assert(eq(i64, rep.tile_w, w));
                cr_assert(eq(i64, rep.tp_cpu, 1), "case %d", it);
            } else if (tiles) {
                cr_assert(eq(i64, rep.tiles, (int64_t)((w + 15) / 16) * ((h + 15) / 16)));
            }
            for (int64_t i = 0; i < (int64_t)w * h; i++) {
                uint64_t v = wide ? ((uint64_t *)got)[i] : ((uint32_t *)got)[i];

                cr_assert(eq(u64, v, want[i]), "case %d: %dx%d conn %d mode %d pixel %lld", it,
                          w, h, conn, mode, (long long)i);
            }
            free(m);
            free(want);
            free(got);
        }
        tw_runtime_destroy(rt);
    }
}

/* Objects that cross many tiles: a spiral and a comb whose teeth join only at the bottom,
 * labelled with 1x1, 3x2 and 7x7 tiles, give the flood fill's labels (the comb's first pixel
 * is far from where its pieces meet). */
Test(label, the_caller_images_are_the_tiles)
{
    /* A mask and a result with padded rows: the tiles are windows of them (runtime/tile.c,
     * "Wrapped tiles"), so the runtime allocates no tile memory at all; 32- and
     * 64-bit labels equal the flood fill and the mask is left as it was. */
    const int w = 131, h = 97, pad = 5;

    for (int wide = 0; wide < 2; wide++) {
        size_t ls = wide ? 8 : 4, mstride = (size_t)w + (size_t)pad, lstride = (w + pad) * ls;
        uint8_t *m = malloc((size_t)(w * h)), *mp = calloc(mstride * (size_t)h, 1);
        uint8_t *before = malloc(mstride * (size_t)h);
        char *res = calloc(lstride * (size_t)h, 1);
        uint64_t *want = malloc((size_t)(w * h) * 8), nw;
        tw_runtime *rt = runtime_or_die(2);
        tw_label_opts o;
        tw_label_report rep;
        tw_memory_info mi;
        tw_job *job = NULL;
        tw_error err;

        twtest_label_mask(m, w, h, 1, 45, &rng);
        nw = twtest_label_naive(m, w, h, 8, want);
        for (int y = 0; y < h; y++)
            memcpy(mp + (size_t)y * mstride, m + (size_t)y * (size_t)w, (size_t)w);
        memcpy(before, mp, mstride * (size_t)h);
        tw_label_opts_init(&o);
        tw_label_report_init(&rep);
        o.image = (tw_host_image){mp, w, h, mstride, TW_U8};
        o.result = (tw_host_image){res, w, h, lstride, wide ? TW_U64 : TW_U32};
        o.connectivity = 8;
        o.tile_w = 32;
        o.tile_h = 24;
        o.report = &rep;
        cr_assert(eq(int, tw_label_submit(rt, &o, &job, &err), TW_OK), "%s", err.message);
        cr_assert(eq(int, tw_job_wait(job, -1), TW_OK), "%s", tw_job_get_error(job));
        tw_job_destroy(job);
        cr_assert(eq(u64, rep.objects, nw));
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++) {
                const char *p = res + (size_t)y * lstride + (size_t)x * ls;
                uint64_t v = 0;

                if (wide) {
                    memcpy(&v, p, 8);
                } else {
                    uint32_t v32;

                    memcpy(&v32, p, 4);
                    v = v32;
                }
                cr_assert(eq(u64, v, want[y * w + x]), "%d-bit: pixel (%d, %d)", wide ? 64 : 32,
                          x, y);
            }
        cr_assert(memcmp(before, mp, mstride * (size_t)h) == 0, "the mask was written");
        cr_assert(eq(int, tw_runtime_get_memory(rt, &mi), TW_OK));
        cr_assert(eq(i64, mi.host_peak, 0)); /* no tile memory at all */
        tw_runtime_destroy(rt);
        free(m);
        free(mp);
        free(before);
        free(res);
        free(want);
    }
}

Test(label, objects_crossing_many_tiles)
{
    enum { W = 61, H = 47 };
    static uint8_t m[W * H];
    static uint64_t want[W * H];
    static uint32_t got[W * H];
    static const int tiles[][2] = {{1, 1}, {3, 2}, {7, 7}, {60, 1}, {1, 46}};
    tw_runtime *rt = runtime_or_die(2);

    for (int shape = 0; shape < 2; shape++) {
        memset(m, 0, sizeof m);
        if (shape == 0) { /* a square spiral, one pixel wide */
            int x0 = 0, y0 = 0, x1 = W - 1, y1 = H - 1;

            while (x0 <= x1 && y0 <= y1) {
                for (int x = x0; x <= x1; x++)
                    m[y0 * W + x] = 1;
                for (int y = y0; y <= y1; y++)
                    m[y * W + x1] = 1;
                for (int x = x0; x <= x1; x++)
                    m[y1 * W + x] = 1;
                for (int y = y0 + 2; y <= y1; y++)
                    m[y * W + x0] = 1;
                x0 += 2;
                y0 += 2;
                x1 -= 2;
                y1 -= 2;
                if (x0 <= x1)
                    m[y0 * W + x0 - 1] = 1;
            }
        } else { /* teeth from the top, joined by the last row; isolated dots between */
            for (int y = 0; y < H; y++)
                for (int x = 0; x < W; x++)
                    m[y * W + x] = (uint8_t)((x % 4 == 0 && y >= x % 9) || y == H - 1 ||
                                             (x % 4 == 2 && y % 5 == 1));
        }
        for (int conn = 4; conn <= 8; conn += 4) {
            uint64_t nw = twtest_label_naive(m, W, H, conn, want);

            for (size_t t = 0; t < sizeof tiles / sizeof tiles[0]; t++) {
                tw_label_report rep;
                tw_error err;

                tw_label_report_init(&rep);
                cr_assert(eq(int, run_label(rt, m, W, H, conn, tiles[t][0], tiles[t][1], got,
                                            TW_U32, &rep, &err),
                             TW_OK), "%s", err.message);
                cr_assert(eq(u64, rep.objects, nw));
                for (int i = 0; i < W * H; i++)
                    cr_assert(eq(u64, got[i], want[i]), "shape %d conn %d tiles %dx%d pixel %d",
                              shape, conn, tiles[t][0], tiles[t][1], i);
            }
        }
    }
    tw_runtime_destroy(rt);
}

/* An empty mask gives all 0 and no object; a full one a single object labelled 1 everywhere,
 * whatever the tiles. */
Test(label, empty_and_full_masks)
{
    enum { W = 33, H = 20 };
    static uint8_t m[W * H];
    static uint32_t got[W * H];
    tw_runtime *rt = runtime_or_die(2);

    for (int full = 0; full < 2; full++)
        for (int tw = 1; tw <= 40; tw += 13) {
            tw_label_report rep;
            tw_error err;

            memset(m, full ? 7 : 0, sizeof m);
            memset(got, 0xAB, sizeof got);
            tw_label_report_init(&rep);
            cr_assert(eq(int, run_label(rt, m, W, H, 8, tw, tw, got, TW_U32, &rep, &err), TW_OK),
                      "%s", err.message);
            cr_assert(eq(u64, rep.objects, (uint64_t)full));
            for (int i = 0; i < W * H; i++)
                cr_assert(eq(u32, got[i], (uint32_t)full));
        }
    tw_runtime_destroy(rt);
}

/* Bad options fail at submission with one line naming the problem. */
Test(label, rejects_bad_options)
{
    uint8_t m[4] = {1, 0, 0, 1};
    uint32_t out[4];
    uint16_t small[4];
    tw_runtime *rt = runtime_or_die(1);
    tw_label_opts o;
    tw_job *job = NULL;
    tw_error err;

    tw_label_opts_init(&o);
    o.image = (tw_host_image){m, 2, 2, 0, TW_U8};
    o.result = (tw_host_image){out, 2, 2, 0, TW_U32};
    o.connectivity = 6;
    cr_assert(eq(int, tw_label_submit(rt, &o, &job, &err), TW_E_INVALID));
    cr_assert(strstr(err.message, "connectivity 6") != NULL, "%s", err.message);
    o.connectivity = 4;
    o.label_bits = 64;
    cr_assert(eq(int, tw_label_submit(rt, &o, &job, &err), TW_E_INVALID));
    cr_assert(strstr(err.message, "64-bit") != NULL, "%s", err.message);
    o.label_bits = 0;
    o.result = (tw_host_image){small, 2, 2, 0, TW_U16};
    cr_assert(eq(int, tw_label_submit(rt, &o, &job, &err), TW_E_INVALID));
    o.result = (tw_host_image){NULL, 0, 0, 0, TW_U32};
    cr_assert(eq(int, tw_label_submit(rt, &o, &job, &err), TW_E_INVALID));
    cr_assert(strstr(err.message, "no output") != NULL, "%s", err.message);
    o.struct_size = 0;
    cr_assert(eq(int, tw_label_submit(rt, &o, &job, &err), TW_E_INVALID));
    cr_assert(job == NULL);
    tw_runtime_destroy(rt);
}
