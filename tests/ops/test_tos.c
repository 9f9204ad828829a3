/* SPDX-License-Identifier: MIT */
/* tilewave tests: the tree-of-shapes and grain jobs (tasks on the runtime) against the kernel. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "omp_kernels.h"
#include "tilewave.h"
#include "twtest.h"
#include "twtest_maxtree.h"
#include "twtest_rt.h"

/* Criterion 2.4 assertions store into a 1-bit field, which -Wconversion flags at every use. */
#pragma GCC diagnostic ignored "-Wconversion"

/*
 * The kernels (twi_omp_tos) are checked against two naive references in
 * tests/omp/test_tos_omp.c; here the jobs, whose steps are tasks on the runtime's workers
 * (parts of the sort split off for idle workers, the max-tree in blocks, bands of rows), must
 * give the same bytes whatever the number of workers, and report what they found.
 */

static tw_runtime *
runtime_or_die(int workers)
{
    tw_error err;
    tw_runtime *rt = twtest_runtime(workers, "none", &err);

    cr_assert(rt != NULL, "runtime: %s", err.message);
    return rt;
}

/* The kernel's parent, area and grain images (one thread, no split). */
static void
kernel(const void *img, tw_sample_type t, int w, int h, uint64_t grain, uint32_t *par,
       uint32_t *area, void *gout, twi_tos_run *r)
{
    size_t ss = tw_sample_size(t);
    tw_tile_view vi = { .data = (void *)img, .stride = (int64_t)((size_t)w * ss), .w = w,
                        .h = h, .channels = 1, .type = t },
                 vp = { .data = par, .stride = 4 * w, .w = w, .h = h, .channels = 1,
                        .type = TW_U32 },
                 va = vp, vg = vi;

    va.data = area;
    vg.data = gout;
    memset(r, 0, sizeof *r);
    r->nthreads = 1;
    cr_assert(eq(int, twi_omp_tos(&vi, &vp, &va, &vg, grain, r), TW_OK));
}

static void
run_case(tw_runtime *rt, uint64_t *rng, int it, int w, int h, int64_t min_parts,
         tw_sample_type t, bool natural)
{
    size_t n = (size_t)w * (size_t)h, ss = tw_sample_size(t);
    uint64_t grain = 1 + twtest_rnd(rng, (uint32_t)n + 2);
    void *img = malloc(n * ss), *gk = malloc(n * ss), *gj = malloc(n * ss);
    uint32_t *pk = malloc(n * 4), *ak = malloc(n * 4), *pj = malloc(n * 4), *aj = malloc(n * 4);
    tw_tos_opts o;
    tw_grain_opts g;
    tw_tos_report rep, grep;
    tw_progress prog;
    twi_tos_run r;
    tw_job *job = NULL;
    tw_error err;
    tw_status st;

    cr_assert(img && gk && gj && pk && ak && pj && aj);
    if (natural)
        twtest_maxtree_natural_image(rng, img, t, w, h);
    else
        twtest_maxtree_random_image(rng, img, t, w, h, (int)twtest_rnd(rng, 6));
    kernel(img, t, w, h, grain, pk, ak, gk, &r);

    tw_tos_opts_init(&o);
    tw_tos_report_init(&rep);
    o.image = (tw_host_image){ img, w, h, 0, t };
    o.parent = (tw_host_image){ pj, w, h, 0, TW_U32 };
    o.area = (tw_host_image){ aj, w, h, 0, TW_U32 };
    o.report = &rep;
    cr_assert(eq(int, tw_tos_submit(rt, &o, &job, &err), TW_OK), "case %d: %s", it,
              err.message);
    cr_assert(eq(int, tw_job_wait(job, -1), TW_OK), "case %d: %s", it, tw_job_get_error(job));
    tw_job_get_progress(job, &prog);
    cr_assert(eq(i64, prog.done, prog.total), "case %d: progress %lld of %lld", it,
              (long long)prog.done, (long long)prog.total);
    tw_job_destroy(job);
    job = NULL;
    cr_assert(eq(int, memcmp(pj, pk, n * 4), 0), "case %d %dx%d: parent image", it, w, h);
    cr_assert(eq(int, memcmp(aj, ak, n * 4), 0), "case %d: area image", it);
    cr_assert(eq(u32, rep.exterior, r.exterior));
    cr_assert(eq(int, rep.implicit_root, r.implicit_root));
    cr_assert(eq(i64, rep.nodes, r.nodes));
    cr_assert(ge(i64, rep.parts, min_parts), "parts %lld", (long long)rep.parts);
    cr_assert(gt(i64, rep.scratch_bytes, (int64_t)n * 16));

    tw_grain_opts_init(&g);
    tw_tos_report_init(&grep);
    g.image = o.image;
    g.result = (tw_host_image){ gj, w, h, 0, t };
    g.area = grain;
    g.report = &grep;
    st = twtest_job_finish(tw_grain_submit(rt, &g, &job, &err), &job);
    cr_assert(eq(int, st, TW_OK), "case %d: %s", it, err.message);
    cr_assert(eq(int, memcmp(gj, gk, n * ss), 0), "case %d %dx%d: grain %llu", it, w, h,
              (unsigned long long)grain);
    cr_assert(eq(i64, grep.nodes, r.nodes));
    free(aj);
    free(pj);
    free(ak);
    free(pk);
    free(gj);
    free(gk);
    free(img);
}

