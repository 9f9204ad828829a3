/* SPDX-License-Identifier: MIT */
/* tilewave tests: the label job's whole-image GPU path equals the CPU-only job, byte for byte. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

/* Criterion 2.4 assertions store into a 1-bit field, which -Wconversion flags at every use. */
#pragma GCC diagnostic ignored "-Wconversion"

#include "tilewave.h"
#include "twtest.h"
#include "twtest_label.h"
#include "twtest_rt.h"

#ifdef TW_HAVE_CUDA

/*
 * An image in memory into 32-bit labels in memory, on a runtime with a GPU, is labelled whole on
 * the GPU (ops/label.c, label.whole; docs/objects.md "Whole images on a GPU"): its labels must be
 * the CPU-only job's bytes (runtime.gpus = none, tile by tile) for every mask kind, both
 * connectivities, sizes from 1x1 to a few thousand pixels a side, 8- and 16-bit masks, and rows
 * of the caller's images at odd strides, copied (pageable memory, runtime.caller_memory = auto)
 * or wrapped (= wrap). The report says the GPU ran it: one tile of the whole image, one GPU task.
 * A failed GPU attempt falls back to the tile passes with the same bytes. Sizes stay small
 * enough for compute-sanitizer.
 */

static uint64_t rng = 0x2545f4914f6cdd1dull;

typedef struct lj_case {
    int w, h;
    int mode, p;       /* twtest_label_mask's */
    int conn;
    int mask_pad;      /* bytes after each mask row (odd: not a multiple of 2 for 16-bit) */
    int out_pad;       /* bytes after each label row */
    bool u16;
} lj_case;

static tw_runtime *
make_rt_mem(const char *gpus, const char *cpu_workers, const char *caller, const char *fault,
            const char *whole, const char *gpu_mem)
{
    tw_log_set_level(TW_LOG_ERROR);
    return twtest_runtime_kv_ok(false, (const char *const[]){"runtime.gpus", gpus,
                                                             "runtime.cpu_workers", cpu_workers,
                                                             "runtime.caller_memory", caller,
                                                             "runtime.fault_inject", fault,
                                                             "label.gpu_whole", whole,
                                                             "runtime.gpu_mem", gpu_mem, NULL});
}

static tw_runtime *
make_rt(const char *gpus, const char *cpu_workers, const char *caller, const char *fault,
        const char *whole)
{
    return make_rt_mem(gpus, cpu_workers, caller, fault, whole, NULL);
}

/* The mask of c at its stride (*stride; 16-bit: the 8-bit mask times 257), padding 0x5a. */
static void *
make_mask(const lj_case *c, size_t *stride)
{
    size_t ss = c->u16 ? 2 : 1, px = (size_t)c->w * (size_t)c->h;
    uint8_t *m = malloc(px ? px : 1);
    char *img;

    *stride = (size_t)c->w * ss + (size_t)c->mask_pad;
    img = malloc(*stride * (size_t)c->h);
    cr_assert(m != NULL && img != NULL);
    memset(img, 0x5a, *stride * (size_t)c->h);
    twtest_label_mask(m, c->w, c->h, c->mode, c->p, &rng);
    for (int y = 0; y < c->h; y++)
        for (int x = 0; x < c->w; x++) {
            uint8_t v = m[(size_t)y * (size_t)c->w + (size_t)x];

            if (c->u16) {
                uint16_t s = (uint16_t)(v * 257u);

                memcpy(img + (size_t)y * *stride + 2 * (size_t)x, &s, 2);
            } else {
                img[(size_t)y * *stride + (size_t)x] = (char)v;
            }
        }
    free(m);
    return img;
}

/* Label c's mask on rt into a fresh result at c's stride (padding bytes 0xAB), with a report,
 * in tiles of `tile` (0: the runtime's choice). */
static uint8_t *
run_tiled(tw_runtime *rt, const lj_case *c, const void *mask, size_t mstride, size_t *ostride,
          tw_label_report *rep, int tile)
{
    size_t os = (size_t)c->w * 4 + (size_t)c->out_pad;
    uint8_t *out = malloc(os * (size_t)c->h);
    tw_label_opts o;
    tw_job *job = NULL;
    tw_error err;

    cr_assert(out != NULL);
    memset(out, 0xab, os * (size_t)c->h);
    tw_label_opts_init(&o);
    tw_label_report_init(rep);
    o.image = (tw_host_image){(void *)mask, c->w, c->h, mstride, c->u16 ? TW_U16 : TW_U8};
    o.result = (tw_host_image){out, c->w, c->h, os, TW_U32};
    o.connectivity = c->conn;
    o.tile_w = o.tile_h = tile;
    o.report = rep;
    cr_assert(eq(int, tw_label_submit(rt, &o, &job, &err), TW_OK), "%s", err.message);
    cr_assert(eq(int, tw_job_wait(job, -1), TW_OK), "%dx%d: %s", c->w, c->h,
              tw_job_get_error(job));
    tw_job_destroy(job);
    *ostride = os;
    return out;
}

