/* SPDX-License-Identifier: MIT */
/* tilewave tests: the distance transform job (bands across tiles) vs brute force. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tilewave.h"
#include "twtest.h"

/*
 * The reference is brute force: every pixel against every background pixel, in int64 (in
 * double with a spacing). The job is run on caller buffers (and files for the file paths) with
 * many tile sizes, so every band height and column split is exercised: tiled exactness is
 * "the same bytes as brute force whatever the tile".
 */

/* ---- one stream of the tests' generator (twtest_rnd.h) for the whole file */
static uint64_t rng_state;

static uint64_t
rnd(void)
{
    return twtest_xorshift(&rng_state);
}

static int64_t
rndi(int64_t lo, int64_t hi)
{
    return lo + (int64_t)(rnd() % (uint64_t)(hi - lo + 1));
}

/* ---- brute force */

/* d2[p] = min over background q (img[q] <= t) of sx^2 dx^2 + sy^2 dy^2; -1 when none. */
static void
brute(const uint8_t *img, int64_t w, int64_t h, unsigned t, double sx, double sy, double *d2)
{
    for (int64_t p = 0; p < w * h; p++) {
        int64_t px = p % w, py = p / w;
        double best = -1;

        for (int64_t q = 0; q < w * h; q++) {
            if (img[q] > t)
                continue;
            int64_t dx = px - q % w, dy = py - q / w;
            double d = (sx * sx) * (double)(dx * dx) + (sy * sy) * (double)(dy * dy);
            if (best < 0 || d < best)
                best = d;
        }
        d2[p] = best;
    }
}

static uint8_t *
random_image(int64_t w, int64_t h, int pattern)
{
    uint8_t *img = malloc((size_t)(w * h));
    uint64_t keep = (uint64_t)rndi(1, 999); /* background per mille */

    for (int64_t p = 0; p < w * h; p++) {
        switch (pattern) {
        case 0: img[p] = rnd() % 1000 < keep ? 0 : (uint8_t)rndi(1, 255); break;
        case 1: img[p] = 200; break; /* then a few background pixels */
        default: img[p] = (uint8_t)rndi(0, 255); break; /* thresholded at 128 */
        }
    }
    if (pattern == 1) {
        int64_t n = rndi(1, 3);
        for (int64_t i = 0; i < n; i++)
            img[rndi(0, w * h - 1)] = 0;
    }
    return img;
}

/* Run the job in memory; returns the status of the wait. */
static tw_status
run_edt(tw_runtime *rt, tw_edt_opts *o, char *msg, size_t n)
{
    tw_job *job = NULL;
    tw_error err;
    tw_status st;

    if ((st = tw_edt_submit(rt, o, &job, &err)) != TW_OK) {
        snprintf(msg, n, "%s", err.message);
        return st;
    }
    st = tw_job_wait(job, -1);
    snprintf(msg, n, "%s", tw_job_get_error(job));
    tw_job_destroy(job);
    return st;
}

static tw_runtime *
cpu_runtime(void)
{
    tw_error err;
    tw_runtime *rt = twtest_runtime(2, "none", &err);

    cr_assert(rt != NULL, "runtime: %s", err.message);
    return rt;
}

/* One image through the job with one tile size, every format, indices in memory; checks
 * against the brute-force d2. */
