/* SPDX-License-Identifier: MIT */
/* tilewave tests: --gray, --threshold and --tissue of the op commands on the sample slide. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops_internal.h"
#include "tilewave.h"
#include "twtest_cli.h"

TWTEST_CLI_SUITE(cli_tissue, .timeout = TWTEST_TIMEOUT(180));

/* The sample slide, w x h, in the test's directory. */
static char *
sample(int w, int h)
{
    char *path = twtest_path(dir, "s.tif");
    char size[64];

    snprintf(size, sizeof size, "%dx%d", w, h);
    OK_RUN("sample", path, "--size", size, "--quiet");
    return path;
}

static uint8_t *
read_u8(const char *path, int64_t *w, int64_t *h, int want_channels)
{
    int ch = 0;
    tw_sample_type t = 0;
    uint8_t *px = twtest_read_image(path, w, h, &ch, &t);

    cr_assert(px != NULL, "cannot read %s", path);
    cr_assert(eq(int, ch, want_channels));
    cr_assert(eq(int, (int)t, (int)TW_U8));
    return px;
}

/* Independent double-precision hematoxylin (docs/io.md). */
static int
ref_h(const uint8_t *rgb)
{
    /* inverse of scikit-image's rgb_from_hed, column 0 (hed_from_rgb[:, 0]) */
    static const double d[3] = {1.87798274, -0.06590806, -0.60190736};
    double c = 0;

    for (int i = 0; i < 3; i++)
        c += -log10((rgb[i] < 1 ? 1 : rgb[i]) / 255.0) * d[i];
    c = floor(255.0 * c + 0.5);
    return c < 0 ? 0 : c > 255 ? 255 : (int)c;
}

Test(cli_tissue, hematoxylin_of_the_sample_matches_reference)
{
    /* gray --mode hematoxylin of the sample slide is within 1 of the double formula at every
     * pixel (equal at nearly all), whatever the tile; nuclei are bright. */
    char *s = sample(1000, 700), *out = twtest_path(dir, "h.tif");
    int64_t w, h, w2, h2, off = 0;
    uint8_t *rgb, *g;
    int max = 0;

    OK_RUN("gray", s, "-o", out, "--mode", "hematoxylin", "--tile", "97x61", "--quiet");
    rgb = read_u8(s, &w, &h, 3);
    g = read_u8(out, &w2, &h2, 1);
    cr_assert(w == w2 && h == h2);
    for (int64_t i = 0; i < w * h; i++) {
        int want = ref_h(rgb + 3 * i);
        cr_assert(abs(want - g[i]) <= 1, "pixel %lld: %d want %d", (long long)i, g[i], want);
        off += want != g[i];
        max = g[i] > max ? g[i] : max;
    }
    cr_assert(off * 1000 < w * h);
    cr_assert(max > 150, "no bright nucleus (max %d)", max);
    free(rgb);
    free(g);
    free(s);
    free(out);
}

/* The number after "threshold " in the CLI's input line. */
static int
printed_threshold(const char *err)
{
    const char *p = strstr(err, "threshold ");

    cr_assert(p != NULL, "no threshold printed: %s", err);
    return atoi(p + 10);
}

Test(cli_tissue, otsu_threshold_of_the_whole_level)
{
    /* --threshold otsu uses Otsu's threshold of the hematoxylin channel of every pixel of the
     * input's level (level 0 here; level 1 with --level 1), printed in the summary; the mask
     * is 255 exactly where the hematoxylin is above it. */
    char *s = sample(2560, 2048), *m = twtest_path(dir, "m.tif");
    char *h[2] = {twtest_path(dir, "h0.tif"), twtest_path(dir, "h1.tif")};

    for (int lv = 0; lv < 2; lv++) {
        char level[8], want[32];
        uint64_t hist[256] = {0};
        int64_t w, hh, mw, mh;
        uint8_t *g, *mk;
        int t;

        snprintf(level, sizeof level, "%d", lv);
        snprintf(want, sizeof want, "(otsu of level %d)", lv);
        OK_RUN("gray", s, "-o", h[lv], "--mode", "hematoxylin", "--level", level, "--quiet");
        twtest_run r = RUN("gray", s, "-o", m, "--mode", "hematoxylin", "--level", level,
                           "--threshold", "otsu");
        cr_assert(eq(int, r.status, 0), "%s", r.err);
        cr_assert(strstr(r.err, want) != NULL, "%s", r.err);
        t = printed_threshold(r.err);
        twtest_run_free(&r);
        g = read_u8(h[lv], &w, &hh, 1);
        for (int64_t i = 0; i < w * hh; i++)
            hist[g[i]]++;
        cr_assert(eq(i64, (int64_t)t, twi_otsu(hist, 256)));
        mk = read_u8(m, &mw, &mh, 1);
        cr_assert(eq(i64, mw, w));
        for (int64_t i = 0; i < w * hh; i++)
            cr_assert(eq(u8, mk[i], g[i] > t ? 255 : 0));
        free(g);
        free(mk);
    }
    free(s);
    free(m);
    free(h[0]);
    free(h[1]);
}

