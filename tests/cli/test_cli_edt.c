/* SPDX-License-Identifier: MIT */
/* tilewave tests: `tilewave edt` end to end, its outputs and its errors. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tilewave.h"
#include "twtest_cli.h"

TWTEST_CLI_SUITE(cli_edt, .timeout = TWTEST_TIMEOUT(120));

static char *
write_u8(const char *name, const uint8_t *px, int64_t w, int64_t h)
{
    char *path = twtest_path(dir, name);
    tw_error err;

    cr_assert(eq(int, twtest_write_image(path, px, w, h, TW_U8, &err), TW_OK), "%s", err.message);
    return path;
}

/* A 40x30 image: foreground 200 with a few background pixels and a background column. */
static char *
write_input(void)
{
    uint8_t px[40 * 30];

    memset(px, 200, sizeof px);
    px[3 * 40 + 5] = 0;
    px[25 * 40 + 33] = 0;
    for (int y = 0; y < 30; y++)
        px[y * 40 + 20] = 10; /* background below threshold 50, foreground above 0 */
    return write_u8("in.tif", px, 40, 30);
}

Test(cli_edt, formats_and_indices_agree)
{
    /* sq32, f32, u16 and u8 (with a step) outputs and the indices file describe the same
     * exact distances, for several tile sizes, and the threshold moves the background. */
    char *in = write_input(), *sq = twtest_path(dir, "sq.tif"), *f = twtest_path(dir, "f.tif"),
         *u = twtest_path(dir, "u.tif"), *ix = twtest_path(dir, "ix.tif"),
         *sq2 = twtest_path(dir, "sq2.tif"), *v8 = twtest_path(dir, "v8.tif");
    int64_t w, h;
    int ch;
    tw_sample_type ty;

    {
        twtest_run r = RUN("edt", in, "-o", sq, "--format", "sq32", "--threshold", "50",
                           "--indices", ix, "--tile", "7x3", "--quiet");
        cr_assert(eq(int, r.status, 0), "%s", r.err);
        cr_assert(eq(str, r.err, ""));
        twtest_run_free(&r);
    }
    OK_RUN("edt", in, "-o", f, "--threshold", "50", "--quiet");
    OK_RUN("edt", in, "-o", u, "--format", "u16", "--threshold", "50", "--quiet", "--tile",
           "1000");
    OK_RUN("edt", in, "-o", sq2, "--format", "sq32", "--quiet");
    OK_RUN("edt", in, "-o", v8, "--format", "u8", "--step", "0.25", "--threshold", "50",
           "--quiet", "--tile", "16x8");
    uint32_t *s = twtest_read_image(sq, &w, &h, &ch, &ty);
    cr_assert(s && w == 40 && h == 30 && ch == 1 && ty == TW_U32);
    float *fd = twtest_read_image(f, &w, &h, &ch, &ty);
    cr_assert(fd && ty == TW_F32);
    uint16_t *ud = twtest_read_image(u, &w, &h, &ch, &ty);
    cr_assert(ud && ty == TW_U16);
    uint32_t *id = twtest_read_image(ix, &w, &h, &ch, &ty);
    cr_assert(id && ch == 2 && ty == TW_U32);
    uint32_t *s2 = twtest_read_image(sq2, &w, &h, &ch, &ty);
    cr_assert(s2 != NULL);
    uint8_t *vd = twtest_read_image(v8, &w, &h, &ch, &ty);
    cr_assert(vd && ty == TW_U8);
    for (int64_t y = 0; y < 30; y++)
        for (int64_t x = 0; x < 40; x++) {
            int64_t p = y * 40 + x, best = -1, best2 = -1;
            /* brute force: background = {(5,3), (33,25)} plus column 20 at threshold 50 */
            for (int64_t qy = 0; qy < 30; qy++)
                for (int64_t qx = 0; qx < 40; qx++) {
                    bool strict = (qx == 5 && qy == 3) || (qx == 33 && qy == 25);
                    int64_t d = (qx - x) * (qx - x) + (qy - y) * (qy - y);
                    if ((strict || qx == 20) && (best < 0 || d < best))
                        best = d;
                    if (strict && (best2 < 0 || d < best2))
                        best2 = d;
                }
            cr_assert(eq(u32, s[p], (uint32_t)best), "(%lld, %lld)", (long long)x, (long long)y);
            cr_assert(eq(u32, s2[p], (uint32_t)best2));
            cr_assert(fd[p] == (float)sqrt((double)best));
            cr_assert(eq(u16, ud[p], (uint16_t)floor(sqrt((double)best) + 0.5)));
            /* u8, step 0.25: four grey levels a pixel, saturating at 255 */
            double q = floor(4 * sqrt((double)best) + 0.5);
            cr_assert(eq(u8, vd[p], (uint8_t)(q > 255 ? 255 : q)), "u8 at (%lld, %lld)",
                      (long long)x, (long long)y);
            int64_t dy = (int64_t)id[2 * p] - y, dx = (int64_t)id[2 * p + 1] - x;
            cr_assert(eq(i64, dx * dx + dy * dy, best));
        }
    free(s);
    free(fd);
    free(ud);
    free(id);
    free(s2);
    free(vd);
    free(v8);
    free(in);
    free(sq);
    free(f);
    free(u);
    free(ix);
    free(sq2);
}

