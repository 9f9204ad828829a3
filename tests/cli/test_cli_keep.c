/* SPDX-License-Identifier: MIT */
/* tilewave tests: each input tile decoded once (runtime.keep_input), the same bytes wherever
 * the input is kept between passes, and the --summary io line that says so. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tilewave.h"
#include "twtest_cli.h"
#include "twtest_filter.h"

TWTEST_CLI_SUITE(cli_keep, .timeout = TWTEST_TIMEOUT(240));

/* The count N of the summary's "(T tiles, N decoded more than once)", -1 when absent. */
static long
redecoded(const char *err)
{
    const char *p = strstr(err, " decoded more than once)");
    long n = -1;

    if (!p)
        return -1;
    while (p > err && p[-1] >= '0' && p[-1] <= '9')
        p--;
    sscanf(p, "%ld", &n);
    return n;
}

/* A 640x480 RGB sample slide (256x256 file tiles) and its luminance. */
static char *
sample(uint8_t **gray, int64_t *w, int64_t *h)
{
    char *s = twtest_path(dir, "s.tif"), *g = twtest_path(dir, "g.tif");

    OK_RUN("sample", s, "--size", "640x480", "--quiet");
    OK_RUN("gray", s, "-o", g, "--quiet");
    uint8_t *px = twtest_read_image(g, w, h, NULL, NULL);

    cr_assert(px != NULL && w[0] == 640 && h[0] == 480, "gray of the sample");
    *gray = px;
    free(g);
    return s;
}

Test(cli_keep, area_filters_give_the_same_bytes_wherever_the_input_is_kept)
{
    /* area-close of an RGB slide in 256x256 tiles (3x2, two passes) equals the naive
     * closing of its luminance with the input kept in host memory, in a scratch file, asked on
     * a GPU (none here: host memory), or decoded again; only the last decodes tiles twice,
     * and the summary says where the input was. */
    static const char *const keep[][2] = {{"auto", "kept in host memory"},
                                          {"host", "kept in host memory"},
                                          {"gpu", "kept in host memory"},
                                          {"scratch", "kept in a scratch file"},
                                          {"reread", "decoded again in the second pass"}};
    char *out = twtest_path(dir, "o.tif"), set[64];
    int64_t w, h;
    uint8_t *gray, *want, *got;
    char *s = sample(&gray, &w, &h);

    want = malloc((size_t)(w * h));
    twtest_attr_filter_naive(gray, TW_U8, (int)w, (int)h, 4, TWTEST_AREA, 30, 1, want);
    for (size_t k = 0; k < sizeof keep / sizeof keep[0]; k++) {
        twtest_run r;

        snprintf(set, sizeof set, "runtime.keep_input=%s", keep[k][0]);
        r = RUN("area-close", s, "--area", "30", "--tile", "256x256", "-o", out, "--summary",
                "--set", set, "--gpus", "none");
        cr_assert(eq(int, r.status, 0), "%s: %s", keep[k][0], r.err);
        cr_assert(strstr(r.err, keep[k][1]) != NULL, "%s: %s", keep[k][0], r.err);
        if (strcmp(keep[k][0], "reread") == 0)
            cr_assert(gt(long, redecoded(r.err), 0), "%s", r.err);
        else
            cr_assert(eq(long, redecoded(r.err), 0), "%s: %s", keep[k][0], r.err);
        twtest_run_free(&r);
        got = twtest_read_image(out, &w, &h, NULL, NULL);
        cr_assert(got && w == 640 && h == 480);
        cr_assert(eq(int, memcmp(got, want, (size_t)(w * h)), 0), "%s: the pixels differ",
                  keep[k][0]);
        free(got);
        remove(out);
    }
    free(want);
    free(gray);
    free(s);
    free(out);
}

Test(cli_keep, a_small_budget_keeps_the_input_in_a_scratch_file)
{
    /* Under --mem-budget 512K the 300 KB luminance does not fit a quarter of the budget: the
     * automatic choice is the scratch file, with the bytes of the run without a budget. */
    char *out = twtest_path(dir, "o.tif"), *ref = twtest_path(dir, "ref.tif");
    int64_t w, h;
    uint8_t *gray, *a, *b;
    char *s = sample(&gray, &w, &h);
    twtest_run r;

    OK_RUN("area-open", s, "--area", "50", "--tile", "256x256", "-o", ref, "--quiet");
    r = RUN("area-open", s, "--area", "50", "--tile", "256x256", "-o", out, "--summary",
            "--mem-budget", "512K");
    cr_assert(eq(int, r.status, 0), "%s", r.err);
    cr_assert(strstr(r.err, "kept in a scratch file") != NULL, "%s", r.err);
    cr_assert(eq(long, redecoded(r.err), 0), "%s", r.err);
    twtest_run_free(&r);
    a = twtest_read_image(ref, &w, &h, NULL, NULL);
    b = twtest_read_image(out, &w, &h, NULL, NULL);
    cr_assert(a && b);
    cr_assert(eq(int, memcmp(a, b, (size_t)(w * h)), 0));
    free(a);
    free(b);
    free(gray);
    free(s);
    free(out);
    free(ref);
}