static void
check_job(tw_runtime *rt, const uint8_t *img, int64_t w, int64_t h, unsigned t, int32_t tw,
          int32_t th, const double *d2, const char *what)
{
    float *f = malloc((size_t)(w * h) * sizeof *f);
    uint16_t *u = malloc((size_t)(w * h) * sizeof *u);
    uint32_t *s = malloc((size_t)(w * h) * sizeof *s), *ix = malloc((size_t)(w * h) * 8);
    char msg[512];
    tw_edt_opts o;

    for (int fmt = 0; fmt < 3; fmt++) {
        tw_edt_opts_init(&o);
        o.image = (tw_host_image){.data = (void *)img, .w = w, .h = h, .type = TW_U8};
        o.threshold = t;
        o.format = (tw_edt_format)fmt;
        o.tile_w = tw;
        o.tile_h = th;
        o.result = (tw_host_image){.w = w, .h = h};
        o.result.data = fmt == 0 ? (void *)f : fmt == 1 ? (void *)u : (void *)s;
        o.result.type = fmt == 0 ? TW_F32 : fmt == 1 ? TW_U16 : TW_U32;
        if (fmt == 2)
            o.indices = (tw_host_image){.data = ix, .w = w, .h = h, .type = TW_U32};
        cr_assert(eq(int, run_edt(rt, &o, msg, sizeof msg), TW_OK), "%s: %s", what, msg);
    }
    for (int64_t p = 0; p < w * h; p++) {
        double d = d2[p];
        if (d < 0) {
            cr_assert(isinf(f[p]) && u[p] == 65535 && s[p] == UINT32_MAX &&
                          ix[2 * p] == UINT32_MAX && ix[2 * p + 1] == UINT32_MAX,
                      "%s: no background, pixel %lld", what, (long long)p);
            continue;
        }
        uint64_t di = (uint64_t)d;
        double sq = sqrt(d);
        uint32_t ru = sq + 0.5 >= 65535 ? 65535 : (uint32_t)floor(sq + 0.5);
        cr_assert(s[p] == (di > UINT32_MAX ? UINT32_MAX : di),
                  "%s tile %dx%d: sq32 at (%lld, %lld) is %u, want %.0f", what, tw, th,
                  (long long)(p % w), (long long)(p / w), s[p], d);
        cr_assert(f[p] == (float)sq, "%s: f32 at %lld is %.9g, want %.9g", what, (long long)p,
                  (double)f[p], (double)(float)sq);
        cr_assert(u[p] == ru, "%s: u16 at %lld is %u, want %u", what, (long long)p, u[p], ru);
        /* the index names a background pixel at exactly that distance */
        uint32_t r = ix[2 * p], c = ix[2 * p + 1];
        cr_assert(r < h && c < w && img[r * w + c] <= t, "%s: index (%u, %u) of %lld", what, r, c,
                  (long long)p);
        int64_t dy = (int64_t)r - p / w, dx = (int64_t)c - p % w;
        cr_assert(eq(i64, dx * dx + dy * dy, (int64_t)di), "%s: index distance at %lld", what,
                  (long long)p);
    }
    free(f);
    free(u);
    free(s);
    free(ix);
}

Test(edt_job, random_images_every_tile_size)
{
    /* Random images (1x1 .. 48x40, background from one pixel to 99.9 %, and a random gray
     * image thresholded at 128) through the job with tile sizes from 1x1 to larger than the
     * image: every format equals brute force. */
    tw_runtime *rt = cpu_runtime();

    rng_state = 5;
    for (int k = 0; k < 120; k++) {
        int64_t w = k < 10 ? rndi(1, 3) : rndi(1, 48), h = k < 10 ? rndi(1, 3) : rndi(1, 40);
        int pattern = k % 3;
        unsigned t = pattern == 2 ? 128 : 0;
        uint8_t *img = random_image(w, h, pattern);
        double *d2 = malloc((size_t)(w * h) * sizeof *d2);
        const int32_t tiles[][2] = {{1, 1},
                                    {(int32_t)rndi(1, 9), (int32_t)rndi(1, 9)},
                                    {(int32_t)rndi(1, (int)w), (int32_t)rndi(1, (int)h)},
                                    {64, 64}};
        char what[64];

        brute(img, w, h, t, 1, 1, d2);
        snprintf(what, sizeof what, "image %d (%lldx%lld)", k, (long long)w, (long long)h);
        for (int i = 0; i < 4; i++) {
            if (i == 0 && w * h > 400)
                continue; /* 1x1 tiles: small images only */
            check_job(rt, img, w, h, t, tiles[i][0], tiles[i][1], d2, what);
        }
        free(img);
        free(d2);
    }
    tw_runtime_destroy(rt);
}