static uint8_t *
run(tw_runtime *rt, const lj_case *c, const void *mask, size_t mstride, size_t *ostride,
    tw_label_report *rep)
{
    /* the fallback: tiles, and a merge, for all but small images */
    return run_tiled(rt, c, mask, mstride, ostride, rep, 64);
}

/* c on the CPU-only runtime and on `gpu`: the same bytes (padding included) and objects; the
 * report of the GPU run says whether it ran whole on the GPU (`whole`) or tile by tile. */
static void
check_case(tw_runtime *cpu, tw_runtime *gpu, const lj_case *c, bool whole, const char *what)
{
    size_t ms, os, os2;
    void *mask = make_mask(c, &ms);
    tw_label_report want_rep, got_rep;
    uint8_t *want = run(cpu, c, mask, ms, &os, &want_rep);
    uint8_t *got = run(gpu, c, mask, ms, &os2, &got_rep);
    int64_t ntw = (c->w + 63) / 64, nth = (c->h + 63) / 64;

    cr_assert(eq(u64, got_rep.objects, want_rep.objects), "%s %dx%d mode %d conn %d", what,
              c->w, c->h, c->mode, c->conn);
    for (int y = 0; y < c->h; y++)
        if (memcmp(got + (size_t)y * os, want + (size_t)y * os, os) != 0)
            for (size_t i = 0; i < os; i++)
                cr_assert(eq(u8, got[(size_t)y * os + i], want[(size_t)y * os + i]),
                          "%s %dx%d mode %d conn %d u16 %d pads %d/%d: row %d byte %zu", what,
                          c->w, c->h, c->mode, c->conn, c->u16, c->mask_pad, c->out_pad, y, i);
    cr_assert(eq(int, want_rep.tp_cuda, 0));
    if (whole) {
        cr_assert(eq(i64, got_rep.tiles, 1), "%s %dx%d", what, c->w, c->h);
        cr_assert(eq(i64, got_rep.tp_cuda, 1), "%s %dx%d", what, c->w, c->h);
        cr_assert(eq(i64, got_rep.tp_cpu, 0), "%s %dx%d", what, c->w, c->h);
        cr_assert(eq(int, got_rep.tile_w, c->w));
        cr_assert(eq(int, got_rep.tile_h, c->h));
        cr_assert(eq(i64, got_rep.border_labels, 0));
        cr_assert(eq(int, got_rep.label_bits, 32));
    } else {
        cr_assert(eq(i64, got_rep.tiles, ntw * nth), "%s %dx%d", what, c->w, c->h);
        cr_assert(eq(i64, got_rep.border_labels, want_rep.border_labels));
    }
    free(got);
    free(want);
    free(mask);
}

static const int sizes[][2] = {{1, 1},    {1, 300},  {300, 1},   {2, 2},     {3, 5},
                               {33, 17},  {64, 64},  {65, 63},   {257, 129}, {1000, 613},
                               {4099, 3}, {3, 4099}, {2001, 1003}};

/* Every mask kind (noise of three densities, blobs, winding stripes, full, empty), both
 * connectivities, every size, on GPU workers alone and with CPU workers, copied and wrapped. */
Test(label_job, whole_gpu_equals_cpu_job, .timeout = TWTEST_TIMEOUT(600))
{
    static const int modes[][2] = {{0, 10}, {0, 45}, {0, 70}, {1, 30}, {2, 0}, {3, 0}, {4, 0}};
    static const char *const setups[][3] = {{"0", "auto"}, {"2", "wrap"}};
    tw_runtime *cpu;

    twtest_need_gpu();
    cpu = make_rt("none", "2", NULL, NULL, NULL);
    for (size_t k = 0; k < sizeof setups / sizeof setups[0]; k++) {
        tw_runtime *gpu = make_rt("all", setups[k][0], setups[k][1], NULL, NULL);

        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
            for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++)
                for (int conn = 4; conn <= 8; conn += 4) {
                    lj_case c = {sizes[s][0], sizes[s][1], modes[m][0], modes[m][1], conn,
                                 (int)((s + m) % 3) * 3, (int)(s % 2) * 4, false};

                    /* the largest size on a few masks only (compute-sanitizer's time) */
                    if (c.w * c.h > 1000000 && m % 3 != 0)
                        continue;
                    check_case(cpu, gpu, &c, true, setups[k][1]);
                }
        tw_runtime_destroy(gpu);
    }
    tw_runtime_destroy(cpu);
}

/* 16-bit masks, and rows at strides that are no multiple of the sample size (the caller's
 * images are then copied, whatever runtime.caller_memory says). */
