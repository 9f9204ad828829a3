/* SPDX-License-Identifier: MIT */
/* tilewave tests: `watershed` end to end through the CLI: the labels written, bad inputs. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tilewave.h"
#include "twtest_cli.h"

TWTEST_CLI_SUITE(cli_watershed, .timeout = 120);

static char *
write_img(const char *name, const void *px, int64_t w, int64_t h, tw_sample_type type)
{
    char *path = twtest_path(dir, name);
    tw_error err;

    cr_assert(eq(int, twtest_write_image(path, px, w, h, type, &err), TW_OK), "%s", err.message);
    return path;
}

Test(cli_watershed, writes_the_labels_of_two_basins_for_every_tile)
{
    /* Two basins (levels rising from columns 0 and 9 to a ridge at column 5) with markers 3
     * and 8 at their bottoms, rows 0 and 2; --mask cuts row 1 out (label 0). Columns 0-4 are
     * 3, 6-9 are 8; the ridge is reached at the same level (9) from both sides, and its best
     * predecessor is the lower one, column 4 (level 4 < 5): 3. Every --tile gives that. */
    enum { W = 10, H = 3 };
    static const uint8_t row[W] = {0, 1, 2, 3, 4, 9, 5, 3, 1, 0};
    uint8_t img[W * H], mask[W * H];
    uint16_t mark[W * H] = {0};
    char *fi, *fm, *fk, *out = twtest_path(dir, "labels.tif");
    const char *tiles[] = {"1x1", "3x2", "16x16"};

    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) {
            img[y * W + x] = row[x];
            mask[y * W + x] = y != 1;
        }
    mark[0] = 3;
    mark[W - 1] = 8;
    mark[2 * W] = 3;
    mark[2 * W + W - 1] = 8;
    fi = write_img("img.tif", img, W, H, TW_U8);
    fm = write_img("m.tif", mark, W, H, TW_U16);
    fk = write_img("mask.tif", mask, W, H, TW_U8);
    for (size_t t = 0; t < 3; t++) {
        twtest_run r = RUN("watershed", fi, "--markers", fm, "--mask", fk, "--conn", "4",
                           "--tile", tiles[t], "-o", out);
        int64_t w = 0, h = 0;
        int ch = 0;
        tw_sample_type type = 0;
        uint32_t *got;

        cr_assert(eq(int, r.status, 0), "%s", r.err);
        got = twtest_read_image(out, &w, &h, &ch, &type);
        cr_assert(got != NULL);
        cr_assert(eq(int, type, TW_U32));
        cr_assert(eq(i64, w, W));
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++) {
                uint32_t want = y == 1 ? 0u : x <= 5 ? 3u : 8u;

                cr_assert(eq(u32, got[y * W + x], want), "tile %s (%d, %d)", tiles[t], x, y);
            }
        free(got);
        twtest_run_free(&r);
    }
    free(fi);
    free(fm);
    free(fk);
    free(out);
}

Test(cli_watershed, bad_inputs_give_one_line_and_no_output)
{
    /* A missing --markers, markers of another size, float markers, a missing file, a bad
     * --conn, the output over an input: one line on stderr naming the problem, a non-zero
     * exit, and nothing at the output path. */
    uint8_t img[12] = {0};
    float f[12] = {0};
    char *fi = write_img("img.tif", img, 4, 3, TW_U8), *fs = write_img("small.tif", img, 2, 2, TW_U8);
    char *ff = write_img("f.tif", f, 4, 3, TW_F32), *out = twtest_path(dir, "o.tif");
    struct {
        const char *args[10];
        const char *msg;
    } cases[] = {
        {{"watershed", fi, "-o", out, NULL}, "missing --markers"},
        {{"watershed", fi, "--markers", fs, "-o", out, NULL}, "the markers image is 2x2"},
        {{"watershed", fi, "--markers", ff, "-o", out, NULL}, "u8 or u16 or u32 needed"},
        {{"watershed", fi, "--markers", "/nonexistent/m.tif", "-o", out, NULL}, "cannot"},
        {{"watershed", fi, "--markers", fi, "--conn", "6", "-o", out, NULL}, "--conn"},
        {{"watershed", fi, "--markers", fs, "-o", fs, NULL}, "would overwrite"},
    };

    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        twtest_run r = twtest_cli(cases[i].args, NULL);

        cr_assert(r.status != 0, "case %zu succeeded", i);
        cr_assert(strstr(r.err, cases[i].msg) != NULL, "case %zu: %s", i, r.err);
        cr_assert(eq(int, twtest_lines(r.err), 1), "case %zu: %s", i, r.err);
        cr_assert(twtest_exists(out) == false, "case %zu left %s", i, out);
        twtest_run_free(&r);
    }
    free(fi);
    free(fs);
    free(ff);
    free(out);
}

Test(cli_watershed, colour_markers_or_mask_are_refused)
{
    /* An RGB image as --markers would be made gray, its luminance taken for labels, and as
     * --mask nearly every pixel is nonzero: both refused with one line, nothing written; the
     * RGB IMAGE itself is made gray as documented and runs. */
    uint8_t mark[64 * 48] = {0};
    char *s = twtest_path(dir, "s.tif"), *out = twtest_path(dir, "o.tif"), *fm;

    mark[5 * 64 + 7] = 1;
    mark[40 * 64 + 50] = 2;
    fm = write_img("mark.tif", mark, 64, 48, TW_U8);
    OK_RUN("sample", s, "--size", "64x48", "--quiet");
    ERR_RUN(("watershed", s, "--markers", s, "-o", out), 1,
            "the markers '", out);
    ERR_RUN(("watershed", s, "--markers", s, "-o", out), 1, "have 3 channels (labels have 1)",
            out);
    ERR_RUN(("watershed", s, "--markers", fm, "--mask", s, "-o", out), 1,
            "is a colour (RGB) image, not a mask", out);
    OK_RUN("watershed", s, "--markers", fm, "-o", out, "--quiet");
    free(s);
    free(out);
    free(fm);
}

Test(cli_watershed, a_budget_too_small_for_the_whole_image_is_refused)
{
    /* The watershed holds the whole image (18 bytes a pixel): a 1024x1024 image is 18 MiB,
     * over --mem-budget 16M: refused up front with one line naming the budget, nothing
     * written; under 64M it runs. */
    uint8_t *img = calloc(1024 * 1024, 1), *mark = calloc(1024 * 1024, 1);
    char *fi, *fm, *out = twtest_path(dir, "o.tif");

    mark[5 * 1024 + 7] = 1;
    fi = write_img("big.tif", img, 1024, 1024, TW_U8);
    fm = write_img("bigm.tif", mark, 1024, 1024, TW_U8);
    ERR_RUN(("watershed", fi, "--markers", fm, "-o", out, "--mem-budget", "16M"), 1,
            "18 bytes a pixel (18 MiB for 1024x1024), more than the host memory budget "
            "runtime.host_mem=16 MiB",
            out);
    OK_RUN("watershed", fi, "--markers", fm, "-o", out, "--mem-budget", "64M", "--quiet");
    free(img);
    free(mark);
    free(fi);
    free(fm);
    free(out);
}