Test(edt_job, the_result_image_is_the_bands_output)
{
    /* A result with padded rows: the band writes its distances straight into it
     * (runtime.caller_memory = wrap, runtime/tile.c, "Wrapped tiles"), with the same values as
     * brute force and as runtime.caller_memory = copy, whose runtime holds the band's output
     * tile too: its peak of tile memory is that f32 band above. One band (the image is lower
     * than the tile), so that the peaks do not depend on how many bands were in flight;
     * test_edt's other cases wrap results of many bands. */
    const int64_t w = 150, h = 30, pad = 7;
    int64_t peak[2];
    uint8_t *img;
    double *d2 = malloc((size_t)(w * h) * sizeof *d2);
    float *res[2];

    rng_state = 4242;
    img = random_image(w, h, 0);
    brute(img, w, h, 0, 1, 1, d2);
    for (int mode = 0; mode < 2; mode++) {
        tw_runtime *rt = twtest_runtime_with("none", "2");
        tw_memory_info mi;
        tw_edt_opts o;
        char msg[512];

        if (mode == 1) { /* copy: a runtime of its own with the key set */
            tw_config *cfg = NULL;
            tw_error err;

            tw_runtime_destroy(rt);
            cr_assert(eq(int, tw_config_create(&cfg), TW_OK));
            cr_assert(eq(int, tw_config_set(cfg, "runtime.gpus", "none", TW_CONFIG_SET, NULL),
                         TW_OK));
            cr_assert(eq(int, tw_config_set(cfg, "runtime.cpu_workers", "2", TW_CONFIG_SET,
                                            NULL), TW_OK));
            cr_assert(eq(int, tw_config_set(cfg, "runtime.caller_memory", "copy",
                                            TW_CONFIG_SET, NULL), TW_OK));
            cr_assert(eq(int, tw_runtime_create(cfg, &rt, &err), TW_OK), "%s", err.message);
            tw_config_destroy(cfg);
        }
        res[mode] = calloc((size_t)((w + pad) * h), sizeof(float));
        tw_edt_opts_init(&o);
        o.image = (tw_host_image){.data = img, .w = w, .h = h, .type = TW_U8};
        o.threshold = 0;
        o.tile_w = 64;
        o.tile_h = 32;
        o.result = (tw_host_image){res[mode], w, h, (size_t)(w + pad) * sizeof(float), TW_F32};
        cr_assert(eq(int, run_edt(rt, &o, msg, sizeof msg), TW_OK), "%s", msg);
        cr_assert(eq(int, tw_runtime_get_memory(rt, &mi), TW_OK));
        peak[mode] = mi.host_peak;
        for (int64_t p = 0; p < w * h; p++) {
            float got = res[mode][(p / w) * (w + pad) + p % w];

            cr_assert(d2[p] < 0 ? isinf(got) : got == (float)sqrt(d2[p]),
                      "mode %d: pixel (%lld, %lld) is %.9g", mode, (long long)(p % w),
                      (long long)(p / w), (double)got);
        }
        for (int64_t y = 0; y < h; y++) /* the padding is not the job's */
            for (int64_t x = w; x < w + pad; x++)
                cr_assert(res[mode][y * (w + pad) + x] == 0.0f);
        tw_runtime_destroy(rt);
    }
    cr_assert(peak[0] + w * h * (int64_t)sizeof(float) <= peak[1], "peaks %lld (wrap), %lld",
              (long long)peak[0], (long long)peak[1]);
    free(res[0]);
    free(res[1]);
    free(img);
    free(d2);
}

Test(edt_job, single_background_pixel_far_away)
{
    /* One background pixel in a corner of a 300x200 image with 7-row bands: every distance
     * comes from outside almost every band (the per-column bounds carry it). */
    tw_runtime *rt = cpu_runtime();
    int64_t w = 300, h = 200;
    uint8_t *img = malloc((size_t)(w * h));
    uint32_t *s = malloc((size_t)(w * h) * sizeof *s);
    char msg[512];
    tw_edt_opts o;

    memset(img, 1, (size_t)(w * h));
    img[(h - 1) * w + (w - 1)] = 0;
    tw_edt_opts_init(&o);
    o.image = (tw_host_image){.data = img, .w = w, .h = h, .type = TW_U8};
    o.result = (tw_host_image){.data = s, .w = w, .h = h, .type = TW_U32};
    o.format = TW_EDT_SQ32;
    o.tile_w = 33;
    o.tile_h = 7;
    cr_assert(eq(int, run_edt(rt, &o, msg, sizeof msg), TW_OK), "%s", msg);
    for (int64_t y = 0; y < h; y++)
        for (int64_t x = 0; x < w; x++) {
            int64_t dx = w - 1 - x, dy = h - 1 - y;
            cr_assert(eq(u32, s[y * w + x], (uint32_t)(dx * dx + dy * dy)), "(%lld, %lld)",
                      (long long)x, (long long)y);
        }
    free(img);
    free(s);
    tw_runtime_destroy(rt);
}

