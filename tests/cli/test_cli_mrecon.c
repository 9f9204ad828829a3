/* SPDX-License-Identifier: MIT */
/* tilewave tests: `reconstruct` and the filters built on it, end to end through the CLI. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tilewave.h"
#include "twtest_cli.h"

TWTEST_CLI_SUITE(cli_mrecon, .timeout = TWTEST_TIMEOUT(120));

/* Write a one-channel 8-bit w x h image as a tiled TIFF under dir; returns the path. */
static char *
write_gray(const char *name, const uint8_t *px, int64_t w, int64_t h)
{
    char *path = twtest_path(dir, name);
    tw_error err;

    cr_assert(eq(int, twtest_write_image(path, px, w, h, TW_U8, &err), TW_OK), "%s", err.message);
    return path;
}

/* Read a whole one-channel 8-bit image. */
static uint8_t *
read_gray(const char *path, int64_t *w, int64_t *h)
{
    int ch = 0;
    tw_sample_type type = 0;
    uint8_t *buf = twtest_read_image(path, w, h, &ch, &type);

    cr_assert(buf != NULL, "cannot read %s", path);
    cr_assert(eq(int, ch, 1));
    cr_assert(eq(int, type, TW_U8));
    return buf;
}

/* Naive 8-connected reconstruction by dilation, by sweeps until stable. */
static void
naive_recon8(uint8_t *j, const uint8_t *im, int64_t w, int64_t h)
{
    bool changed = true;

    while (changed) {
        changed = false;
        for (int64_t p = 0; p < w * h; p++) {
            int64_t x = p % w, y = p / w;
            unsigned e = j[p];
            for (int64_t yy = y - 1; yy <= y + 1; yy++)
                for (int64_t xx = x - 1; xx <= x + 1; xx++)
                    if (xx >= 0 && yy >= 0 && xx < w && yy < h && j[yy * w + xx] > e)
                        e = j[yy * w + xx];
            if (e > im[p])
                e = im[p];
            if (e != j[p]) {
                j[p] = (uint8_t)e;
                changed = true;
            }
        }
    }
}

Test(cli_mrecon, help_lists_every_command)
{
    /* The top help names every new command; each has its own --help. */
    const char *cmds[] = {"reconstruct", "fill-holes", "hmax", "regional-max", "open-rec",
                          "close-rec"};
    twtest_run r = RUN("--help");
    cr_assert(eq(int, r.status, 0));
    for (size_t i = 0; i < 6; i++)
        cr_assert(strstr(r.out, cmds[i]) != NULL, "top help lacks %s", cmds[i]);
    twtest_run_free(&r);
    for (size_t i = 0; i < 6; i++) {
        r = RUN(cmds[i], "--help");
        cr_assert(eq(int, r.status, 0), "%s --help: %d %s", cmds[i], r.status, r.err);
        cr_assert(strstr(r.out, "Usage: tilewave") != NULL);
        cr_assert(strstr(r.out, "--conn") != NULL);
        twtest_run_free(&r);
    }
}

Test(cli_mrecon, reconstruct_matches_naive_for_any_tile)
{
    /* reconstruct of a random marker under a blurred-noise mask equals the naive result, at
     * one tile and at odd tile sizes; --erode on the complements gives the complement. */
    int64_t w = 150, h = 97, n = w * h;
    uint8_t *im = malloc((size_t)n), *j = malloc((size_t)n), *ic = malloc((size_t)n),
            *jc = malloc((size_t)n);
    uint64_t s = 5;

    for (int64_t p = 0; p < n; p++) {
        uint64_t r = twtest_xorshift(&s);

        im[p] = (uint8_t)(128 + (int)((r >> 40) % 100) - (int)(p % w) / 3);
        j[p] = (r >> 20) % 97 == 0 ? im[p] : 0;
        ic[p] = (uint8_t)(255 - im[p]);
        jc[p] = (uint8_t)(255 - j[p]);
    }
    char *fi = write_gray("i.tif", im, w, h), *fj = write_gray("j.tif", j, w, h);
    char *fic = write_gray("ic.tif", ic, w, h), *fjc = write_gray("jc.tif", jc, w, h);
    char *fo = twtest_path(dir, "o.tif");
    naive_recon8(j, im, w, h);
    const char *tiles[] = {"1000", "16x16", "7x31", "150x1", "1x97"};
    for (size_t k = 0; k < 5; k++) {
        twtest_run r = RUN("reconstruct", "--marker", fj, "--mask", fi, "-o", fo, "--tile",
                           tiles[k], "--cpu-workers", "2", "--quiet");
        expect_ok(&r);
        int64_t ow, oh;
        uint8_t *got = read_gray(fo, &ow, &oh);
        cr_assert(eq(i64, ow, w));
        cr_assert(eq(i64, oh, h));
        cr_assert(memcmp(got, j, (size_t)n) == 0, "tile %s differs", tiles[k]);
        free(got);
    }
    twtest_run r = RUN("reconstruct", "--marker", fjc, "--mask", fic, "-o", fo, "--erode",
                       "--tile", "33x20");
    cr_assert(eq(int, r.status, 0), "%s", r.err);
    cr_assert(strstr(r.err, "border rounds") != NULL, "no summary: %s", r.err);
    twtest_run_free(&r);
    int64_t ow, oh;
    uint8_t *got = read_gray(fo, &ow, &oh);
    for (int64_t p = 0; p < n; p++)
        cr_assert(eq(u8, got[p], (uint8_t)(255 - j[p])), "pixel %lld", (long long)p);
    free(got);
    free(im);
    free(j);
    free(ic);
    free(jc);
    free(fi);
    free(fj);
    free(fic);
    free(fjc);
    free(fo);
}

