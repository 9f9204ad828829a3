/* SPDX-License-Identifier: MIT */
/* tilewave tests: `tilewave maxtree` and the attribute filter commands end to end. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tilewave.h"
#include "twtest_cli.h"
#include "twtest_filter.h"

TWTEST_CLI_SUITE(cli_maxtree, .timeout = TWTEST_TIMEOUT(120));

#define W 45
#define H 33

/* A 45x33 8-bit image with bright and dark blobs of several sizes on a ramp. */
static void
make_image(uint8_t *px)
{
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) {
            int v = 60 + x + (y * 7) % 23;

            if ((x / 5 + y / 4) % 3 == 0)
                v += 90;
            if ((x * 3 + y * 5) % 17 == 0)
                v -= 50;
            px[y * W + x] = (uint8_t)v;
        }
}

static char *
write_input(const char *name, const uint8_t *px)
{
    char *path = twtest_path(dir, name);
    tw_error err;

    cr_assert(eq(int, twtest_write_image(path, px, W, H, TW_U8, &err), TW_OK), "%s", err.message);
    return path;
}

Test(cli_maxtree, filters_match_the_reference_for_every_tile)
{
    /* area-open, area-close, height-open and height-close through the CLI equal the flooding
     * reference with 4- and 8-connectivity and tiles of 7x5, 1x33, 45x1 and 64x64. */
    uint8_t px[W * H], want[W * H];
    char *in, *out = twtest_path(dir, "o.tif");
    static const char *const cmds[] = {"area-open", "area-close", "height-open",
                                       "height-close"};
    static const char *const tiles[] = {"7x5", "1x33", "45x1", "64"};
    static const int rule[] = {TWTEST_AREA, TWTEST_AREA, TWTEST_HEIGHT, TWTEST_HEIGHT};

    make_image(px);
    in = write_input("in.tif", px);
    for (int c = 0; c < 4; c++)
        for (int conn = 4; conn <= 8; conn += 4)
            for (int t = 0; t < 4; t++) {
                const char *flag = c < 2 ? "--area" : "--height", *thr = c < 2 ? "25" : "40";
                int64_t w, h;
                int ch;
                tw_sample_type ty;

                OK_RUN(cmds[c], in, "-o", out, flag, thr, "--conn", conn == 4 ? "4" : "8",
                       "--tile", tiles[t], "--quiet");
                twtest_attr_filter_naive(px, TW_U8, W, H, conn, rule[c], c < 2 ? 25 : 40, c % 2,
                                         want);
                uint8_t *got = twtest_read_image(out, &w, &h, &ch, &ty);
                cr_assert(got && w == W && h == H && ch == 1 && ty == TW_U8);
                cr_assert(eq(int, memcmp(got, want, sizeof want), 0), "%s conn %d tile %s",
                          cmds[c], conn, tiles[t]);
                free(got);
                remove(out);
            }
    free(in);
    free(out);
}