Test(edt_job, spacing_matches_brute_force)
{
    /* Anisotropic spacing: f32 within a relative 1e-6 of brute force in double (near-ties may
     * pick another pixel, whose distance differs by rounding only). */
    tw_runtime *rt = cpu_runtime();
    const double sp[][2] = {{0.5, 1.25}, {2, 3}, {0.25, 0.25}, {1, 7}};

    rng_state = 11;
    for (int k = 0; k < 40; k++) {
        int64_t w = rndi(1, 40), h = rndi(1, 40);
        uint8_t *img = random_image(w, h, k % 2);
        double *d2 = malloc((size_t)(w * h) * sizeof *d2);
        float *f = malloc((size_t)(w * h) * sizeof *f);
        const double *s = sp[k % 4];
        char msg[512];
        tw_edt_opts o;

        brute(img, w, h, 0, s[0], s[1], d2);
        tw_edt_opts_init(&o);
        o.image = (tw_host_image){.data = img, .w = w, .h = h, .type = TW_U8};
        o.result = (tw_host_image){.data = f, .w = w, .h = h, .type = TW_F32};
        o.spacing_x = s[0];
        o.spacing_y = s[1];
        o.tile_w = (int32_t)rndi(1, 16);
        o.tile_h = (int32_t)rndi(1, 16);
        cr_assert(eq(int, run_edt(rt, &o, msg, sizeof msg), TW_OK), "%s", msg);
        for (int64_t p = 0; p < w * h; p++) {
            if (d2[p] < 0) {
                cr_assert(isinf(f[p]));
                continue;
            }
            double want = sqrt(d2[p]);
            cr_assert(fabs((double)f[p] - want) <= 1e-6 * want + 1e-30,
                      "image %d spacing %g,%g pixel %lld: %.9g, want %.9g", k, s[0], s[1],
                      (long long)p, (double)f[p], want);
        }
        free(img);
        free(d2);
        free(f);
    }
    tw_runtime_destroy(rt);
}

Test(edt_job, sixteen_bit_and_float_inputs)
{
    /* The threshold applies to the input's own values: 16-bit and float images give the same
     * distances as the 8-bit image of their foreground. */
    tw_runtime *rt = cpu_runtime();
    int64_t w = 37, h = 29;
    uint16_t *a = malloc((size_t)(w * h) * 2);
    float *b = malloc((size_t)(w * h) * 4);
    uint8_t *ref = malloc((size_t)(w * h));
    double *d2 = malloc((size_t)(w * h) * sizeof *d2);
    uint32_t *s = malloc((size_t)(w * h) * 4);
    char msg[512];
    tw_edt_opts o;

    rng_state = 3;
    for (int64_t p = 0; p < w * h; p++) {
        a[p] = (uint16_t)rndi(0, 65535);
        b[p] = (float)a[p] / 65535.0f;
        ref[p] = a[p] > 40000;
    }
    brute(ref, w, h, 0, 1, 1, d2);
    for (int k = 0; k < 2; k++) {
        tw_edt_opts_init(&o);
        o.image = (tw_host_image){.data = k ? (void *)b : (void *)a, .w = w, .h = h,
                                  .type = k ? TW_F32 : TW_U16};
        o.threshold = k ? 40000.0 / 65535.0 : 40000;
        o.format = TW_EDT_SQ32;
        o.tile_w = 10;
        o.tile_h = 6;
        o.result = (tw_host_image){.data = s, .w = w, .h = h, .type = TW_U32};
        cr_assert(eq(int, run_edt(rt, &o, msg, sizeof msg), TW_OK), "%s", msg);
        for (int64_t p = 0; p < w * h; p++)
            cr_assert(eq(u32, s[p], (uint32_t)d2[p]), "input %d pixel %lld", k, (long long)p);
    }
    free(a);
    free(b);
    free(ref);
    free(d2);
    free(s);
    tw_runtime_destroy(rt);
}

