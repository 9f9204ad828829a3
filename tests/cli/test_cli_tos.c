/* SPDX-License-Identifier: MIT */
/* tilewave tests: `tilewave grain` and `tilewave tos` end to end. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "omp_kernels.h"
#include "tilewave.h"
#include "twtest_cli.h"
#include "twtest_out.h"

TWTEST_CLI_SUITE(cli_tos, .timeout = TWTEST_TIMEOUT(120));

#define W 45
#define H 33

/* 45x33: bright and dark blobs of several sizes, nested, on a ramp; 16-bit when wide. */
static void
make_image(void *px, bool wide)
{
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) {
            int v = 60 + x + (y * 7) % 23;

            if ((x / 5 + y / 4) % 3 == 0)
                v += 90;
            if ((x * 3 + y * 5) % 17 == 0)
                v -= 50;
            if (wide)
                ((uint16_t *)px)[y * W + x] = (uint16_t)(v * 251 + (x * y) % 200);
            else
                ((uint8_t *)px)[y * W + x] = (uint8_t)v;
        }
}

static char *
write_input(const char *name, const void *px, tw_sample_type t)
{
    char *path = twtest_path(dir, name);
    tw_error err;

    cr_assert(eq(int, twtest_write_image(path, px, W, H, t, &err), TW_OK), "%s", err.message);
    return path;
}

/* The kernel's outputs (tests/omp/test_tos_omp.c checks it against two naive references). */
static void
kernel(const void *px, tw_sample_type t, uint64_t grain, uint32_t *par, uint32_t *area,
       void *gout, twi_tos_run *r)
{
    size_t ss = tw_sample_size(t);
    tw_tile_view vi = { .data = (void *)px, .stride = (int64_t)(W * ss), .w = W, .h = H,
                        .channels = 1, .type = t },
                 vp = { .data = par, .stride = 4 * W, .w = W, .h = H, .channels = 1,
                        .type = TW_U32 },
                 va = vp, vg = vi;

    va.data = area;
    vg.data = gout;
    memset(r, 0, sizeof *r);
    cr_assert(eq(int, twi_omp_tos(&vi, &vp, &va, grain ? &vg : NULL, grain, r), TW_OK));
}

Test(cli_tos, outputs_equal_the_kernel)
{
    /* tos (parent and area images, uint32) and grain for several areas, 8- and 16-bit, with 1
     * and 3 workers: the kernel's bytes; grain keeps the input's type; the summary names the
     * node count and the exterior level. */
    static const char *const areas[] = { "1", "7", "60", "2000" };
    char *out = twtest_path(dir, "o.tif"), *ar = twtest_path(dir, "a.tif");

    for (int wide = 0; wide < 2; wide++) {
        tw_sample_type t = wide ? TW_U16 : TW_U8;
        size_t ss = tw_sample_size(t);
        uint16_t px[W * H], gk[W * H];
        uint32_t par[W * H], area[W * H];
        char *in, line[128];
        twi_tos_run r;
        int64_t w, h;
        int ch;
        tw_sample_type ty;
        twtest_run run;

        make_image(px, wide);
        in = write_input(wide ? "in16.tif" : "in8.tif", px, t);
        kernel(px, t, 0, par, area, NULL, &r);
        run = RUN("tos", in, "-o", out, "--area", ar, "--cpu-workers", wide ? "3" : "1");
        cr_assert(eq(int, run.status, 0), "%s", run.err);
        snprintf(line, sizeof line, "(%lld nodes, exterior level %u", (long long)r.nodes,
                 r.exterior);
        cr_assert(strstr(run.err, line) != NULL, "%s lacks %s", run.err, line);
        twtest_run_free(&run);
        uint32_t *gp = twtest_read_image(out, &w, &h, &ch, &ty);
        cr_assert(gp && w == W && h == H && ch == 1 && ty == TW_U32);
        cr_assert(eq(int, memcmp(gp, par, sizeof par), 0), "parent image, %s", in);
        free(gp);
        uint32_t *ga = twtest_read_image(ar, &w, &h, &ch, &ty);
        cr_assert(ga && ty == TW_U32);
        cr_assert(eq(int, memcmp(ga, area, sizeof area), 0), "area image, %s", in);
        free(ga);
        for (int k = 0; k < 4; k++) {
            kernel(px, t, strtoull(areas[k], NULL, 10), par, area, gk, &r);
            OK_RUN("grain", in, "-o", out, "--area", areas[k], "--quiet", "--cpu-workers",
                   k % 2 ? "3" : "1");
            void *g = twtest_read_image(out, &w, &h, &ch, &ty);
            cr_assert(g && w == W && h == H && ty == t);
            cr_assert(eq(int, memcmp(g, gk, W * H * ss), 0), "grain %s, %s", areas[k], in);
            free(g);
        }
        remove(out);
        remove(ar);
        free(in);
    }
    free(out);
    free(ar);
}