Test(cli_edt, bands_stored_in_slices_are_exact)
{
    /* With 16-pixel output tiles a band is stored in slices of 128 columns: a 300-pixel-wide
     * image (3 slices, the last partial) in bands of 16 rows gives exact squared distances
     * and nearest-background indices everywhere, against brute force. */
    enum { W = 300, H = 40 };
    static uint8_t px[W * H];
    char *in, *sq = twtest_path(dir, "sq.tif"), *ix = twtest_path(dir, "ix.tif");
    int64_t w, h;
    int ch;
    tw_sample_type ty;
    uint64_t r = 12345;

    for (int i = 0; i < W * H; i++) {
        px[i] = twtest_rnd(&r, 97) == 0 ? 0 : 255; /* about 1% background */
    }
    in = write_u8("wide.tif", px, W, H);
    OK_RUN("edt", in, "-o", sq, "--format", "sq32", "--indices", ix, "--tile", "64x16", "--set",
           "io.tiff_tile=16x16", "--quiet");
    uint32_t *s = twtest_read_image(sq, &w, &h, &ch, &ty);
    cr_assert(s && w == W && h == H && ch == 1 && ty == TW_U32);
    uint32_t *id = twtest_read_image(ix, &w, &h, &ch, &ty);
    cr_assert(id && ch == 2 && ty == TW_U32);
    for (int64_t y = 0; y < H; y++)
        for (int64_t x = 0; x < W; x++) {
            int64_t p = y * W + x, best = -1;

            for (int64_t q = 0; q < W * H; q++)
                if (px[q] == 0) {
                    int64_t dx = q % W - x, dy = q / W - y, d = dx * dx + dy * dy;

                    if (best < 0 || d < best)
                        best = d;
                }
            cr_assert(eq(u32, s[p], (uint32_t)best), "(%lld, %lld)", (long long)x, (long long)y);
            int64_t dy = (int64_t)id[2 * p] - y, dx = (int64_t)id[2 * p + 1] - x;
            cr_assert(eq(i64, dx * dx + dy * dy, best));
            cr_assert(px[id[2 * p] * W + id[2 * p + 1]] == 0);
        }
    free(s);
    free(id);
    free(in);
    free(sq);
    free(ix);
}

Test(cli_edt, no_background_warns_and_succeeds)
{
    /* An image without background: exit 0, one warning line, infinite distances. */
    uint8_t px[12 * 9];
    char *in, *out = twtest_path(dir, "o.tif");
    int64_t w, h;

    memset(px, 9, sizeof px);
    in = write_u8("full.tif", px, 12, 9);
    twtest_run r = RUN("edt", in, "-o", out);
    cr_assert(eq(int, r.status, 0), "%s", r.err);
    cr_assert(strstr(r.err, "no background pixel") != NULL, "stderr: %s", r.err);
    twtest_run_free(&r);
    float *f = twtest_read_image(out, &w, &h, NULL, NULL);
    cr_assert(f != NULL);
    for (int i = 0; i < 12 * 9; i++)
        cr_assert(isinf(f[i]));
    free(f);
    free(in);
    free(out);
}