Test(label_job, whole_gpu_u16_and_odd_strides)
{
    tw_runtime *cpu, *gpu;

    twtest_need_gpu();
    cpu = make_rt("none", "2", NULL, NULL, NULL);
    gpu = make_rt("all", "1", "wrap", NULL, NULL);
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (int conn = 4; conn <= 8; conn += 4) {
            lj_case a = {sizes[s][0], sizes[s][1], 1, 35, conn, 2, 4, true};
            lj_case b = {sizes[s][0], sizes[s][1], 0, 50, conn, 3, 1, true};
            lj_case d = {sizes[s][0], sizes[s][1], 2, 0, conn, 1, 3, false};

            if (a.w * a.h > 1000000)
                continue;
            check_case(cpu, gpu, &a, true, "u16");
            check_case(cpu, gpu, &b, true, "u16 odd strides");
            check_case(cpu, gpu, &d, true, "u8 odd strides");
        }
    tw_runtime_destroy(gpu);
    tw_runtime_destroy(cpu);
}

/* The GPU attempt fails (an injected fault in label.whole): the CPU retry runs the tile passes
 * instead, with or without CPU workers; the same bytes. label.gpu_whole = no: tiles too. */
Test(label_job, failed_gpu_attempt_falls_back_to_tiles)
{
    static const char *const setups[][3] = {{"0", "cuda:1:label.whole", "auto"},
                                            {"2", "cuda:1:label.whole", "auto"},
                                            {"2", NULL, "no"}};
    static const int fsizes[][2] = {{1, 1}, {300, 1}, {200, 130}, {700, 500}};
    tw_runtime *cpu;

    twtest_need_gpu();
    cpu = make_rt("none", "2", NULL, NULL, NULL);
    for (size_t k = 0; k < sizeof setups / sizeof setups[0]; k++) {
        tw_runtime *gpu = make_rt("all", setups[k][0], "auto", setups[k][1], setups[k][2]);

        for (size_t s = 0; s < sizeof fsizes / sizeof fsizes[0]; s++)
            for (int conn = 4; conn <= 8; conn += 4) {
                lj_case c = {fsizes[s][0], fsizes[s][1], 1, 40, conn, 1, 0, false};

                check_case(cpu, gpu, &c, false, setups[k][2]);
            }
        tw_runtime_destroy(gpu);
    }
    tw_runtime_destroy(cpu);
}

/* An image whose mask, labels and scratch do not fit 7/8 of the GPU budget (runtime.gpu_mem =
 * 16 MiB: about 1.2 M pixels) runs tile by tile; a smaller one still whole. */
Test(label_job, too_large_for_the_budget_runs_tiles)
{
    tw_runtime *cpu, *gpu;
    lj_case big = {2001, 1003, 1, 30, 8, 0, 0, false}, small = {300, 200, 1, 30, 8, 0, 0, false};

    twtest_need_gpu();
    cpu = make_rt("none", "2", NULL, NULL, NULL);
    gpu = make_rt_mem("all", "2", NULL, NULL, NULL, "16777216");
    check_case(cpu, gpu, &big, false, "over the budget");
    check_case(cpu, gpu, &small, true, "within the budget");
    tw_runtime_destroy(gpu);
    tw_runtime_destroy(cpu);
}

/* label.gpu_whole: with 8 CPU workers and pageable buffers (runtime.caller_memory wrap, or
 * auto, where GPU tasks would copy them), auto labels an image in memory whole on the CPU
 * workers, in place, yes on the GPU, no tile by tile; the same bytes as the CPU-only
 * runtime's whole run. */
Test(label_job, gpu_whole_auto_leaves_pageable_images_to_many_cores)
{
    static const char *const modes[] = {"auto", "yes", "no"};
    lj_case c = {1500, 1100, 1, 40, 8, 0, 0, false}; /* 2x2 tiles of the default 1024 */
    size_t ms, os, os2;
    tw_label_report want_rep, rep;
    tw_runtime *cpu;
    void *mask;
    uint8_t *want;

    twtest_need_gpu();
    cpu = make_rt("none", "2", NULL, NULL, NULL);
    mask = make_mask(&c, &ms);
    want = run_tiled(cpu, &c, mask, ms, &os, &want_rep, 0);
    cr_assert(eq(i64, want_rep.tiles, 1)); /* the CPU-only runtime's whole path */
    for (int k = 0; k < 6; k++) {
        int m = k % 3;
        tw_runtime *gpu = make_rt("all", "8", k < 3 ? "wrap" : "auto", NULL, modes[m]);
        uint8_t *got = run_tiled(gpu, &c, mask, ms, &os2, &rep, 0);

        cr_assert(eq(int, memcmp(got, want, os * (size_t)c.h), 0), "%s", modes[m]);
        cr_assert(eq(u64, rep.objects, want_rep.objects));
        if (m < 2) {
            cr_assert(eq(i64, rep.tiles, 1), "%s", modes[m]);
            cr_assert(eq(i64, rep.tp_cpu, m == 0 ? 1 : 0), "%s", modes[m]);
            cr_assert(eq(i64, rep.tp_cuda, m == 1 ? 1 : 0), "%s", modes[m]);
        } else {
            cr_assert(gt(i64, rep.tiles, 1), "no: tiles");
        }
        free(got);
        tw_runtime_destroy(gpu);
    }
    free(want);
    free(mask);
    tw_runtime_destroy(cpu);
}

#else

Test(label_job, skipped_without_cuda)
{
    cr_skip_test("built without CUDA");
}

#endif