Test(cli_tos, grain_of_a_known_image)
{
    /* A 3x3 bright square (9) holding a dark pixel (0) on a background of 5, padded to 45x33
     * with 5s: --area 2 fills the hole (9), --area 10 removes the square (5): whatever the
     * direction of the contrast, shapes under the area go. */
    uint8_t px[W * H], *g;
    char *in, *out = twtest_path(dir, "o.tif");
    int64_t w, h;

    memset(px, 5, sizeof px);
    for (int y = 10; y < 13; y++)
        for (int x = 20; x < 23; x++)
            px[y * W + x] = 9;
    px[11 * W + 21] = 0;
    in = write_input("sq.tif", px, TW_U8);
    OK_RUN("grain", in, "-o", out, "--area", "2", "--quiet");
    g = twtest_read_image(out, &w, &h, NULL, NULL);
    cr_assert(g != NULL);
    for (int p = 0; p < W * H; p++)
        cr_assert(eq(u8, g[p], p == 11 * W + 21 ? 9 : px[p]), "pixel %d", p);
    free(g);
    OK_RUN("grain", in, "-o", out, "--area", "10", "--quiet");
    g = twtest_read_image(out, &w, &h, NULL, NULL);
    cr_assert(g != NULL);
    for (int p = 0; p < W * H; p++)
        cr_assert(eq(u8, g[p], 5), "pixel %d", p);
    free(g);
    free(in);
    free(out);
}

Test(cli_tos, bad_arguments)
{
    /* Every bad argument: exit 2 (usage) or 1, one line naming it, no output left behind. */
    uint8_t px[W * H];
    float fpx[4] = { 0 };
    char *in, *out = twtest_path(dir, "o.tif"), *missing = twtest_path(dir, "no.tif"),
              *fin = twtest_path(dir, "f.tif");
    tw_error err;

    make_image(px, false);
    in = write_input("in.tif", px, TW_U8);
    cr_assert(eq(int, twtest_write_image(fin, fpx, 2, 2, TW_F32, &err), TW_OK));
    ERR_RUN(("grain", in, "-o", out), 2, "--area is required", out);
    ERR_RUN(("grain", in, "-o", out, "--area", "0"), 2, "--area", out);
    ERR_RUN(("grain", in, "-o", out, "--area", "-5"), 2, "--area", out);
    ERR_RUN(("grain", in, "-o", out, "--area", "12x"), 2, "--area", out);
    ERR_RUN(("grain", in, "-o", out, "--area", "4", "--conn", "8"), 2, "--conn", out);
    ERR_RUN(("grain", in, "--area", "4"), 2, "missing -o", out);
    ERR_RUN(("grain", in, in, "-o", out, "--area", "4"), 2, "too many arguments", out);
    ERR_RUN(("grain", missing, "-o", out, "--area", "4"), 1, "no.tif", out);
    ERR_RUN(("grain", fin, "-o", out, "--area", "4"), 1, "f32", out);
    ERR_RUN(("grain", in, "-o", in, "--area", "4"), 2, "overwrite", NULL);
    ERR_RUN(("tos", in, "-o", out, "--area", out), 2, "area", out);
    ERR_RUN(("tos", in, "-o", out, "--conn", "4"), 2, "--conn", out);
    ERR_RUN(("tos", fin, "-o", out), 1, "f32", out);
    ERR_RUN(("tos", in, "-o", out, "--bogus"), 2, "--bogus", out);
    free(in);
    free(out);
    free(missing);
    free(fin);
}

Test(cli_tos, colour_input_through_gray)
{
    /* An RGB input is made one channel by --gray first (luminance by default, r here): the
     * grain of the RGB file equals the grain of its red channel. */
    uint8_t rgb[W * H * 3], red[W * H], *a, *b;
    int64_t w, h;
    char *in = twtest_path(dir, "rgb.tif"), *r8, *o1 = twtest_path(dir, "o1.tif"),
         *o2 = twtest_path(dir, "o2.tif");

    make_image(red, false);
    for (int p = 0; p < W * H; p++) {
        rgb[3 * p] = red[p];
        rgb[3 * p + 1] = (uint8_t)(p * 7);
        rgb[3 * p + 2] = (uint8_t)(255 - red[p]);
    }
    twout_write_input(in, rgb, W, H, 3, TW_U8, 1, 0);
    r8 = write_input("red.tif", red, TW_U8);
    OK_RUN("grain", in, "-o", o1, "--area", "9", "--gray", "r", "--quiet");
    OK_RUN("grain", r8, "-o", o2, "--area", "9", "--quiet");
    a = twtest_read_image(o1, &w, &h, NULL, NULL);
    b = twtest_read_image(o2, &w, &h, NULL, NULL);
    cr_assert(a && b);
    cr_assert(eq(int, memcmp(a, b, W * H), 0));
    free(a);
    free(b);
    free(in);
    free(r8);
    free(o1);
    free(o2);
}