/* Compare two files pixel for pixel. */
static void
same_image(const char *a, const char *b)
{
    int64_t w, h, w2, h2;
    uint8_t *pa = read_u8(a, &w, &h, 1), *pb = read_u8(b, &w2, &h2, 1);

    cr_assert(w == w2 && h == h2);
    cr_assert(eq(int, memcmp(pa, pb, (size_t)(w * h)), 0), "%s and %s differ", a, b);
    free(pa);
    free(pb);
}

Test(cli_tissue, ops_take_gray_and_threshold_from_the_slide)
{
    /* area-open and fill-holes with --gray hematoxylin --threshold 100 on the slide equal the
     * same operations on the mask `gray --mode hematoxylin --threshold 100` wrote; EDT with
     * --gray hematoxylin equals EDT of the hematoxylin image. */
    char *s = sample(900, 600), *mask = twtest_path(dir, "mask.tif");
    char *hh = twtest_path(dir, "hh.tif");
    char *a1 = twtest_path(dir, "a1.tif"), *a2 = twtest_path(dir, "a2.tif");
    char *e1 = twtest_path(dir, "e1.tif"), *e2 = twtest_path(dir, "e2.tif");

    OK_RUN("gray", s, "-o", mask, "--mode", "hematoxylin", "--threshold", "100", "--quiet");
    OK_RUN("gray", s, "-o", hh, "--mode", "hematoxylin", "--quiet");
    OK_RUN("area-open", s, "-o", a1, "--area", "200", "--gray", "hematoxylin", "--threshold",
           "100", "--tile", "128", "--quiet");
    OK_RUN("area-open", mask, "-o", a2, "--area", "200", "--tile", "128", "--quiet");
    same_image(a1, a2);
    OK_RUN("fill-holes", s, "-o", a1, "--gray", "hematoxylin", "--threshold", "100", "--quiet");
    OK_RUN("fill-holes", mask, "-o", a2, "--quiet");
    same_image(a1, a2);
    OK_RUN("edt", s, "-o", e1, "--gray", "hematoxylin", "--threshold", "100", "--format", "u16",
           "--quiet");
    OK_RUN("edt", hh, "-o", e2, "--threshold", "100", "--format", "u16", "--quiet");
    {
        int64_t w, h;
        int ch;
        tw_sample_type t;
        void *p1 = twtest_read_image(e1, &w, &h, &ch, &t), *p2 = twtest_read_image(e2, &w, &h,
                                                                                 &ch, &t);
        cr_assert(p1 && p2);
        cr_assert(eq(int, memcmp(p1, p2, (size_t)(w * h) * 2), 0));
        free(p1);
        free(p2);
    }
    free(s);
    free(mask);
    free(hh);
    free(a1);
    free(a2);
    free(e1);
    free(e2);
}