/* scikit-image's threshold_otsu, written out naively over the values present. */
static unsigned
naive_otsu(const uint8_t *img, int64_t n)
{
    double best = -1;
    unsigned lo = 255, hi = 0, t = 0;

    for (int64_t i = 0; i < n; i++) {
        lo = img[i] < lo ? img[i] : lo;
        hi = img[i] > hi ? img[i] : hi;
    }
    if (lo == hi)
        return lo;
    for (unsigned k = lo; k < hi; k++) {
        double w1 = 0, w2 = 0, s1 = 0, s2 = 0;
        for (int64_t i = 0; i < n; i++) {
            if (img[i] <= k) {
                w1++;
                s1 += img[i];
            } else {
                w2++;
                s2 += img[i];
            }
        }
        double v = w1 * w2 * (s1 / w1 - s2 / w2) * (s1 / w1 - s2 / w2);
        if (w1 > 0 && w2 > 0 && v > best) {
            best = v;
            t = k;
        }
    }
    return t;
}

Test(edt_job, otsu_threshold)
{
    /* --threshold otsu: the report's threshold is Otsu's, and the distances are those of the
     * image thresholded there. */
    tw_runtime *rt = cpu_runtime();
    int64_t w = 50, h = 40;
    uint8_t *img = malloc((size_t)(w * h));
    double *d2 = malloc((size_t)(w * h) * sizeof *d2);
    uint32_t *s = malloc((size_t)(w * h) * 4);
    tw_edt_report rep;
    char msg[512];
    tw_edt_opts o;
    unsigned t;

    rng_state = 9;
    for (int64_t p = 0; p < w * h; p++)
        img[p] = (uint8_t)(rnd() % 3 ? rndi(20, 90) : rndi(140, 230));
    t = naive_otsu(img, w * h);
    brute(img, w, h, t, 1, 1, d2);
    tw_edt_opts_init(&o);
    tw_edt_report_init(&rep);
    o.image = (tw_host_image){.data = img, .w = w, .h = h, .type = TW_U8};
    o.threshold_otsu = true;
    o.format = TW_EDT_SQ32;
    o.tile_w = 13;
    o.tile_h = 9;
    o.result = (tw_host_image){.data = s, .w = w, .h = h, .type = TW_U32};
    o.report = &rep;
    cr_assert(eq(int, run_edt(rt, &o, msg, sizeof msg), TW_OK), "%s", msg);
    cr_assert(eq(dbl, rep.threshold, (double)t));
    cr_assert(rep.background > 0 && rep.bands == 5);
    for (int64_t p = 0; p < w * h; p++)
        cr_assert(eq(u32, s[p], (uint32_t)d2[p]), "pixel %lld", (long long)p);
    free(img);
    free(d2);
    free(s);
    tw_runtime_destroy(rt);
}

Test(edt_job, no_background_is_infinite)
{
    /* An image without background: +inf everywhere, the report counts 0 background pixels,
     * and the job succeeds. */
    tw_runtime *rt = cpu_runtime();
    uint8_t img[6 * 5];
    float f[6 * 5];
    tw_edt_report rep;
    char msg[512];
    tw_edt_opts o;

    memset(img, 7, sizeof img);
    tw_edt_opts_init(&o);
    tw_edt_report_init(&rep);
    o.image = (tw_host_image){.data = img, .w = 6, .h = 5, .type = TW_U8};
    o.result = (tw_host_image){.data = f, .w = 6, .h = 5, .type = TW_F32};
    o.tile_w = o.tile_h = 2;
    o.report = &rep;
    cr_assert(eq(int, run_edt(rt, &o, msg, sizeof msg), TW_OK), "%s", msg);
    cr_assert(eq(i64, rep.background, 0));
    for (int i = 0; i < 30; i++)
        cr_assert(isinf(f[i]) && f[i] > 0);
    tw_runtime_destroy(rt);
}

