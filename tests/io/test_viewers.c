/* SPDX-License-Identifier: MIT */
/* tilewave tests: written outputs opened by OpenSlide and by the vips command line tools. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "twtest.h"
#include "twtest_out.h"
#include "twtest_rt.h"

/* io.description: "aperio" (the default: 8-bit page outputs described in Aperio's form) or
 * "plain" (generic TIFF). */
static tw_runtime *
runtime_described(const char *description)
{
    const char *const kv[] = {"runtime.gpus", "none", "runtime.cpu_workers", "2", "io.tiff_tile",
                              "64x64", "tile.size", "96x96", "io.description", description,
                              NULL};

    twtest_quiet_logs();
    return twtest_runtime_kv_ok(true, kv);
}

static tw_runtime *
runtime(void)
{
    return runtime_described("aperio");
}

/* Copy `in` into `out` through convert with the output options given. */
static void
convert(tw_runtime *rt, const char *in, const char *out, tw_compression comp, tw_layout layout)
{
    tw_convert_opts o;
    tw_job *job = NULL;
    tw_error err = {0};
    tw_status st;

    tw_convert_opts_init(&o);
    o.input.path = in;
    o.output.path = out;
    o.output.compression = comp;
    o.output.compression_set = true;
    o.output.layout = layout;
    o.output.layout_set = true;
    o.output.pyramid = true;
    st = tw_convert_submit(rt, &o, &job, &err);
    cr_assert(eq(int, st, TW_OK), "%s", err.message);
    st = tw_job_wait(job, -1);
    cr_assert(eq(int, st, TW_OK), "%s", tw_job_get_error(job));
    tw_job_destroy(job);
}

static char *
prop_or_none(const tw_slide *s, const char *name)
{
    const char *v = tw_slide_get_property(s, name);

    return (char *)(v ? v : "none");
}

/* `vendor`: "aperio" (then with OpenSlide's mpp of 0.5, the input's) or
 * "generic-tiff" (no mpp: OpenSlide 3.4 derives none from resolution tags). */
static void
openslide_matches_libtiff(const char *path, int ch, const char *vendor, const char *what)
{
    tw_slide *s = NULL;
    tw_error err = {0};
    int n = twout_level_count(path, NULL);
    bool aperio = strcmp(vendor, "aperio") == 0;

    cr_assert(eq(int, tw_slide_open(path, TW_READER_OPENSLIDE, &s, &err), TW_OK), "%s",
              err.message);
    cr_assert(eq(str, (char *)tw_slide_get_format(s), (char *)vendor));
    cr_assert(eq(str, prop_or_none(s, "openslide.mpp-x"), aperio ? "0.5" : "none"), "%s", what);
    cr_assert(eq(str, prop_or_none(s, "openslide.mpp-y"), aperio ? "0.5" : "none"), "%s", what);
    cr_assert(eq(int, tw_slide_get_level_count(s), n));
    cr_assert(eq(int, tw_slide_get_channels(s), 3));
    for (int l = 0; l < n; l++) {
        twout_level lv;
        tw_level_info li;
        uint8_t *got;

        twout_read_level(path, l, &lv);
        cr_assert(eq(int, tw_slide_get_level(s, l, &li), TW_OK));
        cr_assert(eq(i64, li.w, lv.w));
        cr_assert(eq(i64, li.h, lv.h));
        cr_assert(eq(int, li.tile_w, (int)lv.tile_w));
        got = malloc((size_t)(lv.w * lv.h) * 3);
        cr_assert(eq(int,
                     tw_slide_read_region(s, l, 0, 0, lv.w, lv.h, got, (size_t)lv.w * 3, &err),
                     TW_OK),
                  "%s", err.message);
        /* OpenSlide decodes the same tiles (libtiff, libjpeg) to RGB: gray repeated */
        for (int64_t i = 0; i < lv.w * lv.h; i++)
            for (int c = 0; c < 3; c++)
                cr_assert(eq(u8, got[i * 3 + c], lv.px[i * ch + (ch == 3 ? c : 0)]),
                          "%s level %d pixel (%ld, %ld) channel %d", what, l, (long)(i % lv.w),
                          (long)(i / lv.w), c);
        free(got);
        twout_level_free(&lv);
    }
    tw_slide_close(s);
}