Test(cli_maxtree, parent_image_and_areas)
{
    /* maxtree writes a canonical parent image (checked structurally here: parents below their
     * children, canonical pixel = largest index of its node, root to itself) and the node
     * areas, which equal the flooding reference; 64-bit indices hold the same values. */
    uint8_t px[W * H];
    uint64_t area[W * H];
    char *in, *p32 = twtest_path(dir, "p32.tif"), *p64 = twtest_path(dir, "p64.tif"),
              *a32 = twtest_path(dir, "a32.tif");
    int64_t w, h;
    int ch;
    tw_sample_type ty;

    make_image(px);
    in = write_input("in.tif", px);
    OK_RUN("maxtree", in, "-o", p32, "--area", a32, "--conn", "8", "--quiet");
    OK_RUN("maxtree", in, "-o", p64, "--index-bits", "64", "--conn", "8", "--quiet");
    uint32_t *par = twtest_read_image(p32, &w, &h, &ch, &ty);
    cr_assert(par && w == W && h == H && ty == TW_U32);
    uint64_t *par64 = twtest_read_image(p64, &w, &h, &ch, &ty);
    cr_assert(par64 && ty == TW_U64);
    uint32_t *ar = twtest_read_image(a32, &w, &h, &ch, &ty);
    cr_assert(ar && ty == TW_U32);
    twtest_attr_filter_naive(px, TW_U8, W, H, 8, TWTEST_AREA_MAP, 0, 0, area);
    int roots = 0;
    for (int p = 0; p < W * H; p++) {
        uint32_t q = par[p];

        cr_assert(q < W * H);
        cr_assert(eq(u64, par64[p], q));
        cr_assert(eq(u32, ar[p], (uint32_t)area[p]), "pixel %d", p);
        cr_assert(px[q] <= px[p]);
        if (q == (uint32_t)p) {
            roots++;
            continue;
        }
        /* the parent is canonical: it points lower, or is a root */
        cr_assert(par[q] == q || px[par[q]] < px[q], "pixel %d: parent %u not canonical", p, q);
        /* same level: the canonical pixel has the larger index */
        if (px[q] == px[p])
            cr_assert(q > (uint32_t)p);
    }
    cr_assert(eq(int, roots, 1));
    free(par);
    free(par64);
    free(ar);
    free(in);
    free(p32);
    free(p64);
    free(a32);
}

Test(cli_maxtree, bad_arguments)
{
    /* Every bad argument: exit 2 (usage) or 1, one line naming it, no output left behind. */
    uint8_t px[W * H];
    float fpx[4] = {0};
    char *in, *out = twtest_path(dir, "o.tif"), *missing = twtest_path(dir, "no.tif"),
              *fin = twtest_path(dir, "f.tif");
    tw_error err;

    make_image(px);
    in = write_input("in.tif", px);
    cr_assert(eq(int, twtest_write_image(fin, fpx, 2, 2, TW_F32, &err), TW_OK));
    ERR_RUN(("area-open", in, "-o", out), 2, "--area is required", out);
    ERR_RUN(("area-open", in, "-o", out, "--area", "0"), 2, "--area", out);
    ERR_RUN(("area-open", in, "-o", out, "--area", "-5"), 2, "--area", out);
    ERR_RUN(("area-open", in, "-o", out, "--area", "12x"), 2, "--area", out);
    ERR_RUN(("area-close", in, "-o", out, "--height", "3"), 2, "--height", out);
    ERR_RUN(("height-open", in, "-o", out, "--height", "70000"), 2, "--height", out);
    ERR_RUN(("height-open", in, "-o", out, "--height", "4", "--conn", "6"), 2, "--conn", out);
    ERR_RUN(("area-open", in, "--area", "4"), 2, "missing -o", out);
    ERR_RUN(("area-open", missing, "-o", out, "--area", "4"), 1, "no.tif", out);
    ERR_RUN(("area-open", fin, "-o", out, "--area", "4"), 1, "f32", out);
    ERR_RUN(("area-open", in, "-o", in, "--area", "4"), 2, "overwrite", NULL);
    ERR_RUN(("maxtree", in, "-o", out, "--index-bits", "16"), 2, "--index-bits", out);
    ERR_RUN(("maxtree", in, "-o", out, "--area", out), 2, "area", out);
    ERR_RUN(("maxtree", fin, "-o", out), 1, "f32", out);
    free(in);
    free(out);
    free(missing);
    free(fin);
}