Test(edt_job, wavefront_is_an_upper_bound)
{
    /* --method wavefront: every distance is at least the exact one, background is 0, and on
     * one background pixel (no Voronoi gaps) it is exact. */
    tw_runtime *rt = cpu_runtime();

    rng_state = 21;
    for (int k = 0; k < 30; k++) {
        int64_t w = rndi(1, 40), h = rndi(1, 40);
        uint8_t *img = random_image(w, h, k % 2);
        double *d2 = malloc((size_t)(w * h) * sizeof *d2);
        uint32_t *s = malloc((size_t)(w * h) * 4);
        char msg[512];
        tw_edt_opts o;

        brute(img, w, h, 0, 1, 1, d2);
        tw_edt_opts_init(&o);
        o.image = (tw_host_image){.data = img, .w = w, .h = h, .type = TW_U8};
        o.result = (tw_host_image){.data = s, .w = w, .h = h, .type = TW_U32};
        o.format = TW_EDT_SQ32;
        o.method = TW_EDT_WAVEFRONT;
        o.tile_w = 7;
        o.tile_h = 5;
        cr_assert(eq(int, run_edt(rt, &o, msg, sizeof msg), TW_OK), "%s", msg);
        for (int64_t p = 0; p < w * h; p++) {
            if (d2[p] < 0) {
                cr_assert(eq(u32, s[p], UINT32_MAX));
                continue;
            }
            cr_assert(s[p] >= (uint32_t)d2[p], "image %d pixel %lld: %u < %.0f", k,
                      (long long)p, s[p], d2[p]);
            if (d2[p] == 0)
                cr_assert(eq(u32, s[p], 0));
        }
        free(img);
        free(d2);
        free(s);
    }
    tw_runtime_destroy(rt);
}

Test(edt_job, bad_options)
{
    /* Misuse is TW_E_INVALID before anything runs, each with a message naming the problem. */
    tw_runtime *rt = cpu_runtime();
    uint8_t img[4] = {0, 1, 1, 0};
    float f[4];
    uint32_t s[4];
    tw_edt_opts o;
    tw_job *job = NULL;
    tw_error err;
    /* each case breaks one thing; the message must name it */
    static const char *const needle[] = {"spacing", "sq32", "result image", "no output",
                                         "threshold", "otsu", "spacing_auto", "indices image",
                                         "step 0", "u8 and u16 formats only"};

    for (int k = 0; k < 10; k++) {
        tw_edt_opts_init(&o);
        o.image = (tw_host_image){.data = img, .w = 2, .h = 2, .type = TW_U8};
        o.result = (tw_host_image){.data = f, .w = 2, .h = 2, .type = TW_F32};
        switch (k) {
        case 0: o.spacing_x = 0; break;
        case 1:
            o.format = TW_EDT_SQ32;
            o.result.data = s;
            o.result.type = TW_U32;
            o.spacing_y = 2;
            break;
        case 2: o.result.w = 3; break;
        case 3: o.result.data = NULL; break;
        case 4: o.threshold = NAN; break;
        case 5:
            o.threshold_otsu = true;
            o.image.type = TW_F32;
            o.image.data = f;
            break;
        case 6: o.spacing_auto = true; break;
        case 7: o.indices = (tw_host_image){.data = s, .w = 2, .h = 2, .type = TW_U16}; break;
        case 8: o.step = 0; break;
        case 9: o.step = 2; break; /* with f32 */
        }
        cr_assert(eq(int, tw_edt_submit(rt, &o, &job, &err), TW_E_INVALID), "case %d", k);
        cr_assert(strstr(err.message, "edt: ") == err.message && strstr(err.message, needle[k]),
                  "case %d: %s", k, err.message);
    }
    cr_assert(eq(int, tw_edt_submit(rt, NULL, &job, &err), TW_E_INVALID));
    tw_edt_opts_init(&o);
    o.struct_size = 3;
    cr_assert(eq(int, tw_edt_submit(rt, &o, &job, &err), TW_E_INVALID));
    tw_runtime_destroy(rt);
}