Test(cli_keep, edt_decodes_each_tile_once)
{
    /* edt --threshold otsu of an RGB slide in 256x256 tiles: the histogram pass keeps its
     * tiles for the scan (in memory, or a scratch file) and the scan keeps its flags for the
     * band loads, so no tile is decoded twice; the distances are the bytes of the run that
     * decodes the input three times (reread, the behaviour before). Also with a plain
     * threshold and the u16 format. */
    static const char *const keep[] = {"auto", "scratch", "reread"};
    static const char *const thr[] = {"otsu", "150"};
    char *out = twtest_path(dir, "d.tif"), *ref = twtest_path(dir, "ref.tif"), set[64];
    int64_t w, h;
    uint8_t *gray;
    char *s = sample(&gray, &w, &h);

    for (int t = 0; t < 2; t++) {
        OK_RUN("edt", s, "--threshold", thr[t], "--invert", "--tile", "256x256", "-o", ref,
               "--set", "runtime.keep_input=reread", "--format", t ? "u16" : "f32", "--quiet");
        void *want = twtest_read_image(ref, &w, &h, NULL, NULL);

        cr_assert(want != NULL);
        for (int k = 0; k < 2; k++) {
            twtest_run r;
            void *got;

            snprintf(set, sizeof set, "runtime.keep_input=%s", keep[k]);
            r = RUN("edt", s, "--threshold", thr[t], "--invert", "--tile", "256x256", "-o", out,
                    "--set", set, "--format", t ? "u16" : "f32", "--summary");
            cr_assert(eq(int, r.status, 0), "%s", r.err);
            cr_assert(eq(long, redecoded(r.err), 0), "%s %s: %s", thr[t], keep[k], r.err);
            twtest_run_free(&r);
            got = twtest_read_image(out, &w, &h, NULL, NULL);
            cr_assert(got != NULL);
            cr_assert(eq(int, memcmp(got, want, (size_t)(w * h) * (t ? 2 : 4)), 0), "%s %s",
                      thr[t], keep[k]);
            free(got);
            remove(out);
        }
        free(want);
        remove(ref);
    }
    free(gray);
    free(s);
    free(out);
    free(ref);
}

Test(cli_keep, default_tiles_follow_the_file_tiles)
{
    /* A 2000x1500 slide stored in 240x240 tiles (as Aperio's): with the default tile size
     * (1024) the area opening takes tiles of 960x960, a multiple of the file's, and decodes no
     * file tile twice; an explicit --tile 1024x1024 keeps 1024 and decodes the file tiles it
     * straddles more than once. Both give the same pixels. */
    char *s = twtest_path(dir, "s.tif"), *s240 = twtest_path(dir, "s240.tif"),
         *a = twtest_path(dir, "a.tif"), *b = twtest_path(dir, "b.tif");
    int64_t w, h;
    uint8_t *pa, *pb;
    twtest_run r;

    OK_RUN("sample", s, "--size", "2000x1500", "--quiet");
    OK_RUN("convert", s, "-o", s240, "--set", "io.tiff_tile=240x240", "--quiet");
    r = RUN("area-open", s240, "--area", "200", "-o", a, "--summary");
    cr_assert(eq(int, r.status, 0), "%s", r.err);
    cr_assert(strstr(r.err, "tiles of 960x960") != NULL, "%s", r.err);
    cr_assert(eq(long, redecoded(r.err), 0), "%s", r.err);
    twtest_run_free(&r);
    r = RUN("area-open", s240, "--area", "200", "-o", b, "--summary", "--tile", "1024x1024");
    cr_assert(eq(int, r.status, 0), "%s", r.err);
    cr_assert(strstr(r.err, "tiles of 1024x1024") != NULL, "%s", r.err);
    cr_assert(gt(long, redecoded(r.err), 0), "%s", r.err);
    twtest_run_free(&r);
    pa = twtest_read_image(a, &w, &h, NULL, NULL);
    pb = twtest_read_image(b, &w, &h, NULL, NULL);
    cr_assert(pa != NULL && pb != NULL && w == 2000 && h == 1500);
    cr_assert(eq(int, memcmp(pa, pb, (size_t)(w * h)), 0));
    free(pa);
    free(pb);
    free(s);
    free(s240);
    free(a);
    free(b);
}

