/* SPDX-License-Identifier: MIT */
/* tilewave tests: jobs on caller images with padded rows run on GPU workers straight from and
 * into those images (runtime/tile.c, "Wrapped tiles") and give the bytes of CPU workers. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef TW_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#include "tilewave.h"
#include "twtest.h"

/* ---- one stream of the tests' generator (twtest_rnd.h) for the whole file */
static uint64_t rng_state = 31;

static uint64_t
rnd(void)
{
    return twtest_xorshift(&rng_state);
}

/* A w x h image of `ss`-byte samples at rows `stride` apart, the padding filled with 0xEE
 * (what a job must neither read into its result nor write). */
typedef struct img {
    char *buf;
    int64_t w, h;
    size_t stride, ss;
} img;

static img
img_new(int64_t w, int64_t h, size_t ss, size_t pad)
{
    img m = {NULL, w, h, (size_t)w * ss + pad, ss};

    m.buf = malloc(m.stride * (size_t)h);
    memset(m.buf, 0xEE, m.stride * (size_t)h);
    return m;
}

/* Blobs: pixel values of a smooth field plus noise, 8-bit. */
static void
img_fill(img *m, unsigned maxv)
{
    for (int64_t y = 0; y < m->h; y++)
        for (int64_t x = 0; x < m->w; x++) {
            unsigned v = (unsigned)(((x / 9) * 37 + (y / 7) * 53) % 5) * (maxv / 5) +
                         (unsigned)(rnd() % (maxv / 8 + 1));
            char *p = m->buf + (size_t)y * m->stride + (size_t)x * m->ss;

            if (m->ss == 1)
                *(uint8_t *)p = (uint8_t)(v > maxv ? maxv : v);
            else
                memcpy(p, &(uint16_t){(uint16_t)(v > maxv ? maxv : v)}, 2);
        }
}

static tw_host_image
host(const img *m, tw_sample_type t)
{
    return (tw_host_image){m->buf, m->w, m->h, m->stride, t};
}

/* a's and b's pixels are equal (their paddings may differ), and b's padding is intact */
static void
assert_same(const img *a, const img *b, const char *what)
{
    for (int64_t y = 0; y < a->h; y++) {
        cr_assert(memcmp(a->buf + (size_t)y * a->stride, b->buf + (size_t)y * b->stride,
                         (size_t)a->w * a->ss) == 0,
                  "%s: row %lld differs", what, (long long)y);
        for (size_t k = (size_t)b->w * b->ss; k < b->stride; k++)
            cr_assert(eq(u8, (uint8_t)b->buf[(size_t)y * b->stride + k], 0xEE),
                      "%s: row %lld's padding was written", what, (long long)y);
    }
}

/* st: the submit's status; *job: the job it made (read after the submit ran) */
static void
wait_ok(tw_status st, tw_job **job, const tw_error *err, const char *what)
{
    cr_assert(eq(int, st, TW_OK), "%s: %s", what, err->message);
    cr_assert(eq(int, tw_job_wait(*job, -1), TW_OK), "%s: %s", what, tw_job_get_error(*job));
    tw_job_destroy(*job);
    *job = NULL;
}

