/* SPDX-License-Identifier: MIT */
/* tilewave tests: the level chosen by resolution (tw_slide_choose_level, tw_input.mpp) and the
 * k x k area-average reduction, against a naive reference (docs/io.md, "Resolution and
 * metadata"). tests/py/crosscheck_resolution.py checks the same against numpy, OpenSlide,
 * tifffile and vips on real slides. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "twtest.h"
#include "twtest_out.h"
#include "twtest_rt.h"

static char *dir;

static void
setup(void)
{
    twtest_quiet_logs();
    dir = twtest_tmpdir();
}

static void
teardown(void)
{
    twtest_rmtree(dir);
    free(dir);
}

TestSuite(resolution, .init = setup, .fini = teardown);

/* The choice on `s` for mpp (or magnification); asserts it succeeds. */
static tw_level_choice
choose(const tw_slide *s, double mpp, double mag)
{
    tw_level_choice c;
    tw_error err = {0};

    cr_assert(eq(int, tw_slide_choose_level(s, mpp, mag, &c, &err), TW_OK), "%s", err.message);
    return c;
}

static void
choose_fails(const tw_slide *s, double mpp, double mag, const char *msg)
{
    tw_level_choice c;
    tw_error err = {0};

    cr_assert(eq(int, tw_slide_choose_level(s, mpp, mag, &c, &err), TW_E_INVALID),
              "mpp %g magnification %g", mpp, mag);
    cr_assert(strstr(err.message, msg) != NULL, "'%s' lacks '%s'", err.message, msg);
}

Test(resolution, chooses_the_coarsest_level_fine_enough_then_a_whole_factor)
{
    /* A 301 x 203 pyramid of 0.5 mpp (levels 301, 151, 76 wide: downsamples 1, 1.993, 3.961):
     * the level read is the coarsest whose downsample is at most 1.01 times the one asked,
     * reduced by floor(1.01 asked / its downsample) when that is 2 or more; asked finer than
     * level 0, an unknown mpp or objective power, both or neither asked are errors. */
    char *path = twtest_path(dir, "pyr.tif");
    uint8_t *img = twout_image(301, 203, 1, TW_U16, 5, true);
    tw_slide *s = NULL;
    tw_error err = {0};
    tw_level_choice c;

    twout_write_input(path, img, 301, 203, 1, TW_U16, 3, 0.5);
    cr_assert(eq(int, tw_slide_open(path, TW_READER_AUTO, &s, &err), TW_OK), "%s", err.message);
    c = choose(s, 0.5, 0);
    cr_assert(eq(int, c.level, 0));
    cr_assert(eq(int, c.reduce, 1));
    cr_assert(eq(i64, c.w, 301));
    c = choose(s, 0.502, 0); /* within 1%: still level 0, not an error */
    cr_assert(eq(int, c.level, 0));
    c = choose(s, 1.0, 0); /* level 1's 0.9967 um counts as 1 */
    cr_assert(eq(int, c.level, 1));
    cr_assert(eq(int, c.reduce, 1));
    c = choose(s, 1.5, 0);
    cr_assert(eq(int, c.level, 1));
    cr_assert(eq(int, c.reduce, 1));
    c = choose(s, 4.0, 0); /* 8.08 / 3.961: level 2 reduced 2x2 */
    cr_assert(eq(int, c.level, 2));
    cr_assert(eq(int, c.reduce, 2));
    cr_assert(eq(i64, c.w, 38));
    cr_assert(eq(i64, c.h, 26));
    cr_assert(fabs(c.mpp_x - 0.5 * 301.0 / 76.0 * 2) < 1e-12, "%g", c.mpp_x);
    cr_assert(eq(dbl, c.magnification, 0.0));
    c = choose(s, 100.0, 0);
    cr_assert(eq(int, c.level, 2));
    cr_assert(eq(int, c.reduce, 51)); /* 202 / 3.9605 = 51.004 */
    cr_assert(eq(i64, c.w, 2));
    choose_fails(s, 0.49, 0, "finer than level 0");
    choose_fails(s, 0, 5, "objective power of");
    choose_fails(s, 1, 5, "either an mpp or a magnification");
    choose_fails(s, 0, 0, "either an mpp or a magnification");
    choose_fails(s, -1, 0, "either an mpp or a magnification");
    choose_fails(s, NAN, 0, "either an mpp or a magnification");
    choose_fails(s, 1e12, 0, "more than 65535");
    cr_assert(eq(int, tw_slide_choose_level(NULL, 1, 0, &c, &err), TW_E_INVALID));
    cr_assert(eq(int, tw_slide_choose_level(s, 1, 0, NULL, &err), TW_E_INVALID));
    tw_slide_close(s);
    /* no resolution tags: no mpp to choose by, and the message names the file */
    twout_write_input(path, img, 301, 203, 1, TW_U16, 1, 0);
    cr_assert(eq(int, tw_slide_open(path, TW_READER_AUTO, &s, &err), TW_OK), "%s", err.message);
    choose_fails(s, 1, 0, "pixel size (mpp) of");
    choose_fails(s, 1, 0, path);
    tw_slide_close(s);
    free(img);
    free(path);
}

/* The reference: the k x k block at (k x, k y) clipped to the image, its samples summed and
 * divided by their count, rounded half up. */