Test(cli_keep, label_decodes_each_tile_once)
{
    /* label of a thresholded RGB slide and of a 16-bit mask file in 256x256 tiles: pass 1
     * keeps the masks as bits for pass 2, so no tile is decoded twice, and the labels are the
     * bytes of the run that decodes the input again; an image of one tile has one pass. */
    char *ref = twtest_path(dir, "ref.tif"), *out = twtest_path(dir, "l.tif"),
         *m16 = twtest_path(dir, "m16.tif");
    int64_t w, h;
    uint8_t *gray;
    char *s = sample(&gray, &w, &h);
    uint16_t *mask = malloc((size_t)(w * h) * 2);
    tw_error err;

    for (int64_t p = 0; p < w * h; p++)
        mask[p] = gray[p] < 170 ? (uint16_t)(1000 + gray[p]) : 0; /* any nonzero is foreground */
    cr_assert(eq(int, twtest_write_image(m16, mask, w, h, TW_U16, &err), TW_OK), "%s",
              err.message);
    for (int in = 0; in < 2; in++) {
        const char *src = in ? m16 : s;
        twtest_run r;
        uint32_t *a, *b;

        if (in)
            OK_RUN("label", src, "--tile", "256x256", "-o", ref, "--quiet", "--set",
                   "runtime.keep_input=reread");
        else
            OK_RUN("label", src, "--threshold", "170", "--invert", "--tile", "256x256", "-o",
                   ref, "--quiet", "--set", "runtime.keep_input=reread");
        r = in ? RUN("label", src, "--tile", "256x256", "-o", out, "--summary")
               : RUN("label", src, "--threshold", "170", "--invert", "--tile", "256x256", "-o",
                     out, "--summary");
        cr_assert(eq(int, r.status, 0), "%s", r.err);
        cr_assert(eq(long, redecoded(r.err), 0), "input %d: %s", in, r.err);
        cr_assert(strstr(r.err, "kept in host memory") != NULL, "input %d: %s", in, r.err);
        twtest_run_free(&r);
        a = twtest_read_image(ref, &w, &h, NULL, NULL);
        b = twtest_read_image(out, &w, &h, NULL, NULL);
        cr_assert(a != NULL && b != NULL && w == 640 && h == 480);
        cr_assert(eq(int, memcmp(a, b, (size_t)(w * h) * 4), 0), "input %d: labels differ", in);
        free(a);
        free(b);
    }
    free(mask);
    free(gray);
    free(s);
    free(ref);
    free(out);
    free(m16);
}

Test(cli_keep, otsu_pass_keeps_the_gray_image_for_the_reads)
{
    /* fill-holes and label of the RGB slide's hematoxylin above its Otsu threshold, in 256x256
     * tiles: Otsu's pass over the slide keeps the gray image, so the job's reads take it and no
     * tile is decoded twice (the summary counts the pass's decodes); under a host budget it is
     * not kept and every tile is decoded again (the behaviour before). The same bytes either
     * way; the summary says what happened. */
    static const char *const ops[] = {"fill-holes", "label"};
    char *out = twtest_path(dir, "k.tif"), *ref = twtest_path(dir, "kref.tif");
    int64_t w, h;
    uint8_t *gray;
    char *s = sample(&gray, &w, &h);

    for (int o = 0; o < 2; o++) {
        twtest_run r = RUN(ops[o], s, "--gray", "hematoxylin", "--threshold", "otsu", "--tile",
                           "256x256", "-o", ref, "--summary", "--mem-budget", "512M");
        size_t bytes = (size_t)(w * h) * (o ? 4 : 1);
        void *a, *b;

        cr_assert(eq(int, r.status, 0), "%s", r.err);
        cr_assert(eq(long, redecoded(r.err), 6), "%s under a budget: %s", ops[o], r.err);
        twtest_run_free(&r);
        r = RUN(ops[o], s, "--gray", "hematoxylin", "--threshold", "otsu", "--tile", "256x256",
                "-o", out, "--summary");
        cr_assert(eq(int, r.status, 0), "%s", r.err);
        cr_assert(eq(long, redecoded(r.err), 0), "%s: %s", ops[o], r.err);
        cr_assert(strstr(r.err, "(6 tiles, 0 decoded more") != NULL, "%s: %s", ops[o], r.err);
        twtest_run_free(&r);
        a = twtest_read_image(ref, &w, &h, NULL, NULL);
        b = twtest_read_image(out, &w, &h, NULL, NULL);
        cr_assert(a != NULL && b != NULL && w == 640 && h == 480);
        cr_assert(eq(int, memcmp(a, b, bytes), 0), "%s: kept and decoded again differ", ops[o]);
        free(a);
        free(b);
        remove(out);
        remove(ref);
    }
    free(gray);
    free(s);
    free(out);
    free(ref);
}