Test(cli_maxtree, summary_and_trace_describe_the_run)
{
    /* --summary prints one line per worker (tasks and busy time) after the run's own line;
     * --quiet silences it; --trace writes a trace naming the filter's task kinds; a trace in
     * a missing directory is a one-line error before anything runs. */
    uint8_t px[W * H];
    char *in, *out = twtest_path(dir, "o.tif"), *tr = twtest_path(dir, "t.json");
    twtest_run r;

    make_image(px);
    in = write_input("in.tif", px);
    r = RUN("area-open", in, "-o", out, "--area", "20", "--tile", "16x16", "--cpu-workers", "2",
            "--gpus", "none", "--summary", "--trace", tr);
    cr_assert(eq(int, r.status, 0), "%s", r.err);
    cr_assert(strstr(r.err, "2 workers\n") != NULL, "%s", r.err);
    cr_assert(strstr(r.err, "  cpu worker 0 (cores ") != NULL, "%s", r.err);
    cr_assert(strstr(r.err, "  cpu worker 1 (cores ") != NULL, "%s", r.err);
    cr_assert(strstr(r.err, " tasks, busy ") != NULL, "%s", r.err);
    cr_assert(strstr(r.err, "tile passes 18 on CPU, 0 on GPU") != NULL, "%s", r.err);
    twtest_run_free(&r);
    cr_assert(twtest_exists(tr) == 1);
    FILE *f = fopen(tr, "r");
    char buf[4096] = {0};
    cr_assert(f != NULL);
    cr_assert(fread(buf, 1, sizeof buf - 1, f) > 0);
    fclose(f);
    cr_assert(strstr(buf, "\"traceEvents\"") != NULL);
    r = RUN("area-open", in, "-o", out, "--area", "20", "--summary", "--quiet");
    cr_assert(eq(int, r.status, 0), "%s", r.err);
    cr_assert(eq(str, r.err, ""));
    twtest_run_free(&r);
    remove(out);
    ERR_RUN(("area-open", in, "-o", out, "--area", "20", "--trace", "/nonexistent-dir/t.json"),
            1, "cannot write the trace '/nonexistent-dir/t.json'", out);
    free(in);
    free(out);
    free(tr);
}

Test(cli_maxtree, border_trees_merged_in_blocks_under_a_budget)
{
    /* 400x300 in 8x8 tiles (50x38): the border max-trees need about 2.4 MiB, over half a 4 MiB
     * --mem-budget, so they are merged in blocks, the smallest that keep them in a quarter of
     * it (4x4 tiles: 130 blocks); maxtree.merge_block=3 forces blocks of 3x3; both give the
     * bytes of the merge of every tile at once (no budget). With a 64 KiB budget even blocks do
     * not fit: one warning, and the same result. */
    enum { BW = 400, BH = 300 };
    static uint8_t px[BW * BH];
    char *in = twtest_path(dir, "big.tif"), *ref = twtest_path(dir, "ref.tif"),
         *out = twtest_path(dir, "o.tif");
    tw_error err;
    int64_t w, h;
    uint8_t *want, *got;

    for (int y = 0; y < BH; y++)
        for (int x = 0; x < BW; x++)
            px[y * BW + x] = (uint8_t)((x * x / 37 + y * 5 + (x * 7 + y * 13) % 29) % 256);
    cr_assert(eq(int, twtest_write_image(in, px, BW, BH, TW_U8, &err), TW_OK), "%s", err.message);
    OK_RUN("area-open", in, "-o", ref, "--area", "40", "--tile", "8x8", "--quiet");
    want = twtest_read_image(ref, &w, &h, NULL, NULL);
    cr_assert(want != NULL);
    {
        const char *const cases[3][4] = {
            {"--mem-budget", "4M", "merged in 130 blocks of 4x4 tiles", NULL},
            {"--set", "maxtree.merge_block=3", "merged in 221 blocks of 3x3 tiles", NULL},
            {"--mem-budget", "64K", "outside the memory budget of 0.1 MiB, even merged in blocks",
             NULL}};

        for (int k = 0; k < 3; k++) {
            twtest_run r = RUN("area-open", in, "-o", out, "--area", "40", "--tile", "8x8",
                               cases[k][0], cases[k][1], "--set", "log.level=info");

            cr_assert(eq(int, r.status, 0), "%s", r.err);
            cr_assert(strstr(r.err, cases[k][2]) != NULL, "case %d: %s", k, r.err);
            twtest_run_free(&r);
            got = twtest_read_image(out, &w, &h, NULL, NULL);
            cr_assert(got && w == BW && h == BH);
            cr_assert(eq(int, memcmp(got, want, BW * BH), 0), "case %d: the pixels differ", k);
            free(got);
        }
    }
    free(want);
    free(in);
    free(ref);
    free(out);
}
