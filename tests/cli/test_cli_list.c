/* SPDX-License-Identifier: MIT */
/* tilewave tests: --list FILE -o OUTDIR, one job per slide, in one process. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tilewave.h"
#include "twtest_cli.h"
#include "twtest_out.h"

TWTEST_CLI_SUITE(cli_list, .timeout = TWTEST_TIMEOUT(120));

/* The pixels of level 0 of two files are the same. */
static void
same_pixels(const char *a, const char *b)
{
    twout_level la, lb;

    twout_read_level(a, 0, &la);
    twout_read_level(b, 0, &lb);
    cr_assert(la.w == lb.w && la.h == lb.h && la.type == lb.type && la.channels == lb.channels);
    cr_assert(eq(int, memcmp(la.px, lb.px,
                             (size_t)(la.w * la.h * la.channels) * tw_sample_size(la.type)),
                 0),
              "%s and %s differ", a, b);
    twout_level_free(&la);
    twout_level_free(&lb);
}

Test(cli_list, every_slide_is_written_as_its_own_run)
{
    /* edt --list over three slides writes OUTDIR/slideI.tif, each the same as the slide's own
     * run, with that run's command line in its metadata; the folder is made when missing. */
    char *list = twtest_slide_list(dir, 3, 120, 90, NULL);
    char *outdir = twtest_path(dir, "out");
    twtest_run r = RUN("edt", "--list", list, "--threshold", "otsu", "-o", outdir, "--tile", "64");

    cr_assert(eq(int, r.status, 0), "exit %d: %s", r.status, r.err);
    cr_assert(strstr(r.err, "--list: 3 slides") != NULL && strstr(r.err, "3 written") != NULL,
              "%s", r.err);
    twtest_run_free(&r);
    for (int i = 0; i < 3; i++) {
        char name[32], *in, *got, *want, *desc;

        snprintf(name, sizeof name, "slide%d.tif", i);
        in = twtest_path(dir, name);
        got = twtest_path(outdir, name);
        want = twtest_path(dir, "want.tif");
        OK_RUN("edt", in, "--threshold", "otsu", "-o", want, "--tile", "64", "--quiet");
        same_pixels(want, got);
        desc = twout_description(got);
        cr_assert(desc && strstr(desc, "edt ") && strstr(desc, in) && strstr(desc, got),
                  "%s", desc);
        free(desc);
        free(in);
        free(got);
        free(want);
    }
    free(list);
    free(outdir);
}

Test(cli_list, a_failing_slide_does_not_stop_the_list)
{
    /* A slide that cannot be read fails alone: the others are written, the failure is named
     * and the exit status is 1. */
    char *list = twtest_slide_list(dir, 2, 120, 90, NULL);
    char *outdir = twtest_path(dir, "out"), *o0, *o1;
    FILE *f = fopen(list, "a");
    twtest_run r;

    cr_assert(f != NULL);
    fprintf(f, "%s/missing.svs\n", dir);
    fclose(f);
    r = RUN("area-open", "--list=", "--area", "10", "-o", outdir);
    cr_assert(eq(int, r.status, 2), "an empty --list= is a usage error: %s", r.err);
    twtest_run_free(&r);
    r = RUN("area-open", "--list", list, "--area", "10", "-o", outdir, "--tile", "64");
    cr_assert(eq(int, r.status, 1), "exit %d: %s", r.status, r.err);
    cr_assert(strstr(r.err, "missing.svs") != NULL && strstr(r.err, "2 written") != NULL &&
                  strstr(r.err, "1 failed") != NULL,
              "%s", r.err);
    twtest_run_free(&r);
    o0 = twtest_path(outdir, "slide0.tif");
    o1 = twtest_path(outdir, "slide1.tif");
    cr_assert(twtest_exists(o0) && twtest_exists(o1));
    free(o0);
    free(o1);
    free(list);
    free(outdir);
}

Test(cli_list, misuse_is_a_usage_error)
{
    /* No -o, an option naming one more file, two slides with one output name, a command
     * without one input, an unreadable list: one line each, nothing run. */
    char *list = twtest_slide_list(dir, 1, 120, 90, NULL), *outdir = twtest_path(dir, "out");
    char *dup = twtest_path(dir, "d.txt");
    char *sub = twtest_path(dir, "sub"), *again = twtest_path(sub, "slide0.tif");
    char *s0 = twtest_path(dir, "slide0.tif");
    FILE *f;

    ERR_RUN(("edt", "--list", list), 2, "--list needs -o OUTDIR", NULL);
    ERR_RUN(("edt", "--list", list, "-o", outdir, "--indices", "i.tif"), 2,
            "--indices names one file", NULL);
    ERR_RUN(("gray", "--list", list, "-o", outdir, "--overlay=o.tif"), 2,
            "--overlay names one file", NULL);
    ERR_RUN(("maxtree", "--list", list, "-o", outdir, "--area", "a.tif"), 2,
            "--area names one file", NULL);
    cr_assert(mkdir(sub, 0777) == 0);
    OK_RUN("convert", s0, "-o", again, "--quiet");
    f = fopen(dup, "w");
    cr_assert(f != NULL);
    fprintf(f, "%s\n%s\n", s0, again);
    fclose(f);
    ERR_RUN(("gray", "--list", dup, "-o", outdir), 2, "would both write", NULL);
    ERR_RUN(("gray", "--list", "/nonexistent/list.txt", "-o", outdir), 1,
            "--list: cannot open '/nonexistent/list.txt'", NULL);
    ERR_RUN(("info", "--list", list, "-o", outdir), 2, "does not take one input slide", NULL);
    cr_assert(eq(int, twtest_exists(outdir), 0), "the folder was made for nothing");
    free(list);
    free(outdir);
    free(dup);
    free(sub);
    free(again);
    free(s0);
}
