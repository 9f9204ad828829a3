/* SPDX-License-Identifier: MIT */
/* tilewave tests: EDT jobs on GPU workers only, CPU only and mixed give the same bytes. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
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

/* Run one job into out (and idx when not NULL); returns its report. */
static tw_edt_report
run(tw_runtime *rt, const uint8_t *img, int64_t w, int64_t h, tw_edt_format fmt,
    tw_edt_method method, int32_t tile, double sx, double sy, void *out, uint32_t *idx)
{
    static const tw_sample_type types[] = {TW_F32, TW_U16, TW_U32, TW_U8};
    tw_edt_report rep;
    tw_edt_opts o;
    tw_job *job = NULL;
    tw_error err;

    tw_edt_opts_init(&o);
    tw_edt_report_init(&rep);
    o.image = (tw_host_image){.data = (void *)img, .w = w, .h = h, .type = TW_U8};
    o.result = (tw_host_image){.data = out, .w = w, .h = h, .type = types[fmt]};
    if (idx)
        o.indices = (tw_host_image){.data = idx, .w = w, .h = h, .type = TW_U32};
    o.format = fmt;
    o.method = method;
    o.tile_w = o.tile_h = tile;
    o.spacing_x = sx;
    o.spacing_y = sy;
    o.report = &rep;
    cr_assert(eq(int, tw_edt_submit(rt, &o, &job, &err), TW_OK), "%s", err.message);
    cr_assert(eq(int, tw_job_wait(job, -1), TW_OK), "%s", tw_job_get_error(job));
    tw_job_destroy(job);
    return rep;
}

Test(edt_job_cuda, gpu_cpu_and_mixed_give_the_same_bytes)
{
    /* Random images with 1 to 50 % background, every format, tiles from 1x1-sized bands to
     * larger than the image: GPU-only, CPU-only and mixed runtimes write identical distances
     * (isotropic), and indices name pixels at the same distance. */
    if (!twtest_have_gpu())
        cr_skip_test("no CUDA device");
    tw_runtime *gpu = twtest_runtime_with("all", "0"), *cpu = twtest_runtime_with("none", "2"),
               *mix = twtest_runtime_with("all", "2");

    rng_state = 17;
    for (int k = 0; k < 24; k++) {
        int64_t w = 1 + (int64_t)(rnd() % 700), h = 1 + (int64_t)(rnd() % 500);
        uint64_t per_mille = 1 + rnd() % 500;
        uint8_t *img = malloc((size_t)(w * h));
        size_t bytes = (size_t)(w * h) * 4;
        uint32_t *a = malloc(bytes), *b = malloc(bytes), *c = malloc(bytes);
        uint32_t *ia = malloc(2 * bytes), *ib = malloc(2 * bytes);
        tw_edt_format fmt = (tw_edt_format)(k % 3);
        int32_t tile = (int32_t)(k % 4 == 0 ? 1 + rnd() % 5 : 16 + rnd() % 600);

        for (int64_t p = 0; p < w * h; p++)
            img[p] = rnd() % 1000 < per_mille ? 0 : 255;
        tw_edt_report rg = run(gpu, img, w, h, fmt, TW_EDT_EXACT, tile, 1, 1, a, ia);
        run(cpu, img, w, h, fmt, TW_EDT_EXACT, tile, 1, 1, b, ib);
        run(mix, img, w, h, fmt, TW_EDT_EXACT, tile, 1, 1, c, NULL);
        cr_assert(eq(i64, rg.bands_cpu, 0));
        cr_assert(eq(i64, rg.bands_cuda, rg.bands));
        size_t n = (size_t)(w * h) * (fmt == TW_EDT_U16 ? 2 : 4);
        cr_assert(memcmp(a, b, n) == 0, "case %d (%lldx%lld, tile %d, format %d): GPU != CPU", k,
                  (long long)w, (long long)h, (int)tile, (int)fmt);
        cr_assert(memcmp(c, b, n) == 0, "case %d: mixed != CPU", k);
        for (int64_t p = 0; p < w * h; p++) {
            int64_t y = p / w, x = p % w;
            int64_t da = ((int64_t)ia[2 * p] - y) * ((int64_t)ia[2 * p] - y) +
                         ((int64_t)ia[2 * p + 1] - x) * ((int64_t)ia[2 * p + 1] - x);
            int64_t db = ((int64_t)ib[2 * p] - y) * ((int64_t)ib[2 * p] - y) +
                         ((int64_t)ib[2 * p + 1] - x) * ((int64_t)ib[2 * p + 1] - x);
            cr_assert(eq(i64, da, db), "case %d pixel %lld", k, (long long)p);
        }
        free(img);
        free(a);
        free(b);
        free(c);
        free(ia);
        free(ib);
    }
    tw_runtime_destroy(gpu);
    tw_runtime_destroy(cpu);
    tw_runtime_destroy(mix);
}