Test(cli_tissue, glass_tiles_are_skipped_tissue_tiles_are_not)
{
    /* On the sample slide with 256-pixel tiles: the top-right tile is glass (seed 1 at
     * 2560x2048): with --tissue its red channel is one flat value (not read: the glass
     * colour), without it the glass grain varies; every tile that holds tissue (hematoxylin > 100
     * somewhere) is identical in both runs; the report counts skipped reads; the tissue mask
     * is written (0 there). An area opening of the thresholded hematoxylin and an
     * EDT are identical with and without --tissue (glass thresholds to 0 either way). */
    char *s = sample(2560, 2048), *r1 = twtest_path(dir, "r1.tif");
    char *r2 = twtest_path(dir, "r2.tif");
    char *tm = twtest_path(dir, "tm.tif"), *hh = twtest_path(dir, "hh.tif");
    int64_t w, h, mw, mh;
    uint8_t *a, *b, *hv, *mk;
    long long skipped = 0, reads = 0;
    int64_t tissue_tiles = 0, skipped_tiles = 0;

    twtest_run r = RUN("gray", s, "-o", r1, "--mode", "r", "--tissue", "--tissue-mask", tm,
                       "--tile", "256");
    cr_assert(eq(int, r.status, 0), "%s", r.err);
    const char *p = strstr(r.err, "reads skipped");
    cr_assert(p != NULL, "%s", r.err);
    cr_assert(sscanf(strstr(r.err, "level 1, ") + 9, "%lld of %lld", &skipped, &reads) == 2,
              "%s", r.err);
    twtest_run_free(&r);
    cr_assert(eq(i64, (int64_t)reads, 80)); /* 10 x 8 tiles */
    cr_assert(skipped > 0 && skipped < reads, "%lld of %lld", skipped, reads);
    OK_RUN("gray", s, "-o", r2, "--mode", "r", "--tile", "256", "--quiet");
    OK_RUN("gray", s, "-o", hh, "--mode", "hematoxylin", "--quiet");
    a = read_u8(r1, &w, &h, 1);
    b = read_u8(r2, &w, &h, 1);
    hv = read_u8(hh, &w, &h, 1);
    mk = read_u8(tm, &mw, &mh, 1);
    cr_assert(eq(i64, mw, 1280));
    cr_assert(eq(u8, mk[1279], 0));
    for (int64_t ty = 0; ty < 8; ty++)
        for (int64_t tx = 0; tx < 10; tx++) {
            bool tissue = false, same = true, flat = true, grain = false;
            for (int64_t y = ty * 256; y < ty * 256 + 256; y++)
                for (int64_t x = tx * 256; x < tx * 256 + 256; x++) {
                    int64_t i = y * w + x;
                    tissue |= hv[i] > 100;
                    same &= a[i] == b[i];
                    flat &= a[i] == a[ty * 256 * w + tx * 256];
                    grain |= b[i] != b[ty * 256 * w + tx * 256];
                }
            if (tissue) {
                cr_assert(same, "tissue tile %lld,%lld differs with --tissue", (long long)tx,
                          (long long)ty);
                tissue_tiles++;
            }
            if (!same) {
                cr_assert(flat, "tile %lld,%lld differs but is not flat", (long long)tx,
                          (long long)ty);
                skipped_tiles++;
            }
            if (tx == 9 && ty == 0)
                cr_assert(flat && grain && !same, "the top-right glass tile was read");
        }
    cr_assert(tissue_tiles > 0);
    cr_assert(skipped_tiles <= skipped);
    free(a);
    free(b);
    free(mk);
    /* results of mask operations do not change */
    OK_RUN("area-open", s, "-o", r1, "--area", "100", "--gray", "hematoxylin", "--threshold",
           "100", "--tissue", "--tile", "256", "--quiet");
    OK_RUN("area-open", s, "-o", r2, "--area", "100", "--gray", "hematoxylin", "--threshold",
           "100", "--tile", "256", "--quiet");
    same_image(r1, r2);
    OK_RUN("edt", s, "-o", r1, "--gray", "hematoxylin", "--threshold", "100", "--tissue",
           "--format", "u16", "--tile", "256", "--quiet");
    OK_RUN("edt", s, "-o", r2, "--gray", "hematoxylin", "--threshold", "100", "--format", "u16",
           "--tile", "256", "--quiet");
    {
        int ch;
        tw_sample_type t;
        void *p1 = twtest_read_image(r1, &w, &h, &ch, &t), *p2 = twtest_read_image(r2, &w, &h,
                                                                                 &ch, &t);
        cr_assert(p1 && p2);
        cr_assert(eq(int, memcmp(p1, p2, (size_t)(w * h) * 2), 0));
        free(p1);
        free(p2);
    }
    free(hv);
    free(s);
    free(r1);
    free(r2);
    free(tm);
    free(hh);
}

Test(cli_tissue, bad_options)
{
    /* Stain modes need 8-bit RGB, --tissue needs RGB, bad vectors and modes are usage
     * errors; nothing is written. */
    char *s = sample(600, 400), *g = twtest_path(dir, "g.tif"), *o = twtest_path(dir, "o.tif");

    OK_RUN("gray", s, "-o", g, "--quiet");
    ERR_RUN(("gray", g, "-o", o, "--mode", "eosin"), 1, "needs an 8-bit RGB slide", o);
    ERR_RUN(("area-open", g, "-o", o, "--area", "5", "--gray", "hematoxylin"), 1,
             "needs an 8-bit RGB slide", o);
    ERR_RUN(("area-open", g, "-o", o, "--area", "5", "--tissue"), 1, "--tissue needs an RGB",
            o);
    ERR_RUN(("area-open", s, "-o", o, "--area", "5", "--gray", "dab"), 2, "unknown mode", o);
    ERR_RUN(("area-open", s, "-o", o, "--area", "5", "--threshold", "x"), 2, "bad threshold", o);
    ERR_RUN(("gray", s, "-o", o, "--mode", "hematoxylin", "--stain-vectors", "1,2,3"), 2,
            "not 9 numbers", o);
    ERR_RUN(("gray", s, "-o", o, "--mode", "hematoxylin", "--stain-vectors",
             "1,2,3,2,4,6,0,0,1"),
            1, "cannot be separated", o);
    ERR_RUN(("gray", s, "-o", o, "--set", "gray.stain_vectors=1,2"), 2, "gray.stain_vectors",
            o);
    free(s);
    free(g);
    free(o);
}