Test(edt_job, files_and_indices_round_trip)
{
    /* A file in, a file out and an indices file: read back, equal to the in-memory run. */
    tw_runtime *rt = cpu_runtime();
    char *dir = twtest_tmpdir(), *in = twtest_path(dir, "in.tif"), *out = twtest_path(dir, "d.tif"),
         *idx = twtest_path(dir, "i.tif");
    int64_t w = 70, h = 45;
    uint8_t *img = random_image(w, h, 0);
    float *f = malloc((size_t)(w * h) * 4), *g = malloc((size_t)(w * h) * 4);
    uint32_t *ix = malloc((size_t)(w * h) * 8), *jx = malloc((size_t)(w * h) * 8);
    tw_slide *sl = NULL;
    tw_error err;
    char msg[512];
    tw_edt_opts o;

    cr_assert(eq(int, twtest_write_image(in, img, w, h, TW_U8, &err), TW_OK), "%s", err.message);

    tw_edt_opts_init(&o);
    o.input.path = in;
    o.output.path = out;
    o.indices_path = idx;
    o.tile_w = 23;
    o.tile_h = 11;
    cr_assert(eq(int, run_edt(rt, &o, msg, sizeof msg), TW_OK), "%s", msg);
    tw_edt_opts_init(&o);
    o.image = (tw_host_image){.data = img, .w = w, .h = h, .type = TW_U8};
    o.result = (tw_host_image){.data = f, .w = w, .h = h, .type = TW_F32};
    o.indices = (tw_host_image){.data = ix, .w = w, .h = h, .type = TW_U32};
    cr_assert(eq(int, run_edt(rt, &o, msg, sizeof msg), TW_OK), "%s", msg);

    cr_assert(eq(int, tw_slide_open(out, TW_READER_TIFF, &sl, &err), TW_OK), "%s", err.message);
    cr_assert(eq(int, tw_slide_get_sample_type(sl), TW_F32));
    cr_assert(eq(int, tw_slide_read_region(sl, 0, 0, 0, w, h, g, (size_t)w * 4, &err), TW_OK));
    tw_slide_close(sl);
    cr_assert(memcmp(f, g, (size_t)(w * h) * 4) == 0, "distances differ");
    cr_assert(eq(int, tw_slide_open(idx, TW_READER_TIFF, &sl, &err), TW_OK), "%s", err.message);
    cr_assert(eq(int, tw_slide_get_channels(sl), 2));
    cr_assert(eq(int, tw_slide_read_region(sl, 0, 0, 0, w, h, jx, (size_t)w * 8, &err), TW_OK));
    tw_slide_close(sl);
    for (int64_t p = 0; p < w * h; p++) {
        /* ties may name another pixel, never another distance */
        int64_t a = ((int64_t)ix[2 * p] - p / w) * ((int64_t)ix[2 * p] - p / w) +
                    ((int64_t)ix[2 * p + 1] - p % w) * ((int64_t)ix[2 * p + 1] - p % w);
        int64_t b = ((int64_t)jx[2 * p] - p / w) * ((int64_t)jx[2 * p] - p / w) +
                    ((int64_t)jx[2 * p + 1] - p % w) * ((int64_t)jx[2 * p + 1] - p % w);
        cr_assert(eq(i64, a, b), "pixel %lld", (long long)p);
    }
    free(img);
    free(f);
    free(g);
    free(ix);
    free(jx);
    twtest_rmtree(dir);
    free(in);
    free(out);
    free(idx);
    free(dir);
    tw_runtime_destroy(rt);
}

Test(edt_job, u8_and_step_match_brute_force)
{
    /* --format u8 and --step: floor(d / step + 0.5), saturating at 255 (u8) or 65535 (u16),
     * the same whatever the tile; d from brute force. Steps that are powers of two and others:
     * with unit spacing no distance / step falls on a half (d^2 is an integer), so the
     * kernel's d computed with the spacing divided by the step rounds the same. */
    tw_runtime *rt = cpu_runtime();
    const double steps[] = {1, 2, 0.5, 3, 0.25, 0.1};

    rng_state = 23;
    for (int k = 0; k < 36; k++) {
        int64_t w = rndi(1, 48), h = rndi(1, 40);
        uint8_t *img = random_image(w, h, k % 3 == 1 ? 1 : 0);
        double *d2 = malloc((size_t)(w * h) * sizeof *d2);
        uint8_t *u8 = malloc((size_t)(w * h));
        uint16_t *u16 = malloc((size_t)(w * h) * 2);
        double step = steps[k % 6];
        char msg[512];
        tw_edt_opts o;

        brute(img, w, h, 0, 1, 1, d2);
        for (int fmt = 0; fmt < 2; fmt++) {
            tw_edt_opts_init(&o);
            o.image = (tw_host_image){.data = img, .w = w, .h = h, .type = TW_U8};
            o.format = fmt == 0 ? TW_EDT_U8 : TW_EDT_U16;
            o.step = step;
            o.result = (tw_host_image){.data = fmt == 0 ? (void *)u8 : (void *)u16, .w = w,
                                       .h = h, .type = fmt == 0 ? TW_U8 : TW_U16};
            o.tile_w = (int32_t)rndi(1, 20);
            o.tile_h = (int32_t)rndi(1, 20);
            cr_assert(eq(int, run_edt(rt, &o, msg, sizeof msg), TW_OK), "%s", msg);
        }
        for (int64_t p = 0; p < w * h; p++) {
            double q = d2[p] < 0 ? INFINITY : floor(sqrt(d2[p]) / step + 0.5);
            unsigned w8 = q >= 255 ? 255 : (unsigned)q, w16 = q >= 65535 ? 65535 : (unsigned)q;

            cr_assert(u8[p] == w8 && u16[p] == w16,
                      "image %d (%lldx%lld) step %g pixel %lld: u8 %u u16 %u, want %u %u", k,
                      (long long)w, (long long)h, step, (long long)p, u8[p], u16[p], w8, w16);
        }
        free(img);
        free(d2);
        free(u8);
        free(u16);
    }
    tw_runtime_destroy(rt);
}