Test(cli_edt, spacing_scales_distances)
{
    /* --spacing 2,3 on a single background pixel: d = sqrt((2 dx)^2 + (3 dy)^2). */
    uint8_t px[15 * 11];
    char *in, *out = twtest_path(dir, "o.tif");
    int64_t w, h;

    memset(px, 1, sizeof px);
    px[4 * 15 + 6] = 0;
    in = write_u8("one.tif", px, 15, 11);
    OK_RUN("edt", in, "-o", out, "--spacing", "2,3", "--tile", "4x4", "--quiet");
    float *f = twtest_read_image(out, &w, &h, NULL, NULL);
    cr_assert(f != NULL);
    for (int64_t y = 0; y < 11; y++)
        for (int64_t x = 0; x < 15; x++) {
            double dx = 2.0 * (double)(x - 6), dy = 3.0 * (double)(y - 4);
            cr_assert(f[y * 15 + x] == (float)sqrt(dx * dx + dy * dy), "(%lld, %lld)",
                      (long long)x, (long long)y);
        }
    free(f);
    free(in);
    free(out);
}

Test(cli_edt, bad_arguments)
{
    /* Every bad argument: exit 2 (usage) or 1, one line naming it, no output left behind. */
    char *in = write_input(), *out = twtest_path(dir, "o.tif"), *missing = twtest_path(dir, "no.tif");

    ERR_RUN(("edt", in), 2, "missing -o", out);
    ERR_RUN(("edt", "-o", out), 2, "missing IN", out);
    ERR_RUN(("edt", in, "-o", out, "--threshold", "abc"), 2, "--threshold", out);
    ERR_RUN(("edt", in, "-o", out, "--spacing", "0,1"), 2, "--spacing", out);
    ERR_RUN(("edt", in, "-o", out, "--spacing", "1,x"), 2, "--spacing", out);
    ERR_RUN(("edt", in, "-o", out, "--format", "f64"), 2, "--format", out);
    ERR_RUN(("edt", in, "-o", out, "--method", "fast"), 2, "--method", out);
    ERR_RUN(("edt", in, "-o", out, "--format", "sq32", "--spacing", "2"), 2, "sq32",
                 out);
    ERR_RUN(("edt", in, "-o", out, "--conn", "4"), 2, "unknown option", out);
    ERR_RUN(("edt", in, "-o", out, "--step", "2"), 2, "--step applies to --format u8 or u16",
            out);
    ERR_RUN(("edt", in, "-o", out, "--format", "u8", "--step", "-1"), 2, "--step", out);
    ERR_RUN(("edt", in, "-o", out, "--format", "u8", "--step", "nan"), 2, "--step", out);
    /* squares of the spacing / step that underflow or overflow: refused, not a crash */
    ERR_RUN(("edt", in, "-o", out, "--format", "u8", "--step", "1e300"), 1, "out of range", out);
    ERR_RUN(("edt", in, "-o", out, "--format", "u16", "--step", "1e-300"), 1, "out of range",
            out);
    ERR_RUN(("edt", in, "-o", out, "--spacing", "1e-170,1"), 1, "out of range", out);
    ERR_RUN(("edt", missing, "-o", out), 1, "no.tif", out);
    ERR_RUN(("edt", in, "-o", out, "--spacing", "auto"), 1, "mpp", out);
    ERR_RUN(("edt", in, "-o", out, "--indices", out), 2, "indices", out);
    ERR_RUN(("edt", in, "-o", in), 2, "overwrite", NULL);
    ERR_RUN(("edt", in, "-o", out, "--region", "30,0,20,5"), 1, "outside", out);
    free(in);
    free(out);
    free(missing);
}

Test(cli_edt, otsu_needs_integer_input)
{
    /* --threshold otsu on a float image is refused with a clear message. */
    float px[8 * 8];
    char *in = twtest_path(dir, "f.tif"), *out = twtest_path(dir, "o.tif");
    tw_error err;

    for (int i = 0; i < 64; i++)
        px[i] = (float)i;
    cr_assert(eq(int, twtest_write_image(in, px, 8, 8, TW_F32, &err), TW_OK));
    ERR_RUN(("edt", in, "-o", out, "--threshold", "otsu"), 1, "otsu", out);
    OK_RUN("edt", in, "-o", out, "--threshold", "31.5", "--quiet");
    free(in);
    free(out);
}
