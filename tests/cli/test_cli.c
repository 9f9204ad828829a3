/* SPDX-License-Identifier: MIT */
/* tilewave tests: the `tilewave` command end to end (subcommands, exit codes, messages). */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tilewave.h"
#include "twtest_cli.h"

static char *dir;
static char *sample; /* a small sample slide made once per test */

static void
setup(void)
{
    dir = twtest_tmpdir();
    cr_assert(dir != NULL);
    sample = twtest_path(dir, "sample.tif");
}

static void
teardown(void)
{
    twtest_rmtree(dir);
    free(dir);
    free(sample);
}

static void
make_sample(const char *size)
{
    twtest_run r = RUN("sample", sample, "--size", size, "--quiet");
    cr_assert(eq(int, r.status, 0), "sample failed: %s", r.err);
    twtest_run_free(&r);
}

/* Read a whole single-channel u8 image through the library. */
static uint8_t *
read_gray(const char *path, int64_t *w, int64_t *h)
{
    tw_slide *s = NULL;
    tw_level_info li;
    uint8_t *buf;

    cr_assert(eq(int, tw_slide_open(path, TW_READER_TIFF, &s, NULL), TW_OK));
    cr_assert(eq(int, tw_slide_get_channels(s), 1));
    cr_assert(eq(int, tw_slide_get_level(s, 0, &li), TW_OK));
    buf = malloc((size_t)(li.w * li.h));
    cr_assert(eq(int, tw_slide_read_region(s, 0, 0, 0, li.w, li.h, buf, (size_t)li.w, NULL),
                 TW_OK));
    *w = li.w;
    *h = li.h;
    tw_slide_close(s);
    return buf;
}

TestSuite(cli, .init = setup, .fini = teardown, .timeout = TWTEST_TIMEOUT(120));

Test(cli, version_and_help_exit_zero)
{
    /* --version names the version; --help works at the top and for every subcommand. */
    twtest_run r = RUN("--version");
    cr_assert(eq(int, r.status, 0));
    cr_assert(strstr(r.out, tw_version_string()) != NULL);
    twtest_run_free(&r);
    const char *cmds[] = {"info", "devices", "sample", "gray", "config"};
    r = RUN("--help");
    cr_assert(eq(int, r.status, 0));
    for (size_t i = 0; i < 5; i++)
        cr_assert(strstr(r.out, cmds[i]) != NULL, "top help lacks %s", cmds[i]);
    twtest_run_free(&r);
    for (size_t i = 0; i < 5; i++) {
        r = RUN(cmds[i], "--help");
        cr_assert(eq(int, r.status, 0), "%s --help: %d %s", cmds[i], r.status, r.err);
        cr_assert(strstr(r.out, "Usage: tilewave") != NULL);
        twtest_run_free(&r);
    }
}

Test(cli, usage_errors_exit_two)
{
    /* No command, an unknown command, an unknown option, missing arguments: exit 2, one line. */
    twtest_run r = RUN("frobnicate");
    expect_error(&r, 2, "unknown command 'frobnicate'", NULL);
    r = RUN("info");
    expect_error(&r, 2, "missing SLIDE", NULL);
    r = RUN("gray", "in.tif");
    expect_error(&r, 2, "missing -o OUT", NULL);
    r = RUN("gray", "--bogus");
    expect_error(&r, 2, "unknown option '--bogus'", NULL);
    r = RUN("sample", sample, "--size", "0x10");
    expect_error(&r, 2, "--size", sample);
    r = RUN("gray", "in.tif", "-o", "x.tif", "--mode", "purple");
    expect_error(&r, 2, "unknown mode 'purple'", NULL);
    const char *const none[] = {NULL};
    r = twtest_cli(none, NULL);
    cr_assert(eq(int, r.status, 2));
    twtest_run_free(&r);
}

Test(cli, sample_then_info_lists_levels)
{
    /* `sample` writes a pyramid that `info` lists, level by level, through both readers. */
    make_sample("1000x700");
    twtest_run r = RUN("info", sample);
    cr_assert(eq(int, r.status, 0), "%s", r.err);
    cr_assert(strstr(r.out, "level 0: 1000 x 700") != NULL, "%s", r.out);
    cr_assert(strstr(r.out, "level 1: 500 x 350") != NULL, "%s", r.out);
    cr_assert(strstr(r.out, "RGB, u8") != NULL);
    cr_assert(strstr(r.out, "mpp:      0.2500") != NULL, "%s", r.out);
    twtest_run_free(&r);
    r = RUN("info", sample, "--reader", "openslide", "--properties");
    cr_assert(eq(int, r.status, 0), "%s", r.err);
    cr_assert(strstr(r.out, "generic-tiff") != NULL, "%s", r.out);
    cr_assert(strstr(r.out, "level 0: 1000 x 700") != NULL, "%s", r.out);
    cr_assert(strstr(r.out, "openslide.vendor") != NULL);
    twtest_run_free(&r);
}