Test(cli_mrecon, filters_on_small_known_images)
{
    /* fill-holes fills an enclosed hole but not an open bay; hmax and regional-max mark the
     * expected peaks; open-rec removes a bright square smaller than the structuring element
     * and keeps a larger one exactly; close-rec does the dual on dark squares. */
    enum { W = 40, H = 30 };
    uint8_t im[W * H], peaks[W * H], sq[W * H], dsq[W * H];
    for (int p = 0; p < W * H; p++) {
        int x = p % W, y = p / W;
        bool ring = x >= 5 && x <= 15 && y >= 5 && y <= 15 && !(x > 6 && x < 14 && y > 6 && y < 14);
        bool bay = x >= 20 && x <= 30 && y >= 5 && y <= 15 &&
                   !(x > 21 && x < 29 && y > 6 && y <= 15);
        im[p] = ring || bay ? 255 : 0;
        peaks[p] = 10;
        sq[p] = 20;
        dsq[p] = 200;
    }
    peaks[3 * W + 3] = 50;   /* height 40 */
    peaks[20 * W + 30] = 15; /* height 5 */
    peaks[20 * W + 31] = 15;
    for (int y = 2; y < 4; y++)
        for (int x = 2; x < 4; x++) {
            sq[y * W + x] = 250;
            dsq[y * W + x] = 5;
        }
    for (int y = 10; y < 20; y++)
        for (int x = 10; x < 20; x++) {
            sq[y * W + x] = 250;
            dsq[y * W + x] = 5;
        }
    char *fi = write_gray("ring.tif", im, W, H), *fp = write_gray("peaks.tif", peaks, W, H);
    char *fs = write_gray("sq.tif", sq, W, H), *fd = write_gray("dsq.tif", dsq, W, H);
    char *fo = twtest_path(dir, "o.tif");
    int64_t w, h;
    uint8_t *got;

    twtest_run r = RUN("fill-holes", fi, "-o", fo, "--tile", "8x8", "--quiet");
    expect_ok(&r);
    got = read_gray(fo, &w, &h);
    cr_assert(eq(u8, got[10 * W + 10], 255), "the hole is not filled");
    cr_assert(eq(u8, got[10 * W + 25], 0), "the bay was filled");
    cr_assert(eq(u8, got[0], 0));
    free(got);

    r = RUN("hmax", fp, "--h", "20", "-o", fo, "--tile", "7x9", "--quiet");
    expect_ok(&r);
    got = read_gray(fo, &w, &h);
    for (int p = 0; p < W * H; p++)
        cr_assert(eq(u8, got[p], p == 3 * W + 3 ? 255 : 0), "hmax pixel %d", p);
    free(got);
    r = RUN("hmax", fp, "--h", "20", "--dome", "-o", fo, "--quiet");
    expect_ok(&r);
    got = read_gray(fo, &w, &h);
    cr_assert(eq(u8, got[3 * W + 3], 20));
    cr_assert(eq(u8, got[20 * W + 30], 5));
    cr_assert(eq(u8, got[0], 0));
    free(got);
    r = RUN("regional-max", fp, "-o", fo, "--tile", "5x5", "--quiet");
    expect_ok(&r);
    got = read_gray(fo, &w, &h);
    for (int p = 0; p < W * H; p++) {
        bool want = p == 3 * W + 3 || p == 20 * W + 30 || p == 20 * W + 31;
        cr_assert(eq(u8, got[p], want ? 255 : 0), "regional-max pixel %d", p);
    }
    free(got);

    r = RUN("open-rec", fs, "--radius", "2", "-o", fo, "--tile", "6x6", "--quiet");
    expect_ok(&r);
    got = read_gray(fo, &w, &h);
    for (int p = 0; p < W * H; p++) {
        int x = p % W, y = p / W;
        bool big = x >= 10 && x < 20 && y >= 10 && y < 20;
        cr_assert(eq(u8, got[p], big ? 250 : 20), "open-rec pixel %d", p);
    }
    free(got);
    r = RUN("close-rec", fd, "--radius", "2", "-o", fo, "--tile", "13x4", "--quiet");
    expect_ok(&r);
    got = read_gray(fo, &w, &h);
    for (int p = 0; p < W * H; p++) {
        int x = p % W, y = p / W;
        bool big = x >= 10 && x < 20 && y >= 10 && y < 20;
        cr_assert(eq(u8, got[p], big ? 5 : 200), "close-rec pixel %d", p);
    }
    free(got);
    free(fi);
    free(fp);
    free(fs);
    free(fd);
    free(fo);
}