Test(viewers, openslide_reads_the_page_pyramid)
{
    /* The page-based pyramid of an 8-bit output (RGB deflate, RGB JPEG, gray deflate) opens
     * in OpenSlide as aperio, with the input's mpp as openslide.mpp-x/-y (docs/io.md,
     * "Resolution and metadata"), or as generic-tiff with io.description=plain, with every
     * level, their sizes and tiles, and read_region of each whole level equals the pixels
     * libtiff decodes from the file. tilewave reads it back through libtiff. */
    char *dir = twtest_tmpdir();
    char *rgb = twtest_path(dir, "rgb.tif"), *gray = twtest_path(dir, "gray.tif"),
         *out = twtest_path(dir, "out.tif");
    const int64_t w = 520, h = 390;
    uint8_t *img = twout_image(w, h, 3, TW_U8, 21, true);
    uint8_t *gimg = twout_image(w, h, 1, TW_U8, 22, false);
    tw_runtime *rt = runtime();

    twout_write_input(rgb, img, w, h, 3, TW_U8, 1, 0.5);
    twout_write_input(gray, gimg, w, h, 1, TW_U8, 1, 0.5);
    convert(rt, rgb, out, TW_COMPRESS_DEFLATE, TW_LAYOUT_TIFF);
    cr_assert(eq(int, twout_level_count(out, NULL), 3)); /* down to 130 x 98 */
    openslide_matches_libtiff(out, 3, "aperio", "RGB deflate");
    convert(rt, rgb, out, TW_COMPRESS_JPEG, TW_LAYOUT_TIFF);
    openslide_matches_libtiff(out, 3, "aperio", "RGB JPEG");
    convert(rt, gray, out, TW_COMPRESS_DEFLATE, TW_LAYOUT_TIFF);
    openslide_matches_libtiff(out, 1, "aperio", "gray deflate");
    {
        tw_slide *s = NULL;
        tw_error err = {0};

        cr_assert(eq(int, tw_slide_open(out, TW_READER_AUTO, &s, &err), TW_OK), "%s",
                  err.message);
        cr_assert(eq(int, tw_slide_get_reader(s), TW_READER_TIFF));
        cr_assert(eq(int, tw_slide_get_channels(s), 1));
        tw_slide_close(s);
    }
    tw_runtime_destroy(rt);
    rt = runtime_described("plain");
    convert(rt, rgb, out, TW_COMPRESS_DEFLATE, TW_LAYOUT_TIFF);
    openslide_matches_libtiff(out, 3, "generic-tiff", "RGB deflate, plain");
    convert(rt, gray, out, TW_COMPRESS_DEFLATE, TW_LAYOUT_TIFF);
    openslide_matches_libtiff(out, 1, "generic-tiff", "gray deflate, plain");
    free(img);
    free(gimg);
    tw_runtime_destroy(rt);
    twtest_rmtree(dir);
    free(rgb);
    free(gray);
    free(out);
    free(dir);
}

/* vips opens `src` (with loader options) as a w x h image of `bands` bands whose raw pixels
 * equal `px`. */
static void
vips_matches(const char *src, const char *tmp, const twout_level *lv)
{
    const size_t n = (size_t)(lv->w * lv->h) * (size_t)lv->channels * tw_sample_size(lv->type);
    size_t got_n = 0;
    uint8_t *got;

    cr_assert(eq(i64, twout_vips_field(src, "width"), lv->w), "%s", src);
    cr_assert(eq(i64, twout_vips_field(src, "height"), lv->h), "%s", src);
    cr_assert(eq(i64, twout_vips_field(src, "bands"), lv->channels), "%s", src);
    got = twout_vips_raw(src, tmp, &got_n);
    cr_assert_not_null(got, "vips rawsave %s failed", src);
    cr_assert(eq(sz, got_n, n), "%s", src);
    cr_assert(memcmp(got, lv->px, n) == 0, "%s: vips's pixels differ from libtiff's", src);
    free(got);
}

typedef struct vcase {
    int channels;
    tw_sample_type type;
    tw_compression comp;
    tw_layout layout;
} vcase;

Test(viewers, vips_reads_tiff_and_ome_outputs)
{
    /* vips (the CLI, as users and CI have it) opens every level of tiff-layout outputs as
     * pages ([page=N], n-pages = the level count) and of OME outputs as SubIFDs ([subifd=N])
     * with the right size and bands, and its pixels equal libtiff's: RGB u8 deflate and JPEG,
     * gray u16 zstd, float32 LZW. With io.description=plain: 8-bit page outputs described in
     * Aperio's form (the default) are slides to vips, read through OpenSlide
     * (tests/py/crosscheck_resolution.py checks their resolution there). */
    static const vcase cases[] = {
        {3, TW_U8, TW_COMPRESS_DEFLATE, TW_LAYOUT_TIFF},
        {3, TW_U8, TW_COMPRESS_JPEG, TW_LAYOUT_OME},
        {1, TW_U16, TW_COMPRESS_ZSTD, TW_LAYOUT_TIFF},
        {1, TW_F32, TW_COMPRESS_LZW, TW_LAYOUT_OME},
        {1, TW_U8, TW_COMPRESS_JPEG, TW_LAYOUT_TIFF},
    };
    char *dir, *in, *out;
    tw_runtime *rt;

    if (!twout_have_vips())
        cr_skip_test("the vips command line tools are not installed (apt-get install "
                     "libvips-tools); outputs not checked with vips");
    dir = twtest_tmpdir();
    in = twtest_path(dir, "in.tif");
    out = twtest_path(dir, "out.tif");
    rt = runtime_described("plain");
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const vcase *c = &cases[k];
        const int64_t w = 300, h = 260;
        uint8_t *img = twout_image(w, h, c->channels, c->type, 30 + k,
                                   c->comp == TW_COMPRESS_JPEG);
        int n;
        bool ome = false;

        twout_write_input(in, img, w, h, c->channels, c->type, 1, 0.25);
        convert(rt, in, out, c->comp, c->layout);
        n = twout_level_count(out, &ome);
        cr_assert(eq(int, n, 3));
        cr_assert(eq(int, ome, c->layout == TW_LAYOUT_OME));
        /* pages: the main chain only; the OME file has one page */
        cr_assert(eq(i64, twout_vips_field(out, "n-pages"), ome ? 1 : n));
        for (int l = 0; l < n; l++) {
            twout_level lv;
            char src[4200];

            twout_read_level(out, l, &lv);
            if (l == 0)
                snprintf(src, sizeof src, "%s", out);
            else if (ome)
                snprintf(src, sizeof src, "%s[subifd=%d]", out, l - 1);
            else
                snprintf(src, sizeof src, "%s[page=%d]", out, l);
            vips_matches(src, dir, &lv);
            twout_level_free(&lv);
        }
        free(img);
    }
    tw_runtime_destroy(rt);
    twtest_rmtree(dir);
    free(in);
    free(out);
    free(dir);
}