Test(cli, gray_matches_naive_luminance_for_any_tiling)
{
    /* gray on the sample equals a naive luminance of the RGB pixels, and the pixels do not
     * depend on tile size or worker count. */
    make_sample("700x500");
    char *o1 = twtest_path(dir, "g1.tif"), *o2 = twtest_path(dir, "g2.tif");
    twtest_run r = RUN("gray", sample, "-o", o1, "--quiet", "--gpus", "none");
    cr_assert(eq(int, r.status, 0), "%s", r.err);
    twtest_run_free(&r);
    r = RUN("gray", sample, "-o", o2, "--quiet", "--tile", "37x53", "--cpu-workers", "3",
            "--compression", "zstd");
    cr_assert(eq(int, r.status, 0), "%s", r.err);
    twtest_run_free(&r);

    int64_t w, h, w2, h2;
    uint8_t *g1 = read_gray(o1, &w, &h), *g2 = read_gray(o2, &w2, &h2);
    cr_assert(eq(i64, w, 700));
    cr_assert(eq(i64, h, 500));
    cr_assert(eq(i64, w2, w));
    cr_assert(eq(i64, h2, h));
    cr_assert(memcmp(g1, g2, (size_t)(w * h)) == 0, "tiling changed the result");

    tw_slide *s = NULL;
    uint8_t *rgb = malloc((size_t)(w * h * 3));
    cr_assert(eq(int, tw_slide_open(sample, TW_READER_TIFF, &s, NULL), TW_OK));
    cr_assert(eq(int, tw_slide_read_region(s, 0, 0, 0, w, h, rgb, (size_t)(w * 3), NULL), TW_OK));
    tw_slide_close(s);
    for (int64_t i = 0; i < w * h; i++) {
        unsigned want = (299u * rgb[3 * i] + 587u * rgb[3 * i + 1] + 114u * rgb[3 * i + 2] + 500u) /
                        1000u;
        if (g1[i] != want)
            cr_assert(eq(u8, g1[i], (uint8_t)want), "pixel %lld", (long long)i);
    }
    free(rgb);
    free(g1);
    free(g2);
    free(o1);
    free(o2);
}

Test(cli, commands_without_a_gpu_variant_start_no_gpu)
{
    /* convert has no GPU variant: its runtime starts no GPU manager (no CUDA context, whose
     * start and memory it would pay for nothing) whatever --gpus says, while gray, grain and
     * tos (the max-tree of the ranks) start one per GPU present (on a machine with a GPU;
     * elsewhere only the first half can be seen). The GPU manager's start is the info line
     * "GPU N: memory budget". */
    char *out = twtest_path(dir, "out.tif");
    twtest_run r;

    make_sample("300x200");
    r = RUN("convert", sample, "-o", out, "--gpus", "all", "--set", "log.level=info");
    cr_assert(eq(int, r.status, 0), "%s", r.err);
    cr_assert(strstr(r.err, "memory budget") == NULL, "convert started a GPU: %s", r.err);
    cr_assert(strstr(r.err, "0 GPU") != NULL, "no worker line: %s", r.err);
    twtest_run_free(&r);
    r = RUN("gray", sample, "-o", out, "--set", "log.level=info");
    cr_assert(eq(int, r.status, 0), "%s", r.err);
    if (strstr(r.err, "memory budget"))
        cr_log_info("gray started its GPU, convert did not");
    twtest_run_free(&r);
    free(out);
}

Test(cli, gray_region_and_level)
{
    /* --region and --level select what is converted; the output has the region's size. */
    make_sample("1200x900");
    char *o = twtest_path(dir, "r.tif");
    twtest_run r = RUN("gray", sample, "-o", o, "--quiet", "--level", "1", "--region",
                       "10,20,100,50", "--mode", "g");
    cr_assert(eq(int, r.status, 0), "%s", r.err);
    twtest_run_free(&r);
    int64_t w, h;
    uint8_t *g = read_gray(o, &w, &h);
    cr_assert(eq(i64, w, 100));
    cr_assert(eq(i64, h, 50));

    tw_slide *s = NULL;
    uint8_t *rgb = malloc(100 * 50 * 3);
    cr_assert(eq(int, tw_slide_open(sample, TW_READER_TIFF, &s, NULL), TW_OK));
    cr_assert(eq(int, tw_slide_read_region(s, 1, 10, 20, 100, 50, rgb, 300, NULL), TW_OK));
    tw_slide_close(s);
    for (int i = 0; i < 100 * 50; i++)
        cr_assert(eq(u8, g[i], rgb[3 * i + 1]));
    free(rgb);
    free(g);
    free(o);
}