Test(tos_job, equals_the_kernel_with_one_to_four_workers)
{
    /* 120 random images (1 x 1 up to 70 x 50, 8- and 16-bit, every random mode) through
     * runtimes of 1, 2 and 4 CPU workers: parent image, area image, grain result and report
     * equal the kernel's. */
    uint64_t rng = 0x746f736a6f62ull;

    for (int workers = 1; workers <= 4; workers *= 2) {
        tw_runtime *rt = runtime_or_die(workers);

        for (int it = 0; it < 40; it++) {
            tw_sample_type t = twtest_rnd(&rng, 2) ? TW_U16 : TW_U8;
            int w = 1 + (int)twtest_rnd(&rng, 70), h = 1 + (int)twtest_rnd(&rng, 50);

            run_case(rt, &rng, it, w, h, 1, t, false);
        }
        tw_runtime_destroy(rt);
    }
}

Test(tos_job, large_image_splits_the_sort)
{
    /* 600 x 400 16-bit smooth image, 4 workers: the sort splits into several parts, the
     * max-tree runs in several blocks, and the result still equals the kernel's. */
    tw_runtime *rt = runtime_or_die(4);
    uint64_t rng = 0x6c61726765ull;

    tw_sample_type t = twtest_rnd(&rng, 2) ? TW_U16 : TW_U8;

    run_case(rt, &rng, 0, 600, 400, 2, t, false);
    tw_runtime_destroy(rt);
}

Test(tos_job, sub_tree_split_in_the_job)
{
    /* 1200 x 1000 16-bit natural-like image (4.8 million faces), 4 workers: with the default
     * rule (a labelling every 2^20 faces a part pops while workers are idle) the sort's parts
     * are divided by the components of their regions (parts made so, counted in the report),
     * and the result equals the one-thread kernel's. */
    tw_runtime *rt = runtime_or_die(4);
    uint64_t rng = 0x73756274ull;
    const int w = 1200, h = 1000;
    const size_t n = (size_t)w * h;
    uint16_t *img = malloc(n * 2);
    uint32_t *pk = malloc(n * 4), *pj = malloc(n * 4);
    tw_tile_view vi = { .data = img, .stride = 2 * w, .w = w, .h = h, .channels = 1,
                        .type = TW_U16 },
                 vp = { .data = pk, .stride = 4 * w, .w = w, .h = h, .channels = 1,
                        .type = TW_U32 };
    twi_tos_run r = { .nthreads = 1 };
    tw_tos_opts o;
    tw_tos_report rep;
    tw_job *job = NULL;
    tw_error err;

    cr_assert(img && pk && pj);
    twtest_maxtree_natural_image(&rng, img, TW_U16, w, h);
    cr_assert(eq(int, twi_omp_tos(&vi, &vp, NULL, NULL, 0, &r), TW_OK));
    tw_tos_opts_init(&o);
    tw_tos_report_init(&rep);
    o.image = (tw_host_image){ img, w, h, 0, TW_U16 };
    o.parent = (tw_host_image){ pj, w, h, 0, TW_U32 };
    o.report = &rep;
    cr_assert(eq(int, twtest_job_finish(tw_tos_submit(rt, &o, &job, &err), &job), TW_OK), "%s",
              err.message);
    cr_assert(eq(int, memcmp(pj, pk, n * 4), 0), "parent image");
    cr_assert(eq(i64, rep.nodes, r.nodes));
    cr_assert(gt(i64, rep.comp_parts, 0), "parts %lld, none by sub-trees", (long long)rep.parts);
    cr_assert(le(i64, rep.comp_parts, rep.parts - 1));
    free(pj);
    free(pk);
    free(img);
    tw_runtime_destroy(rt);
}