Test(caller_memory_cuda, padded_images_on_the_gpu_equal_cpu_workers,
     .timeout = TWTEST_TIMEOUT(300))
{
    /* Reconstruction, area opening, the EDT and labels of 1000 x 700 images whose rows are
     * padded by an odd number of samples, on GPU workers only (runtime.caller_memory = wrap:
     * the images pageable; register: page-locked for each job) and on CPU workers only:
     * the same result bytes, the padding untouched, the tile tasks on the GPU. */
    if (!twtest_have_gpu())
        cr_skip_test("no CUDA device");
    tw_runtime *rts[3] = {NULL, NULL, twtest_runtime_with("none", "2")};
    const int64_t w = 1000, h = 700;
    img mask = img_new(w, h, 1, 3), marker = img_new(w, h, 1, 5), out[3], dist[3], lab[3],
        rec[3];
    tw_config *cfg = NULL;
    tw_job *job = NULL;
    tw_error err;

    for (int d = 0; d < 2; d++) {
        cr_assert(eq(int, tw_config_create(&cfg), TW_OK));
        cr_assert(eq(int, tw_config_set(cfg, "runtime.cpu_workers", "0", TW_CONFIG_SET, NULL),
                     TW_OK));
        cr_assert(eq(int, tw_config_set(cfg, "runtime.caller_memory", d ? "register" : "wrap",
                                        TW_CONFIG_SET, NULL), TW_OK));
        cr_assert(eq(int, tw_runtime_create(cfg, &rts[d], &err), TW_OK), "%s", err.message);
        tw_config_destroy(cfg);
    }
    img_fill(&mask, 255);
    for (int64_t y = 0; y < h; y++)
        for (int64_t x = 0; x < w; x++) {
            uint8_t v = (uint8_t)mask.buf[(size_t)y * mask.stride + (size_t)x];

            marker.buf[(size_t)y * marker.stride + (size_t)x] = (char)(v > 60 ? v - 60 : 0);
        }
    for (int d = 0; d < 3; d++) {
        tw_mrecon_opts mo;
        tw_mrecon_stats ms;
        tw_attr_filter_opts ao;
        tw_attr_filter_report ar;
        tw_edt_opts eo;
        tw_edt_report er;
        tw_label_opts lo;
        tw_label_report lr;

        rec[d] = img_new(w, h, 1, 7);
        out[d] = img_new(w, h, 1, 9);
        dist[d] = img_new(w, h, 4, 4 * 3);
        lab[d] = img_new(w, h, 4, 4 * 5);

        tw_mrecon_opts_init(&mo);
        tw_mrecon_stats_init(&ms);
        mo.marker_image = host(&marker, TW_U8);
        mo.mask_image = host(&mask, TW_U8);
        mo.result = host(&rec[d], TW_U8);
        mo.tile_w = 256;
        mo.tile_h = 192;
        mo.stats = &ms;
        wait_ok(tw_mrecon_submit(rts[d], &mo, &job, &err), &job, &err, "reconstruction");
        cr_assert(d == 2 || (ms.tp_cuda > 0 && ms.tp_cpu == 0), "reconstruction: TPs %lld on GPU",
                  (long long)ms.tp_cuda);

        tw_attr_filter_opts_init(&ao);
        tw_attr_filter_report_init(&ar);
        ao.image = host(&mask, TW_U8);
        ao.result = host(&out[d], TW_U8);
        ao.filter = TW_AREA_OPENING;
        ao.threshold = 300;
        ao.tile_w = 256;
        ao.tile_h = 256;
        ao.report = &ar;
        wait_ok(tw_attr_filter_submit(rts[d], &ao, &job, &err), &job, &err, "area opening");
        cr_assert(d == 2 || ar.tp_cuda > 0, "area opening: no tile task on the GPU");

        tw_edt_opts_init(&eo);
        tw_edt_report_init(&er);
        eo.image = host(&mask, TW_U8);
        eo.threshold = 100;
        eo.result = host(&dist[d], TW_F32);
        eo.tile_w = 256;
        eo.tile_h = 128;
        eo.report = &er;
        wait_ok(tw_edt_submit(rts[d], &eo, &job, &err), &job, &err, "edt");
        cr_assert(d == 2 || er.bands_cuda > 0, "edt: no band on the GPU");

        tw_label_opts_init(&lo);
        tw_label_report_init(&lr);
        lo.image = host(&rec[d], TW_U8);
        lo.result = host(&lab[d], TW_U32);
        lo.tile_w = 256;
        lo.tile_h = 160;
        lo.report = &lr;
        wait_ok(tw_label_submit(rts[d], &lo, &job, &err), &job, &err, "label");
        cr_assert(d == 2 || lr.tp_cuda > 0, "label: no tile task on the GPU");
    }
    for (int d = 0; d < 2; d++) {
        assert_same(&rec[2], &rec[d], "reconstruction");
        assert_same(&out[2], &out[d], "area opening");
        assert_same(&dist[2], &dist[d], "edt");
        assert_same(&lab[2], &lab[d], "label");
    }
    for (int d = 0; d < 3; d++) {
        free(rec[d].buf);
        free(out[d].buf);
        free(dist[d].buf);
        free(lab[d].buf);
        tw_runtime_destroy(rts[d]);
    }
    free(mask.buf);
    free(marker.buf);
}

#ifdef TW_HAVE_CUDA /* the test page-locks memory itself */
Test(caller_memory_cuda, auto_wraps_page_locked_images_and_copies_pageable_ones)
{
    /* runtime.caller_memory = auto with GPUs: pageable images are copied into pinned tiles
     * (faster GPU copies than from pageable memory), images the caller page-locked are the
     * tiles themselves: the runtime's tile memory shows which. Same bytes both ways. */
    if (!twtest_have_gpu())
        cr_skip_test("no CUDA device");
    tw_runtime *rt[2] = {twtest_runtime_with("all", "2"), twtest_runtime_with("all", "2")};
    const int64_t w = 900, h = 600;
    img mask = img_new(w, h, 1, 0), marker = img_new(w, h, 1, 0), res[2];
    tw_job *job = NULL;
    tw_error err;

    img_fill(&mask, 255);
    for (size_t p = 0; p < (size_t)(w * h); p++)
        marker.buf[p] = (char)((uint8_t)mask.buf[p] > 50 ? (uint8_t)mask.buf[p] - 50 : 0);
    for (int locked = 0; locked < 2; locked++) {
        tw_mrecon_opts mo;
        tw_memory_info mi;

        res[locked] = img_new(w, h, 1, 0);
        if (locked) {
            cr_assert(cudaHostRegister(mask.buf, (size_t)(w * h), cudaHostRegisterPortable) ==
                      cudaSuccess);
            cr_assert(cudaHostRegister(res[1].buf, (size_t)(w * h), cudaHostRegisterPortable) ==
                      cudaSuccess);
        }
        tw_mrecon_opts_init(&mo);
        mo.marker_image = host(&marker, TW_U8);
        mo.mask_image = host(&mask, TW_U8);
        mo.result = host(&res[locked], TW_U8);
        mo.tile_w = 256;
        mo.tile_h = 256;
        wait_ok(tw_mrecon_submit(rt[locked], &mo, &job, &err), &job, &err, "reconstruction");
        cr_assert(eq(int, tw_runtime_get_memory(rt[locked], &mi), TW_OK));
        if (locked) {
            cr_assert(mi.host_peak < w * h, "page-locked: host_peak %lld",
                      (long long)mi.host_peak);
            cr_assert(cudaHostUnregister(mask.buf) == cudaSuccess);
            cr_assert(cudaHostUnregister(res[1].buf) == cudaSuccess);
        } else {
            cr_assert(mi.host_peak >= 2 * w * h, "pageable: host_peak %lld",
                      (long long)mi.host_peak);
        }
    }
    assert_same(&res[0], &res[1], "reconstruction");
    for (int d = 0; d < 2; d++) {
        free(res[d].buf);
        tw_runtime_destroy(rt[d]);
    }
    free(mask.buf);
    free(marker.buf);
}
#endif