Test(cli, bad_inputs_fail_with_one_line_and_no_output)
{
    /* Each bad input: exit 1 (2 for usage), one line naming the problem, no output file. */
    char *o = twtest_path(dir, "out.tif"), *txt = twtest_path(dir, "notes.txt");
    char *ini = twtest_path(dir, "bad.ini");
    FILE *f = fopen(txt, "w");
    fputs("not an image\n", f);
    fclose(f);
    f = fopen(ini, "w");
    fputs("[tile]\nsize = 512x512\nsise = 3\n", f);
    fclose(f);
    make_sample("300x200");

    twtest_run r = RUN("gray", "/nonexistent/slide.tif", "-o", o);
    expect_error(&r, 1, "No such file", o);
    r = RUN("gray", txt, "-o", o);
    expect_error(&r, 1, "notes.txt", o);
    r = RUN("info", txt);
    expect_error(&r, 1, "notes.txt", NULL);
    r = RUN("gray", sample, "-o", o, "--level", "9");
    expect_error(&r, 1, "level 9", o);
    r = RUN("gray", sample, "-o", o, "--region", "250,150,100,100");
    expect_error(&r, 1, "outside", o);
    r = RUN("gray", sample, "-o", o, "--tile", "0x0");
    expect_error(&r, 2, "tile.size", o);
    r = RUN("gray", sample, "-o", o, "--set", "tile.sise=5");
    expect_error(&r, 2, "tile.sise", o);
    r = RUN("gray", sample, "-o", o, "--set", "runtime.cpu_workers=lots");
    expect_error(&r, 2, "runtime.cpu_workers", o);
    r = RUN("gray", sample, "-o", o, "--config", ini);
    expect_error(&r, 1, "bad.ini:3", o);
    r = RUN("gray", sample, "-o", o, "--config", "/nonexistent.ini");
    expect_error(&r, 1, "nonexistent.ini", o);
    r = RUN("gray", sample, "-o", "/nonexistent-dir/out.tif");
    expect_error(&r, 1, "nonexistent-dir", NULL);
    r = RUN("gray", sample, "-o", sample);
    expect_error(&r, 2, "overwrite the input", NULL);
    const char *const env[] = {"TILEWAVE_TILE_SIZE=huge", NULL};
    r = RUN_ENV(env, "gray", sample, "-o", o);
    expect_error(&r, 1, "TILEWAVE_TILE_SIZE", o);
    /* Only the inputs remain in the folder: no temporary files left behind. */
    cr_assert(eq(int, twtest_count_entries(dir), 3));
    free(o);
    free(txt);
    free(ini);
}

Test(cli, devices_lists_workers)
{
    /* devices prints the cores and one line per worker with its cores and binding. */
    twtest_run r = RUN("devices", "--cpu-workers", "2", "--gpus", "none");
    cr_assert(eq(int, r.status, 0), "%s", r.err);
    cr_assert(strstr(r.out, "cores:") != NULL);
    cr_assert(strstr(r.out, "workers: 2") != NULL, "%s", r.out);
    cr_assert(strstr(r.out, "worker  0  cpu") != NULL, "%s", r.out);
    cr_assert(strstr(r.out, "worker  1  cpu") != NULL, "%s", r.out);
    cr_assert(strstr(r.out, "\npolicy:  ") != NULL, "%s", r.out);
    cr_assert(strstr(r.out, " (runtime.policy, from ") != NULL, "%s", r.out);
    twtest_run_free(&r);
    /* --policies lists the policies and the one in use, without starting a runtime. */
    r = RUN("devices", "--policies", "--set", "runtime.policy=fair");
    cr_assert(eq(int, r.status, 0), "%s", r.err);
    cr_assert(strstr(r.out, "policies: fcfs|fair|pats|locality\n") != NULL, "%s", r.out);
    cr_assert(strstr(r.out, "in use: fair (from set)") != NULL, "%s", r.out);
    twtest_run_free(&r);
}