Test(tos_job, natural_images_at_2_3_4_7_workers)
{
    /* 512 x 384 natural-like images, 8- and 16-bit, through runtimes of 2, 3, 4 and 7 CPU
     * workers: the 8-bit image's large levels (thousands of faces a batch) are shared with
     * helper tasks while workers are idle; every result equals the one-thread kernel's. */
    static const int workers[] = { 2, 3, 4, 7 };

    for (size_t k = 0; k < sizeof workers / sizeof workers[0]; k++) {
        tw_runtime *rt = runtime_or_die(workers[k]);
        uint64_t rng = 0x6e6174ull;

        for (int bits = 0; bits < 2; bits++)
            run_case(rt, &rng, bits, 512, 384, 1, bits ? TW_U16 : TW_U8, true);
        tw_runtime_destroy(rt);
    }
}

Test(tos_job, a_report_of_0_6_is_filled_up_to_its_size)
{
    /* A program built against 0.6 passes a report without mt_device and mt_s (added in 0.7):
     * accepted, filled up to its size and not beyond; any other size is refused. */
    tw_runtime *rt = runtime_or_die(2);
    uint8_t img[12] = { 3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8 };
    uint32_t par[12];
    tw_tos_opts o;
    tw_tos_report rep;
    tw_job *job = NULL;
    tw_error err;

    tw_tos_opts_init(&o);
    tw_tos_report_init(&rep);
    rep.struct_size = offsetof(tw_tos_report, mt_device);
    rep.mt_device = (tw_device_type)77;
    rep.mt_s = -1.0;
    o.image = (tw_host_image){ img, 4, 3, 0, TW_U8 };
    o.parent = (tw_host_image){ par, 4, 3, 0, TW_U32 };
    o.report = &rep;
    cr_assert(eq(int, tw_tos_submit(rt, &o, &job, &err), TW_OK), "%s", err.message);
    cr_assert(eq(int, tw_job_wait(job, -1), TW_OK), "%s", tw_job_get_error(job));
    tw_job_destroy(job);
    cr_assert(gt(i64, rep.nodes, 0));
    cr_assert(gt(i64, rep.scratch_bytes, 0));
    cr_assert(eq(int, (int)rep.mt_device, 77));
    cr_assert(eq(dbl, rep.mt_s, -1.0));
    rep.struct_size = sizeof rep - 1;
    cr_assert(eq(int, tw_tos_submit(rt, &o, &job, &err), TW_E_INVALID));
    cr_assert(strstr(err.message, "report not initialised") != NULL, "%s", err.message);
    tw_runtime_destroy(rt);
}

