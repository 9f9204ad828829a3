/* SPDX-License-Identifier: MIT */
/* tilewave tests: every output kind through the streaming path, read back with libtiff. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <criterion/parameterized.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tiffio.h>

#include "tw_io.h"
#include "twtest.h"
#include "twtest_out.h"
#include "twtest_rt.h"

/* A runtime of 2 CPU workers whose written TIFF tiles are `tiff_tile` and processing tiles
 * `tile` (both "WxH"). */
static tw_runtime *
runtime(const char *tiff_tile, const char *tile)
{
    const char *const kv[] = {"runtime.gpus", "none", "runtime.cpu_workers", "2", "io.tiff_tile",
                              tiff_tile, "tile.size", tile, NULL};

    twtest_quiet_logs();
    return twtest_runtime_kv_ok(true, kv);
}

/* The number of levels of a pyramid over w x h in tw x th tiles: halving while the next level
 * still covers a whole tile both ways (OpenSlide 3.4.1 cannot read smaller ones). */
static int
pyramid_levels(int64_t w, int64_t h, int64_t tw, int64_t th)
{
    int n = 1;

    while ((w + 1) / 2 >= tw && (h + 1) / 2 >= th) {
        w = (w + 1) / 2;
        h = (h + 1) / 2;
        n++;
    }
    return n;
}

/* Wait for a job just submitted with status st; the job's error into err; destroy it. */
static tw_status
finish(tw_status st, tw_job **job, tw_error *err)
{
    if (st != TW_OK)
        return st;
    if ((st = tw_job_wait(*job, -1)) != TW_OK)
        snprintf(err->message, sizeof err->message, "%s", tw_job_get_error(*job));
    tw_job_destroy(*job);
    *job = NULL;
    return st;
}

static tw_status
convert(tw_runtime *rt, const tw_convert_opts *o, tw_error *err)
{
    tw_job *job = NULL;

    return finish(tw_convert_submit(rt, o, &job, err), &job, err);
}

static uint16_t
tiff_code(tw_compression c)
{
    return c == TW_COMPRESS_DEFLATE ? COMPRESSION_ADOBE_DEFLATE
           : c == TW_COMPRESS_ZSTD  ? COMPRESSION_ZSTD
           : c == TW_COMPRESS_LZW   ? COMPRESSION_LZW
           : c == TW_COMPRESS_JPEG  ? COMPRESSION_JPEG
                                    : COMPRESSION_NONE;
}

/* Bytes of a packed w x h image. */
static size_t
img_bytes(int64_t w, int64_t h, int ch, tw_sample_type t)
{
    return (size_t)(w * h) * (size_t)ch * tw_sample_size(t);
}

/* The first differing sample, for messages: -1 when equal. */
static int64_t
first_diff(const uint8_t *a, const uint8_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i])
            return (int64_t)i;
    return -1;
}

/* Resolution tags of level `l` of a w0-wide output whose level 0 has `mpp`: pixels per cm,
 * scaled by the level's size. */
static void
check_res(const twout_level *lv, double mpp, int64_t w0, int64_t h0, const char *what)
{
    if (mpp == 0) {
        cr_assert(lv->has_res == false, "%s: resolution tags without an input mpp", what);
        return;
    }
    cr_assert(lv->has_res, "%s: no resolution tags", what);
    cr_assert(eq(u16, lv->resunit, (uint16_t)RESUNIT_CENTIMETER), "%s", what);
    cr_assert(fabs(lv->xres - 1e4 / mpp * (double)lv->w / (double)w0) <= 1e-3 * lv->xres,
              "%s: x resolution %g, want %g", what, lv->xres,
              1e4 / mpp * (double)lv->w / (double)w0);
    cr_assert(fabs(lv->yres - 1e4 / mpp * (double)lv->h / (double)h0) <= 1e-3 * lv->yres,
              "%s: y resolution %g", what, lv->yres);
}

Test(outputs, reduce_matches_the_reference_rules)
{
    /* twi_pyr_reduce, the writer's 2x2 reduction, equals the reference of the test (written
     * independently) for every sample type, rule, channel count and odd or even size. */
    static const tw_sample_type types[] = {TW_U8, TW_U16, TW_U32, TW_F32, TW_U64};
    static const int64_t sizes[][2] = {{1, 1}, {2, 2}, {7, 5}, {16, 9}, {33, 64}};

    for (size_t ti = 0; ti < 5; ti++)
        for (int rule = 0; rule < 3; rule++)
            for (int ch = 1; ch <= 3; ch++)
                for (size_t si = 0; si < 5; si++) {
                    const tw_sample_type t = types[ti];
                    const int64_t w = sizes[si][0], h = sizes[si][1];
                    const size_t px = (size_t)ch * tw_sample_size(t);
                    uint8_t *src, *want, *got;

                    if (t == TW_U64 && rule == TWOUT_MEAN)
                        continue; /* never used: 64-bit outputs are indices */
                    src = twout_image(w, h, ch, t, (uint64_t)(ti * 100 + si), false);
                    if (t == TW_U8 && si == 2) /* ties: (1 + 2 + 0 + 0 + 2) / 4 rounds up */
                        memset(src, 1, px);
                    want = twout_reduce(src, w, h, ch, t, (twout_rule)rule);
                    got = calloc((size_t)((w + 1) / 2 * ((h + 1) / 2)), px);
                    twi_pyr_reduce(src, (size_t)w * px, w, h, ch, t,
                                   rule == TWOUT_MEAN  ? TWI_PYR_MEAN
                                   : rule == TWOUT_MAX ? TWI_PYR_MAX
                                                       : TWI_PYR_NEAREST,
                                   got, (size_t)((w + 1) / 2) * px);
                    cr_assert(first_diff(got, want, (size_t)((w + 1) / 2 * ((h + 1) / 2)) * px) <
                                  0,
                              "%s x%d rule %d %ldx%ld differs", tw_sample_type_name(t), ch, rule,
                              (long)w, (long)h);
                    free(src);
                    free(want);
                    free(got);
                }
}