static uint64_t
naive_mean(const uint8_t *img, int64_t w, int64_t h, int ch, tw_sample_type t, int k, int64_t x,
           int64_t y, int c)
{
    uint64_t sum = 0, n = 0;

    for (int64_t yy = y * k; yy < (y + 1) * k && yy < h; yy++)
        for (int64_t xx = x * k; xx < (x + 1) * k && xx < w; xx++, n++) {
            size_t i = (size_t)((yy * w + xx) * ch + c);

            sum += t == TW_U8 ? img[i] : ((const uint16_t *)(const void *)img)[i];
        }
    return (sum + n / 2) / n;
}

/* convert with input.mpp of a one-level w x h image of mpp 1 (k x k reduction) in tiles of
 * tile x tile; the output equals naive_mean everywhere and the report says level 0, k. */
static void
check_reduction(int64_t w, int64_t h, int ch, tw_sample_type t, int k, int32_t tile)
{
    char *in = twtest_path(dir, "in.tif"), *out = twtest_path(dir, "out.tif");
    uint8_t *img = twout_image(w, h, ch, t, 40 + (uint64_t)k, false);
    const char *const kv[] = {"runtime.gpus", "none", "runtime.cpu_workers", "2", NULL};
    tw_runtime *rt = twtest_runtime_kv_ok(true, kv);
    tw_input_report rep = {0};
    tw_convert_opts o;
    tw_job *job = NULL;
    tw_error err = {0};
    twout_level lv;
    int64_t ow = (w + k - 1) / k, oh = (h + k - 1) / k;

    twout_write_input(in, img, w, h, ch, t, 1, 1.0);
    tw_convert_opts_init(&o);
    o.input.path = in;
    o.input.mpp = (double)k;
    o.input.report = &rep;
    o.output.path = out;
    o.tile_w = o.tile_h = tile;
    cr_assert(eq(int, tw_convert_submit(rt, &o, &job, &err), TW_OK), "%s", err.message);
    cr_assert(eq(int, tw_job_wait(job, -1), TW_OK), "%s", tw_job_get_error(job));
    tw_job_destroy(job);
    cr_assert(eq(int, rep.level, 0));
    cr_assert(eq(int, rep.reduce, k));
    cr_assert(eq(dbl, rep.mpp_x, (double)k));
    twout_read_level(out, 0, &lv);
    cr_assert(eq(i64, lv.w, ow));
    cr_assert(eq(i64, lv.h, oh));
    cr_assert(lv.has_res && lv.resunit == 3 && fabs(1e4 / lv.xres - (double)k) < 1e-6,
              "the output's resolution is %g per unit %d", lv.xres, (int)lv.resunit);
    for (int64_t y = 0; y < oh; y++)
        for (int64_t x = 0; x < ow; x++)
            for (int c = 0; c < ch; c++) {
                size_t i = (size_t)((y * ow + x) * ch + c);
                uint64_t got = t == TW_U8 ? lv.px[i] : ((const uint16_t *)(const void *)lv.px)[i];
                uint64_t want = naive_mean(img, w, h, ch, t, k, x, y, c);

                cr_assert(eq(u64, got, want), "%s k %d tile %d: pixel (%ld, %ld) channel %d",
                          tw_sample_type_name(t), k, (int)tile, (long)x, (long)y, c);
            }
    twout_level_free(&lv);
    tw_runtime_destroy(rt);
    free(img);
    free(in);
    free(out);
}

Test(resolution, reduction_is_the_exact_area_average_for_any_tile)
{
    /* u8 RGB and u16 gray of sizes that are no multiple of k (partial edge blocks average the
     * pixels they hold), k = 2, 3, 7, processing tiles of 5 and 64 pixels: the same bytes as
     * the naive reference, whatever the tiling. */
    static const int ks[] = {2, 3, 7};
    static const int32_t tiles[] = {5, 64};

    for (size_t a = 0; a < 3; a++)
        for (size_t b = 0; b < 2; b++) {
            check_reduction(131, 97, 3, TW_U8, ks[a], tiles[b]);
            check_reduction(120, 83, 1, TW_U16, ks[a], tiles[b]);
        }
}

Test(resolution, level_and_mpp_together_are_refused)
{
    /* tw_input.level with .mpp: TW_E_INVALID naming both, nothing written. */
    char *in = twtest_path(dir, "in.tif"), *out = twtest_path(dir, "out.tif");
    uint8_t *img = twout_image(64, 64, 1, TW_U8, 3, false);
    const char *const kv[] = {"runtime.gpus", "none", "runtime.cpu_workers", "2", NULL};
    tw_runtime *rt = twtest_runtime_kv_ok(true, kv);
    tw_convert_opts o;
    tw_job *job = NULL;
    tw_error err = {0};

    twout_write_input(in, img, 64, 64, 1, TW_U8, 2, 0.5);
    tw_convert_opts_init(&o);
    o.input.path = in;
    o.input.level = 1;
    o.input.mpp = 2;
    o.output.path = out;
    cr_assert(eq(int, tw_convert_submit(rt, &o, &job, &err), TW_E_INVALID));
    cr_assert(strstr(err.message, "a level (1) and an mpp cannot both be given") != NULL, "%s",
              err.message);
    cr_assert(eq(int, twtest_count_entries(dir), 1));
    tw_runtime_destroy(rt);
    free(img);
    free(in);
    free(out);
}
