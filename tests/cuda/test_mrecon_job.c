/* SPDX-License-Identifier: MIT */
/* tilewave tests: reconstruction jobs on GPU workers only, CPU only and mixed give equal bytes. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tilewave.h"
#include "twtest.h"


/* One stream of the tests' generator (twtest_rnd.h) for the whole file. */
static uint64_t rng_state;

static uint64_t
rnd(void)
{
    return twtest_xorshift(&rng_state);
}

/* Naive reconstruction by dilation (8- or 4-connected), sweeps until stable. */
static void
naive_recon(uint16_t *j, const uint16_t *im, int64_t w, int64_t h, int conn)
{
    bool changed = true;

    while (changed) {
        changed = false;
        for (int64_t p = 0; p < w * h; p++) {
            int64_t x = p % w, y = p / w;
            unsigned e = j[p];
            for (int64_t yy = y - 1; yy <= y + 1; yy++)
                for (int64_t xx = x - 1; xx <= x + 1; xx++) {
                    if (xx < 0 || yy < 0 || xx >= w || yy >= h)
                        continue;
                    if (conn == 4 && xx != x && yy != y)
                        continue;
                    if (j[yy * w + xx] > e)
                        e = j[yy * w + xx];
                }
            if (e > im[p])
                e = im[p];
            if (e != j[p]) {
                j[p] = (uint16_t)e;
                changed = true;
            }
        }
    }
}

/* Run one reconstruction by dilation on rt; returns the result (w*h u16 values). */
static uint16_t *
run(tw_runtime *rt, const uint16_t *j, const uint16_t *im, int64_t w, int64_t h,
    tw_sample_type type, int conn, int32_t tw, int32_t th, int64_t qcap, tw_mrecon_stats *stats)
{
    size_t ss = tw_sample_size(type), n = (size_t)(w * h);
    void *bj = malloc(n * ss), *bi = malloc(n * ss), *br = calloc(n, ss);
    uint16_t *out = malloc(n * 2);
    tw_mrecon_opts o;
    tw_job *job = NULL;
    tw_error err;

    for (size_t p = 0; p < n; p++) {
        if (type == TW_U8) {
            ((uint8_t *)bj)[p] = (uint8_t)j[p];
            ((uint8_t *)bi)[p] = (uint8_t)im[p];
        } else {
            ((uint16_t *)bj)[p] = j[p];
            ((uint16_t *)bi)[p] = im[p];
        }
    }
    tw_mrecon_opts_init(&o);
    o.marker_image = (tw_host_image){bj, w, h, 0, type};
    o.mask_image = (tw_host_image){bi, w, h, 0, type};
    o.result = (tw_host_image){br, w, h, 0, type};
    o.conn = conn;
    o.tile_w = tw;
    o.tile_h = th;
    o.queue_capacity = qcap;
    if (stats) {
        tw_mrecon_stats_init(stats);
        o.stats = stats;
    }
    cr_assert(eq(int, tw_mrecon_submit(rt, &o, &job, &err), TW_OK), "%s", err.message);
    cr_assert(eq(int, tw_job_wait(job, -1), TW_OK), "%s", tw_job_get_error(job));
    tw_job_destroy(job);
    for (size_t p = 0; p < n; p++)
        out[p] = type == TW_U8 ? ((uint8_t *)br)[p] : ((uint16_t *)br)[p];
    free(bj);
    free(bi);
    free(br);
    return out;
}