Test(edt_job_cuda, spacing_and_wavefront_on_the_gpu)
{
    /* Anisotropic spacing on GPU workers: within rounding of the CPU result; the wavefront
     * method on GPU workers: never below the exact distance, 0 on background. */
    if (!twtest_have_gpu())
        cr_skip_test("no CUDA device");
    tw_runtime *gpu = twtest_runtime_with("all", "0"), *cpu = twtest_runtime_with("none", "2");

    rng_state = 29;
    for (int k = 0; k < 8; k++) {
        int64_t w = 50 + (int64_t)(rnd() % 400), h = 50 + (int64_t)(rnd() % 300);
        uint8_t *img = malloc((size_t)(w * h));
        float *a = malloc((size_t)(w * h) * 4), *b = malloc((size_t)(w * h) * 4);
        uint32_t *e = malloc((size_t)(w * h) * 4), *v = malloc((size_t)(w * h) * 4);

        for (int64_t p = 0; p < w * h; p++)
            img[p] = rnd() % 100 < 2 ? 0 : 1;
        run(gpu, img, w, h, TW_EDT_F32, TW_EDT_EXACT, 64, 0.5, 1.75, a, NULL);
        run(cpu, img, w, h, TW_EDT_F32, TW_EDT_EXACT, 64, 0.5, 1.75, b, NULL);
        for (int64_t p = 0; p < w * h; p++)
            cr_assert(fabsf(a[p] - b[p]) <= 1e-6f * b[p], "spacing case %d pixel %lld", k,
                      (long long)p);
        run(cpu, img, w, h, TW_EDT_SQ32, TW_EDT_EXACT, 64, 1, 1, e, NULL);
        run(gpu, img, w, h, TW_EDT_SQ32, TW_EDT_WAVEFRONT, 64, 1, 1, v, NULL);
        for (int64_t p = 0; p < w * h; p++) {
            cr_assert(v[p] >= e[p], "wavefront case %d pixel %lld", k, (long long)p);
            cr_assert(e[p] == 0 ? v[p] == 0 : v[p] != 0, "background differs at %lld", (long long)p);
        }
        free(img);
        free(a);
        free(b);
        free(e);
        free(v);
    }
    tw_runtime_destroy(gpu);
    tw_runtime_destroy(cpu);
}

Test(edt_job_cuda, u8_runs_on_cpu_workers_with_the_same_bytes)
{
    /* u8 has no GPU variant: on a runtime with GPUs its bands run on CPU workers (or on the
     * GPU managers' host side when there are none), never on a GPU, with the CPU's bytes. */
    if (!twtest_have_gpu())
        cr_skip_test("no CUDA device");
    tw_runtime *gpu = twtest_runtime_with("all", "0"), *cpu = twtest_runtime_with("none", "2"),
               *mix = twtest_runtime_with("all", "2");

    rng_state = 29;
    for (int k = 0; k < 6; k++) {
        int64_t w = 1 + (int64_t)(rnd() % 700), h = 1 + (int64_t)(rnd() % 500);
        uint8_t *img = malloc((size_t)(w * h)), *a = malloc((size_t)(w * h)),
                *b = malloc((size_t)(w * h)), *c = malloc((size_t)(w * h));
        int32_t tile = (int32_t)(16 + rnd() % 300);

        for (int64_t p = 0; p < w * h; p++)
            img[p] = rnd() % 1000 < 3 ? 0 : 255;
        tw_edt_report rg = run(gpu, img, w, h, TW_EDT_U8, TW_EDT_EXACT, tile, 1, 1, a, NULL);
        run(cpu, img, w, h, TW_EDT_U8, TW_EDT_EXACT, tile, 1, 1, b, NULL);
        tw_edt_report rm = run(mix, img, w, h, TW_EDT_U8, TW_EDT_EXACT, tile, 1, 1, c, NULL);
        cr_assert(eq(i64, rg.bands_cuda, 0));
        cr_assert(eq(i64, rm.bands_cuda, 0));
        cr_assert(memcmp(a, b, (size_t)(w * h)) == 0, "case %d: GPU runtime != CPU", k);
        cr_assert(memcmp(c, b, (size_t)(w * h)) == 0, "case %d: mixed != CPU", k);
        free(img);
        free(a);
        free(b);
        free(c);
    }
    tw_runtime_destroy(gpu);
    tw_runtime_destroy(cpu);
    tw_runtime_destroy(mix);
}