Test(edt_job, u8_file_carries_its_step)
{
    /* A u8 map with a step: the file's description says what a grey level is, read back as
     * a property (OpenSlide shows the same, aperio.DistanceStep); no step item on f32. */
    tw_runtime *rt = cpu_runtime();
    char *dir = twtest_tmpdir(), *in = twtest_path(dir, "in.tif"), *out = twtest_path(dir, "d.tif"),
         *f32 = twtest_path(dir, "f.tif");
    int64_t w = 300, h = 20;
    uint8_t *img = calloc((size_t)(w * h), 1), *got = malloc((size_t)(w * h));
    tw_slide *sl = NULL;
    tw_error err;
    char msg[512];
    tw_edt_opts o;
    const char *v;

    for (int64_t p = 0; p < w * h; p++)
        img[p] = p % w == 0 ? 0 : 9; /* background: column 0; d = x */
    cr_assert(eq(int, twtest_write_image(in, img, w, h, TW_U8, &err), TW_OK), "%s", err.message);
    tw_edt_opts_init(&o);
    o.input.path = in;
    o.output.path = out;
    o.format = TW_EDT_U8;
    o.step = 0.5;
    o.tile_w = 64;
    o.tile_h = 8;
    cr_assert(eq(int, run_edt(rt, &o, msg, sizeof msg), TW_OK), "%s", msg);
    cr_assert(eq(int, tw_slide_open(out, TW_READER_TIFF, &sl, &err), TW_OK), "%s", err.message);
    cr_assert(eq(int, tw_slide_get_sample_type(sl), TW_U8));
    cr_assert(eq(int, tw_slide_read_region(sl, 0, 0, 0, w, h, got, (size_t)w, &err), TW_OK));
    for (int64_t p = 0; p < w * h; p++) {
        int64_t x = p % w;
        cr_assert(eq(u8, got[p], (uint8_t)(2 * x > 255 ? 255 : 2 * x)), "pixel %lld", (long long)p);
    }
    v = tw_slide_get_property(sl, "aperio.DistanceStep");
    cr_assert(v && strcmp(v, "0.5") == 0, "DistanceStep: %s", v ? v : "(none)");
    v = tw_slide_get_property(sl, "aperio.DistanceUnit");
    cr_assert(v && strcmp(v, "pixel") == 0, "DistanceUnit: %s", v ? v : "(none)");
    tw_slide_close(sl);

    tw_edt_opts_init(&o);
    o.input.path = in;
    o.output.path = f32;
    cr_assert(eq(int, run_edt(rt, &o, msg, sizeof msg), TW_OK), "%s", msg);
    cr_assert(eq(int, tw_slide_open(f32, TW_READER_TIFF, &sl, &err), TW_OK), "%s", err.message);
    cr_assert(tw_slide_get_property(sl, "aperio.DistanceStep") == NULL &&
              tw_slide_get_property(sl, "tilewave.DistanceStep") == NULL);
    tw_slide_close(sl);
    free(img);
    free(got);
    twtest_rmtree(dir);
    free(in);
    free(out);
    free(f32);
    free(dir);
    tw_runtime_destroy(rt);
}