typedef struct ocase {
    tw_sample_type type;
    int channels;
    tw_compression comp;
    tw_layout layout;
    bool pyramid;
    int64_t w, h;
    int32_t ttw, tth;      /* the written tiles */
    int32_t tw, th;        /* the processing tiles */
} ocase;

ParameterizedTestParameters(outputs, convert_round_trip)
{
    static ocase cases[] = {
        {TW_U8, 1, TW_COMPRESS_NONE, TW_LAYOUT_TIFF, true, 301, 203, 32, 48, 37, 29},
        {TW_U8, 1, TW_COMPRESS_DEFLATE, TW_LAYOUT_OME, true, 257, 130, 64, 32, 64, 64},
        {TW_U8, 1, TW_COMPRESS_LZW, TW_LAYOUT_TIFF, false, 99, 101, 32, 32, 50, 50},
        {TW_U8, 1, TW_COMPRESS_ZSTD, TW_LAYOUT_OME, false, 120, 77, 48, 48, 1000, 1000},
        {TW_U16, 1, TW_COMPRESS_ZSTD, TW_LAYOUT_TIFF, true, 200, 123, 16, 16, 45, 61},
        {TW_U16, 1, TW_COMPRESS_LZW, TW_LAYOUT_OME, true, 131, 257, 48, 32, 128, 128},
        {TW_U16, 1, TW_COMPRESS_NONE, TW_LAYOUT_OME, true, 130, 67, 16, 16, 16, 16},
        {TW_U32, 1, TW_COMPRESS_DEFLATE, TW_LAYOUT_TIFF, true, 211, 99, 16, 16, 64, 40},
        {TW_U32, 1, TW_COMPRESS_LZW, TW_LAYOUT_OME, true, 100, 100, 32, 32, 33, 33},
        {TW_U32, 1, TW_COMPRESS_ZSTD, TW_LAYOUT_TIFF, false, 45, 300, 16, 64, 45, 300},
        {TW_U32, 1, TW_COMPRESS_NONE, TW_LAYOUT_TIFF, true, 70, 90, 32, 16, 20, 20},
        {TW_F32, 1, TW_COMPRESS_ZSTD, TW_LAYOUT_OME, true, 177, 91, 32, 32, 40, 40},
        {TW_F32, 1, TW_COMPRESS_LZW, TW_LAYOUT_TIFF, true, 129, 65, 32, 32, 64, 64},
        {TW_F32, 1, TW_COMPRESS_NONE, TW_LAYOUT_OME, false, 33, 33, 16, 16, 7, 9},
        {TW_F32, 1, TW_COMPRESS_DEFLATE, TW_LAYOUT_TIFF, true, 90, 51, 16, 16, 90, 51},
        {TW_U8, 3, TW_COMPRESS_LZW, TW_LAYOUT_TIFF, true, 203, 150, 32, 32, 51, 77},
        {TW_U8, 3, TW_COMPRESS_DEFLATE, TW_LAYOUT_OME, true, 160, 97, 48, 48, 96, 96},
        {TW_U8, 3, TW_COMPRESS_NONE, TW_LAYOUT_TIFF, false, 64, 64, 64, 64, 32, 32},
        {TW_U16, 3, TW_COMPRESS_ZSTD, TW_LAYOUT_OME, true, 99, 130, 32, 32, 30, 30},
        {TW_U32, 2, TW_COMPRESS_DEFLATE, TW_LAYOUT_TIFF, true, 77, 55, 16, 16, 25, 25},
    };

    return cr_make_param_array(ocase, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(ocase *c, outputs, convert_round_trip)
{
    /* convert streams an input through the assembler and writer: the output's level 0 equals
     * the input, each reduced level equals the reference reduction (the mean rounded half up;
     * u32 samples: the top-left one) of the level above, for every compression, layout, sample
     * type, odd size and tile misalignment; tags (compression, photometric, reduced-image
     * flag, resolution scaled per level) and the OME SubIFD structure are checked with libtiff
     * alone. */
    char *dir = twtest_tmpdir();
    char *in = twtest_path(dir, "in.tif"), *out = twtest_path(dir, "out.tif");
    uint8_t *img = twout_image(c->w, c->h, c->channels, c->type, 7, false), *ref;
    const twout_rule rule = c->type == TW_U32 ? TWOUT_NEAREST : TWOUT_MEAN;
    tw_runtime *rt;
    tw_convert_opts o;
    tw_error err = {0};
    const int64_t ttw = c->ttw, tth = c->tth;
    int64_t lw = c->w, lh = c->h;
    int n, want_n;
    bool ome = false;
    char *desc, tt[32], pt[32];

    snprintf(tt, sizeof tt, "%dx%d", (int)c->ttw, (int)c->tth);
    snprintf(pt, sizeof pt, "%dx%d", (int)c->tw, (int)c->th);
    rt = runtime(tt, pt);
    twout_write_input(in, img, c->w, c->h, c->channels, c->type, 1, 0.5);
    tw_convert_opts_init(&o);
    o.input.path = in;
    o.output.path = out;
    o.output.compression = c->comp;
    o.output.compression_set = true;
    o.output.layout = c->layout;
    o.output.layout_set = true;
    o.output.pyramid = c->pyramid;
    cr_assert(eq(int, convert(rt, &o, &err), TW_OK), "%s", err.message);

    want_n = c->pyramid ? pyramid_levels(c->w, c->h, ttw, tth) : 1;
    n = twout_level_count(out, &ome);
    cr_assert(eq(int, n, want_n));
    cr_assert(eq(int, ome, c->layout == TW_LAYOUT_OME && want_n > 1));
    if (c->layout == TW_LAYOUT_OME) {
        /* one page in the main chain; the reduced levels only in its SubIFDs */
        TIFF *tif = TIFFOpen(out, "r");

        cr_assert(eq(int, (int)TIFFNumberOfDirectories(tif), 1));
        TIFFClose(tif);
    }
    ref = img;
    img = NULL;
    for (int l = 0; l < n; l++) {
        twout_level lv;
        char what[64];

        snprintf(what, sizeof what, "level %d", l);
        twout_read_level(out, l, &lv);
        cr_assert(eq(i64, lv.w, lw), "%s", what);
        cr_assert(eq(i64, lv.h, lh), "%s", what);
        cr_assert(eq(int, lv.channels, c->channels));
        cr_assert(eq(int, (int)lv.type, (int)c->type));
        cr_assert(eq(u32, lv.tile_w, (uint32_t)ttw));
        cr_assert(eq(u32, lv.tile_h, (uint32_t)tth));
        cr_assert(eq(u16, lv.compression, tiff_code(c->comp)), "%s", what);
        cr_assert(eq(u16, lv.photometric,
                     (uint16_t)(c->channels == 3 ? PHOTOMETRIC_RGB : PHOTOMETRIC_MINISBLACK)));
        cr_assert(eq(u32, lv.subfile, l > 0 ? (uint32_t)FILETYPE_REDUCEDIMAGE : 0u), "%s", what);
        check_res(&lv, 0.5, c->w, c->h, what);
        {
            int64_t d = first_diff(lv.px, ref, img_bytes(lw, lh, c->channels, c->type));

            cr_assert(d < 0, "%s differs from the reference at byte %ld (pixel %ld)", what,
                      (long)d, d < 0 ? 0L : (long)(d / (c->channels * tw_sample_size(c->type))));
        }
        twout_level_free(&lv);
        if (l + 1 < n) {
            uint8_t *next = twout_reduce(ref, lw, lh, c->channels, c->type, rule);

            free(ref);
            ref = next;
            lw = (lw + 1) / 2;
            lh = (lh + 1) / 2;
        }
    }
    desc = twout_description(out);
    cr_assert_not_null(desc);
    {
        char want[128];

        snprintf(want, sizeof want, "tilewave %s convert level 0", tw_version_string());
        cr_assert(strstr(desc, want) != NULL, "description '%s' lacks '%s'", desc, want);
        if (c->layout == TW_LAYOUT_OME)
            cr_assert(strncmp(desc, "<?xml", 5) == 0 && strstr(desc, "<Description>") != NULL &&
                          strstr(desc, "PhysicalSizeX=\"0.5\"") != NULL,
                      "not the OME-XML: %s", desc);
        else if (c->type == TW_U8 && c->channels != 2)
            cr_assert(strncmp(desc, "Aperio Image Library (tilewave ", 31) == 0, "%s", desc);
        else
            cr_assert(strncmp(desc, "tilewave ", 9) == 0, "%s", desc);
    }
    free(desc);
    free(ref);
    tw_runtime_destroy(rt);
    cr_assert(eq(int, twtest_count_entries(dir), 2), "temporary files left in %s", dir);
    twtest_rmtree(dir);
    free(in);
    free(out);
    free(dir);
}

/* max |a - b| and the mean of |a - b| over n u8 samples */
static void
u8_error(const uint8_t *a, const uint8_t *b, size_t n, int *max, double *mean)
{
    double sum = 0;

    *max = 0;
    for (size_t i = 0; i < n; i++) {
        int d = abs((int)a[i] - (int)b[i]);

        *max = d > *max ? d : *max;
        sum += d;
    }
    *mean = n ? sum / (double)n : 0;
}

/*
 * JPEG tolerance. The images are smooth, as visual results are and as JPEG assumes (periods of
 * 60 to 150 pixels at level 0, a quarter of that two levels down). At quality 90 the
 * quantisation steps of the low frequencies that carry such an image are 2 to 5 levels, and
 * the edge tiles are padded by repeating the last pixels, so gray pixels come back within a
 * couple of levels. RGB is stored as YCbCr 4:2:0: chroma is averaged over 2x2 pixels and
 * quantised more coarsely (steps 3 to 20), and the pattern's colour varies fastest on the
 * smallest levels. Measured (libjpeg-turbo, libtiff 4.5): gray max 2, mean 0.31; RGB max 9,
 * mean 0.98 on a 75 x 53 level, max 12, mean 1.46 on a 38 x 27 one. The bounds leave a margin
 * above that; a tile, channel or level mix-up is off by tens of levels on average.
 */
#define JPEG_GRAY_MAX 4
#define JPEG_GRAY_MEAN 0.75
#define JPEG_RGB_MAX 16
#define JPEG_RGB_MEAN 2.0

Test(outputs, jpeg_gray_and_rgb_within_tolerance)
{
    /* 8-bit gray and RGB through --compression jpeg (quality 90), tiff and OME layouts with a
     * pyramid: each level within the JPEG tolerance of the reference (the input, then the 2x2
     * means of the exact levels above, which is what the writer reduced); tags JPEG, YCbCr for
     * RGB, gray for gray. */
    for (int ch = 1; ch <= 3; ch += 2)
        for (int layout = 0; layout < 2; layout++) {
            char *dir = twtest_tmpdir();
            char *in = twtest_path(dir, "in.tif"), *out = twtest_path(dir, "out.tif");
            const int64_t w = 300, h = 211;
            uint8_t *img = twout_image(w, h, ch, TW_U8, 3, true), *ref = NULL;
            tw_runtime *rt = runtime("32x32", "100x100");
            tw_convert_opts o;
            tw_error err = {0};
            int64_t pw = w, ph = h; /* the size of the level above */
            int n;

            twout_write_input(in, img, w, h, ch, TW_U8, 1, 0);
            tw_convert_opts_init(&o);
            o.input.path = in;
            o.output.path = out;
            o.output.compression = TW_COMPRESS_JPEG;
            o.output.compression_set = true;
            o.output.quality = 90;
            o.output.layout = (tw_layout)layout;
            o.output.layout_set = true;
            o.output.pyramid = true;
            cr_assert(eq(int, convert(rt, &o, &err), TW_OK), "%s", err.message);
            n = twout_level_count(out, NULL);
            cr_assert(eq(int, n, pyramid_levels(w, h, 32, 32)));
            for (int l = 0; l < n; l++) {
                twout_level lv;
                int mx;
                double mean;

                twout_read_level(out, l, &lv);
                cr_assert(eq(u16, lv.compression, (uint16_t)COMPRESSION_JPEG));
                cr_assert(eq(u16, lv.photometric,
                             (uint16_t)(ch == 3 ? PHOTOMETRIC_YCBCR : PHOTOMETRIC_MINISBLACK)));
                cr_assert(eq(int, lv.channels, ch));
                if (l > 0) {
                    uint8_t *next = twout_reduce(ref ? ref : img, pw, ph, ch, TW_U8,
                                                 TWOUT_MEAN);

                    free(ref);
                    ref = next;
                }
                u8_error(lv.px, l == 0 ? img : ref, (size_t)(lv.w * lv.h * ch), &mx, &mean);
                cr_assert(mx <= (ch == 1 ? JPEG_GRAY_MAX : JPEG_RGB_MAX) &&
                              mean <= (ch == 1 ? JPEG_GRAY_MEAN : JPEG_RGB_MEAN),
                          "%d channel(s), layout %d, level %d: max error %d, mean %.3f", ch,
                          layout, l, mx, mean);
                pw = lv.w;
                ph = lv.h;
                twout_level_free(&lv);
            }
            free(ref);
            free(img);
            tw_runtime_destroy(rt);
            twtest_rmtree(dir);
            free(in);
            free(out);
            free(dir);
        }
}

/* Read level 0 of a one-level gray u8 file (the input of the mask tests). */
static uint8_t *
read0(const char *path, int64_t *w, int64_t *h)
{
    twout_level lv;

    twout_read_level(path, 0, &lv);
    *w = lv.w;
    *h = lv.h;
    return lv.px;
}

Test(outputs, masks_reduce_by_max)
{
    /* A thresholded input gives a mask (0 / 255): gray --threshold's pyramid reduces it by the
     * largest sample, so a one-pixel object stays visible at every level; so do the maxima of
     * regional-max (0 / 1). Checked against the reference max reduction. */
    char *dir = twtest_tmpdir();
    char *in = twtest_path(dir, "in.tif"), *mask = twtest_path(dir, "mask.tif"),
         *rmax = twtest_path(dir, "rmax.tif");
    const int64_t w = 213, h = 150;
    uint8_t *img = twout_image(w, h, 1, TW_U8, 11, false), *got;
    tw_runtime *rt = runtime("32x32", "50x40");
    tw_gray_opts g;
    tw_mrecon_filter_opts r;
    tw_job *job = NULL;
    tw_error err = {0};
    int64_t gw, gh;

    /* sparse bright dots on a dark field */
    for (int64_t i = 0; i < w * h; i++)
        img[i] = img[i] > 250 ? img[i] : img[i] / 4;
    twout_write_input(in, img, w, h, 1, TW_U8, 1, 0);
    tw_gray_opts_init(&g);
    g.input.path = in;
    g.input.threshold_mode = TW_THRESHOLD_VALUE;
    g.input.threshold = 200;
    g.output.path = mask;
    g.output.pyramid = true;
    cr_assert(eq(int, finish(tw_gray_submit(rt, &g, &job, &err), &job, &err), TW_OK), "%s",
              err.message);
    got = read0(mask, &gw, &gh);
    for (int64_t i = 0; i < w * h; i++)
        cr_assert(eq(u8, got[i], img[i] > 200 ? 255 : 0));
    cr_assert(eq(int, twout_check_pyramid(mask, got, w, h, 1, TW_U8, TWOUT_MAX),
                 pyramid_levels(w, h, 32, 32)));
    free(got);

    tw_mrecon_filter_opts_init(&r);
    r.input.path = in;
    r.output.path = rmax;
    r.output.pyramid = true;
    cr_assert(eq(int, finish(tw_regional_max_submit(rt, &r, &job, &err), &job, &err),
                 TW_OK),
              "%s", err.message);
    got = read0(rmax, &gw, &gh);
    twout_check_pyramid(rmax, got, w, h, 1, TW_U8, TWOUT_MAX);
    free(got);
    free(img);
    tw_runtime_destroy(rt);
    twtest_rmtree(dir);
    free(in);
    free(mask);
    free(rmax);
    free(dir);
}

/* The overlay rule of docs/io.md, computed the obvious way: strength s = v / 255 (binary:
 * 1 for v != 0), out = base (1 - 0.4 s) + tint 0.4 s rounded half up, tint (0, 255, 0). */
static uint8_t
blend_ref(uint8_t base, int c, uint8_t v, bool binary)
{
    const int64_t tint = c == 1 ? 255 : 0;
    /* with s = k / 255: out = (base (1275 - 2k) + tint 2k) / 1275 */
    const int64_t k = binary ? (v ? 255 : 0) : v;
    const int64_t num = base * (1275 - 2 * k) + tint * 2 * k;

    return (uint8_t)((2 * num + 1275) / 2550);
}

static void
check_overlay(const char *ov, const uint8_t *base, int base_ch, const uint8_t *res, int64_t w,
              int64_t h, bool binary)
{
    twout_level lv;
    uint8_t *want = malloc((size_t)(w * h) * 3);
    int n;

    for (int64_t i = 0; i < w * h; i++)
        for (int c = 0; c < 3; c++)
            want[i * 3 + c] = blend_ref(base[i * base_ch + (base_ch == 3 ? c : 0)], c, res[i],
                                        binary);
    n = twout_level_count(ov, NULL);
    twout_read_level(ov, 0, &lv);
    cr_assert(eq(int, lv.channels, 3));
    cr_assert(eq(int, (int)lv.type, (int)TW_U8));
    cr_assert(eq(u16, lv.photometric, (uint16_t)PHOTOMETRIC_RGB));
    for (int64_t i = 0; i < w * h * 3; i++)
        cr_assert(eq(u8, lv.px[i], want[i]), "overlay pixel (%ld, %ld) channel %d",
                  (long)(i / 3 % w), (long)(i / 3 / w), (int)(i % 3));
    twout_level_free(&lv);
    /* the overlay is always a pyramid, reduced by the mean */
    cr_assert(eq(int, twout_check_pyramid(ov, want, w, h, 3, TW_U8, TWOUT_MEAN), n));
    cr_assert(n > 1);
    free(want);
}

Test(outputs, overlay_blends_result_over_slide)
{
    /* --overlay (deflate, for an exact check): 8-bit RGB, the input's size, a pyramid; every
     * level-0 pixel is the naive blend of the result over the slide (gray results in
     * proportion to their value, masks fully where set), its levels the 2x2 means. For an
     * RGB slide and a gray one. */
    char *dir = twtest_tmpdir();
    char *in = twtest_path(dir, "in.tif"), *gin = twtest_path(dir, "gin.tif"),
         *res = twtest_path(dir, "res.tif"), *ov = twtest_path(dir, "ov.tif");
    const int64_t w = 190, h = 130;
    uint8_t *rgb = twout_image(w, h, 3, TW_U8, 5, false);
    uint8_t *gray = twout_image(w, h, 1, TW_U8, 6, false), *got;
    tw_runtime *rt = runtime("32x32", "64x48");
    tw_gray_opts g;
    tw_mrecon_filter_opts r;
    tw_job *job = NULL;
    tw_error err = {0};
    int64_t gw, gh;

    twout_write_input(in, rgb, w, h, 3, TW_U8, 1, 0.25);
    twout_write_input(gin, gray, w, h, 1, TW_U8, 1, 0.25);
    /* gray of an RGB slide: a gray result, blended in proportion */
    tw_gray_opts_init(&g);
    g.input.path = in;
    g.output.path = res;
    g.output.overlay = ov;
    g.output.overlay_deflate = true;
    cr_assert(eq(int, finish(tw_gray_submit(rt, &g, &job, &err), &job, &err), TW_OK), "%s",
              err.message);
    got = read0(res, &gw, &gh);
    check_overlay(ov, rgb, 3, got, w, h, false);
    {
        twout_level lv;

        twout_read_level(ov, 1, &lv);
        check_res(&lv, 0.25, w, h, "overlay level 1");
        twout_level_free(&lv);
    }
    free(got);

    /* hmax of a gray slide: a 0 / 1 mask, tinted fully where set */
    tw_mrecon_filter_opts_init(&r);
    r.input.path = gin;
    r.h = 40;
    r.output.path = res;
    r.output.overlay = ov;
    r.output.overlay_deflate = true;
    cr_assert(eq(int, finish(tw_hmax_submit(rt, &r, &job, &err), &job, &err), TW_OK), "%s",
              err.message);
    got = read0(res, &gw, &gh);
    {
        int64_t set = 0;

        for (int64_t i = 0; i < w * h; i++)
            set += got[i] != 0;
        cr_assert(set > 0 && set < w * h, "hmax found %ld maxima", (long)set);
    }
    check_overlay(ov, gray, 1, got, w, h, true);
    free(got);
    free(rgb);
    free(gray);
    tw_runtime_destroy(rt);
    twtest_rmtree(dir);
    free(in);
    free(gin);
    free(res);
    free(ov);
    free(dir);
}

Test(outputs, resolution_follows_the_level_read)
{
    /* The output's resolution tags are the input's mpp times the downsample of the level read
     * (a region keeps it), scaled on each reduced level by its size: on the main output, on
     * the overlay and on a secondary output (EDT indices); an input without mpp gives none. */
    char *dir = twtest_tmpdir();
    char *in = twtest_path(dir, "in.tif"), *plain = twtest_path(dir, "plain.tif"),
         *out = twtest_path(dir, "out.tif"), *ov = twtest_path(dir, "ov.tif"),
         *idx = twtest_path(dir, "idx.tif");
    const int64_t w = 300, h = 200;
    uint8_t *img = twout_image(w, h, 1, TW_U8, 9, false);
    tw_runtime *rt = runtime("32x32", "64x64");
    tw_convert_opts o;
    tw_gray_opts g;
    tw_edt_opts e;
    tw_job *job = NULL;
    tw_error err = {0};
    twout_level lv;
    int n;

    twout_write_input(in, img, w, h, 1, TW_U8, 3, 0.25);
    twout_write_input(plain, img, w, h, 1, TW_U8, 1, 0);

    /* convert level 1 (downsample 2): mpp 0.5 on level 0, 1.0 on level 1, ... */
    tw_convert_opts_init(&o);
    o.input.path = in;
    o.input.level = 1;
    o.output.path = out;
    o.output.pyramid = true;
    cr_assert(eq(int, convert(rt, &o, &err), TW_OK), "%s", err.message);
    n = twout_level_count(out, NULL);
    cr_assert(n >= 2);
    for (int l = 0; l < n; l++) {
        twout_read_level(out, l, &lv);
        check_res(&lv, 0.5, 150, 100, "convert --level 1");
        twout_level_free(&lv);
    }
    /* a region of level 2 (downsample 4) */
    o.input.level = 2;
    o.input.x = 10;
    o.input.y = 5;
    o.input.w = 40;
    o.input.h = 30;
    o.output.pyramid = false;
    cr_assert(eq(int, convert(rt, &o, &err), TW_OK), "%s", err.message);
    twout_read_level(out, 0, &lv);
    cr_assert(eq(i64, lv.w, 40));
    check_res(&lv, 1.0, 40, 30, "region of level 2");
    twout_level_free(&lv);

    /* gray of level 1 with an overlay */
    tw_gray_opts_init(&g);
    g.input.path = in;
    g.input.level = 1;
    g.output.path = out;
    g.output.overlay = ov;
    cr_assert(eq(int, finish(tw_gray_submit(rt, &g, &job, &err), &job, &err), TW_OK), "%s",
              err.message);
    for (int l = 0; l < twout_level_count(ov, NULL); l++) {
        twout_read_level(ov, l, &lv);
        check_res(&lv, 0.5, 150, 100, "overlay of level 1");
        twout_level_free(&lv);
    }

    /* EDT of level 1: the distances and the indices (a secondary output) */
    tw_edt_opts_init(&e);
    e.input.path = in;
    e.input.level = 1;
    e.threshold = 128;
    e.output.path = out;
    e.indices_path = idx;
    cr_assert(eq(int, finish(tw_edt_submit(rt, &e, &job, &err), &job, &err), TW_OK), "%s",
              err.message);
    twout_read_level(out, 0, &lv);
    check_res(&lv, 0.5, 150, 100, "edt");
    twout_level_free(&lv);
    twout_read_level(idx, 0, &lv);
    check_res(&lv, 0.5, 150, 100, "edt indices");
    twout_level_free(&lv);

    /* no mpp in: no resolution out */
    tw_convert_opts_init(&o);
    o.input.path = plain;
    o.output.path = out;
    o.output.pyramid = true;
    cr_assert(eq(int, convert(rt, &o, &err), TW_OK), "%s", err.message);
    twout_read_level(out, 1, &lv);
    check_res(&lv, 0, w, h, "no input mpp");
    twout_level_free(&lv);

    free(img);
    tw_runtime_destroy(rt);
    twtest_rmtree(dir);
    free(in);
    free(plain);
    free(out);
    free(ov);
    free(idx);
    free(dir);
}

Test(outputs, bad_output_options_leave_nothing)
{
    /* Options the output cannot honour fail at submission with one line naming the problem,
     * and leave no file: a quality without JPEG, JPEG for 16-bit samples and for a mask, an
     * overlay of a copy, a copy with a threshold, an overlay over the input or the output. */
    char *dir = twtest_tmpdir();
    char *in = twtest_path(dir, "in.tif"), *in16 = twtest_path(dir, "in16.tif"),
         *out = twtest_path(dir, "out.tif"), *ov = twtest_path(dir, "ov.tif");
    uint8_t *img = twout_image(64, 48, 1, TW_U8, 1, false);
    uint8_t *img16 = twout_image(64, 48, 1, TW_U16, 1, false);
    tw_runtime *rt = runtime("32x32", "64x64");
    tw_convert_opts o;
    tw_gray_opts g;
    tw_job *job = NULL;
    tw_error err = {0};

    twout_write_input(in, img, 64, 48, 1, TW_U8, 1, 0);
    twout_write_input(in16, img16, 64, 48, 1, TW_U16, 1, 0);

    tw_convert_opts_init(&o);
    o.input.path = in;
    o.output.path = out;
    o.output.quality = 80;
    cr_assert(eq(int, tw_convert_submit(rt, &o, &job, &err), TW_E_INVALID));
    cr_assert(strstr(err.message, "JPEG") != NULL && strchr(err.message, '\n') == NULL, "%s",
              err.message);

    tw_convert_opts_init(&o);
    o.input.path = in16;
    o.output.path = out;
    o.output.compression = TW_COMPRESS_JPEG;
    o.output.compression_set = true;
    cr_assert(eq(int, tw_convert_submit(rt, &o, &job, &err), TW_E_INVALID));
    cr_assert(strstr(err.message, "8-bit") != NULL, "%s", err.message);

    tw_convert_opts_init(&o);
    o.input.path = in;
    o.output.path = out;
    o.output.overlay = ov;
    cr_assert(eq(int, tw_convert_submit(rt, &o, &job, &err), TW_E_INVALID));
    cr_assert(strstr(err.message, "overlay") != NULL, "%s", err.message);

    tw_convert_opts_init(&o);
    o.input.path = in;
    o.input.threshold_mode = TW_THRESHOLD_OTSU;
    o.output.path = out;
    cr_assert(eq(int, tw_convert_submit(rt, &o, &job, &err), TW_E_INVALID));
    cr_assert(strstr(err.message, "threshold") != NULL, "%s", err.message);

    tw_gray_opts_init(&g);
    g.input.path = in;
    g.input.threshold_mode = TW_THRESHOLD_VALUE;
    g.input.threshold = 100;
    g.output.path = out;
    g.output.compression = TW_COMPRESS_JPEG;
    g.output.compression_set = true;
    cr_assert(eq(int, tw_gray_submit(rt, &g, &job, &err), TW_E_INVALID));
    cr_assert(strstr(err.message, "mask") != NULL, "%s", err.message);

    tw_gray_opts_init(&g);
    g.input.path = in;
    g.output.path = out;
    g.output.overlay = in;
    cr_assert(eq(int, tw_gray_submit(rt, &g, &job, &err), TW_E_INVALID));
    cr_assert(strstr(err.message, "overwrite the input") != NULL, "%s", err.message);
    g.output.overlay = out;
    cr_assert(eq(int, tw_gray_submit(rt, &g, &job, &err), TW_E_INVALID));
    cr_assert(strstr(err.message, "output itself") != NULL, "%s", err.message);

    /* only the two inputs: no output, no temporary file */
    cr_assert(eq(int, twtest_count_entries(dir), 2));
    free(img);
    free(img16);
    tw_runtime_destroy(rt);
    twtest_rmtree(dir);
    free(in);
    free(in16);
    free(out);
    free(ov);
    free(dir);
}

Test(outputs, convert_streams_in_bounded_memory)
{
    /* convert keeps a window of tiles in flight: the runtime's tile memory peaks at a few
     * tiles per worker, not the image (a 2048 x 2048 RGB copy in 128 x 128 tiles, 12 MB, with
     * a pyramid). */
    char *dir = twtest_tmpdir();
    char *in = twtest_path(dir, "in.tif"), *out = twtest_path(dir, "out.tif");
    const int64_t w = 2048, h = 2048;
    uint8_t *img = twout_image(w, h, 3, TW_U8, 2, true);
    tw_runtime *rt = runtime("128x128", "128x128");
    tw_convert_opts o;
    tw_error err = {0};
    tw_memory_info mi;
    const int64_t tile_bytes = 128 * 128 * 3;

    twout_write_input(in, img, w, h, 3, TW_U8, 1, 0);
    tw_convert_opts_init(&o);
    o.input.path = in;
    o.output.path = out;
    o.output.pyramid = true;
    o.output.compression = TW_COMPRESS_NONE;
    o.output.compression_set = true;
    cr_assert(eq(int, convert(rt, &o, &err), TW_OK), "%s", err.message);
    cr_assert(eq(int, tw_runtime_get_memory(rt, &mi), TW_OK));
    /* window: 2 per worker + 2 = 6 pipelines of one tile each */
    cr_assert(mi.host_peak <= 8 * tile_bytes, "tile memory peaked at %ld bytes (%ld tiles)",
              (long)mi.host_peak, (long)(mi.host_peak / tile_bytes));
    twout_check_pyramid(out, img, w, h, 3, TW_U8, TWOUT_MEAN);
    free(img);
    tw_runtime_destroy(rt);
    twtest_rmtree(dir);
    free(in);
    free(out);
    free(dir);
}

Test(outputs, writer_takes_levels_in_any_order)
{
    /* tw_writer_write_tile takes the tiles of a later level before the earlier ones are
     * complete (they wait in the scratch file, zstd-packed for LZW and JPEG): the last level
     * first, then the others interleaved backwards. Every codec and both layouts read back
     * exactly (JPEG: within its tolerance), and no scratch file is left. */
    static const tw_compression comps[] = {TW_COMPRESS_NONE, TW_COMPRESS_DEFLATE,
                                           TW_COMPRESS_ZSTD, TW_COMPRESS_LZW, TW_COMPRESS_JPEG};
    const int64_t w = 150, h = 100;

    for (size_t ci = 0; ci < 5; ci++)
        for (int layout = 0; layout < 2; layout++) {
            char *dir = twtest_tmpdir();
            char *out = twtest_path(dir, "w.tif");
            uint8_t *lv[3];
            int64_t lw[3], lh[3];
            tw_writer_opts o;
            tw_writer *wr = NULL;
            tw_error err = {0};

            lv[0] = twout_image(w, h, 3, TW_U8, 40 + ci, true);
            lw[0] = w;
            lh[0] = h;
            for (int l = 1; l < 3; l++) {
                lv[l] = twout_reduce(lv[l - 1], lw[l - 1], lh[l - 1], 3, TW_U8, TWOUT_MEAN);
                lw[l] = (lw[l - 1] + 1) / 2;
                lh[l] = (lh[l - 1] + 1) / 2;
            }
            tw_writer_opts_init(&o);
            o.w = w;
            o.h = h;
            o.channels = 3;
            o.tile_w = o.tile_h = 16;
            o.n_levels = 3;
            o.compression = comps[ci];
            o.layout = (tw_layout)layout;
            cr_assert(eq(int, tw_writer_open(out, &o, &wr, &err), TW_OK), "%s", err.message);
            for (int l = 2; l >= 0; l--) {
                const int64_t tx_n = (lw[l] + 15) / 16, n = tx_n * ((lh[l] + 15) / 16);

                /* all of the last level, then levels 1 and 0 backwards */
                for (int64_t k = n - 1; k >= 0; k--)
                    cr_assert(eq(int,
                                 tw_writer_write_tile(wr, l, k % tx_n, k / tx_n,
                                                      lv[l] + ((k / tx_n) * 16 * lw[l] +
                                                               (k % tx_n) * 16) * 3,
                                                      (size_t)lw[l] * 3, &err),
                                 TW_OK),
                              "%s", err.message);
            }
            cr_assert(eq(int, tw_writer_close(wr, &err), TW_OK), "%s", err.message);
            cr_assert(eq(int, twout_level_count(out, NULL), 3));
            for (int l = 0; l < 3; l++) {
                twout_level r;

                twout_read_level(out, l, &r);
                cr_assert(eq(i64, r.w, lw[l]));
                if (comps[ci] == TW_COMPRESS_JPEG) {
                    int mx;
                    double mean;

                    u8_error(r.px, lv[l], (size_t)(lw[l] * lh[l] * 3), &mx, &mean);
                    cr_assert(mx <= JPEG_RGB_MAX && mean <= JPEG_RGB_MEAN,
                              "JPEG level %d: max %d mean %.3f", l, mx, mean);
                } else {
                    cr_assert(first_diff(r.px, lv[l], (size_t)(lw[l] * lh[l] * 3)) < 0,
                              "codec %d layout %d level %d differs", (int)comps[ci], layout, l);
                }
                twout_level_free(&r);
            }
            cr_assert(eq(int, twtest_count_entries(dir), 1), "scratch or temporary file left");
            for (int l = 0; l < 3; l++)
                free(lv[l]);
            twtest_rmtree(dir);
            free(out);
            free(dir);
        }
}