Test(mrecon_job, gpu_cpu_and_mixed_give_the_same_bytes, .timeout = TWTEST_TIMEOUT(600))
{
    /* Random structured cases (8 and 16 bits, 4 and 8 connectivity, tiles from 1x1 to one
     * tile) on GPU workers only, CPU workers only, and both: identical bytes, equal to the
     * naive reference. GPU-only runs do run their TP tasks on the GPU. */
    if (!twtest_have_gpu())
        cr_skip_test("no CUDA device");
    tw_runtime *gpu = twtest_runtime_with("all", "0"), *cpu = twtest_runtime_with("none", "-1"),
               *mix = twtest_runtime_with("all", "-1");
    int32_t tiles[][2] = {{1, 1}, {3, 2}, {16, 16}, {64, 33}, {100, 1}, {1, 100}, {256, 256},
                          {4096, 4096}};

    rng_state = 99;
    for (int k = 0; k < 48; k++) {
        int32_t tw = tiles[k % 8][0], th = tiles[k % 8][1];
        int64_t w = tw == 1 && th == 1 ? 24 : 40 + (int64_t)(rnd() % 400);
        int64_t h = tw == 1 && th == 1 ? 17 : 30 + (int64_t)(rnd() % 300);
        tw_sample_type type = k % 2 ? TW_U16 : TW_U8;
        int conn = (k / 2) % 2 ? 4 : 8;
        unsigned maxv = type == TW_U8 ? 255 : 65535;
        size_t n = (size_t)(w * h);
        uint16_t *im = malloc(n * 2), *j = malloc(n * 2);
        for (size_t p = 0; p < n; p++) {
            int64_t x = (int64_t)p % w, y = (int64_t)p / w;
            /* Corridors with gaps: propagation snakes across many tiles. */
            bool wall = (y % 6 == 0 && rnd() % 9) || (x % 7 == 0 && rnd() % 9);
            im[p] = (uint16_t)(wall ? rnd() % (maxv / 8) : maxv / 2 + rnd() % (maxv / 2));
            j[p] = rnd() % 300 == 0 ? im[p] : 0;
        }
        tw_mrecon_stats sg;
        uint16_t *a = run(gpu, j, im, w, h, type, conn, tw, th, 0, &sg);
        uint16_t *b = run(cpu, j, im, w, h, type, conn, tw, th, 0, NULL);
        uint16_t *c = run(mix, j, im, w, h, type, conn, tw, th, 0, NULL);
        uint16_t *d = run(gpu, j, im, w, h, type, conn, tw, th, 16, NULL); /* queues overflow */
        naive_recon(j, im, w, h, conn);
        cr_assert(eq(i64, sg.tp_cpu, 0));
        cr_assert(eq(i64, sg.tp_cuda, sg.tp_tasks));
        cr_assert(memcmp(a, j, n * 2) == 0, "case %d: GPU-only differs from the reference", k);
        cr_assert(memcmp(b, j, n * 2) == 0, "case %d: CPU-only differs from the reference", k);
        cr_assert(memcmp(c, j, n * 2) == 0, "case %d: CPU+GPU differs from the reference", k);
        cr_assert(memcmp(d, j, n * 2) == 0, "case %d: a tiny queue capacity changed the result",
                  k);
        free(a);
        free(b);
        free(c);
        free(d);
        free(im);
        free(j);
    }
    tw_runtime_destroy(gpu);
    tw_runtime_destroy(cpu);
    tw_runtime_destroy(mix);
}

Test(mrecon_job, large_tiles_on_gpu_equal_cpu, .timeout = TWTEST_TIMEOUT(600))
{
    /* A 3000x2000 16-bit relief with sparse seeds, 1024 tiles: GPU-only equals CPU-only. */
    if (!twtest_have_gpu())
        cr_skip_test("no CUDA device");
    int64_t w = 3000, h = 2000;
    size_t n = (size_t)(w * h);
    uint16_t *im = malloc(n * 2), *j = calloc(n, 2);
    rng_state = 5;
    for (size_t p = 0; p < n; p++) {
        int64_t x = (int64_t)p % w, y = (int64_t)p / w;
        im[p] = (uint16_t)(20000 + (x * 7 + y * 13) % 30000 + rnd() % 5000);
        if (rnd() % 50000 == 0)
            j[p] = im[p];
    }
    tw_runtime *gpu = twtest_runtime_with("all", "0"), *cpu = twtest_runtime_with("none", "-1");
    uint16_t *a = run(gpu, j, im, w, h, TW_U16, 8, 1024, 1024, 0, NULL);
    uint16_t *b = run(cpu, j, im, w, h, TW_U16, 8, 1024, 1024, 0, NULL);
    cr_assert(memcmp(a, b, n * 2) == 0, "GPU-only differs from CPU-only");
    free(a);
    free(b);
    free(im);
    free(j);
    tw_runtime_destroy(gpu);
    tw_runtime_destroy(cpu);
}