Test(cli_mrecon, slides_are_converted_to_gray)
{
    /* The RGB sample slide as both marker and mask reconstructs to its own luminance, the
     * bytes `gray` writes; the filters run on a slide level. */
    char *sample = twtest_path(dir, "s.tif"), *g = twtest_path(dir, "g.tif"),
         *o = twtest_path(dir, "o.tif");
    twtest_run r = RUN("sample", sample, "--size", "1200x800", "--quiet");
    expect_ok(&r);
    r = RUN("gray", sample, "-o", g, "--quiet");
    expect_ok(&r);
    r = RUN("reconstruct", "--marker", sample, "--mask", sample, "-o", o, "--tile", "100x70",
            "--quiet");
    expect_ok(&r);
    int64_t w1, h1, w2, h2;
    uint8_t *a = read_gray(g, &w1, &h1), *b = read_gray(o, &w2, &h2);
    cr_assert(eq(i64, w1, w2));
    cr_assert(eq(i64, h1, h2));
    cr_assert(memcmp(a, b, (size_t)(w1 * h1)) == 0);
    free(a);
    free(b);
    r = RUN("fill-holes", sample, "-o", o, "--level", "1", "--threshold", "otsu", "--invert",
            "--quiet");
    expect_ok(&r);
    b = read_gray(o, &w2, &h2);
    cr_assert(eq(i64, w2, 600));
    free(b);
    r = RUN("hmax", sample, "--h", "30", "--region", "10,10,200,100", "-o", o, "--quiet");
    expect_ok(&r);
    b = read_gray(o, &w2, &h2);
    cr_assert(eq(i64, w2, 200));
    cr_assert(eq(i64, h2, 100));
    free(b);
    free(sample);
    free(g);
    free(o);
}

Test(cli_mrecon, bad_inputs_fail_with_one_line_and_no_output)
{
    /* Marker above the mask, sizes that differ, a missing file, a bad --conn, missing or bad
     * parameters: exit 1 (2 for usage), one line naming the problem, no output file. */
    uint8_t a[20 * 10], b[20 * 10], c[11 * 10];
    for (int p = 0; p < 200; p++) {
        a[p] = 100;
        b[p] = 50;
    }
    b[7 * 20 + 12] = 200;
    memset(c, 0, sizeof c);
    char *fa = write_gray("a.tif", a, 20, 10), *fb = write_gray("b.tif", b, 20, 10);
    char *fc = write_gray("c.tif", c, 11, 10), *o = twtest_path(dir, "out.tif");

    twtest_run r = RUN("reconstruct", "--marker", fb, "--mask", fa, "-o", o, "--tile", "3x3");
    expect_error(&r, 1, "marker 200 above mask 100 at (12, 7)", o);
    r = RUN("reconstruct", "--marker", fb, "--mask", fa, "-o", o, "--clamp-marker", "--quiet");
    expect_ok(&r);
    cr_assert(eq(int, remove(o), 0));
    r = RUN("reconstruct", "--marker", fa, "--mask", fb, "-o", o, "--erode");
    expect_error(&r, 1, "marker 100 below mask 200 at (12, 7)", o);
    r = RUN("reconstruct", "--marker", fc, "--mask", fa, "-o", o);
    expect_error(&r, 1, "marker is 11x10 but mask is 20x10", o);
    r = RUN("reconstruct", "--marker", "/nonexistent/m.tif", "--mask", fa, "-o", o);
    expect_error(&r, 1, "No such file", o);
    r = RUN("fill-holes", "/nonexistent/m.tif", "-o", o);
    expect_error(&r, 1, "No such file", o);
    r = RUN("reconstruct", "--marker", fb, "--mask", fa, "-o", o, "--conn", "5");
    expect_error(&r, 2, "bad connectivity '5'", o);
    r = RUN("reconstruct", "--mask", fa, "-o", o);
    expect_error(&r, 2, "missing --marker", o);
    r = RUN("reconstruct", "--marker", fb, "--mask", fa);
    expect_error(&r, 2, "missing -o OUT", NULL);
    r = RUN("reconstruct", "--marker", fb, "--mask", fa, "-o", fa);
    expect_error(&r, 2, "would overwrite the input --mask", NULL);
    r = RUN("hmax", fa, "-o", o);
    expect_error(&r, 2, "missing --h H", o);
    r = RUN("hmax", fa, "-o", o, "--h", "0");
    expect_error(&r, 2, "bad height '0'", o);
    r = RUN("open-rec", fa, "-o", o);
    expect_error(&r, 2, "missing --radius R", o);
    r = RUN("close-rec", fa, "-o", o, "--radius", "-3");
    expect_error(&r, 2, "bad radius '-3'", o);
    r = RUN("regional-max", fa, "-o", o, "--h", "3");
    expect_error(&r, 2, "unknown option '--h'", o);
    r = RUN("fill-holes", fa, "-o", o, "--level", "4");
    expect_error(&r, 1, "level 4", o);
    cr_assert(eq(int, twtest_count_entries(dir), 3), "files left in %s", dir);
    free(fa);
    free(fb);
    free(fc);
    free(o);
}