Test(cli, config_print_shows_values_and_origins)
{
    /* config --print shows every key; flags and environment override defaults, and the
     * printout is itself a config file that --config accepts. */
    const char *const env[] = {"TILEWAVE_IO_COMPRESSION=zstd", NULL};
    twtest_run r = RUN_ENV(env, "config", "--print", "--tile", "512x256");
    cr_assert(eq(int, r.status, 0), "%s", r.err);
    cr_assert(strstr(r.out, "tile.size = 512x256") != NULL, "%s", r.out);
    cr_assert(strstr(r.out, "io.compression = zstd") != NULL);
    cr_assert(strstr(r.out, "TILEWAVE_IO_COMPRESSION") != NULL);
    cr_assert(strstr(r.out, "runtime.cpu_workers = -1") != NULL);
    char *saved = twtest_path(dir, "saved.ini");
    FILE *f = fopen(saved, "w");
    fputs(r.out, f);
    fclose(f);
    twtest_run_free(&r);
    r = RUN("config", "--print", "--config", saved);
    cr_assert(eq(int, r.status, 0), "%s", r.err);
    cr_assert(strstr(r.out, "tile.size = 512x256") != NULL);
    twtest_run_free(&r);
    r = RUN("config");
    expect_error(&r, 2, "--print", NULL);
    free(saved);
}

static bool
have_tool(const char *name)
{
    char cmd[256];

    snprintf(cmd, sizeof cmd, "command -v %s >/dev/null 2>&1", name);
    return system(cmd) == 0;
}

Test(cli, gray_output_opens_in_tiffinfo_vips_and_openslide)
{
    /* The gray output of the sample is a TIFF that tiffinfo, vips and OpenSlide read, with the
     * right size: in Aperio's form by default (docs/io.md, "Resolution and metadata"), so that
     * OpenSlide shows the sample's 0.25 mpp and vips reads it through OpenSlide; with
     * --set io.description=plain, a generic-tiff of one band. */
    const char *tools[] = {"tiffinfo", "vipsheader", "openslide-show-properties"};
    for (size_t i = 0; i < 3; i++)
        if (!have_tool(tools[i]))
            cr_skip_test("%s is not installed (libtiff-tools, libvips-tools, openslide-tools)",
                         tools[i]);
    make_sample("1200x900");
    char *o = twtest_path(dir, "g.tif");
    for (int plain = 0; plain < 2; plain++) {
        twtest_run r = plain ? RUN("gray", sample, "-o", o, "--quiet", "--set",
                                   "io.description=plain")
                             : RUN("gray", sample, "-o", o, "--quiet");
        cr_assert(eq(int, r.status, 0), "%s", r.err);
        twtest_run_free(&r);
        char cmd[4096], line[512];
        FILE *p;

        snprintf(cmd, sizeof cmd, "tiffinfo '%s' 2>&1", o);
        p = popen(cmd, "r");
        bool width = false;
        while (fgets(line, sizeof line, p))
            width |= strstr(line, "Image Width: 1200 Image Length: 900") != NULL;
        cr_assert(eq(int, pclose(p), 0));
        cr_assert(width, "tiffinfo did not report 1200x900");

        snprintf(cmd, sizeof cmd, "vipsheader '%s' 2>&1", o);
        p = popen(cmd, "r");
        cr_assert(fgets(line, sizeof line, p) != NULL);
        cr_assert(eq(int, pclose(p), 0));
        cr_assert(strstr(line, plain ? "1200x900 uchar, 1 band" : "1200x900 uchar, 4 bands, "
                                                                  "srgb, openslideload") != NULL,
                  "vipsheader: %s", line);

        snprintf(cmd, sizeof cmd, "openslide-show-properties '%s' 2>&1", o);
        p = popen(cmd, "r");
        bool vendor = false, wide = false, mpp = false;
        while (fgets(line, sizeof line, p)) {
            vendor |= strstr(line, plain ? "openslide.vendor: 'generic-tiff'"
                                         : "openslide.vendor: 'aperio'") != NULL;
            wide |= strstr(line, "openslide.level[0].width: '1200'") != NULL;
            mpp |= strstr(line, "openslide.mpp-x: '0.25'") != NULL;
        }
        cr_assert(eq(int, pclose(p), 0));
        cr_assert(vendor && wide, "openslide-show-properties did not read the output");
        cr_assert(eq(int, mpp, !plain), "openslide.mpp-x of the %s output",
                  plain ? "plain" : "aperio");
    }
    free(o);
}