Test(tos_job, misuse_is_refused_at_submission)
{
    /* NULLs, options not initialised, no output or two, a wrong parent type or size, a
     * 32-bit input, area 0, an uninitialised report: TW_E_INVALID with a message, no job. */
    tw_runtime *rt = runtime_or_die(1);
    uint8_t img[6] = { 0 };
    uint32_t par[6], par2[4];
    float fimg[6] = { 0 };
    tw_tos_opts o;
    tw_grain_opts g;
    tw_tos_report rep;
    tw_job *job = NULL;
    tw_error err;

    tw_tos_opts_init(&o);
    cr_assert(eq(int, tw_tos_submit(NULL, &o, &job, &err), TW_E_INVALID));
    o.image = (tw_host_image){ img, 3, 2, 0, TW_U8 };
    cr_assert(eq(int, tw_tos_submit(rt, &o, &job, &err), TW_E_INVALID));
    cr_assert(strstr(err.message, "no output") != NULL, "%s", err.message);
    o.parent = (tw_host_image){ par2, 2, 2, 0, TW_U32 };
    cr_assert(eq(int, tw_tos_submit(rt, &o, &job, &err), TW_E_INVALID));
    cr_assert(strstr(err.message, "parent image") != NULL, "%s", err.message);
    o.parent = (tw_host_image){ par, 3, 2, 0, TW_U64 };
    cr_assert(eq(int, tw_tos_submit(rt, &o, &job, &err), TW_E_INVALID));
    o.parent = (tw_host_image){ par, 3, 2, 0, TW_U32 };
    o.output.path = "x.tif";
    cr_assert(eq(int, tw_tos_submit(rt, &o, &job, &err), TW_E_INVALID));
    o.output.path = NULL;
    o.image = (tw_host_image){ fimg, 3, 2, 0, TW_F32 };
    cr_assert(eq(int, tw_tos_submit(rt, &o, &job, &err), TW_E_INVALID));
    o.image = (tw_host_image){ img, 3, 2, 0, TW_U8 };
    o.struct_size = 1;
    cr_assert(eq(int, tw_tos_submit(rt, &o, &job, &err), TW_E_INVALID));
    tw_tos_opts_init(&o);
    o.image = (tw_host_image){ img, 3, 2, 0, TW_U8 };
    o.parent = (tw_host_image){ par, 3, 2, 0, TW_U32 };
    memset(&rep, 0, sizeof rep);
    o.report = &rep;
    cr_assert(eq(int, tw_tos_submit(rt, &o, &job, &err), TW_E_INVALID));
    cr_assert(strstr(err.message, "report") != NULL, "%s", err.message);

    tw_grain_opts_init(&g);
    cr_assert(eq(u64, g.area, 1));
    g.image = (tw_host_image){ img, 3, 2, 0, TW_U8 };
    g.result = (tw_host_image){ img, 3, 2, 0, TW_U16 };
    cr_assert(eq(int, tw_grain_submit(rt, &g, &job, &err), TW_E_INVALID));
    g.result = (tw_host_image){ img, 3, 2, 0, TW_U8 };
    g.area = 0;
    cr_assert(eq(int, tw_grain_submit(rt, &g, &job, &err), TW_E_INVALID));
    cr_assert(strstr(err.message, "area 0") != NULL, "%s", err.message);
    cr_assert_null(job);
    tw_runtime_destroy(rt);
}

Test(tos_job, grain_of_a_known_image)
{
    /* A bright 3 x 3 square (9) with a dark 1-pixel hole (0) on a background of 5: areas 25
     * (root), 9 (square and hole), 1 (hole). Grain 2 fills the hole to 9; grain 10 removes
     * the square: all 5; grain 26 (above the image) gives the root's level everywhere. */
    static const uint8_t sq[25] = { 5, 5, 5, 5, 5, 5, 9, 9, 9, 5, 5, 9, 0, 9, 5,
                                    5, 9, 9, 9, 5, 5, 5, 5, 5, 5 };
    tw_runtime *rt = runtime_or_die(2);
    uint8_t out[25];
    tw_grain_opts g;
    tw_job *job = NULL;
    tw_error err;

    tw_grain_opts_init(&g);
    g.image = (tw_host_image){ (void *)sq, 5, 5, 0, TW_U8 };
    g.result = (tw_host_image){ out, 5, 5, 0, TW_U8 };
    g.area = 2;
    cr_assert(eq(int, twtest_job_finish(tw_grain_submit(rt, &g, &job, &err), &job), TW_OK));
    for (int p = 0; p < 25; p++)
        cr_assert(eq(u8, out[p], p == 12 ? 9 : sq[p]), "pixel %d", p);
    g.area = 10;
    cr_assert(eq(int, twtest_job_finish(tw_grain_submit(rt, &g, &job, &err), &job), TW_OK));
    for (int p = 0; p < 25; p++)
        cr_assert(eq(u8, out[p], 5), "pixel %d", p);
    g.area = 26;
    cr_assert(eq(int, twtest_job_finish(tw_grain_submit(rt, &g, &job, &err), &job), TW_OK));
    for (int p = 0; p < 25; p++)
        cr_assert(eq(u8, out[p], 5), "pixel %d", p);
    tw_runtime_destroy(rt);
}
